#include "kernel_start.h"

#include <pthread.h>

#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define NPUSIM_HAS_ASAN 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__)
#define NPUSIM_HAS_ASAN 1
#endif

#ifdef NPUSIM_HAS_ASAN
#include <sanitizer/common_interface_defs.h>
#endif

namespace npu::sim {

void restore_sanitizer_stack_bounds() {
#ifdef NPUSIM_HAS_ASAN
  pthread_attr_t attributes;
  if (pthread_getattr_np(pthread_self(), &attributes) != 0) return;
  void* bottom = nullptr;
  size_t size = 0;
  const bool known = pthread_attr_getstack(&attributes, &bottom, &size) == 0;
  pthread_attr_destroy(&attributes);
  if (!known) return;
  // A switch "to" the stack we are on: the sanitizer's bounds become the thread's own, and its fake stack (for
  // detect_stack_use_after_return) is kept.
  void* fake_stack = nullptr;
  __sanitizer_start_switch_fiber(&fake_stack, bottom, size);
  __sanitizer_finish_switch_fiber(fake_stack, nullptr, nullptr);
#endif
}

void start_kernel(const sc_core::sc_time& duration, sc_core::sc_starvation_policy policy) {
  sc_core::sc_start(duration, policy);
  restore_sanitizer_stack_bounds();
}

void start_kernel() {
  sc_core::sc_start();
  restore_sanitizer_stack_bounds();
}

}  // namespace npu::sim
