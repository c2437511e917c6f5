#include "npusim/compiler/program_builder.h"

#include <stdexcept>

#include "npusim/isa/isa.h"

namespace npu::compiler {

ProgramBuilder::ProgramBuilder(std::string name) { program_.metadata.emplace_back("source", std::move(name)); }

uint16_t ProgramBuilder::add_symbol(const std::string& name, isa::SymbolKind kind, isa::DType dtype, std::vector<uint64_t> shape) {
  isa::Symbol symbol;
  symbol.name = name;
  symbol.kind = kind;
  symbol.dtype = dtype;
  symbol.shape = std::move(shape);
  program_.symbols.push_back(std::move(symbol));
  return static_cast<uint16_t>(program_.symbols.size() - 1);
}

uint16_t ProgramBuilder::input(const std::string& name, isa::DType dtype, std::vector<uint64_t> shape) {
  return add_symbol(name, isa::SymbolKind::Input, dtype, std::move(shape));
}

uint16_t ProgramBuilder::output(const std::string& name, isa::DType dtype, std::vector<uint64_t> shape) {
  return add_symbol(name, isa::SymbolKind::Output, dtype, std::move(shape));
}

Reg ProgramBuilder::reg() {
  for (unsigned i = 1; i < isa::kNumRegisters; ++i)
    if (!(used_registers_ & (1u << i))) {
      used_registers_ |= 1u << i;
      return Reg{i};
    }
  throw std::logic_error("kernel needs more than 31 scalar registers");
}

void ProgramBuilder::release(Reg r) {
  if (r.index != 0) used_registers_ &= ~(1u << r.index);
}

Label ProgramBuilder::label() {
  label_targets_.push_back(-1);
  return Label{label_targets_.size() - 1};
}

void ProgramBuilder::bind(Label label) { label_targets_.at(label.id) = static_cast<int64_t>(words_.size()); }

void ProgramBuilder::emit(isa::Opcode opcode, std::initializer_list<int64_t> operands) {
  isa::Instruction instruction;
  instruction.opcode = opcode;
  const isa::InstructionSpec* spec = isa::find_instruction(opcode);
  if (spec == nullptr || operands.size() != spec->operands.size())
    throw std::logic_error("emit: wrong operand count for " + (spec ? spec->mnemonic : std::string("an unknown opcode")));
  size_t i = 0;
  for (const int64_t operand : operands) instruction.operands[i++] = operand;
  std::string error;
  const auto word = isa::encode(instruction, &error);
  if (!word) throw std::logic_error("emit " + spec->mnemonic + ": " + error);
  words_.push_back(*word);
}

void ProgramBuilder::branch(isa::Opcode opcode, std::initializer_list<int64_t> operands_before_offset, Label target) {
  const isa::InstructionSpec* spec = isa::find_instruction(opcode);
  if (spec == nullptr || spec->operands.empty() || spec->operands.back().kind != isa::OperandKind::Target ||
      operands_before_offset.size() + 1 != spec->operands.size())
    throw std::logic_error("branch: not a branch with these operands");
  Fixup fixup;
  fixup.at = words_.size();
  fixup.instruction.opcode = opcode;
  size_t i = 0;
  for (const int64_t operand : operands_before_offset) fixup.instruction.operands[i++] = operand;
  fixup.offset_operand = i;
  fixup.label = target.id;
  fixups_.push_back(fixup);
  words_.push_back(0);  // patched in finish()
}

void ProgramBuilder::li(Reg rd, int64_t value) {
  if (value >= INT32_MIN && value <= INT32_MAX) {
    emit(isa::Opcode::LI, {rd.index, value});
    return;
  }
  emit(isa::Opcode::LI, {rd.index, static_cast<int32_t>(static_cast<uint32_t>(value))});
  emit(isa::Opcode::LIH, {rd.index, static_cast<int64_t>(static_cast<uint64_t>(value) >> 32)});
}

void ProgramBuilder::scaled_address(Reg out, Reg base, std::initializer_list<std::pair<Reg, int64_t>> terms, int64_t esize_bytes, Reg tmp) {
  mov(out, base);
  for (const auto& [index, stride] : terms) {
    if (stride == 0) continue;
    li(tmp, stride * esize_bytes);
    mul(tmp, tmp, index);
    add(out, out, tmp);
  }
}

void ProgramBuilder::tile_address(Reg out, Reg base, Reg p, const std::vector<int64_t>& plane_dims, const std::vector<int64_t>& plane_strides,
                                  std::initializer_list<std::pair<Reg, int64_t>> terms, int64_t esize_bytes, Reg tmp) {
  if (plane_dims.size() <= 1) {
    scaled_address(out, base, {{p, plane_strides.empty() ? 0 : plane_strides[0]}}, esize_bytes, tmp);
  } else {
    // Innermost digit first: digit = rest % dim, rest /= dim.
    const Reg rest = reg(), digit = reg();
    mov(out, base);
    mov(rest, p);
    for (size_t d = plane_dims.size(); d-- > 0;) {
      li(tmp, plane_dims[d]);
      emit(isa::Opcode::REMU, {digit.index, rest.index, tmp.index});
      if (d > 0) emit(isa::Opcode::DIVU, {rest.index, rest.index, tmp.index});
      if (plane_strides[d] == 0) continue;
      li(tmp, plane_strides[d] * esize_bytes);
      mul(tmp, tmp, digit);
      add(out, out, tmp);
    }
    release(rest), release(digit);
  }
  for (const auto& [index, stride] : terms) {
    if (stride == 0) continue;
    li(tmp, stride * esize_bytes);
    mul(tmp, tmp, index);
    add(out, out, tmp);
  }
}

void ProgramBuilder::tile_origin(Reg t, int64_t rows, int64_t cols, int64_t tile_rows, int64_t tile_cols, Reg p, Reg i0, Reg j0, Reg mt,
                                 Reg nt, Reg tmp) {
  const int64_t row_tiles = (rows + tile_rows - 1) / tile_rows, col_tiles = (cols + tile_cols - 1) / tile_cols;
  li(tmp, row_tiles * col_tiles);
  emit(isa::Opcode::DIVU, {p.index, t.index, tmp.index});
  emit(isa::Opcode::REMU, {i0.index, t.index, tmp.index});
  li(tmp, col_tiles);
  emit(isa::Opcode::REMU, {j0.index, i0.index, tmp.index});
  emit(isa::Opcode::DIVU, {i0.index, i0.index, tmp.index});
  muli(i0, i0, tile_rows);
  muli(j0, j0, tile_cols);
  li(tmp, rows);
  sub(mt, tmp, i0);
  li(tmp, tile_rows);
  min(mt, mt, tmp);
  li(tmp, cols);
  sub(nt, tmp, j0);
  li(tmp, tile_cols);
  min(nt, nt, tmp);
}

void ProgramBuilder::split_over_cores(int64_t total, Reg first, Reg end) {
  const Reg core = reg(), ncores = reg(), count = reg();
  emit(isa::Opcode::CSRR, {core.index, 0});
  emit(isa::Opcode::CSRR, {ncores.index, 1});
  li(count, total);
  mul(first, core, count);
  emit(isa::Opcode::DIVU, {first.index, first.index, ncores.index});
  addi(end, core, 1);
  mul(end, end, count);
  emit(isa::Opcode::DIVU, {end.index, end.index, ncores.index});
  release(core), release(ncores), release(count);
}

void ProgramBuilder::rotation_over_cores(Reg first, Reg end, Reg rotation) {
  const Reg count = reg();
  const Label empty = label();
  li(rotation, 0);
  sub(count, end, first);
  branch(isa::Opcode::BGE, {first.index, end.index}, empty);
  emit(isa::Opcode::CSRR, {rotation.index, 0});
  emit(isa::Opcode::REMU, {rotation.index, rotation.index, count.index});
  bind(empty);
  release(count);
}

void ProgramBuilder::visited_item(Reg item, Reg i, Reg first, Reg end, Reg rotation) {
  const Label inside = label();
  add(item, i, rotation);
  branch(isa::Opcode::BLT, {item.index, end.index}, inside);
  sub(item, item, end), add(item, item, first);
  bind(inside);
}

isa::Program ProgramBuilder::finish() {
  for (const Fixup& fixup : fixups_) {
    const int64_t target = label_targets_.at(fixup.label);
    if (target < 0) throw std::logic_error("branch to a label that was never bound");
    isa::Instruction instruction = fixup.instruction;
    instruction.operands[fixup.offset_operand] = target - static_cast<int64_t>(fixup.at);
    std::string error;
    const auto word = isa::encode(instruction, &error);
    if (!word) throw std::logic_error("branch: " + error);
    words_[fixup.at] = *word;
  }
  isa::Program program = program_;
  isa::CodeSection section;
  section.core_mask = isa::kAllCores;
  section.words = words_;
  program.code.push_back(std::move(section));
  isa::validate_program(program);
  return program;
}

}  // namespace npu::compiler
