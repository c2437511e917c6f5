// Each class of validation error names the file, the line and column of the
// offending field (or of the message missing it) and the field's dotted path.
// The configs are preset dumps with one edit; positions are computed from the
// edited text.
#include <gtest/gtest.h>

#include "config_text.h"
#include "npusim/sim/config_loader.h"

namespace npu::sim {
namespace {

using testing::contains;
using testing::edit_preset;
using testing::kSource;
using testing::occurrences_before;
using testing::parse_error;
using testing::position_in;

// The one error of a preset dump with `from` (after `anchor`) replaced by `to`.
void expect_error(const std::string& preset, const std::string& anchor, const std::string& from, const std::string& to,
                  const std::string& message) {
  const auto edit = edit_preset(preset, anchor, from, to);
  EXPECT_EQ(parse_error(edit.text), edit.where + ": " + message);
}

// The dump of `preset` without the first `part`.
std::string without(const std::string& preset, const std::string& part) {
  return edit_preset(preset, part, part, "").text;
}

// "test.pbtxt:LINE:COL" of the first `needle` in `text`.
std::string where(const std::string& text, const std::string& needle) {
  EXPECT_NE(text.find(needle), std::string::npos) << needle;
  return position_in(text, text.find(needle));
}

TEST(Range, OutOfRange) {
  expect_error("tiny", "clock_mhz", "clock_mhz: 1000", "clock_mhz: 20000",
               "clock_mhz must be in 1..10000 (got 20000)");
  expect_error("tiny", "tensor_core", "rows: 16", "rows: 2048", "core.tensor_core.rows must be in 1..1024 (got 2048)");
  expect_error("tpu_v4", "tensor_core", "arrays: 4", "arrays: 17", "core.tensor_core.arrays must be in 1..16 (got 17)");
  expect_error("tiny", "dma {", "channels: 4", "channels: 5",
               "core.dma.channels must be in 1..4, the channels ch0..ch3 of the ISA (got 5)");
  expect_error("tiny", "command_processor", "num_queues: 2", "num_queues: 17",
               "command_processor.num_queues must be in 1..16 (got 17)");
  expect_error("tiny", "noc {", "mesh_cols: 1", "mesh_cols: 0", "noc.mesh_cols must be in 1..64 (got 0)");
}

TEST(Range, ZeroWhereZeroMeansNothing) {
  expect_error("tiny", "tensor_core", "cols: 16", "cols: 0", "core.tensor_core.cols must be in 1..1024 (got 0)");
  expect_error("tiny", "vector_unit", "lanes: 16", "lanes: 0", "core.vector_unit.lanes must be in 1..4096 (got 0)");
  expect_error("tiny", "simulation", "watchdog_cycles: 100000000", "watchdog_cycles: 0",
               "simulation.watchdog_cycles must be >= 1 (got 0)");
  expect_error("tiny", "simulation", "counter_window_cycles: 1000", "counter_window_cycles: 0",
               "simulation.counter_window_cycles must be >= 1 (got 0)");
  expect_error("tiny", "dma {", "max_outstanding_requests: 16", "max_outstanding_requests: 0",
               "core.dma.max_outstanding_requests must be >= 1 (got 0)");
  expect_error("tiny", "default_cost", "cycles_per_vector: 1", "cycles_per_vector: 0",
               "core.vector_unit.default_cost.cycles_per_vector must be >= 1 (got 0)");
  expect_error("tiny", "op: \"v.neg\"", "latency_cycles: 4", "latency_cycles: 0",
               "core.vector_unit.op_costs[1].latency_cycles must be >= 1 (got 0)");
  expect_error("tiny", "host_link", "bytes_per_cycle: 16", "bytes_per_cycle: 0",
               "host_link.bytes_per_cycle must be >= 1 (got 0)");
  expect_error("tiny", "name", "name: \"tiny\"", "name: \"\"", "name must not be empty (got \"\")");
}

TEST(Range, ZeroAllowedWhereItMeansSomething) {
  const auto edit = edit_preset("tiny", "dma {", "descriptor_cycles: 16", "descriptor_cycles: 0");
  EXPECT_EQ(parse_chip_config(edit.text, kSource).core.dma.descriptor_cycles, 0u);
}

TEST(Missing, TopLevelField) {
  const auto edit = edit_preset("tiny", "clock_mhz", "clock_mhz: 1000\n", "");
  EXPECT_EQ(parse_error(edit.text), kSource + ": missing field clock_mhz (must be in 1..10000)");
}

TEST(Missing, NestedFieldPointsAtItsMessage) {
  const std::string text = without("tiny", " banks: 4");
  EXPECT_EQ(parse_error(text),
            where(text, "scratchpad {") + ": missing field core.scratchpad.banks (must be a power of two)");
}

TEST(Missing, Section) {
  EXPECT_EQ(parse_error(without("tiny", "simulation { watchdog_cycles: 100000000 counter_window_cycles: 1000 quantum_cycles: 1000 }\n")),
            kSource + ": missing field simulation");
  const std::string text = without("tiny", "  control { issue_cycles: 1 branch_taken_cycles: 2 queue_depth: 8 }\n");
  EXPECT_EQ(parse_error(text), where(text, "core {") + ": missing field core.control");
}

TEST(Missing, EverySectionOfAnEmptyConfig) {
  const std::string message = parse_error("name: \"empty\"\n") + "\n";
  for (const char* field : {"clock_mhz (must be in 1..10000)", "num_cores (must be in 1..64)", "core", "noc", "dram",
                            "host_link", "command_processor", "simulation"}) {
    EXPECT_TRUE(contains(message, kSource + ": missing field " + field + "\n"));
  }
}

TEST(Missing, NoDramPorts) {
  const std::string text = without("tiny", "  ports { x: 0 y: 0 }\n");
  EXPECT_EQ(parse_error(text),
            where(text, "dram {") + ": missing field dram.ports (must list at least one DRAM controller position)");
}

TEST(Missing, DtypeList) {
  const std::string text = without("tiny", "    input_dtypes: [\"f32\", \"bf16\", \"f16\", \"i8\"]\n");
  EXPECT_EQ(parse_error(text), where(text, "tensor_core {") +
                                   ": missing field core.tensor_core.input_dtypes (must list at least one dtype)");
  const std::string empty = without("tiny", "\"f32\", \"bf16\", \"f16\", \"i8\"");
  EXPECT_EQ(parse_error(empty),
            where(empty, "input_dtypes") + ": core.tensor_core.input_dtypes must list at least one dtype");
}

TEST(PowerOfTwo, Banks) {
  expect_error("tiny", "dram {", "banks_per_channel: 8", "banks_per_channel: 6",
               "dram.banks_per_channel must be a power of two (got 6)");
  // 3 banks also break the size rule; both are reported.
  const auto edit = edit_preset("tiny", "scratchpad {", "banks: 4", "banks: 3");
  EXPECT_TRUE(contains(parse_error(edit.text), edit.where + ": core.scratchpad.banks must be a power of two (got 3)"));
}

TEST(Dram, Geometry) {
  expect_error("tiny", "dram {", "row_bytes: 1024", "row_bytes: 1000",
               "dram.row_bytes must be a power of two (got 1000)");
  expect_error("tiny", "dram {", "interleave_bytes: 256", "interleave_bytes: 2048",
               "dram.interleave_bytes must be <= dram.row_bytes = 1024 (got 2048)");
  expect_error("tiny", "dram {", "size_bytes: 268435456", "size_bytes: 268435000",
               "dram.size_bytes must be a multiple of dram.channels * dram.interleave_bytes = 512 (got 268435000)");
}

TEST(Dma, Requests) {
  expect_error("tiny", "dma {", "request_bytes: 64", "request_bytes: 48",
               "core.dma.request_bytes must be a power of two >= 8 (got 48)");
  expect_error("tiny", "dma {", "request_bytes: 64", "request_bytes: 4",
               "core.dma.request_bytes must be a power of two >= 8 (got 4)");
  expect_error("tiny", "dma {", "step_bytes: 1024", "step_bytes: 1000",
               "core.dma.step_bytes must be a positive multiple of core.dma.request_bytes = 64 (got 1000)");
}

TEST(Sram, SizeMustFillWholeBankRows) {
  expect_error("tiny", "scratchpad {", "size_bytes: 262144", "size_bytes: 262150",
               "core.scratchpad.size_bytes must be a multiple of core.scratchpad.banks * "
               "core.scratchpad.bank_width_bytes = 64 (got 262150)");
}

TEST(Sram, LocalAddressSpace) {
  expect_error("tiny", "scratchpad {", "size_bytes: 262144", "size_bytes: 1073741824",
               "core.scratchpad.size_bytes must be < 0x40000000, where accumulator addresses start (got 1073741824)");
  expect_error("tiny", "accumulator {", "size_bytes: 65536", "size_bytes: 1073745920",
               "core.accumulator.size_bytes must be <= 0x40000000, the accumulator's window of the local address "
               "space (got 1073745920)");
  // The accumulator may fill its whole window.
  const auto edit = edit_preset("tiny", "accumulator {", "size_bytes: 65536", "size_bytes: 1073741824");
  EXPECT_EQ(parse_chip_config(edit.text, kSource).core.accumulator.size_bytes, 0x40000000u);
}

TEST(Topology, MoreCoresThanMeshNodes) {
  expect_error("base", "num_cores", "num_cores: 4", "num_cores: 5",
               "num_cores must be <= noc.mesh_cols * noc.mesh_rows = 4, one core per node (got 5)");
  const auto edit = edit_preset("large", "num_cores", "num_cores: 16", "num_cores: 65");
  EXPECT_TRUE(contains(parse_error(edit.text), edit.where + ": num_cores must be in 1..64 (got 65)"));
}

TEST(Topology, DramPortOutsideMesh) {
  expect_error("base", "ports { x: 1 y: 1 }", "x: 1", "x: 2", "dram.ports[3].x must be < noc.mesh_cols = 2 (got 2)");
  expect_error("large", "ports { x: 0 y: 2 }", "y: 2", "y: 4", "dram.ports[6].y must be < noc.mesh_rows = 4 (got 4)");
}

TEST(Topology, HostLinkPortOutsideMesh) {
  expect_error("base", "port { x: 0 y: 0 }", "y: 0", "y: 5", "host_link.port.y must be < noc.mesh_rows = 2 (got 5)");
}

// Channel c uses port c % ports: ports past the channel count would carry no traffic.
TEST(Topology, MorePortsThanChannels) {
  const std::string text = edit_preset("base", "dram {", "channels: 4", "channels: 2").text;
  const size_t third_port = text.find("ports {", text.find("ports {", text.find("ports {") + 1) + 1);
  EXPECT_EQ(parse_error(text), position_in(text, third_port) +
                                   ": dram.ports[2] is one port too many: dram.channels = 2 allows at most 2 ports");
}

// The error of the tiny dump with its v.exp entry renamed to `op`.
void expect_op_error(const std::string& op) {
  const auto edit = edit_preset("tiny", "op: \"v.exp\"", "op: \"v.exp\"", "op: \"" + op + "\"");
  const int index = occurrences_before(edit.text, edit.offset, "op_costs {") - 1;  // its own "op_costs {" counts too
  EXPECT_EQ(parse_error(edit.text), edit.where + ": core.vector_unit.op_costs[" + std::to_string(index) +
                                        "].op must be the mnemonic of a vector instruction, such as v.add or v.exp "
                                        "(got \"" + op + "\")");
}

TEST(VectorOps, UnknownOp) { expect_op_error("v.expo"); }

TEST(VectorOps, OpOfAnotherEngine) { expect_op_error("tc.mm"); }

TEST(VectorOps, OpListedTwice) {
  expect_error("tiny", "op_costs {", "op: \"v.neg\"", "op: \"v.mov\"",
               "core.vector_unit.op_costs[1].op names an op listed earlier in op_costs (got \"v.mov\")");
}

TEST(VectorOps, DefaultCostNamesNoOp) {
  expect_error("tiny", "default_cost", "op: \"\"", "op: \"v.exp\"",
               "core.vector_unit.default_cost.op must be empty: default_cost is for every op not in op_costs (got "
               "\"v.exp\")");
}

// Protobuf records where a list starts, not where each element is: errors in
// an element point at the list and name the element's index.
void expect_dtype_error(const std::string& from, const std::string& to, const std::string& message) {
  const std::string text = edit_preset("tiny", "input_dtypes", from, to).text;
  EXPECT_EQ(parse_error(text), where(text, "input_dtypes") + ": " + message);
}

TEST(Dtypes, NotAnInputDtype) {
  expect_dtype_error("\"f16\"", "\"i32\"",
                     "core.tensor_core.input_dtypes[2] must be one of f32, bf16, f16, i8 (got \"i32\")");
}

TEST(Dtypes, UnknownName) {
  expect_dtype_error("\"bf16\"", "\"fp8\"",
                     "core.tensor_core.input_dtypes[1] must be one of f32, bf16, f16, i8 (got \"fp8\")");
}

TEST(Dtypes, Repeated) {
  expect_dtype_error("\"i8\"", "\"f32\"",
                     "core.tensor_core.input_dtypes[3] repeats a dtype listed earlier (got \"f32\")");
}

// One element a line, each with its own position.
TEST(Dtypes, ElementsWrittenOneByOne) {
  const std::string text = edit_preset("tiny", "input_dtypes", "input_dtypes: [\"f32\", \"bf16\", \"f16\", \"i8\"]",
                                       "input_dtypes: \"f32\"\n    input_dtypes: \"u8\"")
                               .text;
  EXPECT_EQ(parse_error(text), where(text, "input_dtypes: \"u8\"") +
                                   ": core.tensor_core.input_dtypes[1] must be one of f32, bf16, f16, i8 (got \"u8\")");
}

TEST(TensorCore, DataflowMustBeSet) {
  expect_error("tiny", "dataflow", "dataflow: WEIGHT_STATIONARY", "dataflow: DATAFLOW_UNSPECIFIED",
               "core.tensor_core.dataflow must be WEIGHT_STATIONARY or OUTPUT_STATIONARY (got DATAFLOW_UNSPECIFIED)");
}

// The error points at the flag, wherever the dataflow was changed.
TEST(TensorCore, DoubleBufferedWeightsNeedWeightStationary) {
  const std::string text = edit_preset("base", "dataflow", "dataflow: WEIGHT_STATIONARY", "dataflow: OUTPUT_STATIONARY").text;
  EXPECT_EQ(parse_error(text), where(text, "weight_double_buffering: true") +
                                   ": core.tensor_core.weight_double_buffering needs dataflow WEIGHT_STATIONARY (an output-stationary "
                                   "array holds no weights) (got true)");
}

TEST(Dram, LatenciesInOrder) {
  expect_error("tiny", "dram {", "row_closed_cycles: 28", "row_closed_cycles: 10",
               "dram.row_closed_cycles must be >= dram.row_hit_cycles = 14 (got 10)");
  expect_error("tiny", "dram {", "row_conflict_cycles: 42", "row_conflict_cycles: 27",
               "dram.row_conflict_cycles must be >= dram.row_closed_cycles = 28 (got 27)");
}

TEST(Dram, RefreshShorterThanItsInterval) {
  expect_error("base", "dram {", "refresh_cycles: 280", "refresh_cycles: 3900",
               "dram.refresh_cycles must be in 1..3899 (below dram.refresh_interval_cycles) when refresh is enabled "
               "(got 3900)");
}

TEST(Report, EveryErrorInSourceOrder) {
  auto edit = edit_preset("tiny", "dram {", "row_hit_cycles: 14", "row_hit_cycles: 0");
  const std::string second = edit.where + ": dram.row_hit_cycles must be >= 1 (got 0)";
  edit.text.replace(edit.text.find("clock_mhz: 1000"), 15, "clock_mhz: 0000");
  const std::string first = where(edit.text, "clock_mhz") + ": clock_mhz must be in 1..10000 (got 0)";
  EXPECT_EQ(parse_error(edit.text), first + "\n" + second);
}

}  // namespace
}  // namespace npu::sim
