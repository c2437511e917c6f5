// What the compiler tests share: element values as doubles in and out of a
// dtype's bytes, and a fixture that compiles an op for a preset, runs it
// through the driver on that preset's simulated chip with the given input
// values, and returns the inputs' and the output's storage bytes.
#pragma once

#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "npusim/compiler/compiler.h"
#include "npusim/driver/device.h"
#include "npusim/driver/program.h"
#include "npusim/isa/dtype.h"
#include "npusim/sim/config_loader.h"
#include "simulator_link.h"

namespace npu::compiler::testing {

inline double load(isa::DType dtype, const uint8_t* p) {
  switch (dtype) {
    case isa::DType::F32: { float f; std::memcpy(&f, p, 4); return f; }
    case isa::DType::BF16: { uint16_t h; std::memcpy(&h, p, 2); return isa::bf16_to_f32(h); }
    case isa::DType::F16: { uint16_t h; std::memcpy(&h, p, 2); return isa::f16_to_f32(h); }
    case isa::DType::I32: { int32_t i; std::memcpy(&i, p, 4); return i; }
    case isa::DType::I8: return int8_t(*p);
    case isa::DType::U8: return *p;
    default: throw std::logic_error("dtype not in these tests");
  }
}

inline void store(isa::DType dtype, double v, uint8_t* p) {
  switch (dtype) {
    case isa::DType::F32: { const float f = float(v); std::memcpy(p, &f, 4); return; }
    case isa::DType::BF16: { const uint16_t h = isa::f32_to_bf16(float(v)); std::memcpy(p, &h, 2); return; }
    case isa::DType::F16: { const uint16_t h = isa::f32_to_f16(float(v)); std::memcpy(p, &h, 2); return; }
    case isa::DType::I32: { const int32_t i = int32_t(v); std::memcpy(p, &i, 4); return; }
    case isa::DType::I8: *p = uint8_t(int8_t(v)); return;
    case isa::DType::U8: *p = uint8_t(v); return;
    default: throw std::logic_error("dtype not in these tests");
  }
}

struct KernelRun {
  std::shared_ptr<const Kernel> kernel;
  std::vector<std::vector<uint8_t>> inputs;  // each input's storage, as given to the chip
  std::vector<uint8_t> output;               // the output's storage, as the chip left it
};

// A test parameterized by preset name: a device and a compiler for that chip.
class KernelTest : public ::testing::TestWithParam<std::string> {
 protected:
  KernelTest() : device_(Device::open(std::make_unique<SimulatorLink>(GetParam()))), compiler_(sim::load_chip_config(GetParam())) {}

  // value(k, i): element i of input k's storage.
  KernelRun run(const OpDesc& op, const std::function<double(size_t input, size_t element)>& value) {
    std::vector<std::vector<uint8_t>> storage;
    for (size_t k = 0; k < op.inputs.size(); ++k) {
      const TensorDesc& t = op.inputs[k];
      const size_t e = isa::dtype_size_bytes(t.dtype);
      std::vector<uint8_t> bytes(size_t(std::max<int64_t>(t.storage_extent(), 1)) * e);
      for (size_t i = 0; i < bytes.size() / e; ++i) store(t.dtype, value(k, i), &bytes[i * e]);
      storage.push_back(std::move(bytes));
    }
    return run_bytes(op, std::move(storage));
  }

  // The same with each input's storage given as bytes (at least its extent).
  // `args`: the launch arguments (csrr arg0..arg7).
  KernelRun run_bytes(const OpDesc& op, std::vector<std::vector<uint8_t>> storage, const std::array<uint64_t, 8>& args = {}) {
    KernelRun run;
    run.kernel = compiler().compile(op);
    const Program program = Program::load(device_, run.kernel->program);
    std::vector<Buffer> buffers;
    for (std::vector<uint8_t>& bytes : storage) {
      buffers.push_back(device_->allocate(std::max<size_t>(bytes.size(), 1)));
      if (!bytes.empty()) device_->copy_to_device(buffers.back(), 0, bytes.data(), bytes.size());
      run.inputs.push_back(std::move(bytes));
    }
    buffers.push_back(device_->allocate(size_t(std::max<int64_t>(op.output.storage_extent(), 1)) * isa::dtype_size_bytes(op.output.dtype)));
    std::vector<Binding> bindings;
    for (size_t k = 0; k < op.inputs.size(); ++k) bindings.push_back({"in" + std::to_string(k), &buffers[k]});
    bindings.push_back({"out", &buffers.back()});
    device_->queue(0).launch(program, bindings, run.kernel->core_mask(), args).wait(std::chrono::seconds(10));
    run.output.resize(buffers.back().size());
    device_->copy_from_device(buffers.back(), 0, run.output.data(), run.output.size());
    return run;
  }

  // The compiler run() uses: a fixture may compile for a smaller chip than it runs on (a kernel
  // made for less scratchpad runs on more), to reach a kernel's limits with small tensors.
  virtual Compiler& compiler() { return compiler_; }

  static TensorDesc t(isa::DType dtype, std::vector<int64_t> shape) { return TensorDesc::contiguous(dtype, std::move(shape)); }

  std::shared_ptr<Device> device_;
  Compiler compiler_;
};

inline std::string preset_name(const ::testing::TestParamInfo<std::string>& info) { return info.param; }

// The relative error per product of f32 operands split into bf16 parts on a tensor core without f32
// (base; 0 on tiny, whose tensor core takes f32): the parts leave out what lies below it (f32_split.h).
inline double f32_split_error(const OpDesc& op, const std::string& preset) {
  if (op.inputs[0].dtype != isa::DType::F32 || preset == "tiny") return 0;
  switch (op.f32_precision) {
    case F32MatmulPrecision::Highest: return std::ldexp(1.0, -21);
    case F32MatmulPrecision::High: return std::ldexp(1.0, -14);
    default: return std::ldexp(1.0, -7);
  }
}

}  // namespace npu::compiler::testing
