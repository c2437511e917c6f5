// Shared conventions of the npusim command-line tools: exit status 0 on
// success, 1 on bad input, 2 on bad usage; messages "TOOL: error: ...".
#pragma once

#include <iostream>
#include <optional>
#include <string>

#include <boost/program_options.hpp>

#include "npusim/version.h"

namespace npu::cli {

inline constexpr int kExitOk = 0;
inline constexpr int kExitBadInput = 1;
inline constexpr int kExitBadUsage = 2;

inline void print_version(const char* tool) { std::cout << tool << " (npusim) " << NPUSIM_VERSION << "\n"; }

// Parses argv; on a usage error prints it and returns false with *exit_code = 2.
inline bool parse_command_line(const char* tool, int argc, char** argv, const boost::program_options::options_description& options,
                               const boost::program_options::positional_options_description& positional,
                               boost::program_options::variables_map* vm, int* exit_code) {
  namespace po = boost::program_options;
  try {
    po::store(po::command_line_parser(argc, argv).options(options).positional(positional).run(), *vm);
    po::notify(*vm);
    return true;
  } catch (const po::error& e) {
    std::cerr << tool << ": error: " << e.what() << "\n" << "Try '" << tool << " --help'.\n";
    *exit_code = kExitBadUsage;
    return false;
  }
}

// --help and --version, the same for every tool: the exit code if one of them
// was asked for (the tool then stops), nothing otherwise.
inline std::optional<int> handle_help_and_version(const char* tool, const boost::program_options::variables_map& vm,
                                                  const boost::program_options::options_description& options) {
  if (vm.count("help")) {
    std::cout << options << "\n";
    return kExitOk;
  }
  if (vm.count("version")) {
    print_version(tool);
    return kExitOk;
  }
  return std::nullopt;
}

// What a tool returns at its end: `code`, unless its standard output could not be written (a full disk, a
// closed pipe), which is a failure like any other failed write.
inline int exit_after_flushing(const char* tool, int code = kExitOk) {
  if (!std::cout.flush()) {
    std::cerr << tool << ": error: cannot write the standard output\n";
    return kExitBadInput;
  }
  return code;
}

}  // namespace npu::cli
