// The mesh network on chip: XY routing, one reservation timeline per directed
// link, a fixed router latency per hop, wormhole serialization charged once.
// An interconnect in the TLM sense: initiators (the cores' DMA engines, the
// host link) bind to `in`, targets (DRAM, each core's local memory) to `out`,
// and transactions are routed by the system address map.
#pragma once

#include <systemc>
#include <tlm>
#include <tlm_utils/multi_passthrough_initiator_socket.h>
#include <tlm_utils/multi_passthrough_target_socket.h>

#include <cstdint>
#include <vector>

#include "chip_context.h"
#include "divider.h"
#include "dram_interleave.h"
#include "noc_links.h"
#include "npusim/sim/stats.h"
#include "bank_timeline.h"
#include "timeline.h"

namespace npu::sim {

class Noc : public sc_core::sc_module {
 public:
  tlm_utils::multi_passthrough_target_socket<Noc> in;
  tlm_utils::multi_passthrough_initiator_socket<Noc> out;

  Noc(sc_core::sc_module_name name, ChipContext& context);

  // Call in binding order: which mesh node each bound initiator sits at.
  void add_initiator_node(MeshPosition position);
  // Target socket indices of `out`, in binding order: 0 = DRAM, 1 + c = core c.
  static constexpr int kDramTarget = 0;

  // Moves `bytes` from one node to another, starting at `ready`; returns the
  // arrival cycle of the last byte. `wait_cycles` gets the link contention.
  uint64_t transfer(MeshPosition from, MeshPosition to, uint64_t bytes, uint64_t ready, uint64_t* wait_cycles) {
    return transfer(from, to, bytes, serialization_cycles(bytes), ready, wait_cycles);
  }
  // The same for a train of packets holding `bytes` in all that occupy each
  // link for `serialization` cycles together (each packet rounds its own
  // bytes up to whole link cycles): a DMA burst (DmaTiming::PerStep).
  uint64_t transfer(MeshPosition from, MeshPosition to, uint64_t bytes, uint64_t serialization, uint64_t ready, uint64_t* wait_cycles);
  unsigned hops(MeshPosition from, MeshPosition to) const {  // (in the class, to be inlined: every request asks)
    const auto distance = [](uint32_t a, uint32_t b) { return a > b ? a - b : b - a; };
    return distance(from.x, to.x) + distance(from.y, to.y);
  }

  // Where the controller of the DRAM channel serving `address` sits.
  MeshPosition dram_port(uint64_t address) const { return dram_port_of_channel_[dram_interleave_.channel_of(address)]; }
  MeshPosition dram_port_of_channel(unsigned channel) const { return dram_port_of_channel_[channel]; }
  // Cycles `bytes` take on one link, and a packet's latency over `hops` routers.
  uint64_t serialization_cycles(uint64_t bytes) const { return link_width_.ceil_quotient(bytes); }
  uint64_t route_cycles(unsigned hop_count) const { return uint64_t{hop_count} * config_.router_latency_cycles; }

  std::vector<NocLinkStats> link_stats() const;

 private:
  using Direction = NocDirection;
  // A link's reservations as intervals with usable gaps (as an SRAM bank's): a transfer
  // reserved ahead for a later cycle (data a DRAM channel returns late) does not hold up
  // one that can cross the link earlier.
  struct Link {
    BankTimeline timeline;
    uint64_t bytes = 0, busy_cycles = 0;
  };
  Link& link(unsigned x, unsigned y, Direction direction) { return links_[noc_link_index(config_.mesh_cols, x, y, direction)]; }
  void b_transport(int initiator, tlm::tlm_generic_payload& payload, sc_core::sc_time& delay);

  ChipContext& context_;
  const NocConfig& config_;
  const DramInterleave dram_interleave_;  // which channel's controller (mesh port) an address goes to
  std::vector<MeshPosition> dram_port_of_channel_;  // the config's ports, repeated if fewer than the channels
  const Divider link_width_;  // bytes per cycle of a link
  std::vector<MeshPosition> initiator_nodes_;
  std::vector<Link> links_;  // 4 per node, indexed (y * cols + x) * 4 + direction
};

}  // namespace npu::sim
