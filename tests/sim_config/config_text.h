// Helpers for tests that feed the loader edited config text and check where
// its messages point.
#pragma once

#include <cstddef>
#include <string>

#include <gtest/gtest.h>

namespace npu::sim::testing {

// The source name tests parse under.
inline const std::string kSource = "test.pbtxt";

// Assertions on messages, which print the whole message when they fail.
::testing::AssertionResult contains(const std::string& text, const std::string& part);
::testing::AssertionResult starts_with(const std::string& text, const std::string& prefix);

// The ConfigError message of parsing `text` as kSource, or "(no error)".
std::string parse_error(const std::string& text);
// Assertions on messages, which print the whole message when they fail.
::testing::AssertionResult contains(const std::string& text, const std::string& part);
::testing::AssertionResult starts_with(const std::string& text, const std::string& prefix);

// The ConfigError message of load_chip_config(preset_or_path), or "(no error)".
std::string load_error(const std::string& preset_or_path);

// "test.pbtxt:LINE:COL" of byte `offset` of `text`, both 1-based.
std::string position_in(const std::string& text, size_t offset);

struct EditedConfig {
  std::string text;
  std::string where;  // "test.pbtxt:LINE:COL" of the start of the replacement
  size_t offset;      // of the replacement in `text`
};

// dump_chip_config of `preset` with the first `from` at or after the first
// `anchor` replaced by `to`. Fails the test when either is not found.
EditedConfig edit_preset(const std::string& preset, const std::string& anchor, const std::string& from,
                         const std::string& to);

// How often `needle` occurs in `text` before `offset`: the index of a
// repeated field's element.
int occurrences_before(const std::string& text, size_t offset, const std::string& needle);

}  // namespace npu::sim::testing
