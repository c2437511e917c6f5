#include <gtest/gtest.h>

#include "npusim/sim/systemc_main.h"

int sc_main(int argc, char* argv[]) {
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}

NPUSIM_SYSTEMC_MAIN
