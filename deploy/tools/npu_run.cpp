// npu-run: runs a deployment package (npusim.export.compile) on the simulated
// chip through the driver alone, with no Python.
#include <chrono>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <iterator>
#include <map>

#include "cli.h"
#include "npusim/common/output_files.h"
#include "npusim/deploy/generate.h"
#include "npusim/deploy/package.h"
#include "npusim/driver/device.h"
#include "npusim/driver/errors.h"
#include "npusim/sim/systemc_main.h"
#include "simulator_link.h"

namespace po = boost::program_options;

namespace {

// NAME=FILE pairs of --input / --output.
std::map<std::string, std::string> name_file_pairs(const std::vector<std::string>& values, const char* option) {
  std::map<std::string, std::string> pairs;
  for (const std::string& value : values) {
    const size_t eq = value.find('=');
    if (eq == std::string::npos || eq == 0 || eq + 1 == value.size())
      throw npu::deploy::PackageError(std::string("--") + option + " " + value + ": expected NAME=FILE");
    pairs[value.substr(0, eq)] = value.substr(eq + 1);
  }
  return pairs;
}

// --prompt's token ids: integers separated by commas or spaces.
std::vector<int64_t> prompt_tokens(const std::string& text) {
  std::vector<int64_t> tokens;
  size_t at = 0;
  while (at < text.size()) {
    if (text[at] == ',' || text[at] == ' ') {
      ++at;
      continue;
    }
    size_t used = 0;
    int64_t token = 0;
    try {
      token = std::stoll(text.substr(at), &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used == 0 || (at + used < text.size() && text[at + used] != ',' && text[at + used] != ' '))
      throw npu::deploy::PackageError("--prompt " + text + ": expected token ids separated by commas or spaces (column " + std::to_string(at + 1) + ")");
    tokens.push_back(token);
    at += used;
  }
  return tokens;
}

std::vector<uint8_t> read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw npu::deploy::PackageError(path + ": cannot open");
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}


std::shared_ptr<npu::Device> open_device(const npu::deploy::Package& package, const po::variables_map& vm) {
  npu::SimulatorLinkOptions link;
  link.config = package.config_name();
  link.config_text = package.config_text();
  link.functional = !vm.count("timing-only");
  if (vm.count("trace")) link.trace_path = vm["trace"].as<std::string>();
  return npu::Device::open(std::make_unique<npu::SimulatorLink>(link));
}

// --generate: the generation loop (npusim/deploy/generate.h), its tokens and cycles printed.
int generate(const npu::deploy::Package& package, const po::variables_map& vm) {
  npu::deploy::check_decode_step(package);
  const std::vector<int64_t> prompt = prompt_tokens(vm["prompt"].as<std::string>());
  if (vm.count("trace")) npu::check_output_path(vm["trace"].as<std::string>());
  auto device = open_device(package, vm);
  npu::deploy::PackageRunner runner(device, package);
  const npu::deploy::GenerateResult result = npu::deploy::generate(runner, package, prompt, vm["generate"].as<int64_t>());
  uint64_t prompt_cycles = 0, later_cycles = 0;
  for (size_t i = 0; i < result.cycles_per_run.size(); ++i) (i < result.prompt_runs ? prompt_cycles : later_cycles) += result.cycles_per_run[i];
  const auto us = [&](uint64_t cycles) { return double(device->cycles_to_time(cycles).count()) / 1000.0; };
  // The prompt's last run makes the first new token: its cycles are the time to the first token.
  std::printf("prompt: %zu tokens in %zu run(s) (%zu of method prefill), %llu cycles to the first new token (%.3f us on the chip)\n",
              prompt.size(), result.prompt_runs, result.prefill_runs, static_cast<unsigned long long>(prompt_cycles), us(prompt_cycles));
  std::printf("new tokens: %zu", result.tokens.size());
  if (result.tokens.size() > 1)
    std::printf(", the %zu after the first in %llu cycles (%.3f us each on the chip)", result.tokens.size() - 1,
                static_cast<unsigned long long>(later_cycles), us(later_cycles) / double(result.tokens.size() - 1));
  std::printf("\ntokens:");
  if (vm.count("timing-only")) std::printf(" (not computed: --timing-only)");
  else
    for (const int32_t token : result.tokens) std::printf(" %d", token);
  std::printf("\n");
  if (std::fflush(stdout) != 0 || std::ferror(stdout)) throw std::runtime_error("cannot write the standard output");
  return npu::cli::kExitOk;
}

}  // namespace

int sc_main(int argc, char* argv[]) {
  po::options_description options(
      "Usage: npu-run PACKAGE --input NAME=FILE... [--output NAME=FILE...]\n\n"
      "Runs a deployment package (written by npusim.export.compile) on the simulated chip it was\n"
      "compiled for, through the driver alone. Inputs and outputs are raw little-endian files of\n"
      "the tensor's dtype, contiguous (numpy: array.tofile / numpy.fromfile); --info lists them.\n"
      "Prints the device cycles of the run (inputs copied in, every kernel, up to the last one's end).\n"
      "A buffer that a run reads and then writes back (a language model's KV cache) keeps its\n"
      "contents from one run to the next; methods share it (a package may have several: --info\n"
      "lists them; a run runs --method, by default the first). With --generate, a language model's\n"
      "package generates tokens greedily from --prompt and prints them: method decode (or its only\n"
      "method; inputs: token ids i32[1,1] and position i32[1]; first output: logits [1,1,V]) runs a\n"
      "token at a time, and method prefill, if there is one (i32[1,P], i32[P]; logits [1,P,V]), runs\n"
      "the prompt P tokens at a time, what is left of it going through decode.\n"
      "Exit status: 0 success, 1 bad package or inputs or a device error, 2 bad usage.\n\nOptions");
  options.add_options()
      ("help,h", "print this help and exit")
      ("version", "print the version and exit")
      ("info", "print the package's signature, launches and memory plan, and exit")
      ("input,i", po::value<std::vector<std::string>>()->value_name("NAME=FILE"), "an input's data (every input is needed)")
      ("output,o", po::value<std::vector<std::string>>()->value_name("NAME=FILE"), "write an output's data")
      ("runs", po::value<int64_t>()->default_value(1)->value_name("N"), "run N times, 1 to 1000000 (cycles of each run are printed)")
      ("trace", po::value<std::string>()->value_name("FILE"), "write a trace of the chip and the driver (.pftrace or .json)")
      ("timing-only", "skip the arithmetic (outputs are not computed; cycles are the same)")
      ("generate", po::value<int64_t>()->value_name("N"), "generate N new tokens, 0 to 1000000, after --prompt (a language model's package)")
      ("prompt", po::value<std::string>()->value_name("TOKENS"), "the prompt's token ids for --generate: \"15,3,7\"")
      ("method", po::value<std::string>()->value_name("NAME"), "the method to run (default: the package's first)")
      ("package", po::value<std::string>(), "the package file");
  po::positional_options_description positional;
  positional.add("package", 1);
  po::variables_map vm;
  int exit_code = 0;
  if (!npu::cli::parse_command_line("npu-run", argc, argv, options, positional, &vm, &exit_code)) return exit_code;
  if (const auto code = npu::cli::handle_help_and_version("npu-run", vm, options)) return *code;
  if (!vm.count("package")) {
    std::cerr << "npu-run: error: no package file\nTry 'npu-run --help'.\n";
    return npu::cli::kExitBadUsage;
  }
  const int64_t runs = vm["runs"].as<int64_t>();
  if (runs < 1 || runs > 1000000) {
    std::cerr << "npu-run: error: --runs " << runs << ": expected 1 to 1000000\nTry 'npu-run --help'.\n";
    return npu::cli::kExitBadUsage;
  }
  const bool generating = vm.count("generate") != 0;
  if (generating != (vm.count("prompt") != 0) ||
      (generating && (vm.count("input") || vm.count("output") || !vm["runs"].defaulted() || vm.count("method")))) {
    std::cerr << "npu-run: error: --generate and --prompt go together, without --input, --output, --runs or --method\nTry 'npu-run --help'.\n";
    return npu::cli::kExitBadUsage;
  }
  if (generating && (vm["generate"].as<int64_t>() < 0 || vm["generate"].as<int64_t>() > 1000000)) {
    std::cerr << "npu-run: error: --generate " << vm["generate"].as<int64_t>() << ": expected 0 to 1000000\nTry 'npu-run --help'.\n";
    return npu::cli::kExitBadUsage;
  }
  try {
    const npu::deploy::Package package = npu::deploy::Package::read(vm["package"].as<std::string>());
    if (vm.count("info")) {
      std::cout << package.summary();
      return npu::cli::kExitOk;
    }
    if (generating) return generate(package, vm);
    const auto input_files = name_file_pairs(vm.count("input") ? vm["input"].as<std::vector<std::string>>() : std::vector<std::string>{}, "input");
    const auto output_files =
        name_file_pairs(vm.count("output") ? vm["output"].as<std::vector<std::string>>() : std::vector<std::string>{}, "output");
    const size_t method = vm.count("method") ? package.method(vm["method"].as<std::string>()) : 0;
    const std::vector<npu::deploy::TensorSpec> input_specs = package.inputs(method);
    std::vector<std::vector<uint8_t>> inputs;
    for (const npu::deploy::TensorSpec& spec : input_specs) {
      const auto it = input_files.find(spec.name);
      if (it == input_files.end()) throw npu::deploy::PackageError("no --input for " + spec.to_string() + " (npu-run --info lists the inputs)");
      inputs.push_back(read_file(it->second));
    }
    for (const auto& [name, file] : input_files) {
      bool known = false;
      for (const auto& spec : input_specs) known |= spec.name == name;
      if (!known) throw npu::deploy::PackageError("--input " + name + ": the package has no input of that name");
    }
    const std::vector<npu::deploy::TensorSpec> outputs = package.outputs(method);
    for (const auto& [name, file] : output_files) {
      bool known = false;
      for (const auto& spec : outputs) known |= spec.name == name;
      if (!known) throw npu::deploy::PackageError("--output " + name + ": the package has no output of that name");
      npu::check_output_path(file);  // before the run, which may be long
    }
    if (vm.count("trace")) npu::check_output_path(vm["trace"].as<std::string>());

    auto device = open_device(package, vm);
    npu::deploy::PackageRunner runner(device, package);
    npu::deploy::PackageRunner::Result result;
    for (int64_t run = 0; run < runs; ++run) {
      result = runner.run(method, inputs);
      const double us = double(device->cycles_to_time(result.cycles).count()) / 1000.0;
      std::printf("run %lld: %llu cycles (%.3f us on the chip)\n", static_cast<long long>(run), static_cast<unsigned long long>(result.cycles), us);
    }
    // Every output or none: a failed write leaves each path as it was.
    npu::OutputFiles files;
    for (size_t i = 0; i < outputs.size(); ++i) {
      const auto it = output_files.find(outputs[i].name);
      if (it != output_files.end())
        files.stage(it->second, std::string_view(reinterpret_cast<const char*>(result.outputs[i].data()), result.outputs[i].size()));
    }
    files.commit();
    if (std::fflush(stdout) != 0 || std::ferror(stdout)) throw std::runtime_error("cannot write the standard output");
    return npu::cli::kExitOk;
  } catch (const npu::deploy::PackageError& e) {
    std::cerr << "npu-run: error: " << e.what() << "\n";
  } catch (const npu::Error& e) {
    std::cerr << "npu-run: device error: " << e.what() << "\n";
  } catch (const std::exception& e) {
    std::cerr << "npu-run: error: " << e.what() << "\n";
  }
  return npu::cli::kExitBadInput;
}

NPUSIM_SYSTEMC_MAIN
