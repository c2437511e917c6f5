// npu-smi: what a device is and what it is doing: identity, memory in use,
// status and counters, read through the driver library (Device::report, which
// a live process holding a Device can print too), and the chip config.
#include <iostream>

#include "cli.h"
#include "npusim/driver/device.h"
#include "npusim/driver/errors.h"
#include "npusim/sim/config_loader.h"
#include "npusim/sim/systemc_main.h"
#include "simulator_link.h"

namespace po = boost::program_options;

int sc_main(int argc, char* argv[]) {
  po::options_description options(
      "Usage: npu-smi [--config PRESET|FILE] [--dump-config]\n\n"
      "Opens the simulated device built from a chip config, through the driver, and prints its\n"
      "identity, memory in use, status (with any latched fault) and counters.\n"
      "Exit status: 0 success, 1 bad config or device error, 2 bad usage.\n\nOptions");
  options.add_options()
      ("help,h", "print this help and exit")
      ("version", "print the version and exit")
      ("config,c", po::value<std::string>()->default_value("base")->value_name("PRESET|FILE"), "chip config: tiny, base, large, tpu_v4, tpu_v5e, tpu_v6e or a .pbtxt file")
      ("dump-config", "also print the device's chip config (protobuf text format)");
  po::positional_options_description positional;
  po::variables_map vm;
  int exit_code = 0;
  if (!npu::cli::parse_command_line("npu-smi", argc, argv, options, positional, &vm, &exit_code)) return exit_code;
  if (const auto code = npu::cli::handle_help_and_version("npu-smi", vm, options)) return *code;
  const std::string config = vm["config"].as<std::string>();
  try {
    const auto device = npu::Device::open(std::make_unique<npu::SimulatorLink>(config));
    std::cout << "config: " << config << "\n" << device->report();
    if (vm.count("dump-config")) std::cout << "\n" << npu::sim::dump_chip_config(npu::sim::load_chip_config(config));
    if (!std::cout.flush()) throw std::runtime_error("cannot write the standard output");
  } catch (const std::exception& e) {  // a driver error, a config that does not load, a failed write
    std::cerr << "npu-smi: error: " << e.what() << "\n";
    return npu::cli::kExitBadInput;
  }
  return npu::cli::kExitOk;
}

NPUSIM_SYSTEMC_MAIN
