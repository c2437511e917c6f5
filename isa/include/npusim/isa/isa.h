// Typed view of the instruction table in isa/isa.def, and the fixed-width
// 64-bit instruction encoding derived from it.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace npu::isa {

// Version of the instruction encoding. Bump on any change to isa.def that
// changes the meaning of an existing word.
inline constexpr uint32_t kIsaVersion = 2;  // 2: 32 semaphores (the sem field 5 bits wide)

inline constexpr unsigned kWordBits = 64;
inline constexpr unsigned kOpcodeBits = 8;
inline constexpr unsigned kMaxOperands = 11;
inline constexpr unsigned kNumRegisters = 32;
// 32: a matmul that shares both operands over the NoC takes a data and a credit semaphore per peer
// in each of its two groups, besides its local rings (compiler/src/matmul_shared.cpp).
inline constexpr unsigned kNumSemaphores = 32;
inline constexpr unsigned kRegisterFieldBits = 5, kSemaphoreFieldBits = 5;  // their operand fields
static_assert(1u << kRegisterFieldBits == kNumRegisters && 1u << kSemaphoreFieldBits == kNumSemaphores);
// Local addresses at or above this are in the accumulator SRAM.
inline constexpr uint64_t kAccumulatorBase = 0x40000000;
// Local addresses are below this (scratchpad below kAccumulatorBase, accumulator above).
inline constexpr uint64_t kLocalAddressLimit = 0x80000000;

enum class Opcode : uint8_t {
  Invalid = 0,
#define NPU_INSTRUCTION(ID, OPCODE, MNEMONIC, ENGINE, OPERANDS, SEMANTICS) ID = OPCODE,
#include "isa.def"
};

enum class Engine : uint8_t { Control, Dma, Tensor, Vector };

enum class OperandKind : uint8_t {
  Reg, Sem, Eng, DType, Bcast, Axis, TcFlags, Csr, Chan, Sym, SImm, UImm, Target
};

// Values of the enumerated operand kinds, in the order isa.def names them.
enum class DType : uint8_t { F32, BF16, F16, I8, I32, U8 };
enum class EngineId : uint8_t { Ctl, Dma0, Dma1, Dma2, Dma3, Tc, Vec };
enum class Bcast : uint8_t { Full, Row, Col, Scalar };
enum class Axis : uint8_t { Axis0, Axis1 };
enum TcFlag : uint8_t { kTcAcc = 1, kTcTransposeA = 2, kTcTransposeB = 4 };
enum class Csr : uint8_t { CoreId, NumCores, Cycle, Arg0 };

struct OperandSpec {
  std::string name;
  OperandKind kind;
  unsigned bits;   // field width in the word
  unsigned shift;  // position of the field's lowest bit
};

struct InstructionSpec {
  Opcode opcode;
  std::string mnemonic;
  Engine engine;
  std::vector<OperandSpec> operands;
  std::string semantics;
};

// A decoded instruction: operand values in assembly order. Signed kinds hold
// their sign-extended value; enumerated kinds hold their index.
struct Instruction {
  Opcode opcode = Opcode::Invalid;
  std::array<int64_t, kMaxOperands> operands{};

  bool operator==(const Instruction& other) const {
    return opcode == other.opcode && operands == other.operands;
  }
};

// All instructions, in isa.def order.
const std::vector<InstructionSpec>& instruction_table();
const InstructionSpec* find_instruction(Opcode opcode);
const InstructionSpec* find_instruction(uint8_t opcode);
const InstructionSpec* find_instruction(std::string_view mnemonic);

// Enumerated operand kinds: value names in order (empty for non-enumerated).
const std::vector<std::string>& operand_value_names(OperandKind kind);
const char* operand_kind_name(OperandKind kind);
const char* engine_name(Engine engine);
// Human description of the operand's accepted values, e.g. "register r0..r31".
std::string describe_operand(const OperandSpec& operand);

// Inclusive range of values an operand field accepts.
int64_t operand_min(const OperandSpec& operand);
int64_t operand_max(const OperandSpec& operand);

// Encodes an instruction; returns nullopt and sets *error when an operand is
// out of its field's range.
std::optional<uint64_t> encode(const Instruction& instruction, std::string* error = nullptr);
// Decodes a word; returns nullopt and sets *error for an unknown opcode,
// an operand value with no meaning, or non-zero reserved bits.
std::optional<Instruction> decode(uint64_t word, std::string* error = nullptr);

}  // namespace npu::isa
