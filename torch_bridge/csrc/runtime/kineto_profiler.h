// torch.profiler sees the chip: while a torch.profiler session with ProfilerActivity.PrivateUse1 runs,
// the runtime reports each kernel launch here, and the session hands Kineto one device activity per
// kernel (its simulated start and duration, on a row per command queue) linked to the ATen op that
// launched it (kineto_profiler.cpp). Kept free of Kineto's headers: they need USE_KINETO and
// FMT_HEADER_ONLY, which only kineto_profiler.cpp is compiled with.
#pragma once

#include <cstdint>
#include <string>

#include "npusim/driver/queue.h"

namespace npusim::kineto {

// Whether a session records kernels now (cheap: an atomic load).
bool recording();

struct Launch {
  std::string kernel, op, layer, nodes;
  unsigned queue = 0;
  npu::Event start, end;  // device timestamps before and after it on its queue
  int64_t host_begin_ns = 0, host_end_ns = 0;  // the launch call on the host (c10::getTime's clock)
};
// The correlation id Kineto gave the ATen op running on this thread (0: none); call before the launch.
uint64_t current_correlation_id();
void note_launch(Launch launch, uint64_t correlation_id);

}  // namespace npusim::kineto
