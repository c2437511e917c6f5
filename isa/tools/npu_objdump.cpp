// npu-objdump: print what an .npubin program contains.
#include <iostream>

#include "cli.h"
#include "npusim/isa/disassembler.h"
#include "npusim/isa/program.h"

namespace po = boost::program_options;

int main(int argc, char** argv) {
  po::options_description options(
      "Usage: npu-objdump [--asm] INPUT.npubin\n\n"
      "Prints an npusim program: metadata, symbols, data sections, and each code section with\n"
      "addresses, instruction words and disassembly. With --asm, prints plain assembly instead,\n"
      "which npu-as assembles back to a byte-identical file.\n"
      "Exit status: 0 success, 1 unreadable or invalid program, 2 bad usage.\n\nOptions");
  options.add_options()
      ("help,h", "print this help and exit")
      ("version", "print the version and exit")
      ("asm,S", "print plain assembly that reassembles to the same file")
      ("input", po::value<std::string>(), "input program file");
  po::positional_options_description positional;
  positional.add("input", 1);
  po::variables_map vm;
  int exit_code = 0;
  if (!npu::cli::parse_command_line("npu-objdump", argc, argv, options, positional, &vm, &exit_code)) return exit_code;
  if (const auto code = npu::cli::handle_help_and_version("npu-objdump", vm, options)) return *code;
  if (!vm.count("input")) {
    std::cerr << "npu-objdump: error: no input file\nTry 'npu-objdump --help'.\n";
    return npu::cli::kExitBadUsage;
  }
  try {
    const npu::isa::Program program = npu::isa::load_program(vm["input"].as<std::string>());
    if (vm.count("asm")) {
      npu::isa::write_assembly(program, std::cout);
    } else {
      npu::isa::write_listing(program, std::cout);
    }
  } catch (const npu::isa::ProgramFormatError& e) {
    std::cerr << "npu-objdump: error: " << e.what() << "\n";
    return npu::cli::kExitBadInput;
  }
  return npu::cli::exit_after_flushing("npu-objdump");
}
