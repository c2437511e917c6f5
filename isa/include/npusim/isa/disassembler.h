// npu-objdump's two views of a program.
#pragma once

#include <ostream>

#include "npusim/isa/program.h"

namespace npu::isa {

// Human listing: header, metadata, symbols, data sections (hex), and each
// code section with addresses, encodings, labels and instructions.
void write_listing(const Program& program, std::ostream& out);

// Plain assembly that npu-as turns back into a byte-identical .npubin.
void write_assembly(const Program& program, std::ostream& out);

std::string format_core_mask(uint64_t mask);

}  // namespace npu::isa
