#include "npusim/isa/program.h"

#include <algorithm>
#include <fstream>
#include <tuple>
#include <sstream>

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>

#include "npusim/common/bytes.h"
#include "npusim/common/output_files.h"
#include "npusim/isa/dtype.h"
#include "program.pb.h"

namespace npu::isa {
namespace {

constexpr char kMagic[8] = {'N', 'P', 'U', 'B', 'I', 'N', 0, 0};
constexpr size_t kHeaderBytes = 24;

constexpr uint64_t kMaxElements = uint64_t{1} << 40;

[[noreturn]] void fail(const std::string& message) { throw ProgramFormatError(message); }

bool valid_dtype_code(uint32_t code) { return code < kNumDTypes; }

uint64_t checked_element_count(const std::vector<uint64_t>& shape, const std::string& name) {
  uint64_t count = 1;
  for (const uint64_t dim : shape) {
    if (dim == 0) fail("symbol '" + name + "' has a zero dimension");
    if (count > kMaxElements / dim) fail("symbol '" + name + "' is too large");
    count *= dim;
  }
  return count;
}

}  // namespace

uint64_t Symbol::element_count() const {
  uint64_t count = 1;
  for (const uint64_t dim : shape) count *= dim;
  return count;
}

uint64_t Symbol::size_bytes() const { return element_count() * dtype_size_bytes(dtype); }

bool Symbol::is_global_buffer() const {
  return kind == SymbolKind::Input || kind == SymbolKind::Output || kind == SymbolKind::Scratch ||
         kind == SymbolKind::Data;
}

const Symbol* Program::find_symbol(const std::string& name) const {
  for (const Symbol& symbol : symbols)
    if (symbol.name == name) return &symbol;
  return nullptr;
}

const CodeSection* Program::code_for_core(unsigned core) const {
  if (core >= 64) return nullptr;
  for (const CodeSection& section : code)
    if (section.core_mask & (uint64_t{1} << core)) return &section;
  return nullptr;
}

const char* symbol_kind_name(SymbolKind kind) {
  switch (kind) {
    case SymbolKind::Input: return "input";
    case SymbolKind::Output: return "output";
    case SymbolKind::Scratch: return "buffer";
    case SymbolKind::Data: return "data";
    case SymbolKind::Local: return "local";
    case SymbolKind::Label: return "label";
  }
  return "?";
}

namespace {
bool is_numbered(const std::string& name, char prefix, unsigned count) {
  if (name.size() < 2 || name.size() > 3 || name[0] != prefix) return false;
  unsigned value = 0;
  for (size_t i = 1; i < name.size(); ++i) {
    if (name[i] < '0' || name[i] > '9') return false;
    value = value * 10 + static_cast<unsigned>(name[i] - '0');
  }
  return !(name.size() == 3 && name[1] == '0') && value < count;
}
}  // namespace

bool is_reserved_name(const std::string& name) {
  return name == "zero" || name == "none" || is_numbered(name, 'r', kNumRegisters) || is_numbered(name, 's', kNumSemaphores);
}

bool is_valid_identifier(const std::string& name) {
  if (name.empty() || name.size() > 256) return false;
  const auto is_start = [](char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; };
  if (!is_start(name[0])) return false;
  for (const char c : name)
    if (!is_start(c) && !(c >= '0' && c <= '9') && c != '.') return false;
  return true;
}

void validate_program(const Program& program) {
  if (program.isa_version != kIsaVersion)
    fail("program uses ISA version " + std::to_string(program.isa_version) + "; this build supports ISA version " +
         std::to_string(kIsaVersion));
  uint64_t cores_seen = 0;
  for (size_t i = 0; i < program.code.size(); ++i) {
    const CodeSection& section = program.code[i];
    if (section.core_mask == 0) fail("code section " + std::to_string(i) + " runs on no core");
    if (section.core_mask & cores_seen)
      fail("code section " + std::to_string(i) + " names a core that an earlier code section already runs on");
    cores_seen |= section.core_mask;
    if (section.words.size() >= (uint64_t{1} << 23))
      fail("code section " + std::to_string(i) + " is too long (" + std::to_string(section.words.size()) + " instructions)");
  }
  uint64_t data_bytes = 0;
  for (size_t i = 0; i < program.data.size(); ++i) {
    const DataSection& section = program.data[i];
    data_bytes += section.contents.size();
    if (data_bytes > kMaxDataBytes) fail("data sections exceed " + std::to_string(kMaxDataBytes) + " bytes in total");
    if (!valid_dtype_code(static_cast<uint32_t>(section.dtype))) fail("data section " + std::to_string(i) + " has an invalid dtype");
    if (section.contents.size() % dtype_size_bytes(section.dtype) != 0)
      fail("data section " + std::to_string(i) + " size is not a multiple of its element size");
  }
  // Canonical order (what npu-as writes, so that npu-objdump --asm round-trips):
  // buffers and locals first, data symbols in data-section order, then labels
  // in (section, address) order.
  uint32_t next_data = 0;
  const Symbol* previous_label = nullptr;
  for (const Symbol& symbol : program.symbols) {
    if (symbol.kind == SymbolKind::Label) {
      if (previous_label && std::tie(symbol.section, symbol.value) < std::tie(previous_label->section, previous_label->value))
        fail("labels are not in address order (label '" + symbol.name + "')");
      previous_label = &symbol;
    } else {
      if (previous_label) fail("symbol '" + symbol.name + "' follows the labels; labels must come last");
      if (symbol.kind == SymbolKind::Data && symbol.section != next_data++)
        fail("data symbol '" + symbol.name + "' does not use the next data section in order");
    }
  }
  for (size_t i = 0; i < program.metadata.size(); ++i) {
    if (!is_valid_identifier(program.metadata[i].first)) fail("metadata key " + std::to_string(i) + " is not a valid name");
    for (size_t j = 0; j < i; ++j)
      if (program.metadata[j].first == program.metadata[i].first) fail("metadata key '" + program.metadata[i].first + "' appears twice");
  }
  std::vector<bool> data_claimed(program.data.size(), false);
  for (size_t i = 0; i < program.symbols.size(); ++i) {
    const Symbol& symbol = program.symbols[i];
    if (!is_valid_identifier(symbol.name) || is_reserved_name(symbol.name))
      fail("symbol " + std::to_string(i) + " has an invalid name");
    for (size_t j = 0; j < i; ++j)
      if (program.symbols[j].name == symbol.name) fail("symbol '" + symbol.name + "' is defined twice");
    if (static_cast<uint8_t>(symbol.kind) < 1 || static_cast<uint8_t>(symbol.kind) > 6)
      fail("symbol '" + symbol.name + "' has an invalid kind");
    if (!valid_dtype_code(static_cast<uint32_t>(symbol.dtype))) fail("symbol '" + symbol.name + "' has an invalid dtype");
    // Fields a kind does not use must be zero, so that every valid file has one text form.
    const bool uses_section = symbol.kind == SymbolKind::Label || symbol.kind == SymbolKind::Data;
    const bool uses_value = symbol.kind == SymbolKind::Label || symbol.kind == SymbolKind::Local;
    if ((!uses_section && symbol.section != 0) || (!uses_value && symbol.value != 0))
      fail("symbol '" + symbol.name + "' sets a field its kind does not use");
    if (symbol.kind == SymbolKind::Label) {
      if (!symbol.shape.empty() || symbol.dtype != DType::F32) fail("label '" + symbol.name + "' has a type or shape");
      if (symbol.section >= program.code.size()) fail("label '" + symbol.name + "' names a missing code section");
      if (symbol.value > program.code[symbol.section].words.size())
        fail("label '" + symbol.name + "' points past the end of its code section");
      continue;
    }
    if (symbol.shape.empty()) fail("symbol '" + symbol.name + "' has no shape");
    if (symbol.shape.size() > kMaxSymbolDims)
      fail("symbol '" + symbol.name + "' has " + std::to_string(symbol.shape.size()) + " dims, more than " + std::to_string(kMaxSymbolDims));
    const uint64_t bytes = checked_element_count(symbol.shape, symbol.name) * dtype_size_bytes(symbol.dtype);
    if (symbol.kind == SymbolKind::Data) {
      if (symbol.section >= program.data.size()) fail("data symbol '" + symbol.name + "' names a missing data section");
      if (data_claimed[symbol.section]) fail("data section " + std::to_string(symbol.section) + " has two symbols");
      data_claimed[symbol.section] = true;
      const DataSection& section = program.data[symbol.section];
      if (section.dtype != symbol.dtype || section.contents.size() != bytes)
        fail("data symbol '" + symbol.name + "' does not match the type or size of its data section");
    } else if (symbol.kind == SymbolKind::Local) {
      if (symbol.value % dtype_size_bytes(symbol.dtype) != 0) fail("local '" + symbol.name + "' is misaligned");
      if (symbol.value > kLocalAddressLimit || bytes > kLocalAddressLimit - symbol.value)
        fail("local '" + symbol.name + "' ends past the local address space");
      if (symbol.value < kAccumulatorBase && symbol.value + bytes > kAccumulatorBase)
        fail("local '" + symbol.name + "' runs from the scratchpad into the accumulator");
    }
  }
  for (size_t i = 0; i < data_claimed.size(); ++i)
    if (!data_claimed[i]) fail("data section " + std::to_string(i) + " has no symbol");
}

std::string serialize_program(const Program& program) {
  validate_program(program);
  pb::Program message;
  message.set_isa_version(program.isa_version);
  for (const CodeSection& section : program.code) {
    pb::CodeSection* out = message.add_code();
    out->set_core_mask(section.core_mask);
    std::string bytes(section.words.size() * 8, '\0');
    for (size_t i = 0; i < section.words.size(); ++i)
      for (unsigned b = 0; b < 8; ++b) bytes[i * 8 + b] = static_cast<char>((section.words[i] >> (8 * b)) & 0xff);
    out->set_words(std::move(bytes));
  }
  for (const DataSection& section : program.data) {
    pb::DataSection* out = message.add_data();
    out->set_dtype(static_cast<uint32_t>(section.dtype));
    out->set_contents(std::string(section.contents.begin(), section.contents.end()));
  }
  for (const Symbol& symbol : program.symbols) {
    pb::Symbol* out = message.add_symbols();
    out->set_name(symbol.name);
    out->set_kind(static_cast<pb::SymbolKind>(symbol.kind));
    out->set_dtype(static_cast<uint32_t>(symbol.dtype));
    for (const uint64_t dim : symbol.shape) out->add_shape(dim);
    out->set_section(symbol.section);
    out->set_value(symbol.value);
  }
  for (const auto& [key, value] : program.metadata) {
    pb::MetadataEntry* out = message.add_metadata();
    out->set_key(key);
    out->set_value(value);
  }
  std::string bytes(kHeaderBytes, '\0');
  bytes.replace(0, sizeof kMagic, kMagic, sizeof kMagic);
  write_le(bytes, 8, 4, kProgramFormatVersion);  // then the CRC and the payload's length, below
  {
    google::protobuf::io::StringOutputStream stream(&bytes);
    google::protobuf::io::CodedOutputStream coded(&stream);
    coded.SetSerializationDeterministic(true);
    message.SerializeToCodedStream(&coded);
  }
  write_le(bytes, 12, 4, crc32_of(std::string_view(bytes).substr(kHeaderBytes)));
  write_le(bytes, 16, 8, bytes.size() - kHeaderBytes);
  return bytes;
}

Program parse_program(const std::string& bytes) {
  if (bytes.size() > kMaxProgramFileBytes) fail("file is larger than the 1 GiB a program may be");
  if (bytes.size() < sizeof kMagic || bytes.compare(0, sizeof kMagic, std::string(kMagic, sizeof kMagic)) != 0)
    fail("not an npubin program (bad magic)");
  if (bytes.size() < kHeaderBytes) fail("truncated npubin header");
  const uint64_t format_version = read_le(bytes, 8, 4);
  if (format_version != kProgramFormatVersion)
    fail("unsupported npubin format version " + std::to_string(format_version) + " (this build reads version " +
         std::to_string(kProgramFormatVersion) + ")");
  const uint64_t length = read_le(bytes, 16, 8);
  if (length != bytes.size() - kHeaderBytes)
    fail("truncated or padded npubin file: header says " + std::to_string(length) + " payload bytes, file has " +
         std::to_string(bytes.size() - kHeaderBytes));
  if (read_le(bytes, 12, 4) != crc32_of(std::string_view(bytes).substr(kHeaderBytes))) fail("corrupt npubin file (payload checksum mismatch)");
  pb::Program message;
  if (!message.ParseFromArray(bytes.data() + kHeaderBytes, static_cast<int>(length)))
    fail("corrupt npubin file (the payload does not parse)");
  Program program;
  program.isa_version = message.isa_version();
  for (const pb::CodeSection& in : message.code()) {
    if (in.words().size() % 8 != 0) fail("code section size is not a whole number of 8-byte instructions");
    CodeSection section;
    section.core_mask = in.core_mask();
    section.words.resize(in.words().size() / 8);
    for (size_t i = 0; i < section.words.size(); ++i) {
      uint64_t word = 0;
      for (unsigned b = 0; b < 8; ++b) word |= static_cast<uint64_t>(static_cast<uint8_t>(in.words()[i * 8 + b])) << (8 * b);
      section.words[i] = word;
    }
    program.code.push_back(std::move(section));
  }
  for (const pb::DataSection& in : message.data()) {
    if (!valid_dtype_code(in.dtype())) fail("data section has an invalid dtype");
    program.data.push_back({static_cast<DType>(in.dtype()), std::vector<uint8_t>(in.contents().begin(), in.contents().end())});
  }
  for (const pb::Symbol& in : message.symbols()) {
    if (in.kind() < 1 || in.kind() > 6) fail("symbol '" + in.name() + "' has an invalid kind");
    if (!valid_dtype_code(in.dtype())) fail("symbol '" + in.name() + "' has an invalid dtype");
    Symbol symbol;
    symbol.name = in.name();
    symbol.kind = static_cast<SymbolKind>(in.kind());
    symbol.dtype = static_cast<DType>(in.dtype());
    symbol.shape.assign(in.shape().begin(), in.shape().end());
    symbol.section = in.section();
    symbol.value = in.value();
    program.symbols.push_back(std::move(symbol));
  }
  for (const pb::MetadataEntry& in : message.metadata()) program.metadata.emplace_back(in.key(), in.value());
  validate_program(program);
  return program;
}

void save_program(const Program& program, const std::string& path) {
  try {
    write_file_atomically(path, serialize_program(program));
  } catch (const OutputFileError& e) {
    fail(e.what());
  }
}

Program load_program(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail("cannot open '" + path + "'");
  in.seekg(0, std::ios::end);
  const std::streamoff size = in.tellg();
  if (size < 0) fail("cannot read '" + path + "'");
  if (static_cast<uint64_t>(size) > kMaxProgramFileBytes) fail("'" + path + "' is larger than the 1 GiB a program may be");
  in.seekg(0);
  std::string bytes(static_cast<size_t>(size), '\0');
  in.read(bytes.data(), size);
  if (!in) fail("cannot read '" + path + "'");
  try {
    return parse_program(bytes);
  } catch (const ProgramFormatError& e) {
    throw ProgramFormatError(path + ": " + e.what());
  }
}

}  // namespace npu::isa
