// Fuzzes deployment packages: the input is read as a whole package file (the
// header's checks), and as a package's payload behind a valid header (so that
// mutations reach the checks the checksum guards: every index, size, offset,
// stride and dtype). A payload that passes is run by PackageRunner on a
// simulated chip with zeroed inputs. Nothing may crash, hang or read outside
// a buffer; what is refused is refused with PackageError, and what faults on
// the chip with a driver error, after which the device keeps working.
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "npusim/deploy/package.h"
#include "npusim/driver/device.h"
#include "npusim/driver/errors.h"
#include "npusim/isa/program.h"
#include "package.pb.h"
#include <google/protobuf/stubs/logging.h>
#include "simulator_link.h"

// protobuf logs every string field with invalid UTF-8 it refuses to parse: thousands of lines per run.
extern "C" int LLVMFuzzerInitialize(int*, char***) {
  google::protobuf::SetLogHandler(nullptr);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // One chip for the whole run (SystemC elaborates once per process).
  static const std::shared_ptr<npu::Device> device = npu::Device::open(std::make_unique<npu::SimulatorLink>("tiny"));
  const std::string bytes(reinterpret_cast<const char*>(data), size);
  try {
    npu::deploy::Package::parse(bytes);
  } catch (const npu::deploy::PackageError&) {
  }
  npu::deploy::proto::Package payload;
  if (!payload.ParseFromString(bytes)) return 0;
  std::optional<npu::deploy::Package> package;
  try {
    package = npu::deploy::Package::parse(npu::deploy::Package(payload).serialize());
  } catch (const npu::deploy::PackageError&) {
    return 0;
  }
  std::vector<std::vector<uint8_t>> inputs;
  uint64_t input_bytes = 0;
  for (const npu::deploy::TensorSpec& spec : package->inputs()) {
    input_bytes += spec.bytes();
    if (input_bytes > (uint64_t{16} << 20)) return 0;  // a valid package, but more host memory than a fuzz run should take
    inputs.emplace_back(spec.bytes());
  }
  try {
    npu::deploy::PackageRunner runner(device, *package);
    runner.run(inputs);
  } catch (const npu::deploy::PackageError&) {
  } catch (const npu::isa::ProgramFormatError&) {
  } catch (const npu::Error&) {  // a fault, a queue error, out of memory: the driver's to report
  }
  // Nothing of this input left in flight: the link's simulation thread runs SystemC's coroutines, whose stacks
  // LeakSanitizer does not scan, so a posted write still queued or running there (a program's code, posted by
  // Program::load before a later program failed to parse) looked leaked to libFuzzer's check after the input.
  try {
    device->drain();
  } catch (const npu::Error&) {
  }
  return 0;
}

// libsystemc.so refers to sc_main; libFuzzer provides main.
extern "C" int sc_main(int, char*[]) { return 0; }
