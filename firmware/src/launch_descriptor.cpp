#include "npusim/firmware/launch_descriptor.h"

#include <stdexcept>

namespace npu::firmware {

std::vector<uint64_t> encode_launch_descriptor(const LaunchDescriptor& descriptor) {
  if (descriptor.sections.empty() || descriptor.sections.size() > kMaxLaunchSections)
    throw std::invalid_argument("a launch descriptor has 1.." + std::to_string(kMaxLaunchSections) + " code sections");
  if (descriptor.symbol_addresses.size() > kMaxLaunchSymbols)
    throw std::invalid_argument("a launch descriptor has at most " + std::to_string(kMaxLaunchSymbols) + " symbols");
  std::vector<uint64_t> words;
  words.reserve(descriptor.size_words());
  words.push_back(kLaunchDescriptorMagic);
  words.push_back(descriptor.sections.size() | uint64_t{descriptor.symbol_addresses.size()} << 32);
  words.insert(words.end(), descriptor.args.begin(), descriptor.args.end());
  for (const LaunchSection& section : descriptor.sections) {
    if (section.code_words == 0 || section.code_words > kMaxLaunchCodeWords)
      throw std::invalid_argument("a code section has 1.." + std::to_string(kMaxLaunchCodeWords) + " words");
    words.push_back(section.core_mask);
    words.push_back(section.code_address);
    words.push_back(section.code_words);
  }
  words.insert(words.end(), descriptor.symbol_addresses.begin(), descriptor.symbol_addresses.end());
  return words;
}

bool decode_launch_descriptor_counts(const uint64_t* header, uint32_t* sections, uint32_t* symbols, std::string* error) {
  if (header[0] != kLaunchDescriptorMagic) {
    *error = "not a launch descriptor (bad magic)";
    return false;
  }
  *sections = static_cast<uint32_t>(header[1]);
  *symbols = static_cast<uint32_t>(header[1] >> 32);
  if (*sections == 0 || *sections > kMaxLaunchSections || *symbols > kMaxLaunchSymbols) {
    *error = "launch descriptor counts out of range (" + std::to_string(*sections) + " sections, " + std::to_string(*symbols) + " symbols)";
    return false;
  }
  return true;
}

bool decode_launch_descriptor(const uint64_t* words, size_t count, LaunchDescriptor* descriptor, std::string* error) {
  if (count < kLaunchDescriptorHeaderWords) {
    *error = "launch descriptor truncated";
    return false;
  }
  uint32_t sections = 0, symbols = 0;
  if (!decode_launch_descriptor_counts(words, &sections, &symbols, error)) return false;
  if (count < kLaunchDescriptorHeaderWords + kLaunchDescriptorSectionWords * sections + symbols) {
    *error = "launch descriptor truncated";
    return false;
  }
  LaunchDescriptor out;
  for (size_t i = 0; i < 8; ++i) out.args[i] = words[2 + i];
  const uint64_t* p = words + kLaunchDescriptorHeaderWords;
  for (uint32_t s = 0; s < sections; ++s, p += kLaunchDescriptorSectionWords) {
    const LaunchSection section{p[0], p[1], p[2]};
    if (section.code_words == 0 || section.code_words > kMaxLaunchCodeWords) {
      *error = "code section " + std::to_string(s) + " has " + std::to_string(section.code_words) + " words (1.." +
               std::to_string(kMaxLaunchCodeWords) + ")";
      return false;
    }
    out.sections.push_back(section);
  }
  out.symbol_addresses.assign(p, p + symbols);
  *descriptor = std::move(out);
  return true;
}

}  // namespace npu::firmware
