// Deployment packages: a model compiled for the chip (device programs, weights,
// memory plan, input/output signature, the launch sequence), written once and
// run through the driver alone (npu-run), with no Python.
//
// A package is made by recording a run (PackageBuilder: the torch bridge
// records what a model launches) and run by PackageRunner, which npu-run and
// the Python package (npusim.export.run) share, so both give the same
// results and the same cycles. The file format is deploy/package.proto.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "npusim/isa/dtype.h"
#include "npusim/isa/program.h"

namespace npu {
class Device;
}

namespace npu::deploy {

namespace proto {
class Method;
class Package;
}  // namespace proto

// A file that is not a valid package, or a package that does not fit the call.
class PackageError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// A tensor of the signature: a view (in elements) of one of the package's buffers.
struct TensorSpec {
  std::string name;
  isa::DType dtype = isa::DType::F32;
  std::vector<int64_t> shape;
  std::vector<int64_t> strides;
  int64_t storage_offset = 0;
  uint32_t buffer = 0;

  int64_t numel() const;
  uint64_t bytes() const { return uint64_t(numel()) * isa::dtype_size_bytes(dtype); }  // contiguous
  std::string to_string() const;  // "x: bf16[2,16]"
};

class Package {
 public:
  Package();
  explicit Package(proto::Package package);
  Package(const Package&);
  Package& operator=(const Package&);
  Package(Package&&) noexcept;
  Package& operator=(Package&&) noexcept;
  ~Package();

  // The file is checked whole before use (header, checksum, every index, size, offset and stride against
  // its buffer, with overflow-safe arithmetic): a file from anywhere can be read. PackageError says why not.
  static Package read(const std::string& path);
  static Package parse(const std::string& bytes);  // a file's bytes
  void write(const std::string& path) const;       // whole or not at all; PackageError
  std::string serialize() const;                   // the file's bytes

  std::string config_name() const;
  std::string config_text() const;
  // The entry points (a language model's "prefill" and "decode"; "forward" where there is one), in order.
  std::vector<std::string> methods() const;
  // The index of the method of that name; PackageError naming the ones there are.
  size_t method(const std::string& name) const;
  std::vector<TensorSpec> inputs(size_t method = 0) const;
  std::vector<TensorSpec> outputs(size_t method = 0) const;
  size_t programs() const;
  size_t launches() const;  // of every method
  uint64_t planned_bytes() const;  // the memory plan: every buffer, weights included
  size_t buffer_count() const;       // buffers of the memory plan
  size_t logical_buffer_count() const;   // buffers of the recording, before planning
  std::string summary() const;     // what npu-run --info prints

  const proto::Package& raw() const { return *package_; }

 private:
  std::unique_ptr<proto::Package> package_;
};

// Records a run, step by step, and turns it into a package with a static
// memory plan: buffers whose lifetimes (first to last step that touches
// them) do not overlap share one device buffer.
class PackageBuilder {
 public:
  PackageBuilder(std::string source, std::string config_name, std::string config_text);
  ~PackageBuilder();

  // The id of a buffer of the recording, known by an identity of the
  // recorder's choosing (the torch bridge uses device addresses).
  uint32_t buffer(uint64_t identity, uint64_t size_bytes);
  // Whether a step has written the buffer, or it is an input or a constant:
  // a buffer read before that holds data from before the recording (a weight),
  // which the recorder must give with constant().
  bool has_contents(uint32_t buffer) const;

  // Starts a method of that name: the inputs, outputs, launches and uploads that follow are its. Weights
  // and state are the package's, shared by every method; any other buffer belongs to one method (an
  // identity seen again in a later method is a new buffer there). Without a call, the one method is "forward".
  void method(const std::string& name);
  void input(TensorSpec spec);
  void output(TensorSpec spec);
  void constant(uint32_t buffer, std::vector<uint8_t> data);
  // The buffer is state: its contents carry from one run to the next (a KV cache the run reads and
  // writes back). Its constant, if it gets one, is written once at load, not at every run.
  void state(uint32_t buffer);
  uint32_t program(const void* identity, const isa::Program& program);
  // `bindings`: (symbol, buffer); the symbol "out" is written, the others read.
  void launch(uint32_t program, const std::vector<std::pair<std::string, uint32_t>>& bindings, uint64_t core_mask, const std::string& op);
  void upload(uint32_t buffer, uint64_t offset_bytes, std::vector<uint8_t> data);

  Package finish();

 private:
  struct Logical {
    uint64_t size_bytes = 0;
    int64_t first_step = -1, last_step = -1;  // -1: untouched; steps counted over every method, in order
    bool loaded = false;                      // a constant or state: lives through every run of every method
    int signature_of = -1;                    // an input or output of this method: lives through its runs
    bool written = false;
    bool state = false;                       // kept between runs (state())
  };
  void touch(uint32_t buffer);
  proto::Method& current_method();

  std::unique_ptr<proto::Package> package_;
  std::vector<int64_t> method_first_step_;    // of each method, in the count of every method's steps
  int64_t steps_ = 0;                         // steps recorded, over every method
  std::vector<Logical> buffers_;
  std::map<uint64_t, uint32_t> by_identity_;
  std::map<const void*, uint32_t> programs_;
  std::vector<std::pair<uint32_t, std::vector<uint8_t>>> constants_;
};

// Runs a package on a device: loads its programs, allocates its memory plan
// and writes its weights once; then run() as often as wanted.
class PackageRunner {
 public:
  PackageRunner(std::shared_ptr<Device> device, const Package& package);
  ~PackageRunner();

  struct Result {
    std::vector<std::vector<uint8_t>> outputs;  // contiguous, in the signature's order
    uint64_t cycles = 0;                        // device cycles from the first input copy to the last step's end
  };
  // Runs a method (by index: Package::method). `inputs`: contiguous bytes of each of its inputs, in the
  // signature's order (PackageError for a wrong count or size).
  Result run(size_t method, const std::vector<std::vector<uint8_t>>& inputs);
  Result run(const std::vector<std::vector<uint8_t>>& inputs) { return run(0, inputs); }

 private:
  struct Loaded;
  std::unique_ptr<Loaded> loaded_;
};

}  // namespace npu::deploy
