// f32 products on a tensor core that takes bf16 but not f32, shared by the
// matmul and the attention kernels: each f32 operand tile is the sum of
// `parts` bf16 parts (part = bf16(r), r -= f32(part), starting from r = x),
// and the products of parts i and j with i + j < parts are accumulated in f32
// (the others fall below f32's resolution), as
// torch.set_float32_matmul_precision describes: 3 parts and 6 products for
// "highest", 2 and 3 for "high", 1 and 1 for "medium".
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "npusim/compiler/op.h"
#include "npusim/compiler/program_builder.h"
#include "npusim/isa/isa.h"

namespace npu::compiler {

inline int64_t f32_split_parts(F32MatmulPrecision precision) {
  return precision == F32MatmulPrecision::Highest ? 3 : precision == F32MatmulPrecision::High ? 2 : 1;
}

// The (part of the first operand, part of the second) of each product, smallest
// first, so that the small ones accumulate before the large one joins them.
inline std::vector<std::pair<int64_t, int64_t>> f32_split_products(int64_t parts) {
  std::vector<std::pair<int64_t, int64_t>> products;
  for (int64_t order = parts - 1; order >= 0; --order)
    for (int64_t i = 0; i <= order; ++i) products.push_back({i, order - i});
  return products;
}

// Emits, on the vector unit, the split of the rows x cols f32 tile at `raw`
// (overwritten: it ends as the last residual) into `parts` bf16 tiles at
// `part`, `part_bytes` apart; `part` is advanced past the last one's start and
// `temp` (the address of an f32 tile as large) holds each part back in f32.
inline void emit_f32_split(ProgramBuilder& pb, int64_t parts, Reg raw, Reg part, int64_t part_bytes, Reg temp, Reg rows, Reg cols) {
  const int64_t bf16 = int64_t(isa::DType::BF16), f32 = int64_t(isa::DType::F32);
  for (int64_t p = 0; p < parts; ++p) {
    pb.emit(isa::Opcode::V_CVT, {bf16, f32, part.index, raw.index, rows.index, cols.index});
    if (p + 1 == parts) break;
    pb.emit(isa::Opcode::V_CVT, {f32, bf16, temp.index, part.index, rows.index, cols.index});
    pb.emit(isa::Opcode::V_SUB, {f32, 0, raw.index, raw.index, temp.index, rows.index, cols.index});
    pb.addi(part, part, part_bytes);
  }
}

}  // namespace npu::compiler
