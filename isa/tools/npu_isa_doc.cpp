// npu-isa-doc: print docs/isa.md, generated from the instruction table.
#include <iostream>

#include "cli.h"
#include "npusim/isa/docgen.h"

namespace po = boost::program_options;

int main(int argc, char** argv) {
  po::options_description options(
      "Usage: npu-isa-doc > docs/isa.md\n\n"
      "Prints the ISA reference generated from isa/isa.def as Markdown.\n\nOptions");
  options.add_options()("help,h", "print this help and exit")("version", "print the version and exit");
  po::positional_options_description positional;
  po::variables_map vm;
  int exit_code = 0;
  if (!npu::cli::parse_command_line("npu-isa-doc", argc, argv, options, positional, &vm, &exit_code)) return exit_code;
  if (const auto code = npu::cli::handle_help_and_version("npu-isa-doc", vm, options)) return *code;
  std::cout << npu::isa::generate_isa_markdown();
  return npu::cli::exit_after_flushing("npu-isa-doc");
}
