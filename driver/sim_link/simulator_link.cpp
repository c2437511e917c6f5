#include "simulator_link.h"

#include <pthread.h>

#include <atomic>
#include <cstring>
#include <future>
#include <new>
#include <stdexcept>
#include <utility>
#include <vector>

#include "npusim/driver/errors.h"
#include "npusim/firmware/command_processor_firmware.h"
#include "npusim/sim/config_loader.h"
#include "npusim/sim/simulator.h"
#include "npusim/traces/trace.h"
#include "npusim/traces/writers.h"

namespace npu {

namespace {

// How many times this process's line of ancestors forked since it started:
// a fork() child handler counts them (registered once, at the first link).
std::atomic<unsigned> g_forks{0};
unsigned fork_count() {
  static const bool registered = pthread_atfork(nullptr, nullptr, [] { g_forks.fetch_add(1); }) == 0;
  (void)registered;
  return g_forks.load();
}

// What a forked child cannot free: the thread (and the simulator it built), which only its parent has.
void keep_forever(std::unique_ptr<std::thread> thread, std::unique_ptr<sim::Simulator> simulator) {
  static auto* kept = new std::vector<std::pair<std::thread*, sim::Simulator*>>;  // (reachable: not a leak)
  kept->emplace_back(thread.release(), simulator.release());
}

}  // namespace

SimulatorLink::SimulatorLink(const SimulatorLinkOptions& options) : trace_path_(options.trace_path) {
  sim::ChipConfig chip;
  try {
    chip = options.config_text.empty() ? sim::load_chip_config(options.config) : sim::parse_chip_config(options.config_text, options.config);
  } catch (const sim::ConfigError& e) {
    throw Error(e.what());
  }
  if (!trace_path_.empty()) trace_ = std::make_unique<trace::Trace>(), tracing_ = true;
  forks_at_open_ = fork_count();
  thread_ = std::make_unique<std::thread>(&SimulatorLink::run, this, chip, options.functional);
  try {
    call([](sim::Simulator&) {});  // returns once the chip is built, or throws why it could not be
  } catch (...) {
    {
      const std::lock_guard<std::mutex> lock(mutex_);
      stopping_ = true;
    }
    wake_.notify_all();
    thread_->join();
    throw;
  }
}

bool SimulatorLink::in_forked_child() const { return fork_count() != forks_at_open_; }

void SimulatorLink::throw_forked() {
  throw Error("the simulated device belongs to the process that opened it: its simulation thread does not survive fork(); "
              "do device work in the process that opened it (or start worker processes with the 'spawn' method)");
}

SimulatorLink::~SimulatorLink() {
  if (in_forked_child()) {
    // The parent's thread may have held the lock or waited on wake_ when it forked: fresh ones, and
    // nothing of the chip is touched (its SystemC objects belong to a thread this process has not got).
    new (&mutex_) std::mutex;
    new (&wake_) std::condition_variable;
    keep_forever(std::move(thread_), std::move(simulator_));
    return;
  }
  if (tracing_ && !trace_path_.empty()) {  // (a trace of start_trace() has no file of its own)
    try {
      call([this](sim::Simulator&) { write_trace_now("", 0); });
    } catch (...) {
      // A destructor cannot report it; write_trace() can, for callers who care.
    }
  }
  {
    const std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  if (thread_ && thread_->joinable()) thread_->join();
}

void SimulatorLink::run(const sim::ChipConfig& config, bool functional) {
  try {
    sim::SimulatorOptions options;
    options.functional = functional;
    options.trace = trace_.get();
    options.firmware = firmware::make_command_processor_firmware();
    simulator_ = std::make_unique<sim::Simulator>(config, options);
  } catch (...) {
    startup_error_ = std::current_exception();
  }
  for (;;) {
    std::function<void()> task;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      wake_.wait(lock, [&] { return stopping_ || !tasks_.empty(); });
      if (tasks_.empty()) break;  // stopping, nothing left to answer
      task = std::move(tasks_.front());
      tasks_.pop_front();
    }
    task();
  }
  simulator_.reset();  // SystemC objects die on the thread that made them
}

void SimulatorLink::post(std::function<void(sim::Simulator&)> task) {
  if (in_forked_child()) throw_forked();
  {
    const std::lock_guard<std::mutex> lock(mutex_);
    if (stopping_) throw Error("the simulated device is shut down");
    tasks_.push_back([this, task = std::move(task)] {
      try {
        if (!simulator_) std::rethrow_exception(startup_error_);
        task(*simulator_);
      } catch (...) {
        const std::lock_guard<std::mutex> error_lock(mutex_);
        if (!posted_error_) posted_error_ = std::current_exception();
      }
    });
  }
  wake_.notify_all();
}

void SimulatorLink::call(const std::function<void(sim::Simulator&)>& task) { call(task, {}, {}); }

void SimulatorLink::call(const std::function<void(sim::Simulator&)>& task, const std::function<void()>& poll,
                         std::chrono::milliseconds interval) {
  if (in_forked_child()) throw_forked();
  std::promise<void> done;
  std::future<void> result = done.get_future();
  {
    const std::lock_guard<std::mutex> lock(mutex_);
    if (stopping_) throw Error("the simulated device is shut down");
    tasks_.push_back([&] {
      try {
        if (!simulator_) std::rethrow_exception(startup_error_);
        {
          std::exception_ptr earlier;
          {
            const std::lock_guard<std::mutex> error_lock(mutex_);
            std::swap(earlier, posted_error_);
          }
          if (earlier) std::rethrow_exception(earlier);
        }
        task(*simulator_);
        done.set_value();
      } catch (...) {
        done.set_exception(std::current_exception());
      }
    });
  }
  wake_.notify_all();
  if (poll)
    while (result.wait_for(interval) != std::future_status::ready) poll();
  result.get();
}

uint32_t SimulatorLink::read_register(uint32_t offset) {
  uint32_t value = 0;
  call([&](sim::Simulator& simulator) { value = simulator.read_register(offset); });
  return value;
}

void SimulatorLink::write_register(uint32_t offset, uint32_t value) {
  post([offset, value](sim::Simulator& simulator) { simulator.post_register_write(offset, value); });
}

void SimulatorLink::write_memory(uint64_t address, const void* data, uint64_t bytes) {
  // Posted: the data travels with the request. Large writes are not worth
  // the copy; they go synchronously (the caller waits as for a read).
  constexpr uint64_t kPostedLimitBytes = 64 << 10;
  if (bytes > kPostedLimitBytes) {
    call([&](sim::Simulator& simulator) { simulator.post_copy_to_device(address, data, bytes); });
    return;
  }
  std::vector<uint8_t> copy(static_cast<const uint8_t*>(data), static_cast<const uint8_t*>(data) + bytes);
  post([address, copy = std::move(copy)](sim::Simulator& simulator) { simulator.post_copy_to_device(address, copy.data(), copy.size()); });
}

void SimulatorLink::read_memory(uint64_t address, void* data, uint64_t bytes) {
  call([&](sim::Simulator& simulator) { simulator.copy_from_device(address, data, bytes); });
}

bool SimulatorLink::wait_for_interrupt(uint64_t max_cycles, const std::function<bool()>& cancelled) {
  bool pending = false;
  if (!cancelled) {
    call([&](sim::Simulator& simulator) { pending = simulator.wait_for_interrupt(max_cycles); });
    return pending;
  }
  if (cancelled()) return false;
  std::atomic<bool> stop{false};
  call([&](sim::Simulator& simulator) { pending = simulator.wait_for_interrupt(max_cycles, &stop); },
       [&] {
         if (!stop.load() && cancelled()) {
           stop.store(true);
           simulator_->request_stop();  // (thread-safe, unlike the rest of the simulator)
         }
       },
       kCancelCheckInterval);
  return pending;
}

uint64_t SimulatorLink::register_host_memory(void* data, uint64_t bytes) {
  uint64_t bus_address = 0;
  call([&](sim::Simulator& simulator) { bus_address = simulator.register_host_memory(data, bytes); });
  return bus_address;
}

void SimulatorLink::unregister_host_memory(uint64_t bus_address) {
  post([bus_address](sim::Simulator& simulator) { simulator.unregister_host_memory(bus_address); });
}

uint64_t SimulatorLink::host_track(const std::string& name) {
  if (host_process_track_ == 0) {
    host_process_track_ = trace_->next_free_id();
    trace_->add_track({host_process_track_, 0, trace::TrackKind::Process, "host (driver)", trace::CounterUnit::Count, -1});
  }
  const auto it = host_tracks_.find(name);
  if (it != host_tracks_.end()) return it->second;
  const trace::TrackId id = trace_->next_free_id();
  trace_->add_track({id, host_process_track_, trace::TrackKind::Thread, name, trace::CounterUnit::Count,
                     static_cast<int32_t>(host_tracks_.size())});
  host_tracks_[name] = id;
  return id;
}

void SimulatorLink::trace_begin(const std::string& track, const std::string& name, const std::vector<uint64_t>& flow_ids,
                                const TraceArgs& args) {
  if (!tracing_) return;
  post([this, track, name, flow_ids, args](sim::Simulator& simulator) {
    if (!trace_) return;
    const uint64_t ps = simulator.now_cycle() * simulator.config().cycle_ps();
    open_spans_[track].push_back({ps, name, flow_ids, args});
  });
}

void SimulatorLink::trace_end(const std::string& track) {
  if (!tracing_) return;
  post([this, track](sim::Simulator& simulator) {
    if (!trace_) return;
    auto& open = open_spans_[track];
    if (open.empty()) return;
    const HostSpan span = open.back();
    open.pop_back();
    trace::Slice slice;
    slice.track = host_track(track);
    slice.begin_ps = span.begin_ps;
    slice.end_ps = std::max(span.begin_ps, simulator.now_cycle() * simulator.config().cycle_ps());
    slice.name = span.name;
    slice.category = "host";
    slice.flows_out = span.flow_ids;
    for (const auto& [name, value] : span.args) slice.args.push_back({name, value});
    trace_->add_slice(std::move(slice));
  });
}

void SimulatorLink::write_trace_now(const std::string& path, uint64_t since_ps) {
  if (!trace_) return;
  simulator_->flush_trace_counters();
  const std::string& file = path.empty() ? trace_path_ : path;
  if (since_ps == 0) {
    trace::write_trace(*trace_, file);
  } else {
    trace::write_trace(trace::since(*trace_, since_ps), file);
  }
}

bool SimulatorLink::tracing() const { return tracing_; }

bool SimulatorLink::start_trace() {
  if (tracing_) return false;
  call([this](sim::Simulator& simulator) {
    auto trace = std::make_unique<trace::Trace>();
    simulator.start_trace(*trace);
    trace_ = std::move(trace);
  });
  tracing_ = true;
  return true;
}

void SimulatorLink::stop_trace() {
  if (!tracing_) return;
  tracing_ = false;
  call([this](sim::Simulator& simulator) {
    if (!trace_) return;
    simulator.stop_trace();
    trace_.reset();
    host_process_track_ = 0;
    host_tracks_.clear();
    open_spans_.clear();
    trace_path_.clear();  // (nothing to write when the link closes)
  });
}

uint64_t SimulatorLink::now_ps() {
  uint64_t ps = 0;
  call([&ps](sim::Simulator& simulator) { ps = simulator.now_cycle() * simulator.config().cycle_ps(); });
  return ps;
}

void SimulatorLink::record_host_transfers(bool on) {
  call([on](sim::Simulator& simulator) { simulator.record_host_transfers(on); });
}

std::vector<sim::HostTransfer> SimulatorLink::take_host_transfers() {
  std::vector<sim::HostTransfer> transfers;
  call([&transfers](sim::Simulator& simulator) { transfers = simulator.take_host_transfers(); });
  return transfers;
}

void SimulatorLink::write_trace(const std::string& path, uint64_t since_ps) {
  try {
    call([this, path, since_ps](sim::Simulator&) { write_trace_now(path, since_ps); });
  } catch (const Error&) {
    throw;
  } catch (const std::exception& e) {
    throw Error(std::string("cannot write the trace: ") + e.what());
  }
}

}  // namespace npu
