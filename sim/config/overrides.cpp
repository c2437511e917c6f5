// Config fields set by path ("core.tensor_core.rows=64"), as `npu-sim --set` and sweeps (npu-sweep) give
// them, and the flat list of every field by path that a sweep's results record. Both walk the schema by
// reflection, so every field of chip_config.proto has a path without a list of its own.
#include <google/protobuf/descriptor.h>
#include <google/protobuf/text_format.h>

#include "npusim/sim/config_loader.h"
#include "overrides.h"

namespace npu::sim::config_detail {
namespace {

using google::protobuf::Descriptor;
using google::protobuf::FieldDescriptor;
using google::protobuf::Message;
using google::protobuf::Reflection;

std::vector<std::string> split(const std::string& text, char separator) {
  std::vector<std::string> parts;
  size_t start = 0;
  while (true) {
    const size_t end = text.find(separator, start);
    parts.push_back(text.substr(start, end == std::string::npos ? std::string::npos : end - start));
    if (end == std::string::npos) return parts;
    start = end + 1;
  }
}

std::string trim(const std::string& text) {
  const size_t first = text.find_first_not_of(" \t"), last = text.find_last_not_of(" \t");
  return first == std::string::npos ? "" : text.substr(first, last - first + 1);
}

std::string field_names(const Descriptor* type) {
  std::string names;
  for (int i = 0; i < type->field_count(); ++i) names += (i ? ", " : "") + type->field(i)->name();
  return names;
}

// One scalar value in protobuf text syntax (a bare word for a string field is quoted for it).
std::string value_syntax(const FieldDescriptor* field, const std::string& value) {
  if (field->cpp_type() == FieldDescriptor::CPPTYPE_STRING && (value.empty() || value.front() != '"')) return '"' + value + '"';
  return value;
}

void set_field(Message* message, const std::string& path, const std::string& value, const std::string& setting) {
  const auto fail = [&](const std::string& why) { throw ConfigError("--set " + setting + ": " + why); };
  const std::vector<std::string> parts = split(path, '.');
  Message* current = message;
  std::string walked;
  for (size_t i = 0; i < parts.size(); ++i) {
    std::string name = parts[i];
    int index = -1;
    if (const size_t bracket = name.find('['); bracket != std::string::npos) {
      if (name.back() != ']') fail("'" + name + "' is not name or name[index]");
      try {
        index = std::stoi(name.substr(bracket + 1, name.size() - bracket - 2));
      } catch (const std::exception&) {
        fail("'" + name + "' has no number in its brackets");
      }
      name = name.substr(0, bracket);
    }
    const Descriptor* type = current->GetDescriptor();
    const FieldDescriptor* field = type->FindFieldByName(name);
    if (field == nullptr)
      fail((walked.empty() ? std::string("the config") : walked) + " has no field '" + name + "' (fields: " + field_names(type) + ")");
    walked += (walked.empty() ? "" : ".") + parts[i];
    const Reflection* reflection = current->GetReflection();
    const bool last = i + 1 == parts.size();
    if (field->is_repeated() && index >= 0) {
      if (index >= reflection->FieldSize(*current, field))
        fail(walked + ": index " + std::to_string(index) + " is past the " + std::to_string(reflection->FieldSize(*current, field)) + " listed");
      if (field->cpp_type() != FieldDescriptor::CPPTYPE_MESSAGE) fail(walked + ": set a list whole (name=a,b,c), not one element");
      current = reflection->MutableRepeatedMessage(current, field, index);
      if (last) fail(walked + " is a section; name one of its fields");
      continue;
    }
    if (field->cpp_type() == FieldDescriptor::CPPTYPE_MESSAGE) {
      if (last || field->is_repeated()) fail(walked + (field->is_repeated() ? " is a list of sections; pick one with [index]" : " is a section; name one of its fields"));
      current = reflection->MutableMessage(current, field);
      continue;
    }
    if (!last) fail(walked + " is a value, not a section");
    if (field->is_repeated()) {
      reflection->ClearField(current, field);
      for (const std::string& item : split(value, ',')) {
        if (trim(item).empty()) continue;
        // Add one element by parsing "name: value" into the message (TextFormat appends to repeated fields).
        if (!google::protobuf::TextFormat::MergeFromString(name + ": " + value_syntax(field, trim(item)), current))
          fail("'" + trim(item) + "' is not a value of " + walked);
      }
      return;
    }
    if (!google::protobuf::TextFormat::ParseFieldValueFromString(value_syntax(field, value), field, current))
      fail("'" + value + "' is not a value of " + walked);
  }
}

void flatten(const Message& message, const std::string& prefix, std::vector<std::pair<std::string, std::string>>& out) {
  const Descriptor* type = message.GetDescriptor();
  const Reflection* reflection = message.GetReflection();
  for (int i = 0; i < type->field_count(); ++i) {
    const FieldDescriptor* field = type->field(i);
    const std::string path = prefix + field->name();
    const auto text = [&](int index) {
      std::string value;
      google::protobuf::TextFormat::PrintFieldValueToString(message, field, index, &value);
      if (value.size() >= 2 && value.front() == '"') value = value.substr(1, value.size() - 2);
      return value;
    };
    if (field->cpp_type() == FieldDescriptor::CPPTYPE_MESSAGE) {
      if (!field->is_repeated()) {
        flatten(reflection->GetMessage(message, field), path + ".", out);
        continue;
      }
      for (int j = 0; j < reflection->FieldSize(message, field); ++j)
        flatten(reflection->GetRepeatedMessage(message, field, j), path + "[" + std::to_string(j) + "].", out);
    } else if (field->is_repeated()) {
      std::string joined;
      for (int j = 0; j < reflection->FieldSize(message, field); ++j) joined += (j ? "," : "") + text(j);
      out.emplace_back(path, joined);
    } else {
      out.emplace_back(path, text(-1));
    }
  }
}

}  // namespace

void apply_overrides(pb::ChipConfig* message, const std::vector<std::string>& settings) {
  for (const std::string& setting : settings) {
    const size_t equals = setting.find('=');
    if (equals == std::string::npos || equals == 0) throw ConfigError("--set " + setting + ": expected FIELD.PATH=VALUE");
    set_field(message, trim(setting.substr(0, equals)), trim(setting.substr(equals + 1)), setting);
  }
}

std::vector<std::pair<std::string, std::string>> flatten_config(const pb::ChipConfig& message) {
  std::vector<std::pair<std::string, std::string>> out;
  flatten(message, "", out);
  return out;
}

}  // namespace npu::sim::config_detail
