#include "npusim/driver/program.h"

#include "npusim/driver/errors.h"

namespace npu {

Program Program::load(const std::shared_ptr<Device>& device, const std::string& npubin_path) {
  try {
    return load(device, isa::load_program(npubin_path));
  } catch (const isa::ProgramFormatError& e) {
    throw Error(e.what());
  }
}

Program Program::load(const std::shared_ptr<Device>& device, isa::Program image) {
  if (!device) throw std::invalid_argument("Program::load without a device");
  if (image.isa_version != device->info().isa_version)
    throw Error("the program is for ISA version " + std::to_string(image.isa_version) + "; the device runs version " +
                std::to_string(device->info().isa_version));
  Program program;
  program.device_ = device;
  program.name_ = "program";
  for (const auto& [key, value] : image.metadata)
    if (key == "source") program.name_ = value;
  for (const isa::CodeSection& section : image.code) {
    Buffer code = device->allocate(section.words.size() * 8, 64);
    device->copy_to_device(code, 0, section.words.data(), section.words.size() * 8);
    program.code_.push_back(std::move(code));
  }
  // Data symbols get their contents; scratch symbols zeroed memory of their own.
  program.own_buffers_.resize(image.symbols.size());
  for (size_t i = 0; i < image.symbols.size(); ++i) {
    const isa::Symbol& symbol = image.symbols[i];
    if (symbol.kind != isa::SymbolKind::Data && symbol.kind != isa::SymbolKind::Scratch) continue;
    Buffer buffer = device->allocate(std::max<uint64_t>(symbol.size_bytes(), 1));
    std::vector<uint8_t> contents = symbol.kind == isa::SymbolKind::Data ? image.data[symbol.section].contents
                                                                          : std::vector<uint8_t>(symbol.size_bytes(), 0);
    contents.resize(symbol.size_bytes(), 0);
    device->copy_to_device(buffer, 0, contents.data(), contents.size());
    program.own_buffers_[i] = std::move(buffer);
  }
  program.image_ = std::make_shared<const isa::Program>(std::move(image));
  return program;
}

uint64_t Program::default_core_mask() const {
  const unsigned cores = device_->info().num_cores;
  unsigned count = 0;
  while (count < cores && count < 64 && image_->code_for_core(count) != nullptr) ++count;
  return count >= 64 ? ~uint64_t{0} : (uint64_t{1} << count) - 1;
}

}  // namespace npu
