#include "noc.h"

#include "npusim/sim/address_map.h"
#include "chip_trace.h"
#include "dram.h"
#include "timing_extension.h"

namespace npu::sim {

Noc::Noc(sc_core::sc_module_name name, ChipContext& context)
    : sc_module(name), in("in"), out("out"), context_(context), config_(context.config.noc), dram_interleave_(context.config.dram),
      link_width_(config_.link_bytes_per_cycle),
      links_(static_cast<size_t>(config_.mesh_cols) * config_.mesh_rows * 4) {
  const auto& ports = context.config.dram.ports;
  for (unsigned channel = 0; channel < context.config.dram.channels; ++channel) dram_port_of_channel_.push_back(ports[channel % ports.size()]);
  in.register_b_transport(this, &Noc::b_transport);
}

void Noc::add_initiator_node(MeshPosition position) { initiator_nodes_.push_back(position); }

uint64_t Noc::transfer(MeshPosition from, MeshPosition to, uint64_t bytes, uint64_t serialization, uint64_t ready,
                       uint64_t* wait_cycles) {
  if (wait_cycles) *wait_cycles = 0;
  if (from.x == to.x && from.y == to.y) return ready;  // same node: no link crossed
  uint64_t head = ready;
  uint64_t waited = 0;
  unsigned x = from.x, y = from.y;
  // XY routing: along the row first, then along the column.
  while (x != to.x || y != to.y) {
    Direction direction;
    if (x != to.x) {
      direction = x < to.x ? East : West;
    } else {
      direction = y < to.y ? South : North;
    }
    Link& hop = link(x, y, direction);
    const uint64_t arrive = head + config_.router_latency_cycles;
    head = hop.timeline.first_free(arrive, serialization);
    hop.timeline.reserve(head, serialization);
    if (hop.timeline.crowded()) hop.timeline.prune(context_.now_cycle());
    hop.busy_cycles += serialization;
    waited += head - arrive;
    hop.bytes += bytes;
    if (context_.trace) {
      context_.trace->noc_transfer(head, head + serialization, bytes);
      context_.trace->noc_link_busy(noc_link_index(config_.mesh_cols, x, y, direction), config_.mesh_cols, head, head + serialization);
    }
    switch (direction) {
      case East: ++x; break;
      case West: --x; break;
      case South: ++y; break;
      case North: --y; break;
    }
  }
  if (wait_cycles) *wait_cycles = waited;
  return head + serialization;
}

void Noc::b_transport(int initiator, tlm::tlm_generic_payload& payload, sc_core::sc_time& delay) {
  const uint64_t address = payload.get_address();
  const uint64_t bytes = payload.get_data_length();
  const MeshPosition source = initiator_nodes_.at(static_cast<size_t>(initiator));
  int target;
  MeshPosition destination;
  if (address < kCoreWindowBase) {
    target = kDramTarget;
    destination = dram_port_of_channel_[dram_interleave_.channel_of(address)];
  } else {
    const uint64_t core = (address - kCoreWindowBase) / kCoreWindowBytes;
    if (core >= context_.config.num_cores) {
      payload.set_response_status(tlm::TLM_ADDRESS_ERROR_RESPONSE);
      return;
    }
    target = 1 + static_cast<int>(core);
    destination = context_.config.core_position(static_cast<unsigned>(core));
    payload.set_address(address - kCoreWindowBase - core * kCoreWindowBytes);
  }
  uint64_t waited = 0;
  auto* timing = payload.get_extension<TimingExtension>();
  const uint64_t ready = transport_cycle(context_, timing, delay);
  // Writes carry their data to the target; reads send a request (modelled as
  // its router latencies) and the data travels back.
  uint64_t at_target;
  if (payload.is_write()) {
    at_target = transfer(source, destination, bytes, ready, &waited);
  } else {
    at_target = ready + uint64_t{hops(source, destination)} * config_.router_latency_cycles;
  }
  sc_core::sc_time target_delay = sc_core::SC_ZERO_TIME;
  set_transport_cycle(context_, timing, target_delay, at_target);
  out[target]->b_transport(payload, target_delay);
  payload.set_address(address);
  if (payload.get_response_status() != tlm::TLM_OK_RESPONSE) {
    if (timing) timing->cycle = ready;  // a refused transaction takes no time (its delay is left as it came)
    return;
  }
  uint64_t done = transport_cycle(context_, timing, target_delay);
  if (payload.is_read()) {
    uint64_t back_wait = 0;
    done = transfer(destination, source, bytes, done, &back_wait);
    waited += back_wait;
  }
  if (timing) timing->noc_wait_cycles += waited;
  set_transport_cycle(context_, timing, delay, done);
}

std::vector<NocLinkStats> Noc::link_stats() const {
  std::vector<NocLinkStats> stats;
  for (size_t index = 0; index < links_.size(); ++index)
    if (links_[index].bytes != 0) stats.push_back({noc_link_name(config_.mesh_cols, index), links_[index].bytes, links_[index].busy_cycles});
  return stats;
}

}  // namespace npu::sim
