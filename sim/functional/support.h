// Small helpers shared by the kernels: instruction names for error messages,
// and overlap tests for the operands that in-place execution could clobber.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "npusim/isa/isa.h"

namespace npu::sim::functional {

inline std::string mnemonic(isa::Opcode op) {
  const isa::InstructionSpec* spec = isa::find_instruction(op);
  return spec ? spec->mnemonic : "opcode " + std::to_string(static_cast<unsigned>(op));
}

inline bool regions_overlap(const void* a, size_t a_bytes, const void* b, size_t b_bytes) {
  const auto a_begin = reinterpret_cast<uintptr_t>(a);
  const auto b_begin = reinterpret_cast<uintptr_t>(b);
  return a_bytes != 0 && b_bytes != 0 && a_begin < b_begin + b_bytes && b_begin < a_begin + a_bytes;
}

// src itself, or a copy in scratch when writing dst could change src before it
// has all been read.
inline const uint8_t* stable_source(const uint8_t* dst, size_t dst_bytes, const uint8_t* src, size_t src_bytes,
                                    std::vector<uint8_t>& scratch) {
  if (!regions_overlap(dst, dst_bytes, src, src_bytes)) return src;
  scratch.assign(src, src + src_bytes);
  return scratch.data();
}

}  // namespace npu::sim::functional
