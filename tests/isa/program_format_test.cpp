// The loader rejects corrupt, truncated and version-mismatched files with a
// clear message, and never crashes.
#include <random>

#include <zlib.h>

#include <gtest/gtest.h>

#include "npusim/isa/program.h"
#include "program.pb.h"
#include "random_program.h"

namespace npu::isa {
namespace {

std::string rejection(const std::string& bytes) {
  try {
    parse_program(bytes);
  } catch (const ProgramFormatError& e) {
    return e.what();
  }
  return "";
}

std::string valid_file() {
  std::mt19937_64 rng(5);
  return serialize_program(testing::random_program(rng));
}

TEST(ProgramFormat, RejectsBytesThatAreNotAProgram) {
  EXPECT_EQ(rejection(""), "not an npubin program (bad magic)");
  EXPECT_EQ(rejection("hello, world"), "not an npubin program (bad magic)");
  EXPECT_EQ(rejection(std::string("NPUBIN\0\0\1", 9)), "truncated npubin header");
}

TEST(ProgramFormat, RejectsEveryTruncation) {
  const std::string file = valid_file();
  for (size_t length = 0; length < file.size(); ++length) {
    const std::string message = rejection(file.substr(0, length));
    EXPECT_FALSE(message.empty()) << "truncated to " << length << " bytes was accepted";
  }
}

// Builds a file around a payload with a correct header, the way the writer does.
std::string wrap(const std::string& payload, uint32_t format_version = kProgramFormatVersion);

pb::Program payload_of(const std::string& file) {
  pb::Program message;
  EXPECT_TRUE(message.ParseFromString(file.substr(24)));
  return message;
}

TEST(ProgramFormat, RejectsVersionMismatches) {
  pb::Program message = payload_of(valid_file());
  EXPECT_EQ(rejection(wrap(message.SerializeAsString(), 2)), "unsupported npubin format version 2 (this build reads version 1)");
  message.set_isa_version(kIsaVersion + 1);
  EXPECT_EQ(rejection(wrap(message.SerializeAsString())), "program uses ISA version 3; this build supports ISA version 2");
}

TEST(ProgramFormat, RejectsChecksumMismatchAndPadding) {
  std::string file = valid_file();
  file[file.size() - 3] ^= 0x40;
  EXPECT_EQ(rejection(file), "corrupt npubin file (payload checksum mismatch)");
  EXPECT_NE(rejection(valid_file() + "x").find("truncated or padded npubin file"), std::string::npos);
}

TEST(ProgramFormat, RejectsInconsistentContents) {
  const pb::Program base = payload_of(valid_file());
  ASSERT_GT(base.code_size(), 0);
  ASSERT_GT(base.symbols_size(), 0);
  {
    pb::Program message = base;
    message.mutable_code(0)->mutable_words()->append("abc");
    EXPECT_EQ(rejection(wrap(message.SerializeAsString())), "code section size is not a whole number of 8-byte instructions");
  }
  {
    pb::Program message = base;
    message.mutable_code(0)->set_core_mask(0);
    EXPECT_EQ(rejection(wrap(message.SerializeAsString())), "code section 0 runs on no core");
  }
  {
    pb::Program message = base;
    message.mutable_symbols(0)->set_dtype(9);
    EXPECT_NE(rejection(wrap(message.SerializeAsString())).find("invalid dtype"), std::string::npos);
  }
  {
    std::mt19937_64 rng(5);
    Program program = testing::random_program(rng);
    program.symbols.insert(program.symbols.begin() + 1, program.symbols[0]);
    try {
      validate_program(program);
      ADD_FAILURE() << "a duplicate symbol was accepted";
    } catch (const ProgramFormatError& e) {
      EXPECT_EQ(std::string(e.what()), "symbol '" + program.symbols[0].name + "' is defined twice");
    }
  }
  {
    pb::Program message = base;
    message.mutable_symbols(0)->set_name("r3");
    EXPECT_EQ(rejection(wrap(message.SerializeAsString())), "symbol 0 has an invalid name");
  }
  {
    pb::Program message = base;
    message.mutable_symbols(0)->clear_shape();
    message.mutable_symbols(0)->add_shape(1ull << 62);
    message.mutable_symbols(0)->add_shape(1ull << 62);
    EXPECT_NE(rejection(wrap(message.SerializeAsString())).find("too large"), std::string::npos);
  }
  {  // more dims than the assembler's directives take: it would print assembly that does not assemble back
    pb::Program message = base;
    message.mutable_symbols(0)->clear_shape();
    for (size_t d = 0; d <= kMaxSymbolDims; ++d) message.mutable_symbols(0)->add_shape(2);
    EXPECT_NE(rejection(wrap(message.SerializeAsString())).find("has 9 dims, more than 8"), std::string::npos)
        << rejection(wrap(message.SerializeAsString()));
  }
}

std::string wrap(const std::string& payload, uint32_t format_version) {
  // Reuse the writer's header by re-serializing a program, then swap payloads.
  std::string file = valid_file().substr(0, 24);
  for (unsigned b = 0; b < 4; ++b) file[8 + b] = static_cast<char>((format_version >> (8 * b)) & 0xff);
  const uint32_t crc = static_cast<uint32_t>(crc32(crc32(0L, Z_NULL, 0), reinterpret_cast<const Bytef*>(payload.data()),
                                                   static_cast<uInt>(payload.size())));
  for (unsigned b = 0; b < 4; ++b) file[12 + b] = static_cast<char>((crc >> (8 * b)) & 0xff);
  for (unsigned b = 0; b < 8; ++b) file[16 + b] = static_cast<char>((static_cast<uint64_t>(payload.size()) >> (8 * b)) & 0xff);
  return file + payload;
}

TEST(ProgramFormat, RandomCorruptionNeverCrashes) {
  const std::string file = valid_file();
  std::mt19937_64 rng(6);
  int rejected = 0;
  for (int i = 0; i < 20000; ++i) {
    std::string bytes = file;
    const int flips = 1 + static_cast<int>(rng() % 4);
    // Corrupt the payload and re-seal it, so that the parser and validator
    // (not only the checksum) see the damage.
    std::string payload = bytes.substr(24);
    for (int f = 0; f < flips; ++f) payload[rng() % payload.size()] = static_cast<char>(rng());
    bytes = i % 2 ? wrap(payload) : bytes.substr(0, 24) + payload;
    try {
      const Program program = parse_program(bytes);
      validate_program(program);  // accepted files are valid ones
    } catch (const ProgramFormatError&) {
      ++rejected;
    }
  }
  EXPECT_GT(rejected, 0);
}

TEST(ProgramFormat, LoadNamesTheFileInErrors) {
  try {
    load_program("/nonexistent/prog.npubin");
    FAIL();
  } catch (const ProgramFormatError& e) {
    EXPECT_EQ(std::string(e.what()), "cannot open '/nonexistent/prog.npubin'");
  }
}

}  // namespace
}  // namespace npu::isa
