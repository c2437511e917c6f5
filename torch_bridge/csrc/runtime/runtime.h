// The bridge's runtime: one simulated device per process (driver + compiler),
// opened on first use with the config chosen by npusim.init() or NPUSIM_CONFIG.
// Kernels are launched on queue 0 without waiting; whatever reads device
// memory from the host waits for the queue first, and a device fault
// surfaces there as a RuntimeError with the decoded fault.
#pragma once

#include <ATen/core/Tensor.h>

#include <array>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "npusim/compiler/compiler.h"
#include "npusim/deploy/package.h"
#include "npusim/driver/device.h"
#include "npusim/driver/program.h"
#include "npusim/driver/queue.h"
#include "npusim/sim/stats.h"

namespace npusim {

// Device addresses are handed to PyTorch as pointers this far up, so that no
// device tensor has a null data pointer (device address 0 is valid).
inline constexpr uintptr_t kPointerBase = uintptr_t{1} << 48;

class Runtime {
 public:
  static Runtime& get();
  // Before the first use only; false if the device is already open.
  // sram_pool_bytes_per_core: the top of each core's scratchpad set aside for
  // SRAM-resident tensors (graph mode's memory plan); kernels are compiled for
  // the rest. kDefaultSramPool: NPUSIM_SRAM_POOL's value if set, else a
  // quarter of the scratchpad (default_sram_pool_bytes).
  static constexpr int64_t kDefaultSramPool = -1;
  // dma_timing: "request", "step" or "window" (docs/chip.md, "DMA timing") over the config's own; empty:
  // NPUSIM_DMA_TIMING's value if set, else the config's.
  static bool configure(const std::string& config, const std::string& trace_path, bool timing_only,
                        int64_t sram_pool_bytes_per_core = kDefaultSramPool, const std::string& dma_timing = "");
  static bool started();
  // Whether the device was opened by the process this one forked from: it
  // cannot be used here (its simulation thread stayed in that process).
  static bool in_bad_fork();

  npu::Device& device() { return *device_; }
  // The chip the kernels are compiled for (its scratchpad less the SRAM pool).
  const npu::sim::ChipConfig& chip() const { return compiler_->config(); }
  // The chip as it runs: its whole scratchpad (what energy and area are priced for).
  const npu::sim::ChipConfig& device_chip() const { return device_chip_; }
  uint64_t device_cycle();  // the device's current cycle, once every earlier call has reached it
  const std::shared_ptr<npu::Device>& shared_device() { return device_; }

  // The device address of a tensor's storage (what kernels bind to).
  static const npu::Buffer& buffer_of(const at::Tensor& tensor);

  // While set (per thread), new device memory comes from the SRAM pool when a
  // core's pool has room, else from DRAM. Returns the previous setting.
  static bool set_sram_placement(bool on);
  static bool sram_placement();

  // Compiles (or takes from the cache) and launches `op`; returns without
  // waiting. Throws npu::compiler::UnsupportedOp for what the compiler cannot do.
  // `args`: the launch arguments (the random ops read their seed and offset there).
  void run(const npu::compiler::OpDesc& op, const std::vector<at::Tensor>& inputs, const at::Tensor& output,
           const std::array<uint64_t, 8>& args = {});
  // Waits for every launched kernel; a device error becomes a c10::Error.
  void synchronize();
  // torch.npu.empty_cache(): after every launched kernel, the programs loaded on the device are freed (they
  // load again, from the compiler's cache, when next launched). Returns the device bytes freed.
  uint64_t unload_programs();

  // Streams are the device's command queues: queue 0 is the default stream;
  // new streams take queues 1.. in turn. The current stream is per thread.
  static unsigned current_queue();
  static void set_current_queue(unsigned queue);
  unsigned new_stream_queue();

  // Every copy between host and device memory goes through these (so that a
  // capture sees it): synchronous, like Device::copy_to/from_device.
  void write_device(const npu::Buffer& buffer, uint64_t offset, const void* data, uint64_t bytes);
  void read_device(const npu::Buffer& buffer, uint64_t offset, void* data, uint64_t bytes);

  // Recording runs into a deployment package (npusim.export): between
  // begin_capture_method and end_capture_method every launch and host write is
  // recorded as the method's, with the contents of every buffer read before the
  // run writes it (the weights, shared by the package's methods). A host read of
  // device memory or a CPU fallback cannot be replayed without Python:
  // end_capture_method then throws, naming them, and the capture is dropped.
  // `state`: tensors whose contents carry from one run of the package to the next (a KV cache).
  void begin_capture(const std::string& source);
  void begin_capture_method(const std::string& method, const std::vector<at::Tensor>& inputs, const std::vector<std::string>& names,
                            const std::vector<at::Tensor>& state = {});
  void end_capture_method(const std::vector<at::Tensor>& outputs, const std::vector<std::string>& names);
  // Writes the package; returns its summary.
  std::string end_capture(const std::string& path);
  void abort_capture();
  // Whether a capture is recording (a check that would read the device back is made on it instead).
  bool capturing() const { return capture_ != nullptr; }
  const std::string& config_name() const { return config_name_; }

  // Profiling (npusim.profile): while on, every launch is bracketed by device
  // timestamps, named by the innermost ATen (or npusim::) op running
  // on the launching thread and by the scope set with set_profile_scope (a
  // model layer). end_profile returns, per kernel in launch order: scope, op,
  // the kernel's compiler op, and its device cycles (between a timestamp
  // before it and one after it on its queue: the launch's cost included).
  struct KernelProfile {
    std::string scope, op, kernel;
    uint64_t cycles;
    uint64_t start_cycle, end_cycle;  // device cycles of the events around it on its queue (cycles = their difference)
    std::shared_ptr<const npu::compiler::Kernel> compiled;  // its plan, for people tuning kernels
  };
  // What end_profile returns: the kernels, and the memory transfers over the host link during the block
  // (the host's copies, program uploads, the copy engine's COPY packets), for the profile's time split.
  struct ProfileResult {
    std::vector<KernelProfile> kernels;
    std::vector<npu::sim::HostTransfer> host_transfers;
  };
  // `trace_path` (.pftrace or .json): end_profile also writes the block's trace there, recorded for
  // the block when no trace was being recorded already.
  void begin_profile(const std::string& trace_path = "");
  ProfileResult end_profile();
  // The layer (and the FX nodes, comma-separated) that this thread's next launches are for.
  static void set_profile_scope(const std::string& scope, const std::string& nodes = "");
  // Whether the device records a trace (launches then carry their op, layer, kernel and nodes into it).
  bool tracing();

  // Writes the trace recorded so far (when a trace file was chosen).
  void write_trace(const std::string& path = "");  // to `path` when given

  // The CPU fallback's bookkeeping: a count per op, one warning per op,
  // NPUSIM_STRICT=1 makes it an error.
  // `reason`, when known, says why the compiler declined (in the warning only).
  void note_fallback(const std::string& op, const std::string& reason = "");
  std::map<std::string, uint64_t> fallback_stats();
  std::map<std::string, uint64_t> kernel_stats();

 private:
  Runtime();
  std::shared_ptr<npu::Device> device_;
  std::unique_ptr<npu::compiler::Compiler> compiler_;
  npu::sim::ChipConfig device_chip_;
  std::string config_name_;
  std::string config_text_;  // the effective config (dump_chip_config), NPUSIM_DMA_TIMING applied
  // The capture in progress (null when none), and why it cannot be replayed.
  std::unique_ptr<npu::deploy::PackageBuilder> capture_;
  std::vector<std::string> capture_problems_;
  // The profile in progress: each kernel's events (a timestamp before it on its queue, and one after).
  struct ProfiledKernel {
    std::string scope, op, kernel;
    npu::Event start, end;
    std::shared_ptr<const npu::compiler::Kernel> compiled;
  };
  bool profiling_ = false;
  std::string profile_trace_path_;   // where end_profile writes the block's trace ("": nowhere)
  uint64_t profile_trace_since_ps_ = 0;
  bool profile_started_trace_ = false;  // the trace is the profile's own: stopped when it ends
  std::vector<ProfiledKernel> profiled_;
  uint64_t op_callback_ = 0;
  uint32_t capture_buffer(const npu::Buffer& buffer, bool read);
  std::mutex mutex_;
  // Each launched kernel's program on the device, by the kernel's identity; the entry holds the kernel, so
  // that its address cannot be reused by another kernel while the entry lives.
  struct LoadedKernel {
    std::shared_ptr<const npu::compiler::Kernel> kernel;
    npu::Program program;
  };
  std::map<const npu::compiler::Kernel*, LoadedKernel> programs_;
  std::map<std::string, uint64_t> fallbacks_;
  std::map<std::string, uint64_t> kernels_;
  unsigned next_stream_ = 0;
};

// A driver error as PyTorch's: a wait the host cancelled (Ctrl-C) re-raises the Python exception its signal
// handler raised (KeyboardInterrupt), on this thread; anything else is a RuntimeError naming the error.
[[noreturn]] void raise_driver_error(const npu::Error& error);

// The profile's names for a launch from this thread: the innermost ATen op, and the scope.
std::string innermost_op();
std::string profile_scope();
std::string profile_nodes();

// The compiler's view of a tensor (dtype, sizes, strides, offset); throws
// UnsupportedOp for a dtype the chip does not have.
npu::compiler::TensorDesc describe(const at::Tensor& tensor);

}  // namespace npusim
