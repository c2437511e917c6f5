#include "dma_engine.h"

#include <algorithm>
#include <cstring>
#include <tuple>
#include <utility>

#include "npusim/sim/address_map.h"
#include "divider.h"
#include "dram.h"
#include "format.h"

namespace npu::sim {
namespace {

constexpr uint64_t kMaxRows = uint64_t{1} << 24;

}  // namespace

DmaEngine::DmaEngine(sc_core::sc_module_name name, ChipContext& context, unsigned core, unsigned channel, Semaphores& semaphores,
                     EngineStats& stats, unsigned engine_index, LocalMemory& local, const CoreDirectory& directory, Dram& dram)
    : Engine(name, context, core, "dma ch" + std::to_string(channel), semaphores, stats, engine_index),
      noc("noc"),
      local_(local),
      directory_(directory),
      dram_(dram),
      channel_bursts_(context.config.dram.channels),
      channel_windows_(context.config.dram.channels),
      stream_(core * context.config.core.dma.channels + channel + 1),
      interleave_(context.config.dram) {
  is_dma_ = true;
  payload_.set_byte_enable_ptr(nullptr);
  payload_.set_dmi_allowed(false);
  // DMA moves bytes in timing-only runs too (unless told no value can change
  // an address): only arithmetic is skipped, so that data-dependent addresses
  // (dma.gather's indices) are the functional run's.
  timing_.move_data = context.moves_data;
  payload_.set_extension(&timing_);
}

DmaEngine::~DmaEngine() { payload_.clear_extension(&timing_); }

std::optional<FaultRecord> DmaEngine::check(const Command& command, Space space, uint64_t address, uint64_t bytes,
                                            unsigned remote_core) const {
  if (space == Space::Global && in_core_window(address)) {
    // A core's window: its scratchpad reached over the NoC (the driver's SRAM buffers).
    const unsigned core = window_core(address);
    if (core < directory_.local_memories.size()) {
      if (auto problem = directory_.local_memories[core]->check(window_offset(address), bytes, 1)) {
        FaultRecord fault = fault_from(command, *problem);
        fault.message += " (in core " + std::to_string(core) + "'s window)";
        fault.has_address = true;
        fault.address = address;
        return fault;
      }
      return std::nullopt;
    }
  }
  if (space == Space::Global) {
    if (dram_.in_range(address, bytes)) return std::nullopt;
    FaultRecord fault = fault_for(command, FaultKind::AddressOutOfRange,
                                  "global range [" + hex(address) + ", +" + std::to_string(bytes) + ") is outside device DRAM (" +
                                      std::to_string(context_.config.dram.size_bytes) + " bytes)");
    fault.has_address = true;
    fault.address = address;
    return fault;
  }
  const LocalMemory& memory = space == Space::Local ? local_ : *directory_.local_memories[remote_core];
  if (auto problem = memory.check(address, bytes, 1)) {
    FaultRecord fault = fault_from(command, *problem);
    if (space == Space::Remote) fault.message += " of core " + std::to_string(remote_core);
    return fault;
  }
  return std::nullopt;
}

bool DmaEngine::holds(Space space, uint64_t address, unsigned __int128 bytes, unsigned remote_core) const {
  if (bytes > UINT64_MAX - address) return false;
  const uint64_t size = static_cast<uint64_t>(bytes);
  // Global: below the core windows (each row is then DRAM), and inside DRAM.
  if (space == Space::Global) return address + size <= kCoreWindowBase && dram_.in_range(address, size);
  const LocalMemory& memory = space == Space::Local ? local_ : *directory_.local_memories[remote_core];
  return !memory.check(address, size, 1);
}

uint64_t DmaEngine::noc_transport(tlm::tlm_command direction, uint64_t address, uint8_t* data, uint64_t bytes, uint64_t ready, bool* ok) {
  // One payload, reused: constructing a payload and attaching its extension
  // for every request costs more than the request's own modelling.
  tlm::tlm_generic_payload& payload = payload_;
  payload.set_command(direction);
  payload.set_address(address);
  payload.set_data_ptr(data);
  payload.set_data_length(static_cast<unsigned>(bytes));
  payload.set_streaming_width(static_cast<unsigned>(bytes));
  payload.set_response_status(tlm::TLM_INCOMPLETE_RESPONSE);
  timing_.reset();
  timing_.cycle = ready;
  sc_core::sc_time delay = sc_core::SC_ZERO_TIME;  // the extension carries the time
  noc->b_transport(payload, delay);
  noc_wait_ += timing_.noc_wait_cycles;
  dram_wait_ += timing_.dram_wait_cycles;
  sram_wait_ += timing_.sram_wait_cycles;
  *ok = payload.get_response_status() == tlm::TLM_OK_RESPONSE;
  return timing_.cycle;
}

uint64_t DmaEngine::request(Space src_space, uint64_t src, Space dst_space, uint64_t dst, uint64_t bytes, uint64_t issue,
                            unsigned remote_core, std::optional<FaultRecord>* fault, const Command& command) {
  bool ok = true;
  uint64_t wait = 0;
  uint64_t done;
  // Data moves once: straight between the memories where one side is local,
  // through the bounce buffer only for global-to-global and core-to-core copies.
  if (src_space == Space::Global && dst_space == Space::Local) {
    const uint64_t read_done = noc_transport(tlm::TLM_READ_COMMAND, src, local_.data(dst, bytes), bytes, issue, &ok);
    done = local_.access(dst, bytes, true, read_done, &wait);
    sram_wait_ += wait;
  } else if (src_space == Space::Local && dst_space == Space::Global) {
    const uint64_t read_done = local_.access(src, bytes, false, issue, &wait);
    sram_wait_ += wait;
    done = noc_transport(tlm::TLM_WRITE_COMMAND, dst, local_.data(src, bytes), bytes, read_done, &ok);
  } else {
    if (buffer_.size() < bytes) buffer_.resize(bytes);
    uint64_t read_done;
    if (src_space == Space::Local) {
      read_done = local_.access(src, bytes, false, issue, &wait);
      sram_wait_ += wait;
      if (timing_.move_data) std::memcpy(buffer_.data(), local_.data(src, bytes), bytes);
    } else {
      read_done = noc_transport(tlm::TLM_READ_COMMAND, src, buffer_.data(), bytes, issue, &ok);
    }
    if (dst_space == Space::Local) {
      done = local_.access(dst, bytes, true, read_done, &wait);
      sram_wait_ += wait;
      if (timing_.move_data) std::memcpy(local_.data(dst, bytes), buffer_.data(), bytes);
    } else {
      const uint64_t address = dst_space == Space::Remote ? core_window_address(remote_core, dst) : dst;
      done = noc_transport(tlm::TLM_WRITE_COMMAND, address, buffer_.data(), bytes, read_done, &ok);
    }
  }
  if (!ok && !*fault) {
    // Bounds were checked before the transfer started; a target refusing a
    // request anyway is reported rather than ignored.
    *fault = fault_for(command, FaultKind::AddressOutOfRange, "a memory target rejected the request");
  }
  return done;
}

void DmaEngine::add_request_stalls(uint64_t requests) {
  // Requests overlap up to max_outstanding deep: spread the waits they met over that depth.
  const uint64_t depth = std::max<uint64_t>(1, std::min<uint64_t>(requests, context_.config.core.dma.max_outstanding_requests));
  add_stall(StallReason::Noc, noc_wait_ / depth);
  add_stall(StallReason::Dram, dram_wait_ / depth);
  add_stall(StallReason::SramBankConflict, sram_wait_ / depth);
}

DmaEngine::Outcome DmaEngine::execute(const Command& command, uint64_t start) {
  const isa::Opcode op = command.opcode;
  Space src_space = Space::Global, dst_space = Space::Local;
  unsigned remote_core = 0;
  uint64_t src = uoperand(command, "src"), dst = uoperand(command, "dst");
  uint64_t n0 = uoperand(command, "n0");
  std::optional<DmaRows> rows;
  last_send_core_ = -1;

  switch (op) {
    case isa::Opcode::DMA_LD: src_space = Space::Global, dst_space = Space::Local; break;
    case isa::Opcode::DMA_ST: src_space = Space::Local, dst_space = Space::Global; break;
    case isa::Opcode::DMA_CP: src_space = Space::Local, dst_space = Space::Local; break;
    case isa::Opcode::DMA_GG: src_space = Space::Global, dst_space = Space::Global; break;
    case isa::Opcode::DMA_SEND: src_space = Space::Local, dst_space = Space::Remote; break;
    case isa::Opcode::DMA_GATHER: src_space = Space::Global, dst_space = Space::Local; break;
    default: return {0, fault_for(command, FaultKind::InvalidInstruction, "not a DMA instruction"), {}};
  }
  const uint64_t n1 = op == isa::Opcode::DMA_GATHER ? 1 : uoperand(command, "n1");
  const uint64_t n2 = (op == isa::Opcode::DMA_SEND || op == isa::Opcode::DMA_GATHER) ? 1 : uoperand(command, "n2");
  if (std::max<uint64_t>(n1, 1) > kMaxRows / std::max<uint64_t>(n2, 1))
    return {0, fault_for(command, FaultKind::ExecutionError, "DMA shape has more than 2^24 rows"), {}};

  if (op == isa::Opcode::DMA_SEND) {
    const uint64_t core = uoperand(command, "core");
    if (core >= context_.config.num_cores)
      return {0, fault_for(command, FaultKind::ExecutionError,
                           "dma.send to core " + std::to_string(core) + ", but the chip has " + std::to_string(context_.config.num_cores)),
              {}};
    remote_core = static_cast<unsigned>(core);
    last_send_core_ = int64_t(core), last_send_sem_ = int64_t(uoperand(command, "sem"));
    rows.emplace(n1, 1, uoperand(command, "src_s1"), uoperand(command, "dst_s1"), 0, 0);
  } else if (op == isa::Opcode::DMA_GATHER) {
    const uint64_t count = uoperand(command, "count");
    const uint64_t idx = uoperand(command, "idx");
    if (count > kMaxRows) return {0, fault_for(command, FaultKind::ExecutionError, "dma.gather of more than 2^24 rows"), {}};
    if (auto problem = local_.check(idx, count * 4, 4)) return {0, fault_from(command, *problem, "index array: "), {}};
    local_.note_use(idx, count * 4);
    const uint64_t stride = uoperand(command, "src_s1");
    std::vector<std::pair<uint64_t, uint64_t>> offsets;
    for (uint64_t i = 0; i < count; ++i) {
      int32_t index;
      std::memcpy(&index, local_.data(idx + i * 4, 4), 4);
      // A negative index addresses below the table: it faults as out of range.
      offsets.emplace_back(static_cast<uint64_t>(static_cast<int64_t>(index)) * stride, i * n0);
    }
    rows.emplace(std::move(offsets));
  } else {
    rows.emplace(n1, n2, uoperand(command, "src_s1"), uoperand(command, "dst_s1"), uoperand(command, "src_s2"), uoperand(command, "dst_s2"));
  }

  // Check every row before moving a byte: a faulting transfer has no effect.
  // Where the rows lie between two ends that one memory holds, none can
  // fault; otherwise each is checked, in order, for the first fault's report.
  unsigned __int128 src_last = 0, dst_last = 0;
  const bool safe = n0 == 0 || (rows->last_row(&src_last, &dst_last) && holds(src_space, src, src_last + n0, remote_core) &&
                                holds(dst_space, dst, dst_last + n0, remote_core));
  if (!safe) {
    DmaRows walk = *rows;
    for (uint64_t src_offset, dst_offset; walk.next(&src_offset, &dst_offset);) {
      if (auto fault = check(command, src_space, src + src_offset, n0, remote_core)) return {0, fault, {}};
      if (auto fault = check(command, dst_space, dst + dst_offset, n0, remote_core)) return {0, fault, {}};
    }
    walk = *rows;
    for (uint64_t src_offset, dst_offset; walk.next(&src_offset, &dst_offset);) {
      if (src_space == Space::Local) local_.note_use(src + src_offset, n0);
      if (dst_space == Space::Local) local_.note_use(dst + dst_offset, n0);
    }
  } else if (n0 != 0) {
    // (Safe: the last row is the farthest; both ends lie inside their memories.)
    if (src_space == Space::Local) local_.note_use(src, static_cast<uint64_t>(src_last) + n0);
    if (dst_space == Space::Local) local_.note_use(dst, static_cast<uint64_t>(dst_last) + n0);
  }

  const DmaConfig& config = context_.config.core.dma;
  noc_wait_ = dram_wait_ = sram_wait_ = 0;
  last_bytes_ = n0 * rows->count();
  // (A global address inside a core's window is that core's scratchpad, not DRAM.)
  last_dram_bytes_ = last_bytes_ * ((src_space == Space::Global && !in_core_window(src)) + (dst_space == Space::Global && !in_core_window(dst)));
  const bool dram_and_scratchpad = (src_space == Space::Global && dst_space == Space::Local && op != isa::Opcode::DMA_GATHER) ||
                                   (src_space == Space::Local && dst_space == Space::Global);
  if (config.timing != DmaTiming::PerRequest && safe && dram_and_scratchpad) {
    const bool load = src_space == Space::Global;
    const uint64_t global = load ? src : dst, local = load ? dst : src;
    Outcome outcome = config.timing == DmaTiming::PerStep ? transfer_in_steps(*rows, load, global, local, n0, start)
                                                          : transfer_in_windows(*rows, load, global, local, n0, start);
    hand_over_stores();  // (what a transfer that ended early, at a fault or a reset, left)
    return outcome;
  }
  if (config.timing != DmaTiming::PerRequest && safe && op == isa::Opcode::DMA_SEND)
    return send_in_steps(*rows, src, dst, remote_core, n0, start, command);
  std::vector<uint64_t> in_flight(config.max_outstanding_requests, 0);  // completion cycles, a ring
  size_t slot = 0;
  const Divider request_bytes(config.request_bytes);
  uint64_t next_issue = start + config.descriptor_cycles;
  uint64_t end = next_issue;
  uint64_t bytes_since_yield = 0;
  uint64_t requests = 0;
  std::optional<FaultRecord> fault;
  // Requests are cut at request_bytes boundaries of the global (or source)
  // address, so that no request spans two DRAM interleave blocks.
  const bool split_on_dst = src_space != Space::Global && dst_space == Space::Global;
  for (uint64_t src_offset, dst_offset; rows->next(&src_offset, &dst_offset);) {
    for (uint64_t done_bytes = 0; done_bytes < n0;) {
      const uint64_t aligned_on = (split_on_dst ? dst + dst_offset : src + src_offset) + done_bytes;
      const uint64_t bytes = std::min(n0 - done_bytes, config.request_bytes - request_bytes.remainder(aligned_on));
      const uint64_t issue = std::max(next_issue, in_flight[slot]);
      const uint64_t done =
          request(src_space, src + src_offset + done_bytes, dst_space, dst + dst_offset + done_bytes, bytes, issue, remote_core, &fault, command);
      if (fault) return {0, fault, {}};
      in_flight[slot] = done;
      if (++slot == in_flight.size()) slot = 0;
      next_issue = issue + 1;
      end = std::max(end, done);
      done_bytes += bytes;
      ++requests;
      bytes_since_yield += bytes;
      if (bytes_since_yield >= config.step_bytes) {
        // Let the rest of the chip catch up before issuing further ahead.
        bytes_since_yield = 0;
        if (!context_.wait_until(issue, timer_)) return {end, std::nullopt, {}};
      }
    }
  }
  add_request_stalls(requests);

  if (op == isa::Opcode::DMA_SEND) raise_at_receiver(command, remote_core, end);
  return {end, std::nullopt, {}};
}

void DmaEngine::raise_at_receiver(const Command& command, unsigned remote_core, uint64_t end) {
  if (context_.wait_until(end, timer_)) directory_.semaphores[remote_core]->signal(static_cast<unsigned>(operand(command, "sem")), true);
}

}  // namespace npu::sim
