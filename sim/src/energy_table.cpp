// Every default number of the energy model, with its source. docs/energy.md tabulates them, says how sure
// each is, and says what is left out. Logic and SRAM figures are at 45 nm and 0.9 V (the node of Horowitz's
// table, the one set of operation energies and areas from one source) and scale from there to the config's
// node (npusim/sim/process_nodes.h: its factors and nominal supply V0) and supply V:
//   dynamic energy  x node energy factor x (V / V0)^2   (C V^2)
//   area            x node area factor
//   leakage power   x node energy factor x (V / V0)     (V I_leak; the energy factor as hwcomponents scales it)
// DRAM and host-link figures are what those devices spend off the die; they do not scale.
#include "energy_table.h"

#include <cmath>

namespace npu::sim::energy_table {
namespace {

// [Horowitz] M. Horowitz, "Computing's energy problem (and what we can do about it)", ISSCC 2014, the
// 45 nm / 0.9 V table of operation energy (pJ) and area (um^2), as reproduced in Gholami et al., "A Survey
// of Quantization Methods for Efficient Neural Network Inference" (2021), Fig. 15.
constexpr double kInt8MultPj = 0.2, kInt8MultUm2 = 282;
constexpr double kInt32AddPj = 0.1, kInt32AddUm2 = 137;
constexpr double kFp16MultPj = 1.1, kFp16MultUm2 = 1640;
constexpr double kFp32MultPj = 3.7, kFp32MultUm2 = 7700;
constexpr double kFp32AddPj = 0.9, kFp32AddUm2 = 4184;
// [TPUv4i] N. Jouppi et al., "Ten Lessons From Three Generations Shaped Google's TPUv4i", ISCA 2021,
// Table 2 (7 nm): bf16 multiply 0.21 pJ against fp16 multiply 0.34 pJ. Horowitz has no bf16; this ratio
// carries his fp16 figure over. Area: Google Cloud's bfloat16 page: a bf16 multiplier is "about half the
// size in silicon of a typical FP16 multiplier".
constexpr double kBf16MultPj = kFp16MultPj * 0.21 / 0.34, kBf16MultUm2 = kFp16MultUm2 / 2;
// [Aladdin] Aladdin's 40 nm standard-cell characterization, as Accelergy-Project/hwcomponents-library
// (library/aladdin.py) tabulates it: a register bit 0.009 pJ per write and 5.98 um^2; a 32-bit multiplier
// leaks 80 uW in 6350 um^2 (taken as the logic leakage density; 40 nm is used as 45 nm).
constexpr double kRegisterBitPj = 0.009, kRegisterBitUm2 = 5.98;
constexpr double kLogicLeakageWPerUm2 = 80e-6 / 6350;
// [Horowitz] again: about 70 pJ to fetch, decode and issue one instruction of a simple core (the
// overhead around the operation; Dally's Hot Chips 2023 talk puts it at about 30 pJ on a newer node).
constexpr double kInstructionPj = 70;
// [Horowitz] SRAM, per 64-bit access: 8 KB 10 pJ, 32 KB 20 pJ, 1 MB 100 pJ: close to 10 pJ x
// sqrt(size / 8 KB) (113 pJ at 1 MB). A read and a write are priced alike (CACTI 7 puts them within 20%).
constexpr double kSram8KbAccessPj = 10, kSramAccessBytes = 8;
// [CACTI] CACTI 7 (HewlettPackard/cacti at 1ffd8df), a 1 MB RAM of one bank with a 64-bit port, 45 nm,
// high-performance cells, 360 K: 3.57 mm^2 (78% array efficiency) and 1198 mW of leakage. Low-standby-power
// cells leak 0.25 mW: the high-performance figure is the pessimistic end (docs/energy.md).
constexpr double kSramUm2PerMb = 3.57e6, kSramLeakageWPerMb = 1.198, kMb = 1048576;
// [Keckler] S. Keckler, W. Dally et al., "GPUs and the Future of Parallel Computing", IEEE Micro 2011,
// Table 1 (40 nm, 0.9 V): 240 fJ per bit per mm per transition; random data toggles half the bits.
constexpr double kWireFjPerBitMm = 240.0 / 2;
// [O'Connor] M. O'Connor et al., "Fine-Grained DRAM", MICRO 2017, sec. 2 and Table 3 (HBM2): 3.97 pJ/bit
// in all, of which row activation 1.21, data movement on the die 2.24, I/O 0.30; one activation of a
// 1 KB row 909 pJ. Data movement and I/O (2.54 pJ/bit) price a byte; the activation is its own action.
constexpr double kHbm2PjPerBit = 2.24 + 0.30, kHbm2ActivationPjPerKb = 909;
// [Accelergy] Accelergy-Project/accelergy-cacti-plug-in (cacti_wrapper.py): LPDDR4 8 pJ/bit ("public
// data"), activation included; less O'Connor's 1.21 pJ/bit of activation, priced on its own here.
constexpr double kLpddrPjPerBit = 8.0 - 1.21;
// [DRAMPower] the Micron DDR4-2400 x8 currents in tukl-msd/DRAMPower (memspecs/MICRON_4Gb_DDR4-2400_8bit_A
// .json: IDD4R 184.5 mA, IDD3N 44 mA, VDD 1.2 V) give about 8.8 pJ/bit to read, without the board's I/O.
constexpr double kDdrPjPerBit = 8.8;
// [PCIe] a lane's transmitter 1.93 pJ/bit (Bae et al., Electronics 10(1):68, 2021, PCIe Gen4, 28 nm) and
// receiver 62.7 mW at 32 Gb/s, 1.96 pJ/bit (Choi et al., IEEE TCAS-II 2022, PCIe Gen5, 40 nm).
constexpr double kHostLinkPjPerBit = 1.93 + 1.96;


// One operand of `dtype` entering a PE and its 32-bit partial sum moving on: the systolic registers a MAC
// writes (Eyeriss measures a PE-to-PE hop at twice a MAC: Chen et al., ISCA 2016, Table IV).
double pe_registers_pj(unsigned operand_bits) { return (operand_bits + 32) * kRegisterBitPj; }

}  // namespace

ActionFigure action_figure(Action action, const ChipConfig& config) {
  const auto sram_byte_pj = [](const SramConfig& sram) {
    const double bank_bytes = static_cast<double>(sram.size_bytes) / sram.banks;
    return kSram8KbAccessPj * std::sqrt(bank_bytes / 8192.0) / kSramAccessBytes;
  };
  // Vector operands pass through three 32-bit pipeline registers (read, operate, write).
  const double vector_registers_pj = 3 * 32 * kRegisterBitPj;
  double dram_byte_pj = 8 * kHbm2PjPerBit;
  if (config.dram.type == DramType::Lpddr5x) dram_byte_pj = 8 * kLpddrPjPerBit;
  if (config.dram.type == DramType::Ddr5) dram_byte_pj = 8 * kDdrPjPerBit;
  switch (action) {
    case Action::MacI8: return {kInt8MultPj + kInt32AddPj + pe_registers_pj(8), true};
    case Action::MacF16: return {kFp16MultPj + kFp32AddPj + pe_registers_pj(16), true};
    case Action::MacBf16: return {kBf16MultPj + kFp32AddPj + pe_registers_pj(16), true};
    case Action::MacF32: return {kFp32MultPj + kFp32AddPj + pe_registers_pj(32), true};
    case Action::AccumulatorReadByte:
    case Action::AccumulatorWriteByte: return {sram_byte_pj(config.core.accumulator), true};
    case Action::ScratchpadReadByte:
    case Action::ScratchpadWriteByte: return {sram_byte_pj(config.core.scratchpad), true};
    case Action::VectorSimple: return {kFp32AddPj + vector_registers_pj, true};
    case Action::VectorMultiply: return {kFp32MultPj + vector_registers_pj, true};
    // Range reduction and a polynomial, or a reciprocal and a Newton step: about eight multiply-adds. An
    // assumption (no source prices a special-function unit per element), the largest of the table.
    case Action::VectorSpecial: return {8 * (kFp32MultPj + kFp32AddPj) + vector_registers_pj, true};
    // Address generation and request tracking, priced as one instruction (an assumption).
    case Action::DmaDescriptor: return {kInstructionPj, true};
    case Action::ControlInstruction: return {kInstructionPj, true};
    case Action::NocByteHop: return {0, true};  // priced by energy.cpp from the hop's length
    case Action::DramReadByte:
    case Action::DramWriteByte: return {dram_byte_pj, false};
    // Opening a row costs in proportion to its size (the bit lines it charges).
    case Action::DramActivation: return {kHbm2ActivationPjPerKb * config.dram.row_bytes / 1024.0, false};
    case Action::HostLinkByte: return {8 * kHostLinkPjPerBit, false};
    case Action::Count: break;
  }
  return {0, false};
}

double wire_pj_per_byte_mm() { return 8 * kWireFjPerBitMm / 1000; }

double tensor_pe_area_um2(const TensorCoreConfig& config) {
  double multiplier = 0;
  unsigned operand_bits = 0;
  bool any_float = false;
  for (isa::DType dtype : config.input_dtypes) {
    switch (dtype) {
      case isa::DType::I8: multiplier = std::max(multiplier, kInt8MultUm2), operand_bits = std::max(operand_bits, 8u); break;
      case isa::DType::BF16: multiplier = std::max(multiplier, kBf16MultUm2), operand_bits = std::max(operand_bits, 16u); break;
      case isa::DType::F16: multiplier = std::max(multiplier, kFp16MultUm2), operand_bits = std::max(operand_bits, 16u); break;
      case isa::DType::F32: multiplier = std::max(multiplier, kFp32MultUm2), operand_bits = std::max(operand_bits, 32u); break;
      default: break;
    }
    any_float = any_float || dtype != isa::DType::I8;
  }
  // A weight and an activation register, the partial sum, and a second weight when double buffered.
  const unsigned register_bits = 2 * operand_bits + 32 + (config.weight_double_buffering ? operand_bits : 0);
  return multiplier + (any_float ? kFp32AddUm2 : kInt32AddUm2) + register_bits * kRegisterBitUm2;
}

double vector_lane_area_um2() { return kFp32MultUm2 + kFp32AddUm2 + 4 * 32 * kRegisterBitUm2; }

double sram_area_um2(uint64_t bytes) { return kSramUm2PerMb * static_cast<double>(bytes) / kMb; }

double logic_leakage_w_per_um2() { return kLogicLeakageWPerUm2; }

double sram_leakage_w_per_byte() { return kSramLeakageWPerMb / kMb; }

}  // namespace npu::sim::energy_table
