// npu-packets-doc: print docs/packets.md, generated from the packet table.
#include <iostream>

#include "cli.h"
#include "npusim/firmware/packets.h"

namespace po = boost::program_options;

int main(int argc, char** argv) {
  po::options_description options(
      "Usage: npu-packets-doc > docs/packets.md\n\n"
      "Prints the command-packet reference generated from firmware/packets.def as Markdown.\n\nOptions");
  options.add_options()("help,h", "print this help and exit")("version", "print the version and exit");
  po::positional_options_description positional;
  po::variables_map vm;
  int exit_code = 0;
  if (!npu::cli::parse_command_line("npu-packets-doc", argc, argv, options, positional, &vm, &exit_code)) return exit_code;
  if (vm.count("help")) {
    std::cout << options << "\n";
    return npu::cli::exit_after_flushing("npu-packets-doc");
  }
  if (vm.count("version")) {
    npu::cli::print_version("npu-packets-doc");
    return npu::cli::exit_after_flushing("npu-packets-doc");
  }
  std::cout << npu::firmware::generate_packet_markdown();
  return npu::cli::exit_after_flushing("npu-packets-doc");
}
