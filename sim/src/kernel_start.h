// sc_start for every caller in the project, so that what follows a run of the
// SystemC kernel holds for all of them.
#pragma once

#include <systemc>

namespace npu::sim {

// Runs the kernel (sc_core::sc_start), then tells AddressSanitizer, when the
// build has it, the calling thread's own stack again.
//
// Why: libsystemc 2.3.4 announces each coroutine switch to the sanitizer
// (__sanitizer_start/finish_switch_fiber) except the last switch out of an
// SC_THREAD that returns (sc_cor_pkg_qt::abort). After such an ending the
// sanitizer takes the ended thread's stack for the current one; and a switch
// back to the thread that called sc_start announces an empty stack (the main
// coroutine's m_stack is null). When the process exits, LeakSanitizer scans
// each thread's stack as it knows it: an ended coroutine's stack, since
// unmapped (and the addresses perhaps mapped anew), crashed its stop-the-world
// tracer ("Tracer caught signal 11") in about half the runs of tests whose
// threads end.
void start_kernel(const sc_core::sc_time& duration, sc_core::sc_starvation_policy policy = sc_core::SC_RUN_TO_TIME);
void start_kernel();  // until nothing is left to do

// The second half of start_kernel alone (a no-op without AddressSanitizer).
void restore_sanitizer_stack_bounds();

}  // namespace npu::sim
