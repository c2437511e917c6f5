// Entry point for executables that link SystemC. libsystemc's own main()
// prints a copyright banner on stdout before anything else; tools must own
// their output, so they define main() with this macro, which silences the
// banner and then enters SystemC (which calls the sc_main they define).
#pragma once

#include <systemc>

#include <cstdlib>

#define NPUSIM_SYSTEMC_MAIN                                     \
  int main(int argc, char* argv[]) {                            \
    setenv("SYSTEMC_DISABLE_COPYRIGHT_MESSAGE", "1", 1);        \
    return sc_core::sc_elab_and_sim(argc, argv);                \
  }
