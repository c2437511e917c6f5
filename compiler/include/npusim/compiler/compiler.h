// The compiler: ops with concrete shapes, strides and dtypes to programs for
// the chip described by a config, with a cache of what it compiled. It knows
// the chip only through the config: a change of cores or SRAM changes the
// code it generates.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>

#include "npusim/compiler/op.h"
#include "npusim/isa/program.h"
#include "npusim/sim/chip_config.h"

namespace npu::compiler {

// An op the compiler cannot lower (yet): the caller falls back or reports it.
class UnsupportedOp : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// A compiled op: the program and how to launch it. Bind each tensor's buffer
// (the start of its storage; the program adds the storage offset) to the
// symbol of the same position: inputs "in0", "in1", output "out".
struct Kernel {
  isa::Program program;
  unsigned cores = 1;  // launch on cores 0..cores-1 (any `cores` cores will do, unless cores_exchange_data)
  // The cores send each other data (dma.send to core ids): launch on exactly cores 0..cores-1.
  bool cores_exchange_data = false;
  std::string plan;    // the tiling decisions, for people who tune kernels
  uint64_t core_mask() const { return cores >= 64 ? ~uint64_t{0} : (uint64_t{1} << cores) - 1; }
};

struct CacheStats {
  uint64_t hits = 0;
  uint64_t misses = 0;
  uint64_t entries = 0;
};

// Whether a row op (a reduction, softmax) along a dim whose elements are strided has a kernel that reads
// along the layout's contiguous run (column_reduce.cpp, column_softmax.cpp) instead of an element at a
// time: its caller need not make the rows dense first.
bool reads_columns(const OpDesc& op);

// Whether a 2-D convolution of `channels` input channels may run as the implicit-im2col kernel on this
// chip (conv.cpp): under 16 channels (an eighth of the array's rows) only with its taps packed into one
// product, and that only on a tensor core of one array. Its caller need not lay out the kernel's
// weights where it may not.
bool conv2d_takes_channels(int64_t channels, const sim::ChipConfig& config);

class Compiler {
 public:
  explicit Compiler(sim::ChipConfig config);

  // The kernel for `op`, from the cache or compiled now. Throws UnsupportedOp
  // for what it cannot lower, std::invalid_argument for an ill-formed op
  // (shapes that do not broadcast, dtypes that do not match).
  std::shared_ptr<const Kernel> compile(const OpDesc& op);
  CacheStats cache_stats() const;

  // The kernel's plan and its code as assembly (the ISA printer's text).
  static std::string listing(const Kernel& kernel);

  const sim::ChipConfig& config() const { return config_; }

 private:
  sim::ChipConfig config_;
  mutable std::mutex mutex_;
  std::map<std::string, std::shared_ptr<const Kernel>> cache_;
  CacheStats stats_;
};

}  // namespace npu::compiler
