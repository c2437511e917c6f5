// GoogleTest entry for the chip-model tests. libsystemc's main() calls
// sc_main; SystemC allows one elaboration per process, so ctest runs every
// test case in a process of its own (gtest_discover_tests).
#include <gtest/gtest.h>

#include "npusim/sim/systemc_main.h"

int sc_main(int argc, char* argv[]) {
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}

NPUSIM_SYSTEMC_MAIN
