#include "config_text.h"

#include "npusim/sim/config_loader.h"

namespace npu::sim::testing {

::testing::AssertionResult contains(const std::string& text, const std::string& part) {
  if (text.find(part) != std::string::npos) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "\"" << part << "\" is not in:\n" << text;
}

::testing::AssertionResult starts_with(const std::string& text, const std::string& prefix) {
  if (text.compare(0, prefix.size(), prefix) == 0) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "does not start with \"" << prefix << "\":\n" << text;
}

std::string parse_error(const std::string& text) {
  try {
    parse_chip_config(text, kSource);
  } catch (const ConfigError& error) {
    return error.what();
  }
  return "(no error)";
}

std::string load_error(const std::string& preset_or_path) {
  try {
    load_chip_config(preset_or_path);
  } catch (const ConfigError& error) {
    return error.what();
  }
  return "(no error)";
}

std::string position_in(const std::string& text, size_t offset) {
  size_t line = 1;
  size_t line_start = 0;
  for (size_t i = 0; i < offset; ++i) {
    if (text[i] == '\n') {
      ++line;
      line_start = i + 1;
    }
  }
  return kSource + ':' + std::to_string(line) + ':' + std::to_string(offset - line_start + 1);
}

EditedConfig edit_preset(const std::string& preset, const std::string& anchor, const std::string& from,
                         const std::string& to) {
  std::string text = dump_chip_config(load_chip_config(preset));
  const size_t anchor_at = text.find(anchor);
  EXPECT_NE(anchor_at, std::string::npos) << "no '" << anchor << "' in the dump of " << preset;
  const size_t at = anchor_at == std::string::npos ? std::string::npos : text.find(from, anchor_at);
  EXPECT_NE(at, std::string::npos) << "no '" << from << "' after '" << anchor << "' in the dump of " << preset;
  if (at == std::string::npos) return {text, "", 0};
  text.replace(at, from.size(), to);
  return {text, position_in(text, at), at};
}

int occurrences_before(const std::string& text, size_t offset, const std::string& needle) {
  int count = 0;
  for (size_t at = text.find(needle); at != std::string::npos && at < offset; at = text.find(needle, at + 1)) ++count;
  return count;
}

}  // namespace npu::sim::testing
