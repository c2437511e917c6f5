#include "npusim/isa/docgen.h"

#include <sstream>

#include "npusim/isa/dtype.h"
#include "npusim/isa/isa.h"

namespace npu::isa {
namespace {

std::string field_range(const OperandSpec& operand) {
  const unsigned high = operand.shift + operand.bits - 1;
  return operand.bits == 1 ? std::to_string(operand.shift) : std::to_string(high) + ":" + std::to_string(operand.shift);
}

// Markdown table cells cannot hold a bare '|'.
std::string cell(const std::string& text) {
  std::string out;
  for (const char c : text) {
    if (c == '|') out += '\\';
    out += c;
  }
  return out;
}

std::string hex2(unsigned value) {
  const char* digits = "0123456789abcdef";
  return std::string("0x") + digits[(value >> 4) & 15] + digits[value & 15];
}

}  // namespace

std::string generate_isa_markdown() {
  std::ostringstream out;
  out << "# npusim ISA reference (version " << kIsaVersion << ")\n\n"
      << "<!-- Generated from isa/isa.def by `npu-isa-doc`; do not edit. A test fails when this file is stale:\n"
      << "     regenerate with `build/bin/npu-isa-doc > docs/isa.md`. -->\n\n"
      << "Every instruction is one 64-bit little-endian word. Bits 7:0 hold the opcode (0 is never valid); the operand\n"
      << "fields follow from bit 8 upward in the order the operands are written; every bit above the last field is\n"
      << "reserved and must be zero, or the word does not decode (the device faults with an invalid-instruction error).\n\n"
      << "Each core has a control unit that fetches and decodes instructions in order and executes the control\n"
      << "instructions itself; DMA, tensor-core and vector instructions are queued on their engine and run\n"
      << "asynchronously, in order within each engine queue (each DMA channel is its own queue). Engines synchronize\n"
      << "through counting semaphores with `sync.signal` and `sync.wait`; `fence` drains the core, `barrier` joins\n"
      << "the cores of a launch. `halt` ends the core's program once its queues drain. Every launch starts with its\n"
      << "cores' registers and semaphores at 0; core ids (`csrr coreid`) count the launch's cores from 0.\n\n"
      << "The control unit reads the register operands of an engine instruction when it dispatches it, so later\n"
      << "register writes do not change queued work; it stalls while the target queue is full. Within one queue each\n"
      << "instruction completes before the next starts. The operands of one instruction may be the same region\n"
      << "(in-place elementwise operations); partially overlapping operands give undefined values. `dma.send` raises\n"
      << "the remote semaphore even when it copies nothing.\n\n"
      << "## Memory\n\n"
      << "* **Global** addresses are byte addresses in device DRAM, 64-bit. Programs get them from `la` (the address\n"
      << "  the launcher bound to a buffer symbol) or from launch arguments (`csrr rd, arg0`).\n"
      << "* **Local** addresses name the executing core's memories: `[0, sram_bytes)` is the scratchpad,\n"
      << "  `[ACC_BASE, ACC_BASE + acc_bytes)` the accumulator, with ACC_BASE = 0x" << std::hex << kAccumulatorBase << std::dec
      << ". Sizes come from the chip config.\n"
      << "* Tiles in local memory are dense and row-major: element (i, j) of a rows x cols tile of type t is at\n"
      << "  `base + (i * cols + j) * sizeof(t)`. Layout changes (strides, transposes of large blocks) are the DMA's job.\n"
      << "* Local operand addresses must be aligned to their element size.\n\n"
      << "## Element types\n\n| name | bytes | kind |\n|---|---|---|\n";
  for (unsigned i = 0; i < kNumDTypes; ++i) {
    const auto dtype = static_cast<DType>(i);
    out << "| `" << dtype_name(dtype) << "` | " << dtype_size_bytes(dtype) << " | "
        << (dtype_is_float(dtype) ? "floating point" : "integer") << " |\n";
  }
  out << "\nFloating-point arithmetic is computed in f32 and rounded to the destination type, to nearest, ties to\n"
      << "even. The tensor core accumulates in f32 (i32 for i8 inputs).\n\n"
      << "## Operand kinds\n\n| kind | bits | assembly | values |\n|---|---|---|---|\n";
  const OperandKind kinds[] = {OperandKind::Reg,     OperandKind::Sem, OperandKind::Eng,  OperandKind::DType, OperandKind::Bcast,
                               OperandKind::Axis,    OperandKind::TcFlags, OperandKind::Csr, OperandKind::Chan,
                               OperandKind::Sym};
  for (const OperandKind kind : kinds) {
    unsigned bits = 0;
    for (const InstructionSpec& spec : instruction_table())
      for (const OperandSpec& operand : spec.operands)
        if (operand.kind == kind) bits = operand.bits;
    const OperandSpec sample{"x", kind, bits, 0};
    std::string values;
    const auto& names = operand_value_names(kind);
    for (size_t i = 0; i < names.size(); ++i)
      values += (values.empty() ? "" : ", ") + std::string("`") + names[i] + "`=" + std::to_string(kind == OperandKind::TcFlags ? (1u << i) : i);
    if (kind == OperandKind::Reg) values = "`r0`..`r31`; `r0` (alias `zero`) always reads 0";
    if (kind == OperandKind::Sem) values = "`s0`..`s" + std::to_string(kNumSemaphores - 1) + "`, counting semaphores, 0 at launch";
    if (kind == OperandKind::Sym) values = "index into the program's symbol table; must name a global buffer";
    if (kind == OperandKind::TcFlags) values = "`none` or flags joined by `|`: " + values;
    out << "| `" << operand_kind_name(kind) << "` | " << bits << " | " << cell(describe_operand(sample)) << " | " << cell(values) << " |\n";
  }
  out << "| `simmN` | N | signed integer expression | two's complement |\n"
      << "| `uimmN` | N | unsigned integer expression | |\n"
      << "| `targetN` | N | label, or `.+K` / `.-K` | offset in instructions from the branch itself |\n";

  const Engine engines[] = {Engine::Control, Engine::Dma, Engine::Tensor, Engine::Vector};
  const char* titles[] = {"Control unit", "DMA engine", "Tensor core", "Vector unit"};
  for (size_t e = 0; e < 4; ++e) {
    out << "\n## " << titles[e] << "\n\n| opcode | syntax | semantics | encoding |\n|---|---|---|---|\n";
    for (const InstructionSpec& spec : instruction_table()) {
      if (spec.engine != engines[e]) continue;
      std::string syntax = "`" + spec.mnemonic;
      std::string encoding = "op 7:0";
      for (size_t i = 0; i < spec.operands.size(); ++i) {
        const OperandSpec& operand = spec.operands[i];
        syntax += (i == 0 ? " " : ", ") + operand.name;
        std::string kind = operand_kind_name(operand.kind);
        if (operand.kind == OperandKind::SImm || operand.kind == OperandKind::UImm || operand.kind == OperandKind::Target)
          kind += std::to_string(operand.bits);
        encoding += "; " + operand.name + ":" + kind + " " + field_range(operand);
      }
      syntax += "`";
      out << "| " << hex2(static_cast<unsigned>(spec.opcode)) << " | " << syntax << " | " << cell(spec.semantics) << " | " << encoding << " |\n";
    }
  }
  out << "\n## DMA shapes\n\n"
      << "`dma.ld`, `dma.st`, `dma.cp` and `dma.gg` copy a 3-D block: `n2` planes of `n1` rows of `n0` contiguous bytes.\n"
      << "Row r of plane p starts at `src + p*src_s2 + r*src_s1` and lands at `dst + p*dst_s2 + r*dst_s1`. A register\n"
      << "holding 0 in `n1` or `n2` counts as 1, so `r0` there gives a 2-D or 1-D copy; `n0` = 0 copies nothing.\n";
  return out.str();
}

}  // namespace npu::isa
