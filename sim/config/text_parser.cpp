#include "text_parser.h"

#include <cctype>
#include <optional>

#include <google/protobuf/io/tokenizer.h>

#include "npusim/sim/config_loader.h"

namespace npu::sim::config_detail {
namespace {

struct Position {
  int line;    // 0-based, as protobuf counts
  int column;  // 0-based; a tab advances to the next multiple of 8, as protobuf counts
};

size_t offset_of(const std::string& text, Position position) {
  size_t offset = 0;
  for (int line = 0; line < position.line && offset < text.size(); ++offset) {
    if (text[offset] == '\n') ++line;
  }
  for (int column = 0; column < position.column && offset < text.size() && text[offset] != '\n'; ++offset) {
    column = text[offset] == '\t' ? (column / 8 + 1) * 8 : column + 1;
  }
  return offset;
}

Position position_of(const std::string& text, size_t offset) {
  Position position{0, 0};
  for (size_t i = 0; i < offset; ++i) {
    if (text[i] == '\n') {
      position = {position.line + 1, 0};
    } else {
      position.column = text[i] == '\t' ? (position.column / 8 + 1) * 8 : position.column + 1;
    }
  }
  return position;
}

// The name an error is about, when protobuf quotes one that it reports
// past: it notices an unknown field at the ':' after it, and an unknown enum
// value or a repeated field only at the next token.
std::optional<std::string> misplaced_name(const std::string& message) {
  for (const std::string lead : {"has no field named \"", "Unknown enumeration value of \"", "Non-repeated field \""}) {
    const size_t start = message.find(lead);
    if (start == std::string::npos) continue;
    const size_t name_start = start + lead.size();
    const size_t name_end = message.find('"', name_start);
    if (name_end != std::string::npos) return message.substr(name_start, name_end - name_start);
  }
  return std::nullopt;
}

bool is_identifier_char(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }

// The last whole-word occurrence of `name` before `position`, or `position`.
Position back_to_name(const std::string& text, Position position, const std::string& name) {
  const size_t end = offset_of(text, position);
  for (size_t at = text.rfind(name, end); at != std::string::npos && !name.empty(); at = text.rfind(name, at - 1)) {
    const bool starts_word = at == 0 || !is_identifier_char(text[at - 1]);
    const bool ends_word = at + name.size() >= text.size() || !is_identifier_char(text[at + name.size()]);
    if (starts_word && ends_word) return position_of(text, at);
    if (at == 0) break;
  }
  return position;
}

// Messages as "SOURCE:LINE:COL: message", counting from 1 like editors do.
class CollectErrors : public google::protobuf::io::ErrorCollector {
 public:
  CollectErrors(const std::string& text, const std::string& source) : text_(text), source_(source) {}

  void AddError(int line, google::protobuf::io::ColumnNumber column, const std::string& message) override {
    Position position{line, column};
    if (const auto name = misplaced_name(message)) position = back_to_name(text_, position, *name);
    if (!messages_.empty()) messages_ += '\n';
    messages_ += source_ + ':' + std::to_string(position.line + 1) + ':' + std::to_string(position.column + 1) + ": " +
                 message;
  }

  const std::string& messages() const { return messages_; }

 private:
  const std::string& text_;
  const std::string& source_;
  std::string messages_;
};

}  // namespace

void parse_text(const std::string& text, const std::string& source, pb::ChipConfig* config,
                google::protobuf::TextFormat::ParseInfoTree* locations) {
  CollectErrors errors(text, source);
  google::protobuf::TextFormat::Parser parser;
  parser.RecordErrorsTo(&errors);
  parser.WriteLocationsTo(locations);
  if (!parser.ParseFromString(text, config)) {
    throw ConfigError(errors.messages().empty() ? source + ": not a valid chip config" : errors.messages());
  }
}

}  // namespace npu::sim::config_detail
