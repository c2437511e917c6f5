#include "runtime.h"

#include <c10/util/ApproximateClock.h>
#include <ATen/record_function.h>
#include <c10/util/Exception.h>
#include <torch/csrc/Exceptions.h>

#include <cstdlib>
#include <iostream>
#include <utility>

#include "npusim/driver/errors.h"
#include "npusim/sim/config_loader.h"
#include "kineto_profiler.h"
#include "simulator_link.h"

namespace npusim {
namespace {

std::mutex g_config_mutex;

// Ctrl-C while a thread waits for the device: the wait's cancel check (Device::set_cancel_check) runs Python's
// signal handlers, and when one raises (KeyboardInterrupt), keeps its exception for this thread to raise once
// the driver has reset the device (raise_driver_error).
thread_local std::unique_ptr<python_error> t_interrupt;

bool interrupted_by_a_signal() {
  if (!Py_IsInitialized() || Py_IsFinalizing()) return false;
  pybind11::gil_scoped_acquire gil;
  if (PyErr_CheckSignals() == 0) return false;
  t_interrupt = std::make_unique<python_error>();
  t_interrupt->persist();  // takes the exception, clearing it
  return true;
}

std::string g_config;
std::string g_trace;

std::unique_ptr<at::ObserverContext> on_op_enter(const at::RecordFunction& fn);
void on_op_exit(const at::RecordFunction&, at::ObserverContext*);
bool g_timing_only = false;
int64_t g_sram_pool_bytes = Runtime::kDefaultSramPool;
std::string g_dma_timing;
bool g_started = false;
thread_local bool t_sram_placement = false;

std::string env_or(const char* name, const std::string& fallback) {
  const char* value = std::getenv(name);
  return value && *value ? value : fallback;
}

// NPUSIM_MATMUL_SCHEDULE: how matmuls are laid on the cores (docs/compiler.md, "Matmul"), read at
// every matmul so that one process can compare the schedules.
npu::compiler::MatmulSchedule matmul_schedule_from_env() {
  const std::string value = env_or("NPUSIM_MATMUL_SCHEDULE", "auto");
  if (value == "auto") return npu::compiler::MatmulSchedule::Auto;
  if (value == "own-tiles") return npu::compiler::MatmulSchedule::OwnTiles;
  if (value == "shared-b") return npu::compiler::MatmulSchedule::SharedB;
  if (value == "shared-b-streamed-a") return npu::compiler::MatmulSchedule::SharedBStreamedA;
  if (value == "shared-ab") return npu::compiler::MatmulSchedule::SharedAB;
  TORCH_CHECK(false, "npusim: NPUSIM_MATMUL_SCHEDULE is auto, own-tiles, shared-b, shared-b-streamed-a or shared-ab, not '", value, "'");
}

}  // namespace

bool Runtime::configure(const std::string& config, const std::string& trace_path, bool timing_only, int64_t sram_pool_bytes_per_core,
                        const std::string& dma_timing) {
  const std::lock_guard<std::mutex> lock(g_config_mutex);
  if (g_started) return false;
  g_config = config;
  g_trace = trace_path;
  g_timing_only = timing_only;
  g_sram_pool_bytes = sram_pool_bytes_per_core;
  g_dma_timing = dma_timing;
  return true;
}

bool Runtime::set_sram_placement(bool on) { return std::exchange(t_sram_placement, on); }
bool Runtime::sram_placement() { return t_sram_placement; }

bool Runtime::started() {
  const std::lock_guard<std::mutex> lock(g_config_mutex);
  return g_started;
}

bool Runtime::in_bad_fork() {
  if (!started()) return false;
  auto* link = dynamic_cast<npu::SimulatorLink*>(&get().device().link());
  return link != nullptr && link->in_forked_child();
}

Runtime& Runtime::get() {
  static Runtime* runtime = new Runtime();  // never destroyed: tensors may outlive static destruction
  return *runtime;
}

Runtime::Runtime() {
  std::string config, trace, dma_timing;
  bool timing_only = false;
  int64_t sram_pool_bytes = kDefaultSramPool;
  {
    const std::lock_guard<std::mutex> lock(g_config_mutex);
    g_started = true;
    config = g_config.empty() ? env_or("NPUSIM_CONFIG", "base") : g_config;
    trace = g_trace.empty() ? env_or("NPUSIM_TRACE", "") : g_trace;
    timing_only = g_timing_only;
    sram_pool_bytes = g_sram_pool_bytes;
    dma_timing = g_dma_timing.empty() ? env_or("NPUSIM_DMA_TIMING", "") : g_dma_timing;
  }
  try {
    npu::SimulatorLinkOptions options;
    options.config = config;
    options.trace_path = trace;
    // Timing only: the chip models time but computes nothing (results are garbage; cycles are the same).
    options.functional = !(timing_only || env_or("NPUSIM_TIMING_ONLY", "0") == "1");
    npu::sim::ChipConfig chip = npu::sim::load_chip_config(config);
    if (!dma_timing.empty()) chip.core.dma.timing = npu::sim::dma_timing_from_name(dma_timing);
    // The chip as it runs (export packages record it): built from this text.
    config_text_ = npu::sim::dump_chip_config(chip);
    options.config_text = config_text_;
    // Kernels keep off the pool: the compiler sees the scratchpad without it.
    // Whole bank rows, so that the compiler's config stays a valid chip.
    const uint64_t bank_row = uint64_t{chip.core.scratchpad.banks} * chip.core.scratchpad.bank_width_bytes;
    if (sram_pool_bytes == kDefaultSramPool) {
      const std::string text = env_or("NPUSIM_SRAM_POOL", "");
      if (text.empty()) {
        // A quarter: on base (2 MiB) GPT-2 124M's forward ran in 0.976x the cycles with it, and 1.19x
        // with half (its gemms' tiles shrink); ResNet-18 in 0.974x (docs/graph.md).
        sram_pool_bytes = static_cast<int64_t>(chip.core.scratchpad.size_bytes / 4 / bank_row * bank_row);
      } else {
        size_t used = 0;
        try {
          sram_pool_bytes = std::stoll(text, &used);
        } catch (const std::exception&) {
          used = 0;
        }
        if (used != text.size() || sram_pool_bytes < 0) throw std::invalid_argument("NPUSIM_SRAM_POOL=" + text + " is not a byte count");
      }
    }
    if (sram_pool_bytes < 0 || sram_pool_bytes % bank_row != 0)
      throw std::invalid_argument("the SRAM pool (" + std::to_string(sram_pool_bytes) + " bytes per core) must be a multiple of " +
                                  std::to_string(bank_row) + " bytes (the scratchpad's banks x bank width)");
    npu::DeviceOptions device_options;
    device_options.sram_pool_bytes_per_core = static_cast<uint64_t>(sram_pool_bytes);
    device_ = npu::Device::open(std::make_unique<npu::SimulatorLink>(options), device_options);
    device_->set_cancel_check(interrupted_by_a_signal);
    device_chip_ = chip;
    chip.core.scratchpad.size_bytes = device_->info().kernel_scratchpad_bytes();
    compiler_ = std::make_unique<npu::compiler::Compiler>(chip);
    config_name_ = config;
    // A trace from the start names each launch's op as a profile does (a profile adds its own hook for its block).
    if (!trace.empty()) at::addGlobalCallback(at::RecordFunctionCallback(on_op_enter, on_op_exit).scopes({at::RecordScope::FUNCTION}));
  } catch (const std::exception& e) {
    TORCH_CHECK(false, "npusim: cannot open the simulated device (config '", config, "'): ", e.what());
  }
}

const npu::Buffer& Runtime::buffer_of(const at::Tensor& tensor) {
  TORCH_CHECK(tensor.device().type() == c10::DeviceType::PrivateUse1,
              "Expected all tensors to be on the same device, but found a tensor on ", tensor.device(), " where npu tensors are needed");
  auto* buffer = static_cast<npu::Buffer*>(tensor.storage().data_ptr().get_context());
  TORCH_CHECK(buffer != nullptr, "npusim: tensor has no device storage");
  return *buffer;
}

npu::compiler::TensorDesc describe(const at::Tensor& tensor) {
  npu::compiler::TensorDesc desc;
  switch (tensor.scalar_type()) {
    case at::kFloat: desc.dtype = npu::isa::DType::F32; break;
    case at::kBFloat16: desc.dtype = npu::isa::DType::BF16; break;
    case at::kHalf: desc.dtype = npu::isa::DType::F16; break;
    case at::kInt: desc.dtype = npu::isa::DType::I32; break;
    case at::kChar: desc.dtype = npu::isa::DType::I8; break;
    case at::kByte:
    case at::kBool: desc.dtype = npu::isa::DType::U8; break;
    default: throw npu::compiler::UnsupportedOp(std::string("dtype ") + c10::toString(tensor.scalar_type()) + " is not on the chip");
  }
  desc.shape.assign(tensor.sizes().begin(), tensor.sizes().end());
  desc.strides.assign(tensor.strides().begin(), tensor.strides().end());
  desc.storage_offset = tensor.storage_offset();
  return desc;
}

void Runtime::run(const npu::compiler::OpDesc& op, const std::vector<at::Tensor>& inputs, const at::Tensor& output,
                  const std::array<uint64_t, 8>& args) {
  // A package replays its launches as recorded: a generator's seed and offset would be frozen in it.
  if (capture_ && npu::compiler::is_random_op(op.kind))
    throw npu::compiler::UnsupportedOp("random numbers inside a deployment package (not yet: the replay would repeat one draw)");
  const npu::compiler::OpDesc* described = &op;
  npu::compiler::OpDesc scheduled;
  if (op.kind == npu::compiler::OpKind::MATMUL && op.schedule == npu::compiler::MatmulSchedule::Auto) {
    if (const npu::compiler::MatmulSchedule schedule = matmul_schedule_from_env(); schedule != npu::compiler::MatmulSchedule::Auto) {
      scheduled = op;
      scheduled.schedule = schedule;
      described = &scheduled;
    }
  }
  const std::shared_ptr<const npu::compiler::Kernel> kernel = compiler_->compile(*described);  // also checks the op
  if (output.numel() == 0) return;  // nothing to compute, nothing to launch
  const std::lock_guard<std::mutex> lock(mutex_);
  auto it = programs_.find(kernel.get());
  if (it == programs_.end()) it = programs_.emplace(kernel.get(), LoadedKernel{kernel, npu::Program::load(device_, kernel->program)}).first;
  std::vector<npu::Binding> bindings;
  for (size_t i = 0; i < inputs.size(); ++i) bindings.push_back({"in" + std::to_string(i), &buffer_of(inputs[i])});
  bindings.push_back({"out", &buffer_of(output)});
  if (capture_) {
    std::vector<std::pair<std::string, uint32_t>> recorded;
    for (const npu::Binding& b : bindings) recorded.emplace_back(b.symbol, capture_buffer(*b.buffer, b.symbol != "out"));
    capture_->launch(capture_->program(kernel.get(), kernel->program), recorded, kernel->core_mask(), npu::compiler::op_name(op.kind));
  }
  try {
    npu::Queue queue = device_->queue(current_queue());
    const bool kineto = kineto::recording();  // (torch.profiler: kineto_profiler.h)
    const int64_t host_begin_ns = kineto ? c10::getTime() : 0;
    npu::Event start;
    if (profiling_ || kineto) start = queue.record_event();
    npu::TraceArgs annotations;
    if (tracing())
      annotations = {{"kernel", npu::compiler::op_name(op.kind)}, {"op", innermost_op()}, {"layer", profile_scope()}, {"nodes", profile_nodes()}};
    queue.launch(it->second.program, bindings, kernel->core_mask(), args, annotations);
    npu::Event end;
    if (profiling_ || kineto) end = queue.record_event();
    if (profiling_) profiled_.push_back({profile_scope(), innermost_op(), npu::compiler::op_name(op.kind), start, end, kernel});
    if (kineto)
      kineto::note_launch({npu::compiler::op_name(op.kind), innermost_op(), profile_scope(), profile_nodes(), current_queue(), start, end, host_begin_ns,
                           c10::getTime()},
                          kineto::current_correlation_id());
  } catch (const npu::Error& e) {
    raise_driver_error(e);
  }
  ++kernels_[npu::compiler::op_name(op.kind)];
}

void Runtime::synchronize() {
  try {
    device_->drain(std::chrono::seconds(600));  // a fault is raised once; the device keeps working after it
  } catch (const npu::Error& e) {
    raise_driver_error(e);
  }
}

uint64_t Runtime::unload_programs() {
  synchronize();
  const uint64_t before = device_->memory_stats().in_use_bytes;
  {
    const std::lock_guard<std::mutex> lock(mutex_);
    programs_.clear();
  }
  const uint64_t after = device_->memory_stats().in_use_bytes;
  return before > after ? before - after : 0;
}

namespace {
thread_local unsigned t_current_queue = 0;
}

// ---- profiling --------------------------------------------------------------------

namespace {
thread_local std::vector<std::string> t_op_stack;  // the ATen ops running on this thread, outermost first
thread_local std::string t_profile_scope;
thread_local std::string t_profile_nodes;

std::unique_ptr<at::ObserverContext> on_op_enter(const at::RecordFunction& fn) {
  t_op_stack.emplace_back(fn.name());
  return nullptr;
}
void on_op_exit(const at::RecordFunction&, at::ObserverContext*) {
  if (!t_op_stack.empty()) t_op_stack.pop_back();
}
}  // namespace

void raise_driver_error(const npu::Error& error) {
  if (dynamic_cast<const npu::CancelledError*>(&error) != nullptr && t_interrupt) {
    python_error interrupt(std::move(*t_interrupt));
    t_interrupt.reset();
    throw interrupt;
  }
  TORCH_CHECK(false, "npusim: ", error.what());
}

std::string innermost_op() { return t_op_stack.empty() ? std::string("(no op)") : t_op_stack.back(); }
std::string profile_scope() { return t_profile_scope; }
std::string profile_nodes() { return t_profile_nodes; }
void Runtime::set_profile_scope(const std::string& scope, const std::string& nodes) {
  t_profile_scope = scope;
  t_profile_nodes = nodes;
}

uint64_t Runtime::device_cycle() {
  auto* link = dynamic_cast<npu::SimulatorLink*>(&device_->link());
  TORCH_CHECK(link != nullptr, "npusim: the device is not simulated");
  try {
    return link->now_ps() / device_chip_.cycle_ps();
  } catch (const npu::Error& e) {
    raise_driver_error(e);
  }
}

bool Runtime::tracing() {
  auto* link = dynamic_cast<npu::SimulatorLink*>(&device_->link());
  return link != nullptr && link->tracing();
}

void Runtime::begin_profile(const std::string& trace_path) {
  synchronize();
  const std::lock_guard<std::mutex> lock(mutex_);
  TORCH_CHECK(!profiling_, "npusim: a profile is already in progress");
  profile_trace_path_ = trace_path;
  profile_started_trace_ = false;
  auto* link = dynamic_cast<npu::SimulatorLink*>(&device_->link());
  if (link != nullptr) {
    link->take_host_transfers();  // (what an earlier profile left, should it have ended by an error)
    link->record_host_transfers(true);
  }
  if (!trace_path.empty()) {
    TORCH_CHECK(link != nullptr, "npusim: this device records no traces");
    try {
      profile_started_trace_ = link->start_trace();
      profile_trace_since_ps_ = link->now_ps();
    } catch (const npu::Error& e) {
      raise_driver_error(e);
    }
  }
  profiling_ = true;
  profiled_.clear();
  t_op_stack.clear();
  // The op names, from PyTorch's RecordFunction (the profiler's own hook).
  op_callback_ = at::addGlobalCallback(at::RecordFunctionCallback(on_op_enter, on_op_exit).scopes({at::RecordScope::FUNCTION}));
}

Runtime::ProfileResult Runtime::end_profile() {
  std::vector<ProfiledKernel> kernels;
  {
    const std::lock_guard<std::mutex> lock(mutex_);
    TORCH_CHECK(profiling_, "npusim: no profile in progress");
    at::removeCallback(op_callback_);
    profiling_ = false;
    kernels = std::move(profiled_);
    profiled_.clear();
  }
  ProfileResult result;
  auto* link = dynamic_cast<npu::SimulatorLink*>(&device_->link());
  // The profile's own trace stops whatever happens here: a later profile can start its own.
  struct StopTrace {
    npu::SimulatorLink* link;
    ~StopTrace() {
      if (link) link->stop_trace();
    }
  } stop{profile_started_trace_ ? link : nullptr};
  try {
    if (link != nullptr) {
      // Taken before the events' cycles are read below: those reads are the profile's, not the block's.
      link->record_host_transfers(false);
      result.host_transfers = link->take_host_transfers();
    }
    // (Each event's cycle read once: every read is a transfer from the device, which moves its time.)
    for (const ProfiledKernel& k : kernels) {
      const uint64_t start = k.start.cycle(), end = k.end.cycle();
      result.kernels.push_back({k.scope, k.op, k.kernel, end >= start ? end - start : 0, start, end, k.compiled});
    }
    if (!profile_trace_path_.empty() && link != nullptr) {
      synchronize();
      link->write_trace(profile_trace_path_, profile_trace_since_ps_);
    }
  } catch (const npu::Error& e) {
    raise_driver_error(e);
  }
  return result;
}

unsigned Runtime::current_queue() { return t_current_queue; }
void Runtime::set_current_queue(unsigned queue) { t_current_queue = queue; }

unsigned Runtime::new_stream_queue() {
  const std::lock_guard<std::mutex> lock(mutex_);
  const unsigned queues = device_->info().num_queues;
  if (queues <= 1) return 0;
  next_stream_ = next_stream_ % (queues - 1) + 1;  // 1, 2, .., queues-1, 1, ..
  return next_stream_;
}

void Runtime::write_trace(const std::string& path) {
  synchronize();
  if (auto* link = dynamic_cast<npu::SimulatorLink*>(&device_->link())) {
    TORCH_CHECK(path.empty() || link->tracing(), "npusim: no trace is being recorded: choose a trace file with npusim.init(trace=...) or ",
                "NPUSIM_TRACE before the device is first used");
    try {
      link->write_trace(path);
    } catch (const npu::Error& e) {
      raise_driver_error(e);
    }
  }
}

void Runtime::note_fallback(const std::string& op, const std::string& reason) {
  bool first;
  {
    const std::lock_guard<std::mutex> lock(mutex_);
    first = fallbacks_[op]++ == 0;
    if (capture_) capture_problems_.push_back(op + " ran on the CPU (" + (reason.empty() ? "no npu kernel" : reason) + ")");
  }
  const char* strict = std::getenv("NPUSIM_STRICT");
  TORCH_CHECK(!(strict && std::string(strict) == "1"), "npusim: ", op, " has no npu kernel (NPUSIM_STRICT=1 forbids the CPU fallback)");
  if (first)
    TORCH_WARN("npusim: ", op, " runs on the CPU (", reason.empty() ? std::string("no npu kernel yet") : reason,
               "); npusim.fallback_stats() counts these");
}

std::map<std::string, uint64_t> Runtime::fallback_stats() {
  const std::lock_guard<std::mutex> lock(mutex_);
  return fallbacks_;
}

std::map<std::string, uint64_t> Runtime::kernel_stats() {
  const std::lock_guard<std::mutex> lock(mutex_);
  return kernels_;
}

// ---- host copies and capture ---------------------------------------------------

void Runtime::write_device(const npu::Buffer& buffer, uint64_t offset, const void* data, uint64_t bytes) {
  {
    const std::lock_guard<std::mutex> lock(mutex_);
    if (capture_) {
      const auto* begin = static_cast<const uint8_t*>(data);
      capture_->upload(capture_buffer(buffer, false), offset, std::vector<uint8_t>(begin, begin + bytes));
    }
  }
  try {
    device_->copy_to_device(buffer, offset, data, bytes);
  } catch (const npu::Error& e) {
    raise_driver_error(e);
  }
}

void Runtime::read_device(const npu::Buffer& buffer, uint64_t offset, void* data, uint64_t bytes) {
  {
    const std::lock_guard<std::mutex> lock(mutex_);
    if (capture_) capture_problems_.push_back("the host read device memory (.cpu(), .item(), printing, or a CPU fallback's input)");
  }
  try {
    device_->copy_from_device(buffer, offset, data, bytes);
  } catch (const npu::Error& e) {
    raise_driver_error(e);
  }
}

// With mutex_ held (or from the launching thread during a capture).
uint32_t Runtime::capture_buffer(const npu::Buffer& buffer, bool read) {
  const uint32_t id = capture_->buffer(buffer.address(), buffer.size());
  if (read && !capture_->has_contents(id)) {
    // Data from before the capture (a weight): its contents now. Every kernel
    // launched before the capture has completed (begin_capture waited), and
    // none since has written it.
    std::vector<uint8_t> contents(buffer.size());
    if (!contents.empty()) device_->copy_from_device(buffer, 0, contents.data(), contents.size());
    capture_->constant(id, std::move(contents));
  }
  return id;
}

namespace {
npu::deploy::TensorSpec spec_of(const at::Tensor& t, const std::string& name, uint32_t buffer) {
  npu::deploy::TensorSpec spec;
  const npu::compiler::TensorDesc desc = describe(t);
  spec.name = name;
  spec.dtype = desc.dtype;
  spec.shape = desc.shape;
  spec.strides = desc.strides;
  spec.storage_offset = desc.storage_offset;
  spec.buffer = buffer;
  return spec;
}
}  // namespace

void Runtime::begin_capture(const std::string& source) {
  const std::lock_guard<std::mutex> lock(mutex_);
  TORCH_CHECK(!capture_, "npusim: a capture is already in progress");
  capture_ = std::make_unique<npu::deploy::PackageBuilder>(source, config_name_, config_text_);
  capture_problems_.clear();
}

void Runtime::begin_capture_method(const std::string& method, const std::vector<at::Tensor>& inputs, const std::vector<std::string>& names,
                                   const std::vector<at::Tensor>& state) {
  TORCH_CHECK(inputs.size() == names.size(), "npusim: one name per input");
  synchronize();  // buffers from before the method are complete from here on
  const std::lock_guard<std::mutex> lock(mutex_);
  TORCH_CHECK(capture_, "npusim: no capture in progress");
  try {
    capture_->method(method);
    for (size_t i = 0; i < inputs.size(); ++i) {
      TORCH_CHECK(inputs[i].device().type() == c10::DeviceType::PrivateUse1, "npusim: capture inputs are npu tensors");
      try {
        capture_->input(spec_of(inputs[i], names[i], capture_->buffer(buffer_of(inputs[i]).address(), buffer_of(inputs[i]).size())));
      } catch (const npu::compiler::UnsupportedOp& e) {
        TORCH_CHECK(false, "npusim: input ", names[i], ": ", e.what());
      }
    }
    for (const at::Tensor& t : state) {
      TORCH_CHECK(t.device().type() == c10::DeviceType::PrivateUse1, "npusim: capture state is npu tensors");
      // Its contents now are what a loaded package starts from (a KV cache's zeros): recorded here, since
      // as state it counts as holding contents and a first read would not record them. (An earlier method
      // of the package recorded them already.)
      capture_buffer(buffer_of(t), true);
      capture_->state(capture_->buffer(buffer_of(t).address(), buffer_of(t).size()));
    }
  } catch (const npu::deploy::PackageError& e) {
    capture_.reset();
    TORCH_CHECK(false, "npusim: ", e.what());
  } catch (...) {
    capture_.reset();
    throw;
  }
}

void Runtime::end_capture_method(const std::vector<at::Tensor>& outputs, const std::vector<std::string>& names) {
  TORCH_CHECK(outputs.size() == names.size(), "npusim: one name per output");
  synchronize();
  const std::lock_guard<std::mutex> lock(mutex_);
  TORCH_CHECK(capture_, "npusim: no capture in progress");
  if (!capture_problems_.empty()) {
    std::string reasons;
    for (size_t i = 0; i < capture_problems_.size() && i < 10; ++i) reasons += "\n  " + capture_problems_[i];
    if (capture_problems_.size() > 10) reasons += "\n  ... and " + std::to_string(capture_problems_.size() - 10) + " more";
    capture_.reset();
    TORCH_CHECK(false, "npusim: the run cannot be replayed without Python:", reasons);
  }
  try {
    for (size_t i = 0; i < outputs.size(); ++i) {
      TORCH_CHECK(outputs[i].device().type() == c10::DeviceType::PrivateUse1, "npusim: output ", names[i], " is not an npu tensor");
      capture_->output(spec_of(outputs[i], names[i], capture_buffer(buffer_of(outputs[i]), true)));
    }
  } catch (const std::exception& e) {
    capture_.reset();
    TORCH_CHECK(false, "npusim: ", e.what());
  }
}

std::string Runtime::end_capture(const std::string& path) {
  const std::lock_guard<std::mutex> lock(mutex_);
  TORCH_CHECK(capture_, "npusim: no capture in progress");
  try {
    npu::deploy::Package package = capture_->finish();
    capture_.reset();
    package.write(path);
    return package.summary();
  } catch (const std::exception& e) {
    capture_.reset();
    TORCH_CHECK(false, "npusim: ", e.what());
  }
}

void Runtime::abort_capture() {
  const std::lock_guard<std::mutex> lock(mutex_);
  capture_.reset();
  capture_problems_.clear();
}

}  // namespace npusim
