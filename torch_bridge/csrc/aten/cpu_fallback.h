// The CPU fallback: the one way an op leaves the chip. An op with no npu kernel reaches it through the
// dispatcher (registered for every aten op); an npu kernel that declines a case hands its op to it with
// fall_back, saying why. Either way the npu arguments are copied to the host, the CPU kernel runs, and the
// results (and arguments the op writes) come back; the op is counted (npusim.fallback_stats()), warned
// about once with the reason, and refused under NPUSIM_STRICT=1 or inside an export capture.
#pragma once

#include <ATen/native/CPUFallback.h>

#include <string>
#include <utility>

namespace npusim {

// The boxed fallback (at::native::cpu_fallback, counted as above).
void cpu_fallback(const c10::OperatorHandle& op, torch::jit::Stack* stack);
// The reason the next cpu_fallback on this thread gives (fall_back's); empty: the reason the last
// try_run on this thread gave.
void set_fallback_reason(std::string reason);

// An npu kernel declining its op: `Op` is the overload it implements (at::_ops::NAME or
// at::_ops::NAME_OVERLOAD), `args` its arguments as the kernel got them.
template <typename Op, typename... Args>
decltype(auto) fall_back(std::string reason, Args&&... args) {
  set_fallback_reason(std::move(reason));
  return at::native::call_fallback_fn<&cpu_fallback, Op>::call(std::forward<Args>(args)...);
}

// The same for an op with no at::_ops (the npusim:: custom ops, which have CPU kernels): by its name
// ("npusim::gemm"), `Kernel` its npu kernel's function type (the op's C++ signature).
template <typename Kernel, typename... Args>
decltype(auto) fall_back_by_name(const char* name, std::string reason, Args&&... args) {
  set_fallback_reason(std::move(reason));
  const auto op = c10::Dispatcher::singleton().findSchemaOrThrow(name, "").typed<Kernel>();
  return c10::impl::BoxedKernelWrapper<Kernel>::call(c10::BoxedKernel::makeFromFunction<&cpu_fallback>(), op, c10::DispatchKeySet(),
                                                     std::forward<Args>(args)...);
}

}  // namespace npusim
