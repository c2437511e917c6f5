// The in-process device link: a simulated chip (npu::sim::Simulator, with
// the command processor's firmware installed) owned by a thread of its own.
// SystemC is not thread-safe, so every call from any driver thread is handed
// to that thread: reads and waits are answered there, writes are posted
// (queued, and the caller goes on), the way a real device answers a driver.
// Simulated time advances only while the link works on a call, so a run is
// deterministic whatever the host threads do. The public interface names no
// SystemC type. fork() does not copy that thread: in a forked child every
// call throws npu::Error saying so (it would otherwise wait forever).
#pragma once

#include <atomic>
#include <condition_variable>
#include <deque>
#include <exception>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "npusim/driver/device_link.h"

namespace npu::sim {
class Simulator;
struct ChipConfig;
struct HostTransfer;
}
namespace npu::trace {
class Trace;
}

namespace npu {

struct SimulatorLinkOptions {
  std::string config = "base";  // preset (tiny, base, large, tpu_v4, tpu_v5e, tpu_v6e) or .pbtxt file
  std::string config_text;      // when set: the config itself (protobuf text format), and `config` only names it in messages
  bool functional = true;       // false: timing only (results are not computed)
  // Record the chip and the driver's host activity, and write the trace here
  // (.pftrace: Perfetto protobuf, .json: Chrome JSON) when the link closes
  // and on write_trace(). Empty: no trace.
  std::string trace_path;
};

class SimulatorLink : public DeviceLink {
 public:
  // Builds the chip; npu::Error with the config's own message if it is not
  // valid. One per process (SystemC elaborates once).
  explicit SimulatorLink(const SimulatorLinkOptions& options);
  explicit SimulatorLink(const std::string& config) : SimulatorLink(SimulatorLinkOptions{config, "", true, ""}) {}
  ~SimulatorLink() override;

  uint32_t read_register(uint32_t offset) override;
  void write_register(uint32_t offset, uint32_t value) override;
  void write_memory(uint64_t address, const void* data, uint64_t bytes) override;
  void read_memory(uint64_t address, void* data, uint64_t bytes) override;
  using DeviceLink::wait_for_interrupt;
  bool wait_for_interrupt(uint64_t max_cycles, const std::function<bool()>& cancelled) override;
  uint64_t register_host_memory(void* data, uint64_t bytes) override;
  void unregister_host_memory(uint64_t bus_address) override;
  void trace_begin(const std::string& track, const std::string& name, const std::vector<uint64_t>& flow_ids, const TraceArgs& args) override;
  void trace_end(const std::string& track) override;

  // Writes the trace recorded so far (npu::Error if it cannot); a no-op without one.
  // To `path` instead of the trace file chosen at construction, when given; only what
  // began at or after `since_ps` of device time, when given.
  void write_trace(const std::string& path = "", uint64_t since_ps = 0);
  bool tracing() const;  // whether a trace is being recorded
  // Starts recording a trace in memory, for write_trace(path) to write (a link opened without
  // a trace path); false, and nothing changes, when one is being recorded already. Call with no
  // work in flight (after a drain): the chip only records what starts after this.
  bool start_trace();
  // Stops recording and drops what start_trace() recorded.
  void stop_trace();
  uint64_t now_ps();  // the device's time, once every earlier call has reached it
  // Records the host link's memory transfers from now on (after every earlier call), or stops;
  // take_host_transfers() returns those recorded (after every earlier call) and forgets them.
  void record_host_transfers(bool on);
  std::vector<sim::HostTransfer> take_host_transfers();

  // Runs `task` on the simulation thread after every earlier call and returns
  // when it has run; exceptions thrown by it (or by an earlier posted write)
  // are rethrown here.
  void call(const std::function<void(sim::Simulator&)>& task);
  // The same, calling `poll` on this thread every `interval` of host time until `task` has run.
  void call(const std::function<void(sim::Simulator&)>& task, const std::function<void()>& poll, std::chrono::milliseconds interval);
  // Whether this process is a fork() of the one that opened the link (which
  // then cannot be used here).
  bool in_forked_child() const;

 private:
  struct HostSpan {
    uint64_t begin_ps;
    std::string name;
    std::vector<uint64_t> flow_ids;
    TraceArgs args;
  };
  void run(const sim::ChipConfig& config, bool functional);
  void post(std::function<void(sim::Simulator&)> task);
  [[noreturn]] static void throw_forked();
  uint64_t host_track(const std::string& name);  // on the simulation thread
  void write_trace_now(const std::string& path, uint64_t since_ps);  // on the simulation thread

  std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<std::function<void()>> tasks_;
  bool stopping_ = false;
  std::exception_ptr posted_error_;              // the first failure of a posted write, for the next call
  std::unique_ptr<sim::Simulator> simulator_;    // created, used and destroyed on thread_
  std::exception_ptr startup_error_;             // why simulator_ could not be built
  std::string trace_path_;
  std::unique_ptr<trace::Trace> trace_;          // used on thread_ only
  std::atomic<bool> tracing_{false};             // whether trace_ is set, for the host side's calls
  uint64_t host_process_track_ = 0;
  std::map<std::string, uint64_t> host_tracks_;
  std::map<std::string, std::deque<HostSpan>> open_spans_;
  std::unique_ptr<std::thread> thread_;
  unsigned forks_at_open_ = 0;  // fork_count() when opened
};

}  // namespace npu
