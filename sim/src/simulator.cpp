#include "npusim/sim/simulator.h"

#include <systemc>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <stdexcept>

#include "chip.h"
#include "chip_trace.h"
#include "kernel_start.h"
#include "npusim/traces/trace.h"

namespace npu::sim {

namespace {

// Pauses the kernel at its next update phase when another thread asks (request_stop): SystemC's one entry
// that is safe from another thread is async_request_update. Nothing else about the run changes: a run that
// is not stopped meets the same events, and adds no pause points (as stopping every so many cycles to look
// at a flag would).
class StopRequest : public sc_core::sc_prim_channel {
 public:
  StopRequest() : sc_core::sc_prim_channel("stop_request") {}
  void request() {
    requested_ = true;
    async_request_update();
  }
  void forget() { requested_ = false; }

 private:
  void update() override {
    if (requested_.exchange(false)) sc_core::sc_pause();
  }
  std::atomic<bool> requested_{false};
};

}  // namespace

struct Simulator::Impl {
  ChipConfig config;
  std::unique_ptr<StopRequest> stop_request;
  std::unique_ptr<ChipTrace> chip_trace;
  std::unique_ptr<ChipContext> context;
  std::unique_ptr<Chip> chip;
  // Copies of what a launch refers to, alive for the run.
  std::vector<std::vector<uint64_t>> code;
  std::vector<uint64_t> symbol_addresses;
  std::vector<unsigned> launched_cores;
  std::unique_ptr<BarrierGroup> barrier;
  uint64_t launch_cycle = 0;
  bool pending = false;
  std::function<void(uint64_t)> progress;
  uint64_t progress_every = 0;

  void reset();
  void host_request(HostLink::Request& request);
  void run_for(uint64_t cycles);
  // `cycles` after cycle `from`, or the last cycle the kernel's time reaches
  // (ChipContext::cycle_limit: 2^64 fs, 18 million cycles per MHz of clock).
  uint64_t deadline(uint64_t from, uint64_t cycles) const {
    const uint64_t last = context->cycle_limit() - 1;
    return from + std::min(cycles, last - std::min(from, last));
  }
};

// Runs the kernel for `cycles`, returning early when it is paused (an
// interrupt, a fault) or runs out of events. SC_EXIT_ON_STARVATION alone also
// returns early, without moving time, when the next event lies beyond the
// end: then time is moved to the end, so that a caller's deadline is reached.
void Simulator::Impl::run_for(uint64_t cycles) {
  // To the end of the cycle `cycles` from now: its every wake slot (ChipContext::new_slot) runs.
  const uint64_t now = context->now_cycle();
  const sc_core::sc_time end = cycles < context->cycle_limit() - now ? context->cycles(now + cycles + 1) - sc_core::sc_time::from_value(1)
                                                                     : sc_core::sc_max_time();
  start_kernel(end - sc_core::sc_time_stamp(), sc_core::SC_EXIT_ON_STARVATION);
  if (sc_core::sc_time_stamp() < end && sc_core::sc_pending_activity() &&
      sc_core::sc_time_stamp() + sc_core::sc_time_to_pending_activity() > end)
    start_kernel(end - sc_core::sc_time_stamp(), sc_core::SC_RUN_TO_TIME);
}

namespace {
bool g_elaborated = false;
}  // namespace

Simulator::Simulator(const ChipConfig& config, SimulatorOptions options) : impl_(std::make_unique<Impl>()) {
  if (g_elaborated) throw std::logic_error("SystemC allows one Simulator per process");
  g_elaborated = true;
  // Room in every cycle for the wake slots (ChipContext::new_slot): a cycle of the fastest clock allowed,
  // 10 GHz, is 100 ps, 100000 fs. (The kernel's time then reaches 2^64 fs, five hours.)
  sc_core::sc_set_time_resolution(1, sc_core::SC_FS);
  impl_->config = config;
  if (options.trace) impl_->chip_trace = std::make_unique<ChipTrace>(impl_->config, *options.trace);
  impl_->context = std::make_unique<ChipContext>(impl_->config, options.functional, options.timing_only_moves_data, impl_->chip_trace.get());
  impl_->chip = std::make_unique<Chip>("chip", *impl_->context);
  impl_->stop_request = std::make_unique<StopRequest>();
  if (options.firmware) impl_->chip->command_processor.install(options.firmware);
  // A zero-length run that finds nothing to do is normal here (a host request
  // or a reset with the chip idle), not worth SystemC's warning on stderr.
  sc_core::sc_report_handler::set_actions(sc_core::SC_ID_NO_SC_START_ACTIVITY_, sc_core::SC_DO_NOTHING);
  // End elaboration and let every thread reach its first wait, so that the
  // first launch's start notifications find them waiting.
  start_kernel(sc_core::SC_ZERO_TIME);
}

Simulator::~Simulator() = default;

const ChipConfig& Simulator::config() const { return impl_->config; }

void Simulator::write_dram(uint64_t address, const void* data, uint64_t bytes) {
  Dram& dram = impl_->chip->dram;
  if (!dram.in_range(address, bytes)) throw std::out_of_range("DRAM write outside device memory");
  std::memcpy(dram.data(address, bytes), data, bytes);
}

uint8_t* Simulator::dram_bytes(uint64_t address, uint64_t bytes) {
  Dram& dram = impl_->chip->dram;
  if (!dram.in_range(address, bytes)) throw std::out_of_range("DRAM access outside device memory");
  return dram.data(address, bytes);
}

void Simulator::read_dram(uint64_t address, void* data, uint64_t bytes) const {
  Dram& dram = impl_->chip->dram;
  if (!dram.in_range(address, bytes)) throw std::out_of_range("DRAM read outside device memory");
  std::memcpy(data, dram.data(address, bytes), bytes);
}

void Simulator::launch(const isa::Program& program, uint64_t core_mask, const std::vector<uint64_t>& symbol_addresses,
                       const std::array<uint64_t, 8>& args) {
  Impl& impl = *impl_;
  if (impl.pending) throw std::logic_error("launch while a previous launch has not been run");
  const unsigned cores = impl.config.num_cores;
  if (core_mask == 0) throw std::invalid_argument("launch on an empty core mask");
  if (cores < 64 && (core_mask >> cores) != 0)
    throw std::invalid_argument("core mask names cores the chip does not have (it has " + std::to_string(cores) + ")");
  if (symbol_addresses.size() != program.symbols.size())
    throw std::invalid_argument("symbol_addresses has " + std::to_string(symbol_addresses.size()) + " entries; the program has " +
                                std::to_string(program.symbols.size()) + " symbols");
  // The program's core ids 0..n-1 are the mask's cores in ascending order.
  impl.code.assign(cores, {});
  impl.launched_cores.clear();
  for (unsigned c = 0; c < cores; ++c) {
    if (!(core_mask & (uint64_t{1} << c))) continue;
    const auto rank = static_cast<unsigned>(impl.launched_cores.size());
    const isa::CodeSection* section = program.code_for_core(rank);
    if (section == nullptr) throw std::invalid_argument("core id " + std::to_string(rank) + " (core " + std::to_string(c) + ") has no code in this program");
    impl.code[c] = section->words;
    impl.launched_cores.push_back(c);
  }
  impl.symbol_addresses = symbol_addresses;
  std::string name = "program";
  for (const auto& [key, value] : program.metadata)
    if (key == "source") name = value;
  impl.barrier = std::make_unique<BarrierGroup>(static_cast<unsigned>(impl.launched_cores.size()));
  impl.launch_cycle = now_cycle();
  for (unsigned rank = 0; rank < impl.launched_cores.size(); ++rank) {
    const unsigned c = impl.launched_cores[rank];
    Launch launch;
    launch.code = &impl.code[c];
    launch.symbol_addresses = &impl.symbol_addresses;
    launch.args = args;
    launch.cores = &impl.launched_cores;
    launch.rank = rank;
    launch.barrier = impl.barrier.get();
    launch.name = name;
    impl.chip->cores[c]->control.start(launch);
  }
  impl.pending = true;
}

void Simulator::Impl::reset() {
  chip->reset();
  // Let every thread observe the reset and park or return to idle.
  start_kernel(sc_core::SC_ZERO_TIME);
}

void Simulator::Impl::host_request(HostLink::Request& request) {
  chip->host_link.submit(&request);
  // The link pauses the kernel when the request is done.
  while (!request.done) {
    start_kernel(sc_core::sc_max_time() - sc_core::sc_time_stamp(), sc_core::SC_EXIT_ON_STARVATION);
    if (!request.done && !sc_core::sc_pending_activity()) throw std::logic_error("host link request did not complete");
  }
}

RunResult Simulator::run(uint64_t max_cycles) {
  Impl& impl = *impl_;
  if (!impl.pending) throw std::logic_error("run without a launch");
  impl.pending = false;
  RunResult result;
  result.start_cycle = impl.launch_cycle;
  const uint64_t deadline = impl.deadline(impl.launch_cycle, max_cycles);
  const auto all_finished = [&] {
    for (const unsigned c : impl.launched_cores)
      if (!impl.chip->cores[c]->control.finished()) return false;
    return true;
  };
  // Run in slices: the kernel returns at the deadline, on a fault (sc_pause),
  // or when no event is left (starvation: finished, or deadlocked).
  while (!impl.context->faulted() && !all_finished()) {
    const uint64_t now = now_cycle();
    if (now >= deadline) break;
    const uint64_t slice = impl.progress ? std::min(deadline - now, impl.progress_every) : deadline - now;
    impl.run_for(slice);
    if (impl.progress) impl.progress(now_cycle());
    if (!impl.context->faulted() && !all_finished() && now_cycle() < deadline && !sc_core::sc_pending_activity()) {
      impl.context->raise_fault(impl.chip->stuck_fault(FaultKind::Deadlock, impl.launched_cores));
    }
  }
  if (impl.context->faulted()) {
    result.fault = impl.context->fault();
  } else if (!all_finished()) {
    result.fault = impl.chip->stuck_fault(FaultKind::Watchdog, impl.launched_cores);
  }
  result.end_cycle = now_cycle();
  if (!result.fault) {
    result.end_cycle = impl.launch_cycle;
    for (const unsigned c : impl.launched_cores) result.end_cycle = std::max(result.end_cycle, impl.chip->cores[c]->control.finish_cycle());
  }
  for (const unsigned c : impl.launched_cores) impl.chip->cores[c]->stats.finish_cycle = impl.chip->cores[c]->control.finish_cycle();
  if (impl.chip_trace) impl.chip_trace->flush_counters();
  if (result.fault) impl.reset();
  return result;
}

uint32_t Simulator::read_register(uint32_t offset) {
  HostLink::Request request{HostLink::Request::Kind::ReadRegister, offset};
  impl_->host_request(request);
  if (!request.ok) throw std::out_of_range("register offset " + std::to_string(offset) + " is not mapped");
  return request.value;
}

void Simulator::write_register(uint32_t offset, uint32_t value) {
  HostLink::Request request{HostLink::Request::Kind::WriteRegister, offset, value};
  impl_->host_request(request);
  if (!request.ok) throw std::out_of_range("register offset " + std::to_string(offset) + " is not mapped");
}

void Simulator::post_register_write(uint32_t offset, uint32_t value) {
  // An unmapped offset cannot be reported when the write arrives: check it now.
  if (offset % 4 != 0 || offset >= kQueueRegisterBase + 16 * kQueueRegisterStride)
    throw std::out_of_range("register offset " + std::to_string(offset) + " is not mapped");
  HostLink::Request request{HostLink::Request::Kind::WriteRegister, offset, value};
  request.posted = true;
  impl_->host_request(request);
}

void Simulator::post_copy_to_device(uint64_t address, const void* data, uint64_t bytes) {
  if (!impl_->chip->device_bytes(address, bytes)) throw std::out_of_range("copy to device outside device memory");
  HostLink::Request request{HostLink::Request::Kind::WriteMemory, address, 0, static_cast<uint8_t*>(const_cast<void*>(data)), bytes};
  request.posted = true;
  impl_->host_request(request);
}

void Simulator::copy_to_device(uint64_t address, const void* data, uint64_t bytes) {
  if (!impl_->chip->device_bytes(address, bytes)) throw std::out_of_range("copy to device outside device memory");
  HostLink::Request request{HostLink::Request::Kind::WriteMemory, address, 0, static_cast<uint8_t*>(const_cast<void*>(data)), bytes};
  impl_->host_request(request);
}

void Simulator::copy_from_device(uint64_t address, void* data, uint64_t bytes) {
  if (!impl_->chip->device_bytes(address, bytes)) throw std::out_of_range("copy from device outside device memory");
  HostLink::Request request{HostLink::Request::Kind::ReadMemory, address, 0, static_cast<uint8_t*>(data), bytes};
  impl_->host_request(request);
}

void Simulator::record_host_transfers(bool on) { impl_->chip->host_link.record_transfers(on); }
std::vector<HostTransfer> Simulator::take_host_transfers() { return impl_->chip->host_link.take_transfers(); }

void Simulator::request_stop() { impl_->stop_request->request(); }

bool Simulator::wait_for_interrupt(uint64_t max_cycles, const std::atomic<bool>* stop) {
  Impl& impl = *impl_;
  impl.stop_request->forget();  // (one asked for after an earlier wait ended)
  const uint64_t deadline = impl.deadline(now_cycle(), max_cycles);
  CommandProcessor& command_processor = impl.chip->command_processor;
  while (!impl.chip->registers.interrupt_pending()) {
    const uint64_t now = now_cycle();
    if (now >= deadline) return false;
    if (stop && stop->load()) return false;
    // The register block pauses the kernel when an interrupt becomes pending;
    // the kernel also stops at the next launch watchdog deadline, and where
    // request_stop() pauses it.
    const uint64_t until = std::min(deadline, std::max(now + 1, command_processor.next_watchdog_cycle()));
    impl.run_for(until - now);
    command_processor.check_watchdogs();
    if (impl.chip->registers.interrupt_pending()) break;
    if (!impl.chip->registers.interrupt_pending() && !sc_core::sc_pending_activity()) {
      std::vector<unsigned> running;
      for (unsigned c = 0; c < impl.config.num_cores; ++c)
        if (!impl.chip->cores[c]->control.finished()) running.push_back(c);
      if (running.empty() || impl.context->faulted()) return false;
      impl.context->raise_fault(impl.chip->stuck_fault(FaultKind::Deadlock, running));
    }
  }
  return true;
}

void Simulator::set_progress(std::function<void(uint64_t)> callback, uint64_t every_cycles) {
  impl_->progress = std::move(callback);
  impl_->progress_every = std::max<uint64_t>(every_cycles, 1);
}

void Simulator::flush_trace_counters() {
  if (impl_->chip_trace) impl_->chip_trace->flush_counters();
}

void Simulator::start_trace(trace::Trace& trace) {
  if (impl_->chip_trace) throw std::logic_error("start_trace: the chip is already recording a trace");
  impl_->chip_trace = std::make_unique<ChipTrace>(impl_->config, trace, impl_->context->now_cycle());
  impl_->context->trace = impl_->chip_trace.get();
}

void Simulator::stop_trace() {
  if (!impl_->chip_trace) throw std::logic_error("stop_trace: the chip is not recording a trace");
  impl_->chip_trace->flush_counters();
  impl_->context->trace = nullptr;
  impl_->chip_trace.reset();
}

uint64_t Simulator::now_cycle() const { return impl_->context->now_cycle(); }

ChipStats Simulator::stats() const { return impl_->chip->stats(); }

uint64_t Simulator::register_host_memory(void* data, uint64_t bytes) { return impl_->chip->command_processor.register_host_memory(data, bytes); }

void Simulator::unregister_host_memory(uint64_t bus_address) { impl_->chip->command_processor.unregister_host_memory(bus_address); }

}  // namespace npu::sim
