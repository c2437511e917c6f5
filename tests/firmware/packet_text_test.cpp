// The text derived from the table: describe() lines, docs/packets.md and the
// npu-packets-doc tool that regenerates it.
#include <fstream>
#include <sstream>

#include <gtest/gtest.h>

#include "generated_doc.h"

#include "npusim/firmware/packets.h"
#include "scratch_directory.h"

namespace npu::firmware {
namespace {

TEST(Describe, NamesThePacketAndEveryField) {
  EXPECT_EQ(describe({PacketOpcode::COPY, {0x1000, 0x2000, 4096, 1}}), "COPY dst=0x1000 src=0x2000 bytes=4096 direction=h2d");
  EXPECT_EQ(describe({PacketOpcode::NOP, {}}), "NOP");
  EXPECT_EQ(describe({PacketOpcode::FILL, {0xffffffffffffffff, 3, 0xdeadbeef}}), "FILL dst=0xffffffffffffffff bytes=3 pattern=0xdeadbeef");
  EXPECT_EQ(describe({PacketOpcode::LAUNCH, {0x4000, 0xf}}), "LAUNCH descriptor=0x4000 core_mask=0xf");
  EXPECT_EQ(describe({PacketOpcode::FENCE_SIGNAL, {0x100, 42, 1}}), "FENCE_SIGNAL address=0x100 value=42 interrupt=1");
  EXPECT_EQ(describe({PacketOpcode::COUNTERS, {0x0, 256}}), "COUNTERS address=0x0 bytes=256");
}

TEST(Describe, WritesWhatItCannotNameAsNumbers) {
  // Packets built by hand need not be valid; traces still show what was there.
  EXPECT_EQ(describe({PacketOpcode::COPY, {1, 2, 3, 7}}), "COPY dst=0x1 src=0x2 bytes=3 direction=7");
  EXPECT_EQ(describe({static_cast<PacketOpcode>(0x99), {}}), "UNKNOWN opcode=0x99");
}

TEST(PacketDoc, DocsPacketsMdIsGeneratedFromTheCurrentTable) {
  npu::testing::expect_generated_doc_is_current("docs/packets.md", generate_packet_markdown(), "build/bin/npu-packets-doc > docs/packets.md");
}

TEST(PacketDoc, DocumentsEveryPacketFieldAndError) {
  const std::string doc = generate_packet_markdown();
  for (const PacketSpec& spec : packet_table()) {
    EXPECT_NE(doc.find("`" + spec.name + "` (" + std::to_string(spec.length_words) + " word"), std::string::npos) << spec.name;
    EXPECT_NE(doc.find(spec.semantics), std::string::npos) << spec.name;
    for (const PacketFieldSpec& field : spec.fields) EXPECT_NE(doc.find("`" + field.name + "`"), std::string::npos) << field.name;
  }
  for (const PacketErrorSpec& error : packet_error_table())
    EXPECT_NE(doc.find("| " + std::to_string(static_cast<uint32_t>(error.code)) + " | `" + error.name + "` | " + error.message + " |"),
              std::string::npos)
        << error.name;
  EXPECT_NE(doc.find("0 `d2d`, 1 `h2d`, 2 `d2h`"), std::string::npos);
}

TEST(PacketDocTool, PrintsTheDocsHelpAndVersion) {
  const npu::testing::ScratchDirectory scratch("npusim_packets_doc");
  const std::string tool = NPU_PACKETS_DOC_PATH;
  const npu::testing::ToolRun doc = scratch.run(tool);
  EXPECT_EQ(doc.status, 0) << doc.err;
  EXPECT_EQ(doc.out, generate_packet_markdown());
  const npu::testing::ToolRun help = scratch.run(tool + " --help");
  EXPECT_EQ(help.status, 0);
  EXPECT_NE(help.out.find("Usage: npu-packets-doc"), std::string::npos) << help.out;
  const npu::testing::ToolRun version = scratch.run(tool + " --version");
  EXPECT_EQ(version.status, 0);
  EXPECT_NE(version.out.find("npu-packets-doc (npusim)"), std::string::npos) << version.out;
  const npu::testing::ToolRun bad = scratch.run(tool + " --bogus");
  EXPECT_EQ(bad.status, 2);
  EXPECT_NE(bad.err.find("npu-packets-doc: error:"), std::string::npos) << bad.err;
}

}  // namespace
}  // namespace npu::firmware
