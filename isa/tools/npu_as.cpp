// npu-as: assemble an npusim assembly file into an .npubin program.
#include <filesystem>
#include <iostream>

#include "cli.h"
#include "npusim/common/output_files.h"
#include "npusim/isa/assembler.h"
#include "npusim/isa/program.h"

namespace po = boost::program_options;

int main(int argc, char** argv) {
  po::options_description options(
      "Usage: npu-as INPUT.s [-o OUTPUT.npubin]\n\n"
      "Assembles npusim assembly (syntax: docs/assembly.md, instructions: docs/isa.md) into a\n"
      "program file. Errors are reported as FILE:LINE:COL: error: MESSAGE with the source line;\n"
      "all errors of a file are shown (up to --max-errors) and the output file is left as it was\n"
      "(a program is written whole or not at all; an output that is the input, or that is not a\n"
      "regular file, such as a directory or a device, is refused).\n"
      "Exit status: 0 success, 1 errors in the input, 2 bad usage.\n\nOptions");
  options.add_options()
      ("help,h", "print this help and exit")
      ("version", "print the version and exit")
      ("output,o", po::value<std::string>()->value_name("FILE"), "output file (default: INPUT with extension .npubin)")
      ("max-errors", po::value<unsigned>()->default_value(20)->value_name("N"), "stop after N errors")
      ("input", po::value<std::string>(), "input assembly file");
  po::positional_options_description positional;
  positional.add("input", 1);
  po::variables_map vm;
  int exit_code = 0;
  if (!npu::cli::parse_command_line("npu-as", argc, argv, options, positional, &vm, &exit_code)) return exit_code;
  if (const auto code = npu::cli::handle_help_and_version("npu-as", vm, options)) return *code;
  if (!vm.count("input")) {
    std::cerr << "npu-as: error: no input file\nTry 'npu-as --help'.\n";
    return npu::cli::kExitBadUsage;
  }
  const std::string input = vm["input"].as<std::string>();
  std::string output = vm.count("output") ? vm["output"].as<std::string>() : "";
  if (output.empty()) output = std::filesystem::path(input).replace_extension(".npubin").string();

  // The output is refused before any work when it could not be written or would replace what is not a
  // program the build made: the source itself, or anything that is not a regular file.
  std::error_code same_error;
  if (std::filesystem::equivalent(input, output, same_error)) {
    std::cerr << "npu-as: error: the output '" << output << "' is the input file (give another with -o)\n";
    return npu::cli::kExitBadUsage;
  }
  try {
    npu::check_output_path(output);
  } catch (const npu::OutputFileError& e) {
    std::cerr << "npu-as: error: " << e.what() << "\n";
    return npu::cli::kExitBadInput;
  }

  npu::isa::AssembleOptions assemble_options;
  assemble_options.max_errors = std::max(1u, vm["max-errors"].as<unsigned>());
  assemble_options.default_metadata = {{"tool", std::string("npu-as ") + NPUSIM_VERSION}};
  const npu::isa::AssembleResult result = npu::isa::assemble_file(input, assemble_options);
  if (!result.program) {
    // The output is left as it was: a failed build replaces nothing (and removes nothing: -o may name a
    // file that was never ours).
    for (const npu::isa::Diagnostic& diagnostic : result.errors) std::cerr << diagnostic.format();
    std::cerr << result.errors.size() << " error" << (result.errors.size() == 1 ? "" : "s") << " in " << input << "\n";
    return npu::cli::kExitBadInput;
  }
  try {
    npu::isa::save_program(*result.program, output);  // whole or not at all
  } catch (const std::exception& e) {
    std::cerr << "npu-as: error: " << e.what() << "\n";
    return npu::cli::kExitBadInput;
  }
  return npu::cli::kExitOk;
}
