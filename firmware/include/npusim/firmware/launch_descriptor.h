// The launch descriptor: what a LAUNCH packet points at in device memory.
// The driver writes one per loaded program (Program::load fills the code and
// the argument slots, each launch its symbol table); the firmware reads it to
// start the cores. Little-endian u64 words:
//   word 0          kLaunchDescriptorMagic
//   word 1          bits 31:0 sections, bits 63:32 symbols
//   words 2..9      arguments (csr arg0..arg7)
//   per section     core id mask (ids within the launch), code address, code length in words
//   per symbol      its device address, or UINT64_MAX when it is not a global buffer
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace npu::firmware {

inline constexpr uint64_t kLaunchDescriptorMagic = 0x3148434e55414c4eull;  // "NLAUNCH1"
inline constexpr size_t kLaunchDescriptorHeaderWords = 10;
inline constexpr size_t kLaunchDescriptorSectionWords = 3;
// Bounds the firmware's memory: it rejects descriptors beyond them.
inline constexpr uint32_t kMaxLaunchSections = 64;
inline constexpr uint32_t kMaxLaunchSymbols = 4096;
inline constexpr uint64_t kMaxLaunchCodeWords = uint64_t{1} << 16;  // a core's instruction memory: 512 KiB

struct LaunchSection {
  uint64_t core_mask = 0;  // the core ids (within the launch) that run this code
  uint64_t code_address = 0;
  uint64_t code_words = 0;
};

struct LaunchDescriptor {
  std::array<uint64_t, 8> args{};
  std::vector<LaunchSection> sections;
  std::vector<uint64_t> symbol_addresses;

  size_t size_words() const {
    return kLaunchDescriptorHeaderWords + kLaunchDescriptorSectionWords * sections.size() + symbol_addresses.size();
  }
  // Word offset of symbol i, for a launch to patch the table in place.
  size_t symbol_word(size_t i) const { return kLaunchDescriptorHeaderWords + kLaunchDescriptorSectionWords * sections.size() + i; }
};

// Throws std::invalid_argument beyond the limits above.
std::vector<uint64_t> encode_launch_descriptor(const LaunchDescriptor& descriptor);

// From the two header words: the counts, or false (with *error) when the
// magic is wrong or a count is beyond its limit.
bool decode_launch_descriptor_counts(const uint64_t* header, uint32_t* sections, uint32_t* symbols, std::string* error);

// The whole descriptor from its words (as many as size_words() says);
// false with *error for a bad header, an empty or oversized section.
bool decode_launch_descriptor(const uint64_t* words, size_t count, LaunchDescriptor* descriptor, std::string* error);

}  // namespace npu::firmware
