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
#include <utility>
#include <vector>

#include "chip_context.h"
#include "npusim/sim/stats.h"
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
    // A posted write (as on PCIe) is done for the host once it has crossed
    // onto the link; it takes effect when it arrives, in order with
    // everything else the host sent. Otherwise the host waits for arrival.
    bool posted = false;
    bool done = false;
    bool ok = true;  // false: the address is not mapped
  };

  SC_HAS_PROCESS(HostLink);
  HostLink(sc_core::sc_module_name name, ChipContext& context);

  // Queues a request; `request` must stay alive until `done`. When it is
  // done the kernel pauses, so that the host side regains control.
  void submit(Request* request);

  // A transfer of the command processor's copy engine over the link (to or
  // from device `address`), ready at `ready_cycle`: it takes its turn on the
  // link direction it crosses, with the host's own transfers. Returns the
  // cycle it has fully arrived.
  uint64_t reserve_transfer(bool to_device, uint64_t address, uint64_t bytes, uint64_t ready_cycle);

  uint64_t bytes() const { return bytes_; }  // crossed so far, both directions (ChipStats::host_link_bytes)

  // Simulator::record_host_transfers and take_host_transfers.
  void record_transfers(bool on) { recording_ = on; }
  std::vector<HostTransfer> take_transfers() { return std::exchange(recorded_, {}); }

 private:
  void run();
  void serve(Request& request);
  void deliver();               // thread: applies posted register writes as they arrive
  void deliver_arrived();       // applies those that have arrived by now, in order
  // A memory transfer has been timed: recorded when asked, and a span on the trace's host link track.
  void note_transfer(const HostTransfer& transfer);
  bool transport(tlm_utils::simple_initiator_socket<HostLink>& socket, tlm::tlm_command command, uint64_t address, uint8_t* data,
                 uint64_t bytes, uint64_t ready, uint64_t* done);

  ChipContext& context_;
  std::deque<Request*> pending_;
  sc_core::sc_event submitted_;
  Timeline to_device_, to_host_;  // the two directions of the link
  uint64_t bytes_ = 0;
  bool recording_ = false;
  std::vector<HostTransfer> recorded_;
  struct PostedWrite {
    uint64_t arrival_cycle;
    uint32_t offset;
    uint32_t value;
  };
  std::deque<PostedWrite> in_flight_;  // in arrival order
  sc_core::sc_event posted_;
  uint64_t serve_slot_ = 0, deliver_slot_ = 0;  // of run()'s and deliver()'s timed waits (ChipContext::new_slot)
};

}  // namespace npu::sim
