#include "runtime.h"

#include <c10/util/Exception.h>

#include <cstdlib>
#include <iostream>

#include "npusim/driver/errors.h"
#include "npusim/sim/config_loader.h"
#include "simulator_link.h"

namespace npusim {
namespace {

std::mutex g_config_mutex;
std::string g_config;
std::string g_trace;
bool g_started = false;

std::string env_or(const char* name, const std::string& fallback) {
  const char* value = std::getenv(name);
  return value && *value ? value : fallback;
}

}  // namespace

bool Runtime::configure(const std::string& config, const std::string& trace_path) {
  const std::lock_guard<std::mutex> lock(g_config_mutex);
  if (g_started) return false;
  g_config = config;
  g_trace = trace_path;
  return true;
}

bool Runtime::started() {
  const std::lock_guard<std::mutex> lock(g_config_mutex);
  return g_started;
}

Runtime& Runtime::get() {
  static Runtime* runtime = new Runtime();  // never destroyed: tensors may outlive static destruction
  return *runtime;
}

Runtime::Runtime() {
  std::string config, trace;
  {
    const std::lock_guard<std::mutex> lock(g_config_mutex);
    g_started = true;
    config = g_config.empty() ? env_or("NPUSIM_CONFIG", "base") : g_config;
    trace = g_trace.empty() ? env_or("NPUSIM_TRACE", "") : g_trace;
  }
  try {
    npu::SimulatorLinkOptions options;
    options.config = config;
    options.trace_path = trace;
    device_ = npu::Device::open(std::make_unique<npu::SimulatorLink>(options));
    compiler_ = std::make_unique<npu::compiler::Compiler>(npu::sim::load_chip_config(config));
  } catch (const std::exception& e) {
    TORCH_CHECK(false, "npusim: cannot open the simulated device (config '", config, "'): ", e.what());
  }
}

const npu::Buffer& Runtime::buffer_of(const at::Tensor& tensor) {
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

void Runtime::run(const npu::compiler::OpDesc& op, const std::vector<at::Tensor>& inputs, const at::Tensor& output) {
  const std::shared_ptr<const npu::compiler::Kernel> kernel = compiler_->compile(op);  // also checks the op
  if (output.numel() == 0) return;  // nothing to compute, nothing to launch
  const std::lock_guard<std::mutex> lock(mutex_);
  auto it = programs_.find(kernel.get());
  if (it == programs_.end()) it = programs_.emplace(kernel.get(), npu::Program::load(device_, kernel->program)).first;
  std::vector<npu::Binding> bindings;
  for (size_t i = 0; i < inputs.size(); ++i) bindings.push_back({"in" + std::to_string(i), &buffer_of(inputs[i])});
  bindings.push_back({"out", &buffer_of(output)});
  try {
    device_->queue(current_queue()).launch(it->second, bindings, kernel->core_mask());
  } catch (const npu::Error& e) {
    TORCH_CHECK(false, "npusim: ", e.what());
  }
  ++kernels_[npu::compiler::op_name(op.kind)];
}

void Runtime::synchronize() {
  try {
    device_->synchronize(std::chrono::seconds(600));
  } catch (const npu::Error& e) {
    TORCH_CHECK(false, "npusim: ", e.what());
  }
}

namespace {
thread_local unsigned t_current_queue = 0;
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

void Runtime::write_trace() {
  synchronize();
  if (auto* link = dynamic_cast<npu::SimulatorLink*>(&device_->link())) {
    try {
      link->write_trace();
    } catch (const npu::Error& e) {
      TORCH_CHECK(false, "npusim: ", e.what());
    }
  }
}

void Runtime::note_fallback(const std::string& op, const std::string& reason) {
  bool first;
  {
    const std::lock_guard<std::mutex> lock(mutex_);
    first = fallbacks_[op]++ == 0;
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

}  // namespace npusim
