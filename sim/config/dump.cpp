// dump_chip_config: the typed config as protobuf text format with every field
// written out. TextFormat::Printer leaves out proto3 fields that hold zero, so
// this walks the message itself.
#include <string>

#include <google/protobuf/descriptor.h>
#include <google/protobuf/text_format.h>

#include "convert.h"
#include "npusim/sim/config_loader.h"

namespace npu::sim {
namespace {

using google::protobuf::Descriptor;
using google::protobuf::FieldDescriptor;
using google::protobuf::Message;

// Small all-scalar messages (a mesh position, an SRAM, an op cost) read best on one line.
bool fits_one_line(const Descriptor* type) {
  if (type->field_count() > 3) return false;
  for (int i = 0; i < type->field_count(); ++i) {
    const FieldDescriptor* field = type->field(i);
    if (field->is_repeated() || field->cpp_type() == FieldDescriptor::CPPTYPE_MESSAGE) return false;
  }
  return true;
}

std::string value_text(const Message& message, const FieldDescriptor* field, int index) {
  std::string text;
  google::protobuf::TextFormat::PrintFieldValueToString(message, field, index, &text);
  return text;
}

void print_message(const Message& message, const std::string& indent, std::string& out);

// One value of `field` (element `index` of a repeated one), as "name: value" or "name { ... }".
void print_value(const Message& message, const FieldDescriptor* field, int index, const std::string& indent,
                 std::string& out) {
  out += indent + field->name();
  if (field->cpp_type() != FieldDescriptor::CPPTYPE_MESSAGE) {
    out += ": " + value_text(message, field, index) + '\n';
    return;
  }
  const Message& nested = field->is_repeated() ? message.GetReflection()->GetRepeatedMessage(message, field, index)
                                               : message.GetReflection()->GetMessage(message, field);
  if (fits_one_line(nested.GetDescriptor())) {
    out += " {";
    for (int i = 0; i < nested.GetDescriptor()->field_count(); ++i) {
      const FieldDescriptor* inner = nested.GetDescriptor()->field(i);
      out += ' ' + inner->name() + ": " + value_text(nested, inner, -1);
    }
    out += " }\n";
    return;
  }
  out += " {\n";
  print_message(nested, indent + "  ", out);
  out += indent + "}\n";
}

void print_message(const Message& message, const std::string& indent, std::string& out) {
  const Descriptor* type = message.GetDescriptor();
  for (int i = 0; i < type->field_count(); ++i) {
    const FieldDescriptor* field = type->field(i);
    if (!field->is_repeated()) {
      print_value(message, field, -1, indent, out);
      continue;
    }
    const int size = message.GetReflection()->FieldSize(message, field);
    if (field->cpp_type() == FieldDescriptor::CPPTYPE_MESSAGE) {
      for (int j = 0; j < size; ++j) print_value(message, field, j, indent, out);
      continue;
    }
    // Repeated scalars as one list, which also shows an empty one.
    out += indent + field->name() + ": [";
    for (int j = 0; j < size; ++j) out += (j > 0 ? ", " : "") + value_text(message, field, j);
    out += "]\n";
  }
}

}  // namespace

std::string dump_chip_config(const ChipConfig& config) {
  std::string out =
      "# Effective chip config \"" + config.name + "\" (schema: sim/config/chip_config.proto), every field shown.\n";
  print_message(config_detail::to_proto(config), "", out);
  return out;
}

}  // namespace npu::sim
