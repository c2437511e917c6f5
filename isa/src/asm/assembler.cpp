// The assembler: two passes over the source lines (after .include expansion).
// Pass 1 handles directives, assigns instruction addresses and labels; pass 2
// encodes instructions, when every label is known. Errors are collected with
// their position and reported together.
#include "npusim/isa/assembler.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <map>
#include <memory>
#include <sstream>

#include "lexer.h"
#include "npusim/isa/dtype.h"

namespace npu::isa {

std::string Diagnostic::format() const {
  std::string out = file;
  if (line > 0) out += ":" + std::to_string(line) + ":" + std::to_string(column);
  out += ": error: " + message + "\n";
  if (line > 0) {
    out += source_line + "\n";
    std::string caret;
    for (int i = 1; i < column && static_cast<size_t>(i - 1) < source_line.size(); ++i)
      caret += source_line[static_cast<size_t>(i - 1)] == '\t' ? '\t' : ' ';
    out += caret + "^\n";
  }
  return out;
}

namespace {

using assembler::LexError;
using assembler::Token;
using assembler::TokenKind;

constexpr int kMaxIncludeDepth = 16;
constexpr int kMaxExpressionDepth = 256;  // parentheses and unary operators

struct SourceLine {
  std::string file;
  int line = 0;
  std::string text;
  size_t order = 0;  // position in the include-expanded source, for sorting errors
};

// Stop parsing quietly once the error limit is reached.
struct TooManyErrors {};

// The text of the file at `path`, or nullopt with *why set: it cannot be opened, is a directory, or holds more
// than `max_bytes` (read no further than that, so that /dev/zero or a FIFO cannot fill memory).
std::optional<std::string> read_source_file(const std::string& path, uint64_t max_bytes, std::string* why) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    *why = std::strerror(errno);
    return std::nullopt;
  }
  struct stat status {};
  if (::fstat(fd, &status) == 0 && S_ISDIR(status.st_mode)) {
    ::close(fd);
    *why = "it is a directory";
    return std::nullopt;
  }
  std::string text;
  char chunk[1 << 16];
  for (;;) {
    const ssize_t n = ::read(fd, chunk, sizeof chunk);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      *why = std::strerror(errno);
      ::close(fd);
      return std::nullopt;
    }
    if (n == 0) break;
    if (text.size() + size_t(n) > max_bytes) {
      ::close(fd);
      *why = "larger than the " + std::to_string(max_bytes >> 20) + " MiB a source file may be";
      return std::nullopt;
    }
    text.append(chunk, size_t(n));
  }
  ::close(fd);
  return text;
}

std::string directory_of(const std::string& path) {
  const auto slash = path.find_last_of('/');
  return slash == std::string::npos ? "" : path.substr(0, slash + 1);
}

std::string base_name(const std::string& path) {
  const auto slash = path.find_last_of('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diagonal = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = up;
    }
  }
  return row[b.size()];
}

std::optional<unsigned> register_number(const std::string& name, char prefix, unsigned count) {
  if (name == "zero" && prefix == 'r') return 0u;
  if (name.size() < 2 || name.size() > 3 || name[0] != prefix) return std::nullopt;
  unsigned value = 0;
  for (size_t i = 1; i < name.size(); ++i) {
    if (!std::isdigit(static_cast<unsigned char>(name[i]))) return std::nullopt;
    value = value * 10 + static_cast<unsigned>(name[i] - '0');
  }
  if (name.size() == 3 && name[1] == '0') return std::nullopt;  // no "r05"
  return value < count ? std::optional<unsigned>(value) : std::nullopt;
}

std::string hex(uint64_t value) {
  char buf[24];
  std::snprintf(buf, sizeof buf, "0x%llx", static_cast<unsigned long long>(value));
  return buf;
}

class Assembler {
 public:
  explicit Assembler(const AssembleOptions& options) : options_(options) {}

  AssembleResult run(const std::string& text, const std::string& file) {
    AssembleResult result;
    try {
      load(text, file, 0);
      for (const auto& line : lines_) pass1_line(*line);
      close_data_section();
      for (const PendingInstruction& pending : pending_) encode_instruction(pending);
    } catch (const TooManyErrors&) {
      errors_.push_back({file, 0, 0, "too many errors (" + std::to_string(options_.max_errors) + "); stopping", ""});
    }
    // Report in source order, although pass 2 finds its errors after pass 1.
    std::vector<size_t> index(error_order_.size());
    for (size_t i = 0; i < index.size(); ++i) index[i] = i;
    std::stable_sort(index.begin(), index.end(), [&](size_t a, size_t b) { return error_order_[a] < error_order_[b]; });
    std::vector<Diagnostic> sorted;
    for (const size_t i : index) sorted.push_back(errors_[i]);
    for (size_t i = index.size(); i < errors_.size(); ++i) sorted.push_back(errors_[i]);  // "too many errors" last
    errors_ = std::move(sorted);
    if (errors_.empty()) {
      Program program = build_program();
      try {
        validate_program(program);
        result.program = std::move(program);
      } catch (const ProgramFormatError& e) {
        errors_.push_back({file, 0, 0, std::string("internal error: assembled program is invalid: ") + e.what(), ""});
      }
    }
    result.errors = std::move(errors_);
    return result;
  }

 private:
  enum class NameKind { Constant, RegAlias, SemAlias, Buffer, Local, Label };
  struct NameEntry {
    NameKind kind;
    int64_t value;  // constant value, register number, symbol index, or pc
    uint32_t section = 0;
    const SourceLine* where = nullptr;
    int column = 0;
  };
  struct PendingInstruction {
    const SourceLine* line;
    std::vector<Token> tokens;
    size_t first;  // index of the mnemonic token
    uint32_t section;
    uint64_t pc;
  };
  struct OpenData {
    size_t symbol_index;
    const SourceLine* line;
    int column;
    bool explicit_shape;
  };

  // ---- Diagnostics -------------------------------------------------------
  void error(const SourceLine& line, int column, const std::string& message) {
    errors_.push_back({line.file, line.line, column, message, line.text});
    error_order_.push_back(line.order);
    if (errors_.size() >= options_.max_errors) throw TooManyErrors{};
  }
  std::string where(const NameEntry& entry) const {
    if (entry.where == nullptr) return "";
    return " (first defined at " + entry.where->file + ":" + std::to_string(entry.where->line) + ":" +
           std::to_string(entry.column) + ")";
  }

  // ---- Source loading ----------------------------------------------------
  void load(const std::string& text, const std::string& file, int depth) {
    include_stack_.push_back(file);
    std::istringstream in(text);
    std::string line_text;
    int number = 0;
    while (std::getline(in, line_text)) {
      ++number;
      auto line = std::make_unique<SourceLine>(SourceLine{file, number, line_text, storage_.size()});
      const SourceLine* line_ptr = line.get();
      std::vector<Token> tokens;
      LexError lex_error{};
      const bool lexed = assembler::tokenize_line(line_text, &tokens, &lex_error);
      if (lexed && tokens[0].kind == TokenKind::Identifier && tokens[0].text == ".include") {
        storage_.push_back(std::move(line));
        handle_include(*line_ptr, tokens, depth);
        continue;
      }
      storage_.push_back(std::move(line));
      lines_.push_back(line_ptr);
    }
    include_stack_.pop_back();
  }

  void handle_include(const SourceLine& line, const std::vector<Token>& tokens, int depth) {
    if (tokens[1].kind != TokenKind::String || tokens[2].kind != TokenKind::End) {
      error(line, tokens[1].column, ".include takes one quoted file name");
      return;
    }
    const std::string& name = tokens[1].text;
    const std::string path = (!name.empty() && name[0] == '/') ? name : directory_of(line.file) + name;
    if (depth + 1 >= kMaxIncludeDepth) {
      error(line, tokens[1].column, "includes nested more than " + std::to_string(kMaxIncludeDepth) + " deep");
      return;
    }
    if (std::find(include_stack_.begin(), include_stack_.end(), path) != include_stack_.end()) {
      error(line, tokens[1].column, "'" + name + "' includes itself");
      return;
    }
    std::optional<std::string> text;
    std::string why;
    if (options_.read_include) {
      text = options_.read_include(path);
      if (!text) why = "cannot be read";
      else if (text->size() > options_.max_source_bytes) {
        text.reset();
        why = "larger than the " + std::to_string(options_.max_source_bytes >> 20) + " MiB a source file may be";
      }
    } else {
      text = read_source_file(path, options_.max_source_bytes, &why);
    }
    if (!text) {
      error(line, tokens[1].column, "cannot include '" + path + "': " + why);
      return;
    }
    load(*text, path, depth + 1);
  }

  // ---- Token cursor over [pos, end) ----------------------------------------
  struct Cursor {
    const std::vector<Token>* tokens;
    size_t pos;
    size_t end;
    const Token& peek() const { return pos < end ? (*tokens)[pos] : (*tokens)[end]; }
    const Token& next() { return pos < end ? (*tokens)[pos++] : (*tokens)[end]; }
    bool at_end() const { return pos >= end; }
    bool accept(const char* punct) {
      if (!at_end() && peek().kind == TokenKind::Punct && peek().text == punct) {
        ++pos;
        return true;
      }
      return false;
    }
  };

  // Splits [first, End) at top-level commas into operand ranges.
  static std::vector<std::pair<size_t, size_t>> split_operands(const std::vector<Token>& tokens, size_t first) {
    std::vector<std::pair<size_t, size_t>> ranges;
    if (tokens[first].kind == TokenKind::End) return ranges;
    int depth = 0;
    size_t start = first;
    size_t i = first;
    for (; tokens[i].kind != TokenKind::End; ++i) {
      if (tokens[i].kind != TokenKind::Punct) continue;
      if (tokens[i].text == "(") ++depth;
      if (tokens[i].text == ")") --depth;
      if (tokens[i].text == "," && depth == 0) {
        ranges.emplace_back(start, i);
        start = i + 1;
      }
    }
    ranges.emplace_back(start, i);
    return ranges;
  }

  // ---- Expressions ---------------------------------------------------------
  std::optional<int64_t> parse_integer_literal(const SourceLine& line, const Token& token) {
    std::string digits;
    for (const char c : token.text)
      if (c != '_') digits += c;
    int base = 10;
    size_t start = 0;
    if (digits.size() > 2 && digits[0] == '0' && (digits[1] == 'x' || digits[1] == 'X')) base = 16, start = 2;
    else if (digits.size() > 2 && digits[0] == '0' && (digits[1] == 'b' || digits[1] == 'B')) base = 2, start = 2;
    if (start == digits.size()) {
      error(line, token.column, "malformed number '" + token.text + "'");
      return std::nullopt;
    }
    uint64_t value = 0;
    for (size_t i = start; i < digits.size(); ++i) {
      const char c = static_cast<char>(std::tolower(static_cast<unsigned char>(digits[i])));
      int digit = -1;
      if (c >= '0' && c <= '9') digit = c - '0';
      else if (c >= 'a' && c <= 'f') digit = c - 'a' + 10;
      if (digit < 0 || digit >= base) {
        error(line, token.column, "malformed number '" + token.text + "'");
        return std::nullopt;
      }
      if (value > (UINT64_MAX - static_cast<uint64_t>(digit)) / static_cast<uint64_t>(base)) {
        error(line, token.column, "number '" + token.text + "' does not fit in 64 bits");
        return std::nullopt;
      }
      value = value * static_cast<uint64_t>(base) + static_cast<uint64_t>(digit);
    }
    if (base == 10 && value > static_cast<uint64_t>(INT64_MAX)) {
      error(line, token.column, "number '" + token.text + "' does not fit in 64 bits");
      return std::nullopt;
    }
    return static_cast<int64_t>(value);  // hex/binary may set the top bit, as raw words do
  }

  std::optional<int64_t> parse_primary(Cursor& cursor, const SourceLine& line) {
    const Token& token = cursor.next();
    // Parentheses and unary operators recurse: bounded, so that no source overflows the stack.
    struct Nesting {
      int& depth;
      explicit Nesting(int& d) : depth(++d) {}
      ~Nesting() { --depth; }
    } nesting(expression_depth_);
    if (expression_depth_ > kMaxExpressionDepth) {
      error(line, token.column, "expression nested more than " + std::to_string(kMaxExpressionDepth) + " deep");
      return std::nullopt;
    }
    if (token.kind == TokenKind::Integer) return parse_integer_literal(line, token);
    if (token.kind == TokenKind::Punct && token.text == "(") {
      const auto value = parse_expression(cursor, line, 0);
      if (!value) return std::nullopt;
      if (!cursor.accept(")")) {
        error(line, cursor.peek().column, "expected ')'");
        return std::nullopt;
      }
      return value;
    }
    if (token.kind == TokenKind::Punct && (token.text == "-" || token.text == "~" || token.text == "+")) {
      const auto value = parse_primary(cursor, line);
      if (!value) return std::nullopt;
      if (token.text == "+") return value;
      if (token.text == "~") return ~*value;
      if (*value == INT64_MIN) {
        error(line, token.column, "integer overflow in expression");
        return std::nullopt;
      }
      return -*value;
    }
    if (token.kind == TokenKind::Identifier && token.text == "f32" && cursor.accept("(")) return parse_f32_bits(cursor, line, token);
    if (token.kind == TokenKind::Identifier) {
      const auto it = names_.find(token.text);
      if (it != names_.end() && (it->second.kind == NameKind::Constant || it->second.kind == NameKind::Local))
        return it->second.kind == NameKind::Constant ? it->second.value : static_cast<int64_t>(symbols_[it->second.value].value);
      if (it != names_.end()) {
        error(line, token.column, "'" + token.text + "' is not a constant");
        return std::nullopt;
      }
      error(line, token.column, "undefined constant '" + token.text + "'");
      return std::nullopt;
    }
    if (token.kind == TokenKind::Float) {
      error(line, token.column, "expected an integer, got '" + token.text + "'");
      return std::nullopt;
    }
    error(line, token.column, token.kind == TokenKind::End ? "expected an expression" : "unexpected '" + token.text + "' in expression");
    return std::nullopt;
  }

  // f32(LITERAL): the bit pattern of an f32 value, for v.fill operands and raw words.
  std::optional<int64_t> parse_f32_bits(Cursor& cursor, const SourceLine& line, const Token& head) {
    bool negative = false;
    if (cursor.accept("-")) negative = true;
    else cursor.accept("+");
    const Token& literal = cursor.next();
    double value = 0;
    if (literal.kind == TokenKind::Float || literal.kind == TokenKind::Integer) {
      if (literal.kind == TokenKind::Integer) {
        const auto integer = parse_integer_literal(line, literal);
        if (!integer) return std::nullopt;
        value = static_cast<double>(*integer);
      } else {
        char* end = nullptr;
        value = std::strtod(literal.text.c_str(), &end);
        if (end == nullptr || *end != '\0') {
          error(line, literal.column, "malformed number '" + literal.text + "'");
          return std::nullopt;
        }
      }
    } else if (literal.kind == TokenKind::Identifier && (literal.text == "inf" || literal.text == "nan")) {
      value = literal.text == "inf" ? INFINITY : NAN;
    } else {
      error(line, literal.column, "f32() takes a number, got '" + literal.text + "'");
      return std::nullopt;
    }
    if (!cursor.accept(")")) {
      error(line, cursor.peek().column, "expected ')' to close f32( at column " + std::to_string(head.column));
      return std::nullopt;
    }
    // As a signed 32-bit value, so that li (which sign-extends) loads exactly these low 32 bits.
    return static_cast<int64_t>(static_cast<int32_t>(f32_bits(static_cast<float>(negative ? -value : value))));
  }

  static int precedence(const Token& token) {
    if (token.kind != TokenKind::Punct) return -1;
    const std::string& op = token.text;
    if (op == "|") return 1;
    if (op == "^") return 2;
    if (op == "&") return 3;
    if (op == "<<" || op == ">>") return 4;
    if (op == "+" || op == "-") return 5;
    if (op == "*" || op == "/" || op == "%") return 6;
    return -1;
  }

  std::optional<int64_t> parse_expression(Cursor& cursor, const SourceLine& line, int min_precedence) {
    auto left = parse_primary(cursor, line);
    if (!left) return std::nullopt;
    while (!cursor.at_end()) {
      const Token& op = cursor.peek();
      const int prec = precedence(op);
      if (prec < 0 || prec < min_precedence) break;
      cursor.next();
      const auto right = parse_expression(cursor, line, prec + 1);
      if (!right) return std::nullopt;
      int64_t result = 0;
      bool overflow = false;
      const int64_t a = *left, b = *right;
      if (op.text == "+") overflow = __builtin_add_overflow(a, b, &result);
      else if (op.text == "-") overflow = __builtin_sub_overflow(a, b, &result);
      else if (op.text == "*") overflow = __builtin_mul_overflow(a, b, &result);
      else if (op.text == "/" || op.text == "%") {
        if (b == 0) {
          error(line, op.column, "division by zero in expression");
          return std::nullopt;
        }
        if (a == INT64_MIN && b == -1) overflow = true;
        else result = op.text == "/" ? a / b : a % b;
      } else if (op.text == "<<" || op.text == ">>") {
        if (b < 0 || b > 63) {
          error(line, op.column, "shift amount " + std::to_string(b) + " is not in 0..63");
          return std::nullopt;
        }
        result = op.text == "<<" ? static_cast<int64_t>(static_cast<uint64_t>(a) << b) : (a >> b);
      } else if (op.text == "&") result = a & b;
      else if (op.text == "|") result = a | b;
      else result = a ^ b;
      if (overflow) {
        error(line, op.column, "integer overflow in expression");
        return std::nullopt;
      }
      left = result;
    }
    return left;
  }

  // A whole operand range as one integer expression.
  std::optional<int64_t> eval_range(const std::vector<Token>& tokens, std::pair<size_t, size_t> range, const SourceLine& line) {
    Cursor cursor{&tokens, range.first, range.second};
    if (cursor.at_end()) {
      error(line, tokens[range.first].column, "expected an expression");
      return std::nullopt;
    }
    const auto value = parse_expression(cursor, line, 0);
    if (value && !cursor.at_end()) {
      error(line, cursor.peek().column, "unexpected '" + cursor.peek().text + "' after expression");
      return std::nullopt;
    }
    return value;
  }

  // ---- Names -------------------------------------------------------------
  bool define_name(const SourceLine& line, const Token& token, NameEntry entry, const char* what) {
    if (!is_valid_identifier(token.text)) {
      error(line, token.column, "'" + token.text + "' is not a valid name for a " + what);
      return false;
    }
    if (is_reserved_name(token.text)) {
      error(line, token.column, "'" + token.text + "' is a reserved name");
      return false;
    }
    const auto it = names_.find(token.text);
    if (it != names_.end()) {
      const char* kind_text = it->second.kind == NameKind::Label ? "label" : "name";
      error(line, token.column, std::string("duplicate ") + (entry.kind == NameKind::Label ? "label" : kind_text) + " '" + token.text + "'" + where(it->second));
      return false;
    }
    entry.where = &line;
    entry.column = token.column;
    names_.emplace(token.text, entry);
    return true;
  }

  // ---- Pass 1 --------------------------------------------------------------
  void pass1_line(const SourceLine& line) {
    std::vector<Token> tokens;
    LexError lex_error{};
    if (!assembler::tokenize_line(line.text, &tokens, &lex_error)) {
      error(line, lex_error.column, lex_error.message);
      return;
    }
    size_t pos = 0;
    while (tokens[pos].kind == TokenKind::Identifier && tokens[pos + 1].kind == TokenKind::Punct && tokens[pos + 1].text == ":") {
      define_label(line, tokens[pos]);
      pos += 2;
    }
    const Token& head = tokens[pos];
    if (head.kind == TokenKind::End) return;
    if (head.kind != TokenKind::Identifier) {
      error(line, head.column, "expected an instruction, directive or label, got '" + head.text + "'");
      return;
    }
    if (head.text[0] == '.') {
      directive(line, tokens, pos);
      return;
    }
    if (current_code_ < 0) {
      error(line, head.column, data_open_ ? "instruction inside data section (start code with '.code CORES')"
                                          : "instruction outside a code section (start one with '.code CORES')");
      return;
    }
    pending_.push_back({&line, tokens, pos, static_cast<uint32_t>(current_code_), code_[static_cast<size_t>(current_code_)].words.size()});
    code_[static_cast<size_t>(current_code_)].words.push_back(0);
  }

  void define_label(const SourceLine& line, const Token& token) {
    if (current_code_ < 0) {
      error(line, token.column, "label '" + token.text + "' outside a code section");
      return;
    }
    const uint64_t pc = code_[static_cast<size_t>(current_code_)].words.size();
    if (define_name(line, token, {NameKind::Label, static_cast<int64_t>(pc), static_cast<uint32_t>(current_code_)}, "label"))
      labels_.push_back({token.text, static_cast<uint32_t>(current_code_), pc, labels_.size()});
  }

  bool expect_operand_count(const SourceLine& line, const Token& head, const std::vector<std::pair<size_t, size_t>>& ops,
                            size_t min, size_t max, const char* usage) {
    if (ops.size() >= min && ops.size() <= max) return true;
    error(line, head.column, std::string("bad directive: ") + head.text + " expects " + usage);
    return false;
  }

  const Token* name_operand(const SourceLine& line, const std::vector<Token>& tokens, std::pair<size_t, size_t> range, const char* what) {
    if (range.second - range.first != 1 || tokens[range.first].kind != TokenKind::Identifier) {
      error(line, tokens[range.first].column, std::string("expected a ") + what + " name");
      return nullptr;
    }
    return &tokens[range.first];
  }

  std::optional<DType> dtype_operand(const SourceLine& line, const std::vector<Token>& tokens, std::pair<size_t, size_t> range) {
    const Token& token = tokens[range.first];
    const auto dtype = range.second - range.first == 1 ? dtype_from_name(token.text) : std::nullopt;
    if (!dtype) error(line, token.column, "expected an element type (f32, bf16, f16, i8, i32, u8), got '" + token.text + "'");
    return dtype;
  }

  std::optional<std::vector<uint64_t>> shape_operands(const SourceLine& line, const std::vector<Token>& tokens,
                                                      const std::vector<std::pair<size_t, size_t>>& ops, size_t first) {
    std::vector<uint64_t> shape;
    uint64_t count = 1;
    for (size_t i = first; i < ops.size(); ++i) {
      const auto dim = eval_range(tokens, ops[i], line);
      if (!dim) return std::nullopt;
      if (*dim <= 0) {
        error(line, tokens[ops[i].first].column, "dimension must be positive, got " + std::to_string(*dim));
        return std::nullopt;
      }
      if (count > (uint64_t{1} << 40) / static_cast<uint64_t>(*dim)) {
        error(line, tokens[ops[i].first].column, "shape is too large");
        return std::nullopt;
      }
      count *= static_cast<uint64_t>(*dim);
      shape.push_back(static_cast<uint64_t>(*dim));
    }
    return shape;
  }

  void directive(const SourceLine& line, const std::vector<Token>& tokens, size_t pos) {
    const Token& head = tokens[pos];
    const std::string& name = head.text;
    const auto ops = split_operands(tokens, pos + 1);
    for (const auto& range : ops)
      if (range.first == range.second) {
        error(line, tokens[range.first].column, "empty operand in " + name);
        return;
      }
    if (name != ".values" && name != ".zeros") close_data_section();

    if (name == ".equ") {
      if (!expect_operand_count(line, head, ops, 2, 2, "NAME, VALUE")) return;
      const Token* id = name_operand(line, tokens, ops[0], "constant");
      const auto value = eval_range(tokens, ops[1], line);
      if (id && value) define_name(line, *id, {NameKind::Constant, *value}, "constant");
    } else if (name == ".reg" || name == ".sem") {
      const bool is_reg = name == ".reg";
      if (!expect_operand_count(line, head, ops, 2, 2, is_reg ? "NAME, rN" : "NAME, sN")) return;
      const Token* id = name_operand(line, tokens, ops[0], is_reg ? "register alias" : "semaphore alias");
      const Token& target = tokens[ops[1].first];
      const auto number = ops[1].second - ops[1].first == 1
                              ? register_number(target.text, is_reg ? 'r' : 's', is_reg ? kNumRegisters : kNumSemaphores)
                              : std::nullopt;
      if (!number || target.text == "zero") {
        error(line, target.column, std::string("expected a ") + (is_reg ? "register (r0..r" + std::to_string(kNumRegisters - 1) + ")" : "semaphore (s0..s" + std::to_string(kNumSemaphores - 1) + ")") + ", got '" + target.text + "'");
        return;
      }
      if (id) define_name(line, *id, {is_reg ? NameKind::RegAlias : NameKind::SemAlias, static_cast<int64_t>(*number)}, "alias");
    } else if (name == ".input" || name == ".output" || name == ".buffer") {
      if (!expect_operand_count(line, head, ops, 3, 2 + kMaxSymbolDims, "NAME, DTYPE, DIM[, DIM...]")) return;
      const Token* id = name_operand(line, tokens, ops[0], "buffer");
      const auto dtype = dtype_operand(line, tokens, ops[1]);
      const auto shape = shape_operands(line, tokens, ops, 2);
      if (!id || !dtype || !shape) return;
      const SymbolKind kind = name == ".input" ? SymbolKind::Input : name == ".output" ? SymbolKind::Output : SymbolKind::Scratch;
      add_symbol(line, *id, {id->text, kind, *dtype, *shape, 0, 0}, NameKind::Buffer);
    } else if (name == ".local") {
      if (!expect_operand_count(line, head, ops, 4, 3 + kMaxSymbolDims, "NAME, DTYPE, ADDRESS, DIM[, DIM...]")) return;
      const Token* id = name_operand(line, tokens, ops[0], "local region");
      const auto dtype = dtype_operand(line, tokens, ops[1]);
      const auto address = eval_range(tokens, ops[2], line);
      const auto shape = shape_operands(line, tokens, ops, 3);
      if (!id || !dtype || !address || !shape) return;
      const Token& at = tokens[ops[2].first];
      const unsigned align = dtype_size_bytes(*dtype);
      if (*address < 0) {
        error(line, at.column, "local address " + std::to_string(*address) + " is negative");
        return;
      }
      if (*address % align != 0) {
        error(line, at.column, "misaligned address " + hex(static_cast<uint64_t>(*address)) + " for '" + id->text + "': a " +
                                   std::string(dtype_name(*dtype)) + " region must start at a multiple of " + std::to_string(align) + " bytes");
        return;
      }
      Symbol symbol{id->text, SymbolKind::Local, *dtype, *shape, 0, static_cast<uint64_t>(*address)};
      const uint64_t end = static_cast<uint64_t>(*address) + symbol.size_bytes();
      if (end > kLocalAddressLimit) {
        error(line, at.column, "local region '" + id->text + "' ends past the local address space (" + hex(kLocalAddressLimit) + ")");
        return;
      }
      if (static_cast<uint64_t>(*address) < kAccumulatorBase && end > kAccumulatorBase) {
        error(line, at.column, "local region '" + id->text + "' runs from the scratchpad into the accumulator (ACC_BASE " + hex(kAccumulatorBase) + ")");
        return;
      }
      add_symbol(line, *id, symbol, NameKind::Local);
    } else if (name == ".data") {
      if (!expect_operand_count(line, head, ops, 2, 2 + kMaxSymbolDims, "NAME, DTYPE[, DIM...]")) return;
      const Token* id = name_operand(line, tokens, ops[0], "data section");
      const auto dtype = dtype_operand(line, tokens, ops[1]);
      const auto shape = shape_operands(line, tokens, ops, 2);
      if (!id || !dtype || !shape) return;
      current_code_ = -1;
      data_.push_back({*dtype, {}});
      Symbol symbol{id->text, SymbolKind::Data, *dtype, *shape, static_cast<uint32_t>(data_.size() - 1), 0};
      if (add_symbol(line, *id, symbol, NameKind::Buffer)) {
        data_open_ = OpenData{symbols_.size() - 1, &line, head.column, !shape->empty()};
      } else {
        data_.pop_back();
      }
    } else if (name == ".values" || name == ".zeros") {
      if (!data_open_) {
        error(line, head.column, name + " outside a data section (start one with '.data NAME, DTYPE')");
        return;
      }
      DataSection& section = data_[symbols_[data_open_->symbol_index].section];
      if (name == ".zeros") {
        if (!expect_operand_count(line, head, ops, 1, 1, "COUNT")) return;
        const auto count = eval_range(tokens, ops[0], line);
        if (!count) return;
        if (*count < 0) {
          error(line, tokens[ops[0].first].column, ".zeros count " + std::to_string(*count) + " is negative");
          return;
        }
        if (!reserve_data(line, tokens[ops[0].first].column, static_cast<uint64_t>(*count) * dtype_size_bytes(section.dtype))) return;
        section.contents.resize(section.contents.size() + static_cast<size_t>(*count) * dtype_size_bytes(section.dtype), 0);
      } else {
        if (ops.empty()) {
          error(line, head.column, "bad directive: .values expects VALUE[, VALUE...]");
          return;
        }
        for (const auto& range : ops) data_value(line, tokens, range, section);
      }
    } else if (name == ".code") {
      code_directive(line, tokens, head, ops);
    } else if (name == ".word") {
      if (!expect_operand_count(line, head, ops, 1, 1, "VALUE")) return;
      if (current_code_ < 0) {
        error(line, head.column, ".word outside a code section");
        return;
      }
      const auto value = eval_range(tokens, ops[0], line);
      if (value) code_[static_cast<size_t>(current_code_)].words.push_back(static_cast<uint64_t>(*value));
    } else if (name == ".meta") {
      if (!expect_operand_count(line, head, ops, 2, 2, "KEY, \"VALUE\"")) return;
      const Token* key = name_operand(line, tokens, ops[0], "metadata key");
      const Token& value = tokens[ops[1].first];
      if (value.kind != TokenKind::String || ops[1].second - ops[1].first != 1) {
        error(line, value.column, ".meta value must be a quoted string");
        return;
      }
      if (!key) return;
      for (const auto& entry : metadata_)
        if (entry.first == key->text) {
          error(line, key->column, "duplicate metadata key '" + key->text + "'");
          return;
        }
      metadata_.emplace_back(key->text, value.text);
    } else if (name == ".include") {
      error(line, head.column, ".include must stand alone on its line");
    } else {
      error(line, head.column, "unknown directive '" + name + "'");
    }
  }

  bool add_symbol(const SourceLine& line, const Token& id, const Symbol& symbol, NameKind kind) {
    if (!define_name(line, id, {kind, static_cast<int64_t>(symbols_.size())}, "symbol")) return false;
    symbols_.push_back(symbol);
    return true;
  }

  void code_directive(const SourceLine& line, const std::vector<Token>& tokens, const Token& head,
                      const std::vector<std::pair<size_t, size_t>>& ops) {
    if (ops.empty()) {
      error(line, head.column, "bad directive: .code expects CORES ('all', or core numbers and ranges such as 0-3, 5)");
      return;
    }
    uint64_t mask = 0;
    if (ops.size() == 1 && ops[0].second - ops[0].first == 1 && tokens[ops[0].first].text == "all") {
      mask = kAllCores;
    } else {
      for (const auto& range : ops) {
        Cursor cursor{&tokens, range.first, range.second};
        const auto first = parse_primary(cursor, line);
        if (!first) return;
        int64_t last = *first;
        if (cursor.accept("-")) {
          const auto end = parse_primary(cursor, line);
          if (!end) return;
          last = *end;
        }
        if (!cursor.at_end()) {
          error(line, cursor.peek().column, "unexpected '" + cursor.peek().text + "' in core list");
          return;
        }
        if (*first < 0 || last > 63 || *first > last) {
          error(line, tokens[range.first].column, "core range " + std::to_string(*first) + "-" + std::to_string(last) + " is not within 0..63");
          return;
        }
        for (int64_t core = *first; core <= last; ++core) mask |= uint64_t{1} << core;
      }
    }
    for (size_t i = 0; i < code_.size(); ++i) {
      if (code_[i].core_mask & mask) {
        error(line, head.column, "cores of this section already run the code section at " + code_lines_[i]->file + ":" +
                                     std::to_string(code_lines_[i]->line));
        return;
      }
    }
    code_.push_back({mask, {}});
    code_lines_.push_back(&line);
    current_code_ = static_cast<int>(code_.size() - 1);
  }

  void data_value(const SourceLine& line, const std::vector<Token>& tokens, std::pair<size_t, size_t> range, DataSection& section) {
    const Token& first = tokens[range.first];
    const size_t size = dtype_size_bytes(section.dtype);
    uint8_t bytes[4] = {0, 0, 0, 0};
    if (dtype_is_float(section.dtype)) {
      size_t pos = range.first;
      bool negative = false;
      if (tokens[pos].kind == TokenKind::Punct && (tokens[pos].text == "-" || tokens[pos].text == "+")) {
        negative = tokens[pos].text == "-";
        ++pos;
      }
      const Token& literal = tokens[pos];
      std::optional<uint32_t> raw;  // raw bit pattern in the section's dtype
      double value = 0;
      bool ok = pos + 1 == range.second;
      if (ok && literal.kind == TokenKind::Float) {
        errno = 0;
        char* end = nullptr;
        value = std::strtod(literal.text.c_str(), &end);
        ok = end != nullptr && *end == '\0';
      } else if (ok && literal.kind == TokenKind::Integer) {
        const auto integer = parse_integer_literal(line, literal);  // keeps the sign of "-0"
        if (!integer) return;
        value = static_cast<double>(*integer);
      } else if (ok && literal.kind == TokenKind::Identifier && literal.text == "inf") {
        value = INFINITY;
      } else if (ok && literal.kind == TokenKind::Identifier && literal.text == "nan") {
        value = NAN;
      } else if (pos + 3 == range.second && literal.kind == TokenKind::Identifier && literal.text == "nan" &&
                 tokens[pos + 1].text == ":" && tokens[pos + 2].kind == TokenKind::Integer) {
        const auto bits = parse_integer_literal(line, tokens[pos + 2]);
        if (!bits) return;
        const uint64_t limit = size == 4 ? 0xffffffffull : 0xffffull;
        if (static_cast<uint64_t>(*bits) > limit) {
          error(line, tokens[pos + 2].column, "NaN bit pattern does not fit " + std::string(dtype_name(section.dtype)));
          return;
        }
        raw = static_cast<uint32_t>(*bits);
        ok = true;
      } else {
        // Any integer expression: converted exactly as an integer would be.
        const auto integer = eval_range(tokens, range, line);
        if (!integer) return;
        value = static_cast<double>(*integer);
        negative = false;
        ok = true;
      }
      if (!ok) {
        error(line, first.column, "expected a number for a " + std::string(dtype_name(section.dtype)) + " value");
        return;
      }
      if (!raw) {
        const float f = static_cast<float>(negative ? -value : value);
        raw = section.dtype == DType::F32 ? f32_bits(f) : section.dtype == DType::BF16 ? f32_to_bf16(f) : f32_to_f16(f);
      }
      for (size_t b = 0; b < size; ++b) bytes[b] = static_cast<uint8_t>((*raw >> (8 * b)) & 0xff);
    } else {
      const auto value = eval_range(tokens, range, line);
      if (!value) return;
      int64_t lo = 0, hi = 0;
      switch (section.dtype) {
        case DType::I8: lo = -128, hi = 127; break;
        case DType::U8: lo = 0, hi = 255; break;
        default: lo = INT32_MIN, hi = INT32_MAX; break;
      }
      if (*value < lo || *value > hi) {
        error(line, first.column, "value " + std::to_string(*value) + " out of range for " + std::string(dtype_name(section.dtype)) + " (" +
                                      std::to_string(lo) + ".." + std::to_string(hi) + ")");
        return;
      }
      for (size_t b = 0; b < size; ++b) bytes[b] = static_cast<uint8_t>((static_cast<uint64_t>(*value) >> (8 * b)) & 0xff);
    }
    if (!reserve_data(line, first.column, size)) return;
    section.contents.insert(section.contents.end(), bytes, bytes + size);
  }

  // Counts data bytes against the program's limit; false (and an error) past it.
  bool reserve_data(const SourceLine& line, int column, uint64_t bytes) {
    if (bytes > options_.max_data_bytes || data_bytes_ > options_.max_data_bytes - bytes) {
      error(line, column, "data sections exceed " + std::to_string(options_.max_data_bytes) + " bytes in total");
      return false;
    }
    data_bytes_ += bytes;
    return true;
  }

  void close_data_section() {
    if (!data_open_) return;
    Symbol& symbol = symbols_[data_open_->symbol_index];
    const DataSection& section = data_[symbol.section];
    const uint64_t count = section.contents.size() / dtype_size_bytes(section.dtype);
    if (!data_open_->explicit_shape) {
      if (count == 0) error(*data_open_->line, data_open_->column, "data section '" + symbol.name + "' has no values");
      symbol.shape = {count};
    } else if (count != symbol.element_count()) {
      std::string dims;
      for (const uint64_t dim : symbol.shape) dims += (dims.empty() ? "" : "x") + std::to_string(dim);
      error(*data_open_->line, data_open_->column, "data section '" + symbol.name + "' has " + std::to_string(count) +
                                                       " values; its shape " + dims + " needs " + std::to_string(symbol.element_count()));
    }
    data_open_.reset();
  }

  // ---- Pass 2: instructions ---------------------------------------------------
  void encode_instruction(const PendingInstruction& pending) {
    const SourceLine& line = *pending.line;
    const std::vector<Token>& tokens = pending.tokens;
    const Token& head = tokens[pending.first];
    const InstructionSpec* spec = find_instruction(head.text);
    if (spec == nullptr) {
      std::string suggestion;
      size_t best = 3;
      for (const InstructionSpec& candidate : instruction_table()) {
        const size_t distance = edit_distance(head.text, candidate.mnemonic);
        if (distance < best) best = distance, suggestion = candidate.mnemonic;
      }
      error(line, head.column, "unknown instruction '" + head.text + "'" + (suggestion.empty() ? "" : "; did you mean '" + suggestion + "'?"));
      return;
    }
    const auto ops = split_operands(tokens, pending.first + 1);
    if (ops.size() != spec->operands.size()) {
      std::string names;
      for (const OperandSpec& operand : spec->operands) names += (names.empty() ? "" : ", ") + operand.name;
      error(line, ops.size() > spec->operands.size() ? tokens[ops[spec->operands.size()].first].column : head.column,
            "'" + spec->mnemonic + "' takes " + std::to_string(spec->operands.size()) + " operand" +
                (spec->operands.size() == 1 ? "" : "s") + (names.empty() ? "" : " (" + names + ")") + ", got " + std::to_string(ops.size()));
      return;
    }
    Instruction instruction;
    instruction.opcode = spec->opcode;
    for (size_t i = 0; i < ops.size(); ++i) {
      if (ops[i].first == ops[i].second) {
        error(line, tokens[ops[i].first].column, "missing operand '" + spec->operands[i].name + "' of '" + spec->mnemonic + "'");
        return;
      }
      const auto value = operand_value(line, tokens, ops[i], *spec, spec->operands[i], pending);
      if (!value) return;
      instruction.operands[i] = *value;
    }
    std::string encode_error;
    const auto word = encode(instruction, &encode_error);
    if (!word) {
      error(line, head.column, encode_error);
      return;
    }
    code_[pending.section].words[pending.pc] = *word;
  }

  std::optional<int64_t> operand_value(const SourceLine& line, const std::vector<Token>& tokens, std::pair<size_t, size_t> range,
                                       const InstructionSpec& spec, const OperandSpec& operand, const PendingInstruction& pending) {
    const Token& token = tokens[range.first];
    const bool single = range.second - range.first == 1;
    const std::string role = "operand '" + operand.name + "' of '" + spec.mnemonic + "'";
    const auto wrong_kind = [&]() -> std::optional<int64_t> {
      error(line, token.column, role + " must be " + describe_operand(operand) + ", got '" + token.text + "'");
      return std::nullopt;
    };
    const auto alias = [&](NameKind kind) -> std::optional<int64_t> {
      const auto it = names_.find(token.text);
      if (it != names_.end() && it->second.kind == kind) return it->second.value;
      return std::nullopt;
    };
    switch (operand.kind) {
      case OperandKind::Reg: {
        if (!single || token.kind != TokenKind::Identifier) return wrong_kind();
        if (const auto number = register_number(token.text, 'r', kNumRegisters)) return *number;
        if (const auto number = alias(NameKind::RegAlias)) return number;
        return wrong_kind();
      }
      case OperandKind::Sem: {
        if (!single || token.kind != TokenKind::Identifier) return wrong_kind();
        if (const auto number = register_number(token.text, 's', kNumSemaphores); number && token.text != "zero") return *number;
        if (const auto number = alias(NameKind::SemAlias)) return number;
        return wrong_kind();
      }
      case OperandKind::Sym: {
        if (!single || token.kind != TokenKind::Identifier) return wrong_kind();
        const auto it = names_.find(token.text);
        if (it == names_.end()) {
          error(line, token.column, "undefined symbol '" + token.text + "' (declare it with .input, .output, .buffer or .data)");
          return std::nullopt;
        }
        if (it->second.kind == NameKind::Local) {
          error(line, token.column, "'" + token.text + "' is a local region, not a global buffer; load its address with li");
          return std::nullopt;
        }
        if (it->second.kind != NameKind::Buffer) return wrong_kind();
        return it->second.value;
      }
      case OperandKind::Target: {
        if (token.kind == TokenKind::Identifier && token.text == ".") {
          Cursor cursor{&tokens, range.first + 1, range.second};
          if (cursor.at_end()) return 0;
          const Token& sign = cursor.peek();
          if (sign.kind != TokenKind::Punct || (sign.text != "+" && sign.text != "-")) return wrong_kind();
          const auto offset = parse_expression(cursor, line, 0);  // the sign is part of the expression
          if (!offset) return std::nullopt;
          if (!cursor.at_end()) return wrong_kind();
          return check_range(line, token, role, operand, *offset);
        }
        if (!single || token.kind != TokenKind::Identifier) return wrong_kind();
        const auto it = names_.find(token.text);
        if (it == names_.end()) {
          error(line, token.column, "undefined label '" + token.text + "'");
          return std::nullopt;
        }
        if (it->second.kind != NameKind::Label) {
          error(line, token.column, "'" + token.text + "' is not a label");
          return std::nullopt;
        }
        if (it->second.section != pending.section) {
          error(line, token.column, "label '" + token.text + "' is in another code section");
          return std::nullopt;
        }
        return check_range(line, token, role, operand, it->second.value - static_cast<int64_t>(pending.pc));
      }
      case OperandKind::SImm:
      case OperandKind::UImm: {
        const auto value = eval_range(tokens, range, line);
        if (!value) return std::nullopt;
        return check_range(line, token, role, operand, *value);
      }
      case OperandKind::TcFlags: {
        int64_t flags = 0;
        if (single && (token.text == "none" || token.text == "0")) return 0;
        Cursor cursor{&tokens, range.first, range.second};
        const auto& names = operand_value_names(operand.kind);
        do {
          const Token& flag = cursor.next();
          const auto it = std::find(names.begin(), names.end(), flag.text);
          if (flag.kind != TokenKind::Identifier || it == names.end()) {
            error(line, flag.column, role + " must be " + describe_operand(operand) + ", got '" + flag.text + "'");
            return std::nullopt;
          }
          flags |= int64_t{1} << (it - names.begin());
        } while (cursor.accept("|"));
        if (!cursor.at_end()) return wrong_kind();
        return flags;
      }
      default: {
        const auto& names = operand_value_names(operand.kind);
        const auto it = std::find(names.begin(), names.end(), token.text);
        if (!single || token.kind != TokenKind::Identifier || it == names.end()) return wrong_kind();
        return it - names.begin();
      }
    }
  }

  std::optional<int64_t> check_range(const SourceLine& line, const Token& token, const std::string& role, const OperandSpec& operand,
                                     int64_t value) {
    if (value >= operand_min(operand) && value <= operand_max(operand)) return value;
    if (operand.kind == OperandKind::Target) {
      error(line, token.column, "branch target out of range: offset " + std::to_string(value) + " does not fit " + role);
    } else {
      error(line, token.column, "immediate " + std::to_string(value) + " out of range for " + role + ": must be " + describe_operand(operand));
    }
    return std::nullopt;
  }

  // ---- Output -------------------------------------------------------------
  Program build_program() {
    Program program;
    program.code = code_;
    program.data = data_;
    program.symbols = symbols_;
    // Labels follow the other symbols, in address order, so that a program
    // printed by npu-objdump --asm reassembles with identical symbol indices.
    std::stable_sort(labels_.begin(), labels_.end(), [](const LabelRecord& a, const LabelRecord& b) {
      return std::tie(a.section, a.pc, a.order) < std::tie(b.section, b.pc, b.order);
    });
    for (const LabelRecord& label : labels_)
      program.symbols.push_back({label.name, SymbolKind::Label, DType::F32, {}, label.section, label.pc});
    program.metadata = metadata_;
    for (const auto& entry : options_.default_metadata) {
      const bool present = std::any_of(metadata_.begin(), metadata_.end(), [&](const auto& e) { return e.first == entry.first; });
      if (!present) program.metadata.push_back(entry);
    }
    return program;
  }

  struct LabelRecord {
    std::string name;
    uint32_t section;
    uint64_t pc;
    size_t order;
  };

  const AssembleOptions& options_;
  std::vector<std::unique_ptr<SourceLine>> storage_;
  std::vector<const SourceLine*> lines_;
  std::vector<std::string> include_stack_;
  int expression_depth_ = 0;
  std::vector<Diagnostic> errors_;
  std::vector<size_t> error_order_;  // SourceLine::order of each positioned error
  std::map<std::string, NameEntry, std::less<>> names_;
  std::vector<CodeSection> code_;
  std::vector<const SourceLine*> code_lines_;
  std::vector<DataSection> data_;
  std::vector<Symbol> symbols_;
  std::vector<LabelRecord> labels_;
  std::vector<std::pair<std::string, std::string>> metadata_;
  std::vector<PendingInstruction> pending_;
  std::optional<OpenData> data_open_;
  int current_code_ = -1;
  uint64_t data_bytes_ = 0;
};

}  // namespace

AssembleResult assemble_source(const std::string& text, const std::string& file_name, const AssembleOptions& options) {
  if (text.size() > options.max_source_bytes) {
    AssembleResult result;
    result.errors.push_back({file_name, 0, 0, "larger than the " + std::to_string(options.max_source_bytes >> 20) + " MiB a source file may be", ""});
    return result;
  }
  Assembler assembler(options);
  return assembler.run(text, file_name);
}

AssembleResult assemble_file(const std::string& path, const AssembleOptions& options) {
  std::string why;
  const std::optional<std::string> text = read_source_file(path, options.max_source_bytes, &why);
  if (!text) {
    AssembleResult result;
    result.errors.push_back({path, 0, 0, "cannot read '" + path + "': " + why, ""});
    return result;
  }
  AssembleOptions with_defaults = options;
  const bool has_source = std::any_of(options.default_metadata.begin(), options.default_metadata.end(),
                                      [](const auto& e) { return e.first == "source"; });
  if (!has_source) with_defaults.default_metadata.insert(with_defaults.default_metadata.begin(), {"source", base_name(path)});
  return assemble_source(*text, path, with_defaults);
}

}  // namespace npu::isa
