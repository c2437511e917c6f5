// The in-process device link: a simulated chip (npu::sim::Simulator) owned by
// a thread of its own. SystemC is not thread-safe, so every call from any
// driver thread is handed to that thread and answered there, the way a real
// device answers a driver asynchronously. The public interface names no
// SystemC type.
#pragma once

#include <condition_variable>
#include <deque>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "npusim/driver/device_link.h"

namespace npu::sim {
class Simulator;
struct ChipConfig;
}

namespace npu {

class SimulatorLink : public DeviceLink {
 public:
  // Builds the chip from a config preset (tiny, base, large) or .pbtxt file;
  // npu::Error with the config's own message if it is not valid. One per
  // process (SystemC elaborates once).
  explicit SimulatorLink(const std::string& config);
  ~SimulatorLink() override;

  uint32_t read_register(uint32_t offset) override;
  void write_register(uint32_t offset, uint32_t value) override;
  void write_memory(uint64_t address, const void* data, uint64_t bytes) override;
  void read_memory(uint64_t address, void* data, uint64_t bytes) override;
  bool wait_for_interrupt(uint64_t max_cycles) override;

  // Runs `task` on the simulation thread and returns when it has run;
  // exceptions thrown by it are rethrown here.
  void call(const std::function<void(sim::Simulator&)>& task);

 private:
  void run(const sim::ChipConfig& config);

  std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<std::function<void()>> tasks_;
  bool stopping_ = false;
  std::unique_ptr<sim::Simulator> simulator_;  // created, used and destroyed on thread_
  std::exception_ptr startup_error_;           // why simulator_ could not be built
  std::thread thread_;
};

}  // namespace npu
