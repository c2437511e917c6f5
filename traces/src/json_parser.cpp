#include "json_parser.h"

#include <charconv>
#include <cmath>

#include "utf8.h"

namespace npu::trace::json {
namespace {

// Deeper documents are refused rather than risking the stack in read_value.
constexpr size_t kMaxDepth = 512;

bool is_digit(char c) { return c >= '0' && c <= '9'; }

void append_utf8(std::string& out, unsigned code_point) {
  if (code_point < 0x80) {
    out += static_cast<char>(code_point);
  } else if (code_point < 0x800) {
    out += static_cast<char>(0xC0 | (code_point >> 6));
    out += static_cast<char>(0x80 | (code_point & 0x3F));
  } else if (code_point < 0x10000) {
    out += static_cast<char>(0xE0 | (code_point >> 12));
    out += static_cast<char>(0x80 | ((code_point >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (code_point & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (code_point >> 18));
    out += static_cast<char>(0x80 | ((code_point >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((code_point >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (code_point & 0x3F));
  }
}

}  // namespace

const Value* Value::find(std::string_view key) const {
  for (auto member = object.rbegin(); member != object.rend(); ++member)
    if (member->first == key) return &member->second;
  return nullptr;
}

void Reader::fail(const std::string& message) const {
  size_t line = 1;
  size_t column = 1;
  for (size_t i = 0; i < pos_ && i < text_.size(); ++i) {
    if (text_[i] == '\n') {
      ++line;
      column = 1;
    } else {
      ++column;
    }
  }
  std::string found = "end of input";
  if (pos_ < text_.size()) {
    const auto c = static_cast<unsigned char>(text_[pos_]);
    found = c >= 0x20 && c < 0x7F ? "'" + std::string(1, static_cast<char>(c)) + "'"
                                  : "byte " + std::to_string(static_cast<unsigned>(c));
  }
  throw ParseError("line " + std::to_string(line) + ", column " + std::to_string(column) + ": " + message +
                   " (found " + found + ")");
}

void Reader::skip_whitespace() {
  while (pos_ < text_.size() &&
         (text_[pos_] == ' ' || text_[pos_] == '\t' || text_[pos_] == '\n' || text_[pos_] == '\r'))
    ++pos_;
}

char Reader::peek() {
  skip_whitespace();
  return pos_ < text_.size() ? text_[pos_] : '\0';
}

void Reader::expect(char c) {
  if (pos_ >= text_.size() || text_[pos_] != c) fail(std::string("expected '") + c + "'");
  ++pos_;
}

Value::Type Reader::peek_type() {
  const char c = peek();
  switch (c) {
    case '{': return Value::Type::Object;
    case '[': return Value::Type::Array;
    case '"': return Value::Type::String;
    case 't':
    case 'f': return Value::Type::Bool;
    case 'n': return Value::Type::Null;
    default:
      if (c == '-' || is_digit(c)) return Value::Type::Number;
      fail("expected a value");
  }
}

Value Reader::read_value() {
  Value value;
  value.type = peek_type();
  switch (value.type) {
    case Value::Type::Object: {
      begin_object();
      std::string key;
      while (next_member(key)) {
        Value member = read_value();
        value.object.emplace_back(std::move(key), std::move(member));
      }
      break;
    }
    case Value::Type::Array:
      begin_array();
      while (next_element()) value.array.push_back(read_value());
      break;
    case Value::Type::String: value.string = read_string(); break;
    case Value::Type::Number: {
      const size_t start = pos_;
      value.number = read_number();
      value.string = text_.substr(start, pos_ - start);
      break;
    }
    case Value::Type::Bool:
      value.boolean = text_[pos_] == 't';
      read_literal(value.boolean ? "true" : "false");
      break;
    case Value::Type::Null: read_literal("null"); break;
  }
  return value;
}

void Reader::enter(char open, char close) {
  skip_whitespace();
  expect(open);
  if (open_.size() >= kMaxDepth) fail("nesting deeper than " + std::to_string(kMaxDepth));
  open_.push_back(Container{close, true});
}

void Reader::begin_object() { enter('{', '}'); }
void Reader::begin_array() { enter('[', ']'); }

bool Reader::next_in_container(char close) {
  if (open_.empty() || open_.back().close != close)
    throw std::logic_error("json::Reader: next_member/next_element outside its container");
  Container& container = open_.back();
  if (peek() == close) {
    ++pos_;
    open_.pop_back();
    return false;
  }
  if (!container.first) {
    expect(',');
    // A comma promises another member: "[1,]" is not JSON.
    if (peek() == close) fail("trailing comma");
  }
  container.first = false;
  return true;
}

bool Reader::next_member(std::string& key) {
  if (!next_in_container('}')) return false;
  if (peek() != '"') fail("expected a member name");
  key = read_string();
  skip_whitespace();
  expect(':');
  return true;
}

bool Reader::next_element() { return next_in_container(']'); }

void Reader::finish() {
  skip_whitespace();
  if (pos_ != text_.size()) fail("unexpected text after the document");
}

std::string Reader::read_string() {
  expect('"');
  std::string out;
  while (true) {
    if (pos_ >= text_.size()) fail("unterminated string");
    const auto c = static_cast<unsigned char>(text_[pos_]);
    if (c == '"') {
      ++pos_;
      return out;
    }
    if (c == '\\') {
      ++pos_;
      read_escape(out);
    } else if (c < 0x20) {
      fail("unescaped control character in a string");
    } else if (c < 0x80) {
      out += static_cast<char>(c);
      ++pos_;
    } else {
      const size_t length = utf8_sequence_length(text_, pos_);
      if (length == 0) fail("invalid UTF-8 in a string");
      out.append(text_, pos_, length);
      pos_ += length;
    }
  }
}

void Reader::read_escape(std::string& out) {
  if (pos_ >= text_.size()) fail("unterminated escape");
  const char c = text_[pos_++];
  switch (c) {
    case '"': out += '"'; return;
    case '\\': out += '\\'; return;
    case '/': out += '/'; return;
    case 'b': out += '\b'; return;
    case 'f': out += '\f'; return;
    case 'n': out += '\n'; return;
    case 'r': out += '\r'; return;
    case 't': out += '\t'; return;
    case 'u': break;
    default: --pos_; fail("unknown escape");
  }
  unsigned code_point = read_hex4();
  if (code_point >= 0xDC00 && code_point <= 0xDFFF) fail("unpaired low surrogate");
  if (code_point >= 0xD800 && code_point <= 0xDBFF) {
    if (text_.substr(pos_, 2) != "\\u") fail("unpaired high surrogate");
    pos_ += 2;
    const unsigned low = read_hex4();
    if (low < 0xDC00 || low > 0xDFFF) fail("unpaired high surrogate");
    code_point = 0x10000 + ((code_point - 0xD800) << 10) + (low - 0xDC00);
  }
  append_utf8(out, code_point);
}

unsigned Reader::read_hex4() {
  unsigned value = 0;
  for (int i = 0; i < 4; ++i, ++pos_) {
    if (pos_ >= text_.size()) fail("truncated \\u escape");
    const char c = text_[pos_];
    unsigned digit = 0;
    if (is_digit(c))
      digit = static_cast<unsigned>(c - '0');
    else if (c >= 'a' && c <= 'f')
      digit = static_cast<unsigned>(c - 'a' + 10);
    else if (c >= 'A' && c <= 'F')
      digit = static_cast<unsigned>(c - 'A' + 10);
    else
      fail("expected a hex digit");
    value = value * 16 + digit;
  }
  return value;
}

double Reader::read_number() {
  // Check the RFC 8259 grammar first: from_chars alone would accept "01",
  // "1." or ".5".
  const size_t start = pos_;
  const auto digits = [&] {
    if (pos_ >= text_.size() || !is_digit(text_[pos_])) fail("expected a digit");
    while (pos_ < text_.size() && is_digit(text_[pos_])) ++pos_;
  };
  if (text_[pos_] == '-') ++pos_;
  if (pos_ < text_.size() && text_[pos_] == '0')
    ++pos_;
  else
    digits();
  if (pos_ < text_.size() && text_[pos_] == '.') {
    ++pos_;
    digits();
  }
  if (pos_ < text_.size() && (text_[pos_] == 'e' || text_[pos_] == 'E')) {
    ++pos_;
    if (pos_ < text_.size() && (text_[pos_] == '+' || text_[pos_] == '-')) ++pos_;
    digits();
  }
  double value = 0;
  const auto [end, error] = std::from_chars(text_.data() + start, text_.data() + pos_, value);
  if (error != std::errc() || end != text_.data() + pos_ || !std::isfinite(value)) {
    pos_ = start;
    fail("number out of range");
  }
  return value;
}

void Reader::read_literal(std::string_view word) {
  if (text_.substr(pos_, word.size()) != word) fail("expected '" + std::string(word) + "'");
  pos_ += word.size();
}

Value parse(std::string_view text) {
  Reader reader(text);
  Value value = reader.read_value();
  reader.finish();
  return value;
}

}  // namespace npu::trace::json
