#include "local_memory.h"

#include <algorithm>
#include <cstdio>
#include <cstring>

#include "background_work.h"
#include "chip_trace.h"
#include "format.h"
#include "timing_extension.h"

namespace npu::sim {

LocalMemory::LocalMemory(sc_core::sc_module_name name, ChipContext& context, CoreStats& stats)
    : sc_module(name), socket("socket"), context_(context), stats_(stats) {
  const CoreConfig& core = context.config.core;
  for (auto [memory, config] : {std::pair{&scratchpad_, &core.scratchpad}, std::pair{&accumulator_, &core.accumulator}}) {
    memory->config = config;
    memory->bytes = ZeroedBytes(config->size_bytes, "local memory");
    memory->banks.resize(config->banks);
    memory->shares.resize(config->banks);
    memory->bank_width = Divider(config->bank_width_bytes);
    memory->bytes_per_cycle = Divider(config->bytes_per_cycle());
    memory->bank_count = Divider(config->banks);
  }
  socket.register_b_transport(this, &LocalMemory::b_transport);
}

std::optional<FaultRecord> LocalMemory::check(uint64_t address, uint64_t bytes, unsigned align) const {
  const bool in_accumulator = address >= isa::kAccumulatorBase;
  const uint64_t base = in_accumulator ? isa::kAccumulatorBase : 0;
  const uint64_t size = in_accumulator ? accumulator_.bytes.size() : scratchpad_.bytes.size();
  const bool misaligned = align > 1 && address % align != 0;
  const bool outside = address - base >= size && !(bytes == 0 && address - base == size);
  if (!misaligned && !outside && bytes <= size - (address - base)) return std::nullopt;  // (checked on every access: no strings built)
  FaultRecord fault;
  fault.has_address = true;
  fault.address = address;
  const char* name = in_accumulator ? "accumulator" : "scratchpad";
  if (misaligned) {
    fault.kind = FaultKind::Misaligned;
    fault.message = "local address " + hex(address) + " is not aligned to " + std::to_string(align) + " bytes";
  } else if (outside) {
    fault.kind = FaultKind::AddressOutOfRange;
    fault.message = "local address " + hex(address) + " is outside the " + name + " (" + std::to_string(size) + " bytes at " +
                    hex(base) + ")";
  } else {
    fault.kind = FaultKind::SramOverflow;
    fault.message = "local range [" + hex(address) + ", +" + std::to_string(bytes) + ") runs past the end of the " + name + " (" +
                    std::to_string(size) + " bytes)";
  }
  return fault;
}

uint8_t* LocalMemory::data(uint64_t address) {
  Memory& memory = memory_of(address);
  return memory.bytes.data() + (address >= isa::kAccumulatorBase ? address - isa::kAccumulatorBase : address);
}

uint64_t LocalMemory::run_in_background(std::initializer_list<Range> ranges, std::function<void()> work) {
  BackgroundWork* background = context_.background;
  if (background == nullptr) {
    for (const Range& range : ranges) settle(range.address, range.bytes);
    work();
    return 0;
  }
  // (No wait for earlier work on the same bytes: the thread does its work in order.)
  in_background_.forget_done(*background);
  const uint64_t number = background->submit(std::move(work));
  for (const Range& range : ranges) in_background_.add(number, range.address, range.address + range.bytes);
  return number;
}

bool LocalMemory::in_background(uint64_t address, uint64_t bytes) {
  return !in_background_.empty() && in_background_.last_user(*context_.background, address, address + bytes) != 0;
}

uint64_t LocalMemory::bytes_until_end(uint64_t address) const {
  const bool in_accumulator = address >= isa::kAccumulatorBase;
  const uint64_t offset = in_accumulator ? address - isa::kAccumulatorBase : address;
  const uint64_t size = in_accumulator ? accumulator_.bytes.size() : scratchpad_.bytes.size();
  return offset < size ? size - offset : 0;
}

LocalMemory::BankSpan LocalMemory::bank_span(const Memory& memory, uint64_t offset, uint64_t bytes) const {
  const SramConfig& config = *memory.config;
  // An access of B bytes streams through the banks it touches at one bank
  // width per bank per cycle; a transfer of a full bank row or more uses all banks.
  const uint64_t first = memory.bank_count.remainder(memory.bank_width.quotient(offset));
  const uint64_t span = std::min<uint64_t>(config.banks, memory.bank_width.ceil_quotient(memory.bank_width.remainder(offset) + bytes));
  const uint64_t to_end = std::min<uint64_t>(span, config.banks - first);
  return {first, to_end, span - to_end};
}

LocalMemory::BankSpan LocalMemory::begin(uint64_t address, uint64_t bytes, bool is_write, uint64_t ready, uint64_t cycles,
                                         Memory** memory_out) {
  Memory& memory = memory_of(address);
  const bool accumulator = &memory == &accumulator_;
  (accumulator ? (is_write ? stats_.accumulator_write_bytes : stats_.accumulator_read_bytes)
               : (is_write ? stats_.scratchpad_write_bytes : stats_.scratchpad_read_bytes)) += bytes;
  if (context_.trace) {
    const Action action = accumulator ? (is_write ? Action::AccumulatorWriteByte : Action::AccumulatorReadByte)
                                      : (is_write ? Action::ScratchpadWriteByte : Action::ScratchpadReadByte);
    context_.trace->actions(action, ready, ready + std::max<uint64_t>(cycles, 1), bytes);
  }
  *memory_out = &memory;
  return bank_span(memory, accumulator ? address - isa::kAccumulatorBase : address, bytes);
}

uint64_t LocalMemory::access(uint64_t address, uint64_t bytes, bool is_write, uint64_t ready, uint64_t* wait_cycles) {
  if (wait_cycles) *wait_cycles = 0;
  if (bytes == 0) return ready;
  Memory* touched;
  const BankSpan span = begin(address, bytes, is_write, ready, 1, &touched);
  Memory& memory = *touched;
  BankTimeline* const banks = memory.banks.data();
  // What streams leave of the banks' bandwidth: the access is slower by their
  // largest share. And whether the banks are all free from `ready` on, as
  // they usually are: then the access starts at once.
  const uint64_t share = largest_share(memory, span, ready);
  bool all_free = true;
  span.each([&](uint64_t bank) { all_free = all_free && banks[bank].free_from(ready); });
  const uint64_t full_width_cycles = access_cycles(address, bytes);
  const uint64_t cycles = share == 0 ? full_width_cycles : ceil_div(full_width_cycles * kShareUnit, kShareUnit - share);
  // Otherwise the first cycle from which every bank it touches is free (other DMA requests hold them).
  uint64_t start = ready;
  for (bool moved = !all_free; moved;) {
    moved = false;
    const auto fit = [&](uint64_t bank) {
      const uint64_t free = banks[bank].first_free(start, cycles);
      if (free != start) start = free, moved = true;
    };
    span.each(fit);
  }
  const auto take = [&](uint64_t bank) {
    banks[bank].reserve(start, cycles);
    if (banks[bank].crowded()) banks[bank].prune(context_.now_cycle());
  };
  span.each(take);
  if (wait_cycles) *wait_cycles = start - ready + (cycles - full_width_cycles);
  return start + cycles;
}

uint64_t LocalMemory::burst(uint64_t address, uint64_t bytes, uint64_t full_width_cycles, bool is_write, uint64_t ready, uint64_t duration,
                            uint64_t* wait_cycles) {
  if (wait_cycles) *wait_cycles = 0;
  if (bytes == 0) return ready;
  Memory* touched;
  const BankSpan span = begin(address, bytes, is_write, ready, duration, &touched);
  const uint64_t share = largest_share(*touched, span, ready);
  const uint64_t cycles = share == 0 ? full_width_cycles : ceil_div(full_width_cycles * kShareUnit, kShareUnit - share);
  if (wait_cycles) *wait_cycles = cycles > duration ? cycles - std::max(duration, full_width_cycles) : 0;
  return ready + std::max(cycles, duration);
}

uint64_t LocalMemory::stream(uint64_t address, uint64_t bytes, bool is_write, uint64_t ready, uint64_t duration) {
  if (bytes == 0) return ready;
  Memory* touched;
  const BankSpan span = begin(address, bytes, is_write, ready, duration, &touched);
  Memory& memory = *touched;
  // The stream's bytes spread over its banks and its duration (at least the cycles they take at full width).
  const uint64_t span_bytes_per_cycle = span.size() * memory.config->bank_width_bytes;
  duration = std::max(duration, ceil_div(bytes, span_bytes_per_cycle));
  // Streams sharing a bank add up, to at most 7/8 of it, so that DMA requests still get through.
  const uint64_t share = std::min<uint64_t>(kShareUnit, ceil_div(bytes * kShareUnit, span_bytes_per_cycle * duration));
  const uint64_t until = ready + duration;
  const auto take = [&](BankShare& s) {
    s.share = std::min<uint64_t>(kShareUnit * 7 / 8, (s.until > ready ? s.share : 0) + share);
    s.until = std::max(s.until, until);
  };
  if (span.size() == memory.config->banks && (memory.shares_uniform || memory.shares_until <= ready)) {
    // Every bank's share was the same (or every one had run out, as if none): so it is after.
    if (!memory.shares_uniform) memory.uniform_share = BankShare{};
    take(memory.uniform_share);
    memory.shares_uniform = true;
  } else {
    if (memory.shares_uniform) std::fill(memory.shares.begin(), memory.shares.end(), memory.uniform_share);
    memory.shares_uniform = false;
    BankShare* const shares = memory.shares.data();
    span.each([&](uint64_t bank) { take(shares[bank]); });
  }
  memory.shares_until = std::max(memory.shares_until, until);
  return until;
}

uint64_t LocalMemory::largest_share(const Memory& memory, const BankSpan& span, uint64_t ready) {
  if (memory.shares_until <= ready) return 0;
  if (memory.shares_uniform) return memory.uniform_share.until > ready ? memory.uniform_share.share : 0;
  const BankShare* const shares = memory.shares.data();
  uint64_t share = 0;
  // (A select, not a branch: which banks' shares have run out is unpredictable.)
  span.each([&](uint64_t bank) { share = std::max(share, shares[bank].until > ready ? shares[bank].share : 0); });
  return share;
}

void LocalMemory::b_transport(int, tlm::tlm_generic_payload& payload, sc_core::sc_time& delay) {
  const uint64_t address = payload.get_address();
  const uint64_t bytes = payload.get_data_length();
  if (check(address, bytes, 1)) {
    payload.set_response_status(tlm::TLM_ADDRESS_ERROR_RESPONSE);
    return;
  }
  uint64_t wait = 0;
  auto* timing = payload.get_extension<TimingExtension>();
  const uint64_t done = access(address, bytes, payload.is_write(), transport_cycle(context_, timing, delay), &wait);
  if (!timing || timing->move_data) {
    if (payload.is_write()) {
      std::memcpy(data(address, bytes), payload.get_data_ptr(), bytes);
    } else {
      std::memcpy(payload.get_data_ptr(), data(address, bytes), bytes);
    }
  }
  if (timing) timing->sram_wait_cycles += wait;
  set_transport_cycle(context_, timing, delay, done);
  payload.set_response_status(tlm::TLM_OK_RESPONSE);
}

}  // namespace npu::sim
