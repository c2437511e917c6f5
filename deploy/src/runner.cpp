// Running a package through the driver: programs loaded and weights written
// once, then each run (of one method) copies the inputs in, replays the
// method's steps on queue 0 in their recorded order, and copies the outputs out.
#include <chrono>
#include <cstring>
#include <exception>

#include "npusim/deploy/package.h"
#include "npusim/driver/device.h"
#include "npusim/driver/errors.h"
#include "npusim/driver/program.h"
#include "npusim/driver/queue.h"
#include "package.pb.h"

namespace npu::deploy {

struct PackageRunner::Loaded {
  std::shared_ptr<Device> device;
  Package package;
  std::vector<Program> programs;
  std::vector<Buffer> buffers;
  std::vector<std::vector<TensorSpec>> inputs, outputs;  // of each method
};

PackageRunner::PackageRunner(std::shared_ptr<Device> device, const Package& package) : loaded_(std::make_unique<Loaded>()) {
  Loaded& l = *loaded_;
  l.device = std::move(device);
  l.package = package;
  const proto::Package& p = package.raw();
  for (size_t m = 0; m < size_t(p.methods_size()); ++m) {
    l.inputs.push_back(package.inputs(m));
    l.outputs.push_back(package.outputs(m));
  }
  for (const std::string& image : p.programs()) l.programs.push_back(Program::load(l.device, isa::parse_program(image)));
  for (const proto::Buffer& b : p.buffers()) l.buffers.push_back(l.device->allocate(std::max<uint64_t>(b.size_bytes(), 1)));
  for (const proto::Constant& c : p.constants())
    if (!c.data().empty()) l.device->copy_to_device(l.buffers[c.buffer()], 0, c.data().data(), c.data().size());
}

PackageRunner::~PackageRunner() = default;

namespace {

// The elements of a strided view, gathered contiguous (element by element: outputs are small next to the run).
std::vector<uint8_t> gather(const TensorSpec& spec, const std::vector<uint8_t>& storage) {
  const size_t esize = isa::dtype_size_bytes(spec.dtype);
  std::vector<uint8_t> out(spec.bytes());
  if (out.empty()) return out;
  std::vector<int64_t> index(spec.shape.size(), 0);
  for (size_t n = 0; n < out.size() / esize; ++n) {
    int64_t offset = spec.storage_offset;
    for (size_t d = 0; d < index.size(); ++d) offset += index[d] * spec.strides[d];
    std::memcpy(&out[n * esize], &storage[size_t(offset) * esize], esize);
    for (size_t d = index.size(); d-- > 0;) {
      if (++index[d] < spec.shape[d]) break;
      index[d] = 0;
    }
  }
  return out;
}

}  // namespace

PackageRunner::Result PackageRunner::run(size_t method, const std::vector<std::vector<uint8_t>>& inputs) {
  Loaded& l = *loaded_;
  if (method >= l.inputs.size())
    throw PackageError("the package has " + std::to_string(l.inputs.size()) + " methods, not a method " + std::to_string(method));
  const std::vector<TensorSpec>& specs = l.inputs[method];
  const std::string of_method = l.inputs.size() > 1 ? " (method " + l.package.raw().methods(int(method)).name() + ")" : "";
  if (inputs.size() != specs.size())
    throw PackageError("package takes " + std::to_string(specs.size()) + " inputs" + of_method + ", got " + std::to_string(inputs.size()));
  for (size_t i = 0; i < inputs.size(); ++i)
    if (inputs[i].size() != specs[i].bytes())
      throw PackageError("input " + specs[i].to_string() + of_method + " is " + std::to_string(specs[i].bytes()) + " bytes, got " +
                         std::to_string(inputs[i].size()));
  Device& device = *l.device;
  // Earlier work first (its cycles are not this run's). drain, not synchronize: work that an earlier fault
  // abandoned was reported to whoever submitted it and is not this run's failure.
  device.drain();
  Queue queue = device.queue(0);
  const uint64_t start = device.now_cycle();
  // The copies below read the caller's input bytes when the device gets to them: whatever ends this run
  // early (a launch the driver refuses, a fault), the queue is drained before the caller may free them.
  struct DrainOnError {
    Device& device;
    int uncaught = std::uncaught_exceptions();
    ~DrainOnError() {
      if (std::uncaught_exceptions() == uncaught) return;
      try {
        device.drain();
      } catch (const Error&) {  // the error in flight is the one to report
      }
    }
  } drain_on_error{device};
  for (size_t i = 0; i < inputs.size(); ++i)
    if (!inputs[i].empty())
      queue.copy_to_device(l.buffers[specs[i].buffer], uint64_t(specs[i].storage_offset) * isa::dtype_size_bytes(specs[i].dtype),
                           inputs[i].data(), inputs[i].size());
  std::vector<Binding> bindings;
  for (const proto::Step& step : l.package.raw().methods(int(method)).steps()) {
    if (step.has_upload()) {
      const proto::Upload& u = step.upload();
      if (!u.data().empty()) queue.copy_to_device(l.buffers[u.buffer()], u.offset_bytes(), u.data().data(), u.data().size());
      continue;
    }
    const proto::Launch& launch = step.launch();
    bindings.clear();
    for (const proto::Binding& b : launch.bindings()) bindings.push_back({b.symbol(), &l.buffers[b.buffer()]});
    queue.launch(l.programs[launch.program()], bindings, launch.core_mask());
  }
  queue.synchronize();
  Result result;
  result.cycles = device.now_cycle() - start;
  for (const TensorSpec& spec : l.outputs[method]) {
    const Buffer& buffer = l.buffers[spec.buffer];
    std::vector<uint8_t> storage(buffer.size());
    if (!storage.empty()) device.copy_from_device(buffer, 0, storage.data(), storage.size());
    result.outputs.push_back(gather(spec, storage));
  }
  return result;
}

}  // namespace npu::deploy
