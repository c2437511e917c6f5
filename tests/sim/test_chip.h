// A small chip config with round numbers, so that golden tests can state the
// expected cycles as arithmetic; and helpers to assemble and run programs.
#pragma once

#include <string>
#include <vector>

#include "npusim/isa/assembler.h"
#include "npusim/sim/chip_config.h"
#include "npusim/sim/simulator.h"

namespace npu::sim::testing {

// 1 GHz; array 4x4 weight-stationary; vector 8 lanes (latency 4, 1 cycle per
// vector); scratchpad 64 KiB as 8 banks x 8 B (64 B/cycle); accumulator
// 16 KiB as 4 x 16 B; DMA: 2 channels, 5-cycle descriptor, 64-byte requests,
// 64 outstanding; NoC: 16 B/cycle links, 2-cycle routers; DRAM: 16 MiB,
// 2 channels x 32 B/cycle, 4 banks, 1 KiB rows, 256-byte interleave,
// hit/closed/conflict 10/20/30 cycles, no refresh, one port at (0,0).
ChipConfig test_config(unsigned cores = 1, unsigned mesh_cols = 1, unsigned mesh_rows = 1);

isa::Program assemble(const std::string& source);

// Binds every global buffer symbol to consecutive 64 KiB-aligned DRAM addresses.
std::vector<uint64_t> bind_symbols(const isa::Program& program);

}  // namespace npu::sim::testing
