// torch.profiler's view of the chip, through PyTorch's PrivateUse1 profiler registry (a Kineto child
// profiler, torch/csrc/profiler/standalone/privateuse1_profiler.h). What Kineto and PyTorch need, found
// by trying torch 2.13:
// - the backend renamed ("npu"), or ProfilerActivity.PrivateUse1 is refused;
// - a session only when Kineto asks for CONCURRENT_KERNEL (it asks for PRIVATEUSE1_RUNTIME even for a
//   CPU-only profile);
// - device kernels as CONCURRENT_KERNEL activities whose `linked` is the launching op's activity (the
//   callback processTrace gets): PyTorch then adds their time to the op's device time (key_averages);
// - the host launch as a PRIVATEUSE1_RUNTIME activity, a flow (kLinkAsyncCpuGpu) to the kernel with a
//   per-launch id (flow starts must be unique), and "device", "stream" and "correlation" metadata, which
//   Holistic Trace Analysis needs to see kernels and pair them with their launches;
// - the activities owned by the CpuTraceBuffer getTraceBuffer() hands over (the logger keeps pointers).
// Times are nanoseconds of CLOCK_REALTIME (c10::getTime). The device row shows simulated time: the
// session's start on the host is the device's cycle at that moment, and each kernel starts and lasts
// what the chip simulated (so kernels run ahead of the host ops that launched them: simulating takes
// longer than the chip would).
#include "kineto_profiler.h"

#include <c10/util/ApproximateClock.h>
#include <libkineto.h>
#include <output_base.h>
#include <torch/csrc/profiler/standalone/privateuse1_profiler.h>

#include <atomic>
#include <mutex>
#include <vector>

#include "runtime.h"
#include "simulator_link.h"

namespace npusim::kineto {
namespace {

std::atomic<bool> g_recording{false};
std::mutex g_mutex;
struct Recorded {
  Launch launch;
  uint64_t correlation_id;
  uint64_t launch_id;
};
std::vector<Recorded> g_launches;  // of the running session
uint64_t g_next_launch_id = 1;
thread_local std::vector<uint64_t> t_correlation;       // ATen ops (pushCorrelationId)
thread_local std::vector<uint64_t> t_user_correlation;  // record_function blocks (pushUserCorrelationId)

// Launch ids well apart from PyTorch's op ids, which share the trace's id space.
constexpr uint64_t kLaunchIdBase = uint64_t{1} << 30;

class Session : public libkineto::IActivityProfilerSession {
 public:
  void start() override {
    Runtime& runtime = Runtime::get();
    runtime.synchronize();
    start_ns_ = c10::getTime();
    start_cycle_ = runtime.device_cycle();
    cycle_ns_ = 1e3 / runtime.device_chip().clock_mhz;
    {
      const std::lock_guard<std::mutex> lock(g_mutex);
      g_launches.clear();
    }
    g_recording = true;
    status_ = libkineto::TraceStatus::RECORDING;
  }

  void stop() override {
    g_recording = false;
    status_ = libkineto::TraceStatus::PROCESSING;
  }

  std::vector<std::string> errors() override { return errors_; }

  void processTrace(libkineto::ActivityLogger& logger) override { processTrace(logger, nullptr, 0, 0); }

  void processTrace(libkineto::ActivityLogger& logger, libkineto::getLinkedActivityCallback linked_activity, int64_t start_time,
                    int64_t end_time) override {
    std::vector<Recorded> launches;
    {
      const std::lock_guard<std::mutex> lock(g_mutex);
      launches.swap(g_launches);
    }
    buffer_ = std::make_unique<libkineto::CpuTraceBuffer>();
    buffer_->span = libkineto::TraceSpan(start_time, end_time, "npu");
    const int32_t pid = libkineto::processId();
    for (const Recorded& r : launches) {
      uint64_t begin_cycle = 0, end_cycle = 0;
      try {
        begin_cycle = r.launch.start.cycle(), end_cycle = r.launch.end.cycle();
      } catch (const std::exception& e) {
        errors_.push_back(std::string("npusim: a kernel's device time could not be read: ") + e.what());
        continue;
      }
      const libkineto::ITraceActivity* op =
          linked_activity && r.correlation_id ? linked_activity(static_cast<int32_t>(r.correlation_id)) : nullptr;
      const auto flow_id = static_cast<uint32_t>(r.launch_id);

      buffer_->emplace_activity(buffer_->span, libkineto::ActivityType::PRIVATEUSE1_RUNTIME, std::string("npuLaunchKernel"));
      libkineto::GenericTraceActivity& call = libkineto::CpuTraceBuffer::toRef(buffer_->activities.back());
      call.startTime = r.launch.host_begin_ns;
      call.endTime = std::max(r.launch.host_end_ns, r.launch.host_begin_ns + 1);
      call.id = static_cast<int32_t>(r.launch_id);
      call.device = pid;
      call.resource = libkineto::systemThreadId();
      call.threadId = call.resource;
      call.flow.id = flow_id, call.flow.type = libkineto::kLinkAsyncCpuGpu, call.flow.start = 1;
      call.linked = op;
      call.addMetadata("correlation", r.launch_id);
      logger.handleActivity(call);

      buffer_->emplace_activity(buffer_->span, libkineto::ActivityType::CONCURRENT_KERNEL, r.launch.kernel);
      libkineto::GenericTraceActivity& kernel = libkineto::CpuTraceBuffer::toRef(buffer_->activities.back());
      kernel.startTime = to_ns(begin_cycle);
      kernel.endTime = std::max(to_ns(end_cycle), kernel.startTime + 1);
      kernel.id = static_cast<int32_t>(r.launch_id);
      kernel.device = 0;
      kernel.resource = r.launch.queue;
      kernel.flow.id = flow_id, kernel.flow.type = libkineto::kLinkAsyncCpuGpu, kernel.flow.start = 0;
      kernel.linked = op;
      kernel.addMetadata("device", 0);
      kernel.addMetadata("stream", r.launch.queue);
      kernel.addMetadata("correlation", r.launch_id);
      kernel.addMetadata("cycles", end_cycle - begin_cycle);
      kernel.addMetadataQuoted("op", r.launch.op);
      kernel.addMetadataQuoted("layer", r.launch.layer);
      kernel.addMetadataQuoted("nodes", r.launch.nodes);
      logger.handleActivity(kernel);
      ++buffer_->gpuOpCount;
    }
  }

  std::unique_ptr<libkineto::DeviceInfo> getDeviceInfo() override {
    return std::make_unique<libkineto::DeviceInfo>(libkineto::DeviceInfo{0, 0x7ffff, "NPU 0 (simulated, " + Runtime::get().config_name() + ")", "npu"});
  }

  std::vector<libkineto::ResourceInfo> getResourceInfos() override {
    std::vector<libkineto::ResourceInfo> queues;
    const unsigned count = Runtime::get().device().info().num_queues;
    for (unsigned q = 0; q < count; ++q) queues.push_back({q, q, 0, "queue " + std::to_string(q)});
    return queues;
  }

  std::unique_ptr<libkineto::CpuTraceBuffer> getTraceBuffer() override { return std::move(buffer_); }

  void pushCorrelationId(uint64_t id) override { t_correlation.push_back(id); }
  void popCorrelationId() override {
    if (!t_correlation.empty()) t_correlation.pop_back();
  }
  void pushUserCorrelationId(uint64_t id) override { t_user_correlation.push_back(id); }
  void popUserCorrelationId() override {
    if (!t_user_correlation.empty()) t_user_correlation.pop_back();
  }

 private:
  int64_t to_ns(uint64_t cycle) const {
    return start_ns_ + static_cast<int64_t>((static_cast<double>(cycle) - static_cast<double>(start_cycle_)) * cycle_ns_);
  }

  int64_t start_ns_ = 0;
  uint64_t start_cycle_ = 0;
  double cycle_ns_ = 1;
  std::unique_ptr<libkineto::CpuTraceBuffer> buffer_;
  std::vector<std::string> errors_;
};

class Profiler : public libkineto::IActivityProfiler {
 public:
  const std::string& name() const override { return name_; }
  const std::set<libkineto::ActivityType>& availableActivities() const override { return activities_; }

  std::unique_ptr<libkineto::IActivityProfilerSession> configure(const std::set<libkineto::ActivityType>& activity_types,
                                                                 const libkineto::Config&) override {
    if (!activity_types.count(libkineto::ActivityType::CONCURRENT_KERNEL)) return nullptr;  // a CPU-only profile
    if (!Runtime::started()) return nullptr;  // no device: nothing to record (and nothing opened for it)
    return std::make_unique<Session>();
  }
  std::unique_ptr<libkineto::IActivityProfilerSession> configure(int64_t, int64_t, const std::set<libkineto::ActivityType>& activity_types,
                                                                 const libkineto::Config& config) override {
    return configure(activity_types, config);
  }

 private:
  std::string name_ = "npusim";
  std::set<libkineto::ActivityType> activities_ = {libkineto::ActivityType::PRIVATEUSE1_RUNTIME,
                                                   libkineto::ActivityType::CONCURRENT_KERNEL};
};

REGISTER_PRIVATEUSE1_PROFILER(Profiler);

}  // namespace

bool recording() { return g_recording.load(std::memory_order_relaxed); }

uint64_t current_correlation_id() {
  if (!t_correlation.empty()) return t_correlation.back();
  return t_user_correlation.empty() ? 0 : t_user_correlation.back();
}

void note_launch(Launch launch, uint64_t correlation_id) {
  const std::lock_guard<std::mutex> lock(g_mutex);
  g_launches.push_back({std::move(launch), correlation_id, kLaunchIdBase + g_next_launch_id++});
}

}  // namespace npusim::kineto
