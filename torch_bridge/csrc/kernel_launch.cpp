#include "kernel_launch.h"

#include <ATen/Context.h>
#include <ATen/EmptyTensor.h>

#include <string>

#include "npusim/compiler/compiler.h"
#include "runtime.h"

namespace npusim {
namespace {
// Why the last try_run on this thread did not run (for the fallback's warning).
thread_local std::string t_unsupported_reason;
}  // namespace

at::Tensor new_npu(c10::IntArrayRef size, at::ScalarType dtype) {
  const c10::DispatchKeySet keys(c10::DispatchKey::PrivateUse1);
  return at::detail::empty_generic(size, c10::GetAllocator(kNpu), keys, dtype, std::nullopt);
}

at::Tensor to_npu(const at::Tensor& t) { return on_npu(t) ? t : t.to(at::Device(kNpu, 0)); }

bool try_run(const std::function<npu::compiler::OpDesc()>& make_op, const std::vector<at::Tensor>& inputs, const at::Tensor& out) {
  try {
    Runtime::get().run(make_op(), inputs, out);
    return true;
  } catch (const npu::compiler::UnsupportedOp& e) {
    t_unsupported_reason = e.what();
  } catch (const std::invalid_argument& e) {
    t_unsupported_reason = e.what();
  }
  return false;
}

void note_cpu_fallback(const char* op) {
  const std::string reason = std::move(t_unsupported_reason);
  t_unsupported_reason.clear();
  Runtime::get().note_fallback(op, reason);
}

npu::compiler::F32MatmulPrecision f32_matmul_precision() {
  switch (at::globalContext().float32MatmulPrecision()) {
    case at::Float32MatmulPrecision::MEDIUM: return npu::compiler::F32MatmulPrecision::Medium;
    case at::Float32MatmulPrecision::HIGH: return npu::compiler::F32MatmulPrecision::High;
    default: return npu::compiler::F32MatmulPrecision::Highest;
  }
}

}  // namespace npusim
