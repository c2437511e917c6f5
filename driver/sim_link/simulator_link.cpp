#include "simulator_link.h"

#include <future>
#include <stdexcept>

#include "npusim/driver/errors.h"
#include "npusim/sim/config_loader.h"
#include "npusim/sim/simulator.h"

namespace npu {

SimulatorLink::SimulatorLink(const std::string& config) {
  sim::ChipConfig chip;
  try {
    chip = sim::load_chip_config(config);
  } catch (const sim::ConfigError& e) {
    throw Error(e.what());
  }
  thread_ = std::thread(&SimulatorLink::run, this, chip);
  try {
    call([](sim::Simulator&) {});  // returns once the chip is built, or throws why it could not be
  } catch (...) {
    {
      const std::lock_guard<std::mutex> lock(mutex_);
      stopping_ = true;
    }
    wake_.notify_all();
    thread_.join();
    throw;
  }
}

SimulatorLink::~SimulatorLink() {
  {
    const std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void SimulatorLink::run(const sim::ChipConfig& config) {
  try {
    simulator_ = std::make_unique<sim::Simulator>(config);
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

void SimulatorLink::call(const std::function<void(sim::Simulator&)>& task) {
  std::promise<void> done;
  std::future<void> result = done.get_future();
  {
    const std::lock_guard<std::mutex> lock(mutex_);
    if (stopping_) throw Error("the simulated device is shut down");
    tasks_.push_back([&] {
      try {
        if (!simulator_) std::rethrow_exception(startup_error_);
        task(*simulator_);
        done.set_value();
      } catch (...) {
        done.set_exception(std::current_exception());
      }
    });
  }
  wake_.notify_all();
  result.get();
}

uint32_t SimulatorLink::read_register(uint32_t offset) {
  uint32_t value = 0;
  call([&](sim::Simulator& simulator) { value = simulator.read_register(offset); });
  return value;
}

void SimulatorLink::write_register(uint32_t offset, uint32_t value) {
  call([&](sim::Simulator& simulator) { simulator.write_register(offset, value); });
}

void SimulatorLink::write_memory(uint64_t address, const void* data, uint64_t bytes) {
  call([&](sim::Simulator& simulator) { simulator.copy_to_device(address, data, bytes); });
}

void SimulatorLink::read_memory(uint64_t address, void* data, uint64_t bytes) {
  call([&](sim::Simulator& simulator) { simulator.copy_from_device(address, data, bytes); });
}

bool SimulatorLink::wait_for_interrupt(uint64_t max_cycles) {
  bool pending = false;
  call([&](sim::Simulator& simulator) { pending = simulator.wait_for_interrupt(max_cycles); });
  return pending;
}

}  // namespace npu
