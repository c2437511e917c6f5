// Where the fields of a parsed config were written, so that each validation
// rule can name the file, line, column and dotted path of the field it rejects.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <google/protobuf/message.h>
#include <google/protobuf/text_format.h>

namespace npu::sim::config_detail {

// A position in the source text, 0-based as protobuf reports it; line < 0
// when there is none (the top level, or a field that was not written).
struct TextPosition {
  int line = -1;
  int column = -1;
};

// The validation errors of one source, each "SOURCE:LINE:COL: message".
class Diagnostics {
 public:
  explicit Diagnostics(std::string source) : source_(std::move(source)) {}

  void report(TextPosition where, const std::string& message);
  bool empty() const { return errors_.empty(); }
  // All errors in source order, one a line.
  std::string text() const;

 private:
  struct Error {
    TextPosition where;
    std::string message;
  };
  std::string source_;
  std::vector<Error> errors_;
};

// A field of a message, by name; `index` picks an element of a repeated field.
struct FieldRef {
  // Implicit, so that rules can name a field with just "banks".
  FieldRef(const char* field_name) : name(field_name) {}
  FieldRef(const char* field_name, int element) : name(field_name), index(element) {}
  const char* name;
  int index = -1;
};

// One message of the parsed config: the message, its dotted path, where it
// was written, and where each of its fields was written.
class Scope {
 public:
  static Scope root(const google::protobuf::Message& message,
                    const google::protobuf::TextFormat::ParseInfoTree& locations, Diagnostics& diagnostics);

  template <class Message>
  const Message& as() const {
    return dynamic_cast<const Message&>(*message_);
  }

  // The nested message `field`, or nullopt after reporting it missing.
  std::optional<Scope> section(FieldRef field) const;
  // Element `index` of the repeated message field `name`.
  Scope element(const char* name, int index) const;

  // "core.scratchpad.banks", "dram.ports[2]".
  std::string path(FieldRef field) const;

  // When !ok, reports "PATH RULE (got GOT)" at the field, or, when the field
  // was not written, "missing field PATH (RULE)" at this message. An empty
  // `got` leaves out the "(got ...)".
  void require(bool ok, FieldRef field, const std::string& rule, const std::string& got) const;
  void require(bool ok, FieldRef field, const std::string& rule, uint64_t got) const;

 private:
  Scope(const google::protobuf::Message* message, const google::protobuf::TextFormat::ParseInfoTree* locations,
        std::string path, TextPosition position, Diagnostics* diagnostics)
      : message_(message), locations_(locations), path_(std::move(path)), position_(position),
        diagnostics_(diagnostics) {}

  const google::protobuf::FieldDescriptor* descriptor(const char* name) const;
  // Where the field (or, for a repeated field without index, its first element) was written.
  TextPosition position_of(FieldRef field) const;

  const google::protobuf::Message* message_;
  const google::protobuf::TextFormat::ParseInfoTree* locations_;  // null when nothing inside was written
  std::string path_;                                              // empty at the top level
  TextPosition position_;
  Diagnostics* diagnostics_;
};

}  // namespace npu::sim::config_detail
