#include "scope.h"

#include <algorithm>
#include <stdexcept>

namespace npu::sim::config_detail {

using google::protobuf::FieldDescriptor;
using google::protobuf::Message;
using google::protobuf::TextFormat;

void Diagnostics::report(TextPosition where, const std::string& message) { errors_.push_back({where, message}); }

std::string Diagnostics::text() const {
  std::vector<Error> sorted = errors_;
  std::stable_sort(sorted.begin(), sorted.end(), [](const Error& a, const Error& b) {
    return a.where.line != b.where.line ? a.where.line < b.where.line : a.where.column < b.where.column;
  });
  std::string text;
  for (const Error& error : sorted) {
    if (!text.empty()) text += '\n';
    text += source_;
    if (error.where.line >= 0) {
      text += ':' + std::to_string(error.where.line + 1) + ':' + std::to_string(error.where.column + 1);
    }
    text += ": " + error.message;
  }
  return text;
}

Scope Scope::root(const Message& message, const TextFormat::ParseInfoTree& locations, Diagnostics& diagnostics) {
  return Scope(&message, &locations, "", TextPosition{}, &diagnostics);
}

const FieldDescriptor* Scope::descriptor(const char* name) const {
  const FieldDescriptor* field = message_->GetDescriptor()->FindFieldByName(name);
  if (field == nullptr) {
    throw std::logic_error(message_->GetDescriptor()->full_name() + " has no field " + name);
  }
  return field;
}

std::string Scope::path(FieldRef field) const {
  std::string path = path_.empty() ? field.name : path_ + '.' + field.name;
  if (field.index >= 0) path += '[' + std::to_string(field.index) + ']';
  return path;
}

TextPosition Scope::position_of(FieldRef field) const {
  if (locations_ == nullptr) return {};
  const FieldDescriptor* descriptor = this->descriptor(field.name);
  if (!descriptor->is_repeated()) {
    const TextFormat::ParseLocation location = locations_->GetLocation(descriptor, -1);
    return {location.line, location.column};
  }
  // Protobuf records one location per time the field is written, and a list
  // ("input_dtypes: [...]") is one time: an element without a location of its
  // own is in the last list written before it.
  for (int index = std::max(field.index, 0); index >= 0; --index) {
    const TextFormat::ParseLocation location = locations_->GetLocation(descriptor, index);
    if (location.line >= 0) return {location.line, location.column};
  }
  return {};
}

std::optional<Scope> Scope::section(FieldRef field) const {
  const FieldDescriptor* descriptor = this->descriptor(field.name);
  if (!message_->GetReflection()->HasField(*message_, descriptor)) {
    diagnostics_->report(position_, "missing field " + path(field));
    return std::nullopt;
  }
  return Scope(&message_->GetReflection()->GetMessage(*message_, descriptor),
               locations_ ? locations_->GetTreeForNested(descriptor, -1) : nullptr, path(field), position_of(field),
               diagnostics_);
}

Scope Scope::element(const char* name, int index) const {
  const FieldDescriptor* descriptor = this->descriptor(name);
  return Scope(&message_->GetReflection()->GetRepeatedMessage(*message_, descriptor, index),
               locations_ ? locations_->GetTreeForNested(descriptor, index) : nullptr, path({name, index}),
               position_of({name, index}), diagnostics_);
}

void Scope::require(bool ok, FieldRef field, const std::string& rule, const std::string& got) const {
  if (ok) return;
  const TextPosition where = position_of(field);
  if (where.line < 0) {
    diagnostics_->report(position_, "missing field " + path(field) + " (" + rule + ")");
  } else {
    diagnostics_->report(where, path(field) + ' ' + rule + (got.empty() ? "" : " (got " + got + ")"));
  }
}

void Scope::require(bool ok, FieldRef field, const std::string& rule, uint64_t got) const {
  require(ok, field, rule, std::to_string(got));
}

}  // namespace npu::sim::config_detail
