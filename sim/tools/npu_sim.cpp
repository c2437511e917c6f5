// npu-sim: run an .npubin program on the simulated chip.
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <sstream>
#include <stdexcept>
#include <thread>

#include "npusim/sim/systemc_main.h"  // declares sc_main, which this file defines

#include "cli.h"
#include "npusim/common/output_files.h"
#include "npusim/isa/dtype.h"
#include "npusim/isa/program.h"
#include "npusim/sim/config_loader.h"
#include "npusim/sim/energy.h"
#include "npusim/sim/registers.h"
#include "npusim/sim/simulator.h"
#include "npusim/traces/trace.h"
#include "npusim/traces/writers.h"

namespace po = boost::program_options;

namespace {

constexpr uint64_t kBufferAlignment = 4096;

// Element i gets encodings[splitmix64(seed + i) % kValues], in kSize bytes;
// a large input in two halves on two host threads (each element depends only on i).
template <unsigned kSize, uint64_t kValues>
void fill_encoded(uint64_t seed, const std::vector<uint32_t>& encodings, uint8_t* bytes, uint64_t size) {
  const auto fill = [seed, &encodings, bytes](uint64_t begin, uint64_t end) {
    for (uint64_t i = begin; i < end; ++i) {
      uint64_t x = seed + i * 0x9e3779b97f4a7c15ull;  // splitmix64
      x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
      x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
      x ^= x >> 31;
      std::memcpy(bytes + i * kSize, &encodings[x % kValues], kSize);
    }
  };
  const uint64_t count = size / kSize, half = count / 2;
  if (count < (uint64_t{1} << 20) || std::thread::hardware_concurrency() < 2) return fill(0, count);
  std::thread second_half(fill, half, count);
  fill(0, half);
  second_half.join();
}

// Deterministic data for inputs the user did not give: the same program and
// symbol always get the same values. Floats in [-1, 1] in steps of 1/1000;
// integers in [0, 8), small enough for products and valid as small indices.
void fill_deterministic(const npu::isa::Symbol& symbol, uint8_t* bytes, uint64_t bytes_size) {
  uint64_t seed = 1469598103934665603ull;
  for (const char c : symbol.name) seed = (seed ^ static_cast<uint8_t>(c)) * 1099511628211ull;
  const unsigned element_bytes = npu::isa::dtype_size_bytes(symbol.dtype);
  const bool is_float = npu::isa::dtype_is_float(symbol.dtype);
  // Each value's encoding, computed once: a multi-megabyte input would otherwise spend most of its
  // time converting the same 2001 values.
  std::vector<uint32_t> encodings(is_float ? 2001 : 8);
  for (uint32_t v = 0; v < encodings.size(); ++v) {
    if (!is_float) {
      encodings[v] = v;
      continue;
    }
    const float value = static_cast<float>(static_cast<int64_t>(v) - 1000) / 1000.0f;
    encodings[v] = symbol.dtype == npu::isa::DType::F32    ? npu::isa::f32_bits(value)
                   : symbol.dtype == npu::isa::DType::BF16 ? npu::isa::f32_to_bf16(value)
                                                           : npu::isa::f32_to_f16(value);
  }
  switch (element_bytes * 10000 + encodings.size()) {  // the constants let the loop's division and copy compile to a few instructions
    case 1 * 10000 + 8: fill_encoded<1, 8>(seed, encodings, bytes, bytes_size); break;
    case 4 * 10000 + 8: fill_encoded<4, 8>(seed, encodings, bytes, bytes_size); break;
    case 2 * 10000 + 2001: fill_encoded<2, 2001>(seed, encodings, bytes, bytes_size); break;
    case 4 * 10000 + 2001: fill_encoded<4, 2001>(seed, encodings, bytes, bytes_size); break;
    default: throw std::logic_error("fill_deterministic: no loop for " + std::to_string(element_bytes) + "-byte elements");
  }
}

// Whether a value in memory can change the program's timing: only dma.gather
// reads addresses from memory (no instruction loads data into a register).
bool timing_depends_on_data(const npu::isa::Program& program) {
  for (const npu::isa::CodeSection& section : program.code)
    for (const uint64_t word : section.words) {
      const auto instruction = npu::isa::decode(word);
      if (instruction && instruction->opcode == npu::isa::Opcode::DMA_GATHER) return true;
    }
  return false;
}

std::map<std::string, std::string> parse_bindings(const std::vector<std::string>& items, const char* option) {
  std::map<std::string, std::string> bindings;
  for (const std::string& item : items) {
    const auto equals = item.find('=');
    if (equals == std::string::npos || equals == 0 || equals + 1 == item.size())
      throw po::error(std::string("--") + option + " takes SYMBOL=FILE, got '" + item + "'");
    bindings[item.substr(0, equals)] = item.substr(equals + 1);
  }
  return bindings;
}

struct InputError : std::runtime_error {
  using std::runtime_error::runtime_error;
};
// A limit of the run's own (--max-trace-bytes, --max-seconds) that stopped it.
struct RunLimitReached : std::runtime_error {
  using std::runtime_error::runtime_error;
};

}  // namespace

int sc_main(int argc, char* argv[]) {
  po::options_description options(
      "Usage: npu-sim [OPTIONS] PROGRAM.npubin\n"
      "       npu-sim --config PRESET|FILE --dump-config\n\n"
      "Runs a program on the simulated chip: computes its results and its cycles.\n"
      "Every global buffer of the program gets device memory; inputs not given with --input get\n"
      "deterministic data (floats in [-1, 1], integers in [0, 8)), so every program runs with\n"
      "nothing but a config. Prints a summary; a device fault (bad address, bad instruction,\n"
      "deadlock, watchdog) is printed as a fault record and exits with status 1, after writing\n"
      "the trace and statistics gathered so far.\n"
      "Exit status: 0 success, 1 bad input or device fault, 2 bad usage.\n\nOptions");
  options.add_options()
      ("help,h", "print this help and exit")
      ("version", "print the version and exit")
      ("config,c", po::value<std::string>()->default_value("base")->value_name("PRESET|FILE"),
       "chip config: a preset (tiny, base, large, tpu_v4, tpu_v5e, tpu_v6e) or a .pbtxt file")
      ("set", po::value<std::vector<std::string>>()->value_name("FIELD=VALUE"),
       "set a config field by its path, repeatable: core.tensor_core.rows=64, dram.type=HBM3, "
       "core.tensor_core.input_dtypes=bf16,i8 (paths: chip_config.proto, or --dump-config)")
      ("dma-timing", po::value<std::string>()->value_name("request|step|window"),
       "override the config's core.dma.timing: 'request' (PER_REQUEST, every DMA request modelled), 'step' "
       "(PER_STEP, a step's requests to one DRAM channel as one burst: faster) or 'window' (PER_WINDOW, a "
       "window of requests in closed form per DRAM channel: fastest, coarsest; docs/chip.md \"DMA timing\")")
      ("dump-config", "print the effective chip config (protobuf text format) and exit")
      ("register-map", "print the MMIO register map (Markdown, docs/registers.md) and exit")
      ("input,i", po::value<std::vector<std::string>>()->value_name("SYMBOL=FILE"),
       "raw little-endian bytes for an input buffer (exactly its size); repeatable")
      ("output,o", po::value<std::vector<std::string>>()->value_name("SYMBOL=FILE"),
       "write a buffer's bytes after the run; repeatable")
      ("trace", po::value<std::string>()->value_name("FILE"), "write a trace: FILE.pftrace (Perfetto) or FILE.json (Chrome)")
      ("stats", po::value<std::string>()->value_name("FILE.json"),
       "write statistics as JSON (total in the top-level \"cycles\"; energy, power and area in \"energy\")")
      ("action-counts", po::value<std::string>()->value_name("FILE.yaml"),
       "write the run's action counts in Accelergy's format (price them with your own tables; docs/energy.md)")
      ("energy-table", po::value<std::string>()->value_name("FILE.yaml"),
       "write the config's energy per action as an Accelergy energy reference table (ERT)")
      ("timing-only", "skip the tensor-core and vector arithmetic (same cycles, outputs not computed); a program without dma.gather moves no data either")
      ("max-cycles", po::value<int64_t>()->value_name("N"), "fault if the run takes longer (default: the config's watchdog)")
      ("max-trace-bytes", po::value<int64_t>()->default_value(int64_t{1} << 30)->value_name("N"),
       "stop a run whose trace passes about N bytes as written (a runaway loop's trace fills the disk)")
      ("max-seconds", po::value<double>()->value_name("S"), "stop a run that takes more than S seconds of host time")
      ("program", po::value<std::string>(), "program file");
  po::positional_options_description positional;
  positional.add("program", 1);
  po::variables_map vm;
  int exit_code = 0;
  if (!npu::cli::parse_command_line("npu-sim", argc, argv, options, positional, &vm, &exit_code)) return exit_code;
  if (const auto code = npu::cli::handle_help_and_version("npu-sim", vm, options)) return *code;

  if (vm.count("register-map")) {
    std::cout << npu::sim::generate_register_markdown();
    return npu::cli::exit_after_flushing("npu-sim");
  }
  npu::sim::ChipConfig config;
  try {
    config = npu::sim::load_chip_config(vm["config"].as<std::string>(),
                                        vm.count("set") ? vm["set"].as<std::vector<std::string>>() : std::vector<std::string>{});
  } catch (const npu::sim::ConfigError& e) {
    std::cerr << "npu-sim: error: " << e.what() << "\n";
    return npu::cli::kExitBadInput;
  }
  if (vm.count("dma-timing")) {
    try {
      config.core.dma.timing = npu::sim::dma_timing_from_name(vm["dma-timing"].as<std::string>());
    } catch (const npu::sim::ConfigError& e) {
      std::cerr << "npu-sim: error: --dma-timing: " << e.what() << "\nTry 'npu-sim --help'.\n";
      return npu::cli::kExitBadUsage;
    }
  }
  if (vm.count("dump-config")) {
    std::cout << npu::sim::dump_chip_config(config);
    return npu::cli::exit_after_flushing("npu-sim");
  }
  if (!vm.count("program")) {
    std::cerr << "npu-sim: error: no program file\nTry 'npu-sim --help'.\n";
    return npu::cli::kExitBadUsage;
  }
  std::map<std::string, std::string> inputs, outputs;
  try {
    if (vm.count("input")) inputs = parse_bindings(vm["input"].as<std::vector<std::string>>(), "input");
    if (vm.count("output")) outputs = parse_bindings(vm["output"].as<std::vector<std::string>>(), "output");
    if (vm.count("max-cycles") && vm["max-cycles"].as<int64_t>() < 1)
      throw po::error("--max-cycles needs a positive number, got " + std::to_string(vm["max-cycles"].as<int64_t>()));
    if (vm.count("trace")) {
      const std::string path = vm["trace"].as<std::string>();
      const bool known = path.size() > 5 && (path.substr(path.size() - 5) == ".json" ||
                                              (path.size() > 8 && path.substr(path.size() - 8) == ".pftrace"));
      if (!known) throw po::error("--trace needs a file ending in .pftrace or .json, got '" + path + "'");
    }
  } catch (const po::error& e) {
    std::cerr << "npu-sim: error: " << e.what() << "\nTry 'npu-sim --help'.\n";
    return npu::cli::kExitBadUsage;
  }

  try {
    const npu::isa::Program program = npu::isa::load_program(vm["program"].as<std::string>());
    // Cores: those the program has code for, on this chip.
    uint64_t core_mask = 0;
    const uint64_t chip_cores = config.num_cores >= 64 ? ~uint64_t{0} : (uint64_t{1} << config.num_cores) - 1;
    for (const npu::isa::CodeSection& section : program.code) {
      if (section.core_mask != npu::isa::kAllCores && (section.core_mask & ~chip_cores))
        throw InputError("the program has code for cores this chip does not have (config '" + config.name + "' has " +
                         std::to_string(config.num_cores) + " cores)");
      core_mask |= section.core_mask & chip_cores;
    }
    if (core_mask == 0) throw InputError("the program has no code");

    // A timing-only run of a program whose timing no value can change needs
    // no data: it moves none, and inputs not given stay zero (none generated).
    const bool timing_only = vm.count("timing-only") != 0;
    const bool needs_data = !timing_only || timing_depends_on_data(program);

    // Device memory for every global buffer, in symbol order.
    std::vector<uint64_t> addresses(program.symbols.size(), npu::sim::kUnboundSymbol);
    uint64_t next = 0;
    for (size_t i = 0; i < program.symbols.size(); ++i) {
      const npu::isa::Symbol& symbol = program.symbols[i];
      if (!symbol.is_global_buffer()) continue;
      const uint64_t size = symbol.size_bytes();
      if (size > config.dram.size_bytes || next > config.dram.size_bytes - size)
        throw InputError("the program's buffers do not fit in device DRAM (" + std::to_string(config.dram.size_bytes) + " bytes)");
      addresses[i] = next;
      next = (next + size + kBufferAlignment - 1) / kBufferAlignment * kBufferAlignment;
    }
    for (const auto& [name, file] : inputs) {
      const npu::isa::Symbol* symbol = program.find_symbol(name);
      if (symbol == nullptr || symbol->kind != npu::isa::SymbolKind::Input) throw InputError("--input " + name + ": the program has no input of that name");
    }
    for (const auto& [name, file] : outputs) {
      const npu::isa::Symbol* symbol = program.find_symbol(name);
      if (symbol == nullptr || !symbol->is_global_buffer()) throw InputError("--output " + name + ": the program has no buffer of that name");
      npu::check_output_path(file);  // before the run, which may be long
    }
    for (const char* option : {"stats", "action-counts", "energy-table"})
      if (vm.count(option)) npu::check_output_path(vm[option].as<std::string>());
    if (vm.count("trace")) npu::check_output_path(vm["trace"].as<std::string>());

    npu::trace::Trace trace;
    npu::sim::SimulatorOptions sim_options;
    sim_options.functional = !timing_only;
    sim_options.timing_only_moves_data = needs_data;
    sim_options.trace = vm.count("trace") ? &trace : nullptr;
    npu::sim::Simulator simulator(config, sim_options);
    // The buffers' contents, written straight into device memory (generated inputs of a large GEMM
    // took a seventh of its functional run when they were built aside and copied). Device memory
    // starts zeroed: a buffer that would be written as zeros (outputs, scratch, inputs not generated)
    // is left as it is, which saves a timing-only run most of its host time on large buffers.
    for (size_t i = 0; i < program.symbols.size(); ++i) {
      const npu::isa::Symbol& symbol = program.symbols[i];
      if (addresses[i] == npu::sim::kUnboundSymbol) continue;
      const uint64_t size = symbol.size_bytes();
      if (symbol.kind == npu::isa::SymbolKind::Data) {
        const std::vector<uint8_t>& bytes = program.data[symbol.section].contents;
        if (!bytes.empty()) simulator.write_dram(addresses[i], bytes.data(), bytes.size());
      } else if (symbol.kind == npu::isa::SymbolKind::Input) {
        const auto given = inputs.find(symbol.name);
        if (given == inputs.end()) {
          if (needs_data && size > 0) fill_deterministic(symbol, simulator.dram_bytes(addresses[i], size), size);
        } else {
          std::ifstream in(given->second, std::ios::binary);
          if (!in) throw InputError("cannot open input file '" + given->second + "' for " + symbol.name);
          std::error_code error;
          const uint64_t file_size = std::filesystem::file_size(given->second, error);
          if (error) throw InputError("cannot read input file '" + given->second + "' for " + symbol.name + ": " + error.message());
          if (file_size != size)
            throw InputError("input file '" + given->second + "' has " + std::to_string(file_size) + " bytes; " + symbol.name + " needs " +
                             std::to_string(size));
          if (size > 0 && !in.read(reinterpret_cast<char*>(simulator.dram_bytes(addresses[i], size)), static_cast<std::streamsize>(size)))
            throw InputError("cannot read input file '" + given->second + "'");
        }
      }
    }

    // Every million cycles: the limits on the trace's size and the host time, and a progress line for long
    // runs where a person watches stderr. (Slicing the run changes none of its cycles.)
    const bool show_progress = isatty(STDERR_FILENO) != 0;
    const auto wall_start = std::chrono::steady_clock::now();
    const uint64_t max_trace_bytes = uint64_t(vm["max-trace-bytes"].as<int64_t>());
    const double max_seconds = vm.count("max-seconds") ? vm["max-seconds"].as<double>() : 0.0;
    uint64_t last_shown = 0;
    simulator.set_progress(
        [&](uint64_t cycle) {
          const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - wall_start).count();
          if (vm.count("trace")) {
            const uint64_t bytes = npu::trace::estimated_written_bytes(trace, vm["trace"].as<std::string>());
            if (bytes > max_trace_bytes)
              throw RunLimitReached("the trace passed --max-trace-bytes " + std::to_string(max_trace_bytes) + " (about " +
                                    std::to_string(bytes) + " bytes) at cycle " + std::to_string(cycle) +
                                    "; the run was stopped and no trace was written");
          }
          if (max_seconds > 0 && seconds > max_seconds)
            throw RunLimitReached("the run passed --max-seconds " + vm["max-seconds"].as<std::string>() + " of host time at cycle " +
                                  std::to_string(cycle) + "; it was stopped");
          if (show_progress && cycle - last_shown >= 10'000'000) {
            last_shown = cycle;
            std::fprintf(stderr, "\rnpu-sim: cycle %llu (%.1f M cycles/s)   ", static_cast<unsigned long long>(cycle),
                         seconds > 0 ? static_cast<double>(cycle) / seconds / 1e6 : 0.0);
          }
        },
        1'000'000);
    simulator.launch(program, core_mask, addresses);
    const uint64_t max_cycles = vm.count("max-cycles") ? uint64_t(vm["max-cycles"].as<int64_t>()) : config.simulation.watchdog_cycles;
    const npu::sim::RunResult result = simulator.run(max_cycles);
    if (show_progress) std::fprintf(stderr, "\r\033[K");

    npu::sim::ChipStats stats = simulator.stats();
    stats.cycles = result.cycles();
    if (vm.count("trace")) npu::trace::write_trace(trace, vm["trace"].as<std::string>());
    // The statistics and the outputs appear together or not at all (the trace above stands alone: a fault's
    // trace is what one reads to find it).
    npu::OutputFiles files;
    const npu::sim::EnergyModel energy = npu::sim::energy_model(config);
    if (vm.count("stats")) {
      std::ostringstream json;
      stats.write_json(json, &energy);
      files.stage(vm["stats"].as<std::string>(), json.str());
    }
    if (vm.count("action-counts")) {
      std::ostringstream yaml;
      npu::sim::write_accelergy_action_counts(yaml, npu::sim::action_counts(stats));
      files.stage(vm["action-counts"].as<std::string>(), yaml.str());
    }
    if (vm.count("energy-table")) {
      std::ostringstream yaml;
      npu::sim::write_accelergy_ert(yaml, energy);
      files.stage(vm["energy-table"].as<std::string>(), yaml.str());
    }
    if (result.fault) {
      files.commit();
      std::cerr << "npu-sim: " << result.fault->to_string() << "\n";
      return npu::cli::kExitBadInput;
    }
    for (const auto& [name, file] : outputs) {
      const auto index = static_cast<size_t>(program.find_symbol(name) - program.symbols.data());
      std::string bytes(program.symbols[index].size_bytes(), '\0');
      simulator.read_dram(addresses[index], bytes.data(), bytes.size());
      files.stage(file, bytes);
    }
    // The summary first: a run whose report could not be written fails whole, its outputs left as they were.
    stats.write_summary(std::cout, &energy);
    if (std::fflush(stdout) != 0 || !std::cout.flush()) throw InputError("cannot write the standard output");
    files.commit();
  } catch (const npu::isa::ProgramFormatError& e) {
    std::cerr << "npu-sim: error: " << e.what() << "\n";
    return npu::cli::kExitBadInput;
  } catch (const InputError& e) {
    std::cerr << "npu-sim: error: " << e.what() << "\n";
    return npu::cli::kExitBadInput;
  } catch (const std::exception& e) {
    std::cerr << "npu-sim: error: " << e.what() << "\n";
    return npu::cli::kExitBadInput;
  }
  return npu::cli::kExitOk;
}

NPUSIM_SYSTEMC_MAIN
