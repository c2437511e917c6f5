// The host link (PCIe-like): how the host reaches the chip. Register accesses
// go to the register block; memory transfers cross the link (bytes_per_cycle
// each way, latency_cycles each crossing) and enter the NoC at the link's mesh
// node on their way to DRAM. Requests come from the host side of the
// Simulator and are served in order by this module's thread.
#pragma once

#include <systemc>
#include <tlm>
#include <tlm_utils/simple_initiator_socket.h>

#include <cstdint>
#include <deque>

#include "chip_context.h"
#include "timeline.h"

namespace npu::sim {

class HostLink : public sc_core::sc_module {
 public:
  tlm_utils::simple_initiator_socket<HostLink> noc;        // device memory through the NoC
  tlm_utils::simple_initiator_socket<HostLink> registers;  // the register block

  struct Request {
    enum class Kind { ReadRegister, WriteRegister, ReadMemory, WriteMemory } kind;
    uint64_t address = 0;  // register offset or device address
    uint32_t value = 0;    // register value written or read
    uint8_t* data = nullptr;
    uint64_t bytes = 0;
    bool done = false;
    bool ok = true;  // false: the address is not mapped
  };

  SC_HAS_PROCESS(HostLink);
  HostLink(sc_core::sc_module_name name, ChipContext& context);

  // Queues a request; `request` must stay alive until `done`. When it is
  // done the kernel pauses, so that the host side regains control.
  void submit(Request* request);

 private:
  void run();
  void serve(Request& request);
  bool transport(tlm_utils::simple_initiator_socket<HostLink>& socket, tlm::tlm_command command, uint64_t address, uint8_t* data,
                 uint64_t bytes, uint64_t ready, uint64_t* done);

  ChipContext& context_;
  std::deque<Request*> pending_;
  sc_core::sc_event submitted_;
  Timeline to_device_, to_host_;  // the two directions of the link
};

}  // namespace npu::sim
