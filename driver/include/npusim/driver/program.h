// A program loaded onto a device: its code, data sections and scratch
// buffers in device memory, and a launch descriptor template
// (firmware/include/npusim/firmware/launch_descriptor.h). Queue::launch runs it.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "npusim/driver/device.h"
#include "npusim/isa/program.h"

namespace npu {

class Program {
 public:
  // Copies the program's code and data to the device and allocates its
  // scratch buffers. npu::Error for a file that is not a valid program.
  static Program load(const std::shared_ptr<Device>& device, const std::string& npubin_path);
  static Program load(const std::shared_ptr<Device>& device, isa::Program program);

  const isa::Program& image() const { return *image_; }
  std::shared_ptr<const isa::Program> shared_image() const { return image_; }
  // The program's name (its `source` metadata, else "program").
  const std::string& name() const { return name_; }
  // The cores a launch uses by default: as many as the program has code for
  // (all cores of the device when one section covers every core id).
  uint64_t default_core_mask() const;

 private:
  friend class Queue;
  std::shared_ptr<Device> device_;
  std::shared_ptr<const isa::Program> image_;
  std::string name_;
  std::vector<Buffer> code_;               // one per code section
  std::vector<Buffer> own_buffers_;        // data and scratch symbols (empty Buffer for the others)
};

}  // namespace npu
