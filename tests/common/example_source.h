// Example programs with their size constants rewritten, for tests that run
// examples/*.s on other shapes.
#pragma once

#include <gtest/gtest.h>

#include <regex>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

namespace npu::testing {

// Replaces the value of `.equ NAME, VALUE` for each given name; every name must
// be defined exactly once in the source.
inline std::string with_sizes(const std::string& source, const std::vector<std::pair<std::string, long>>& sizes) {
  std::istringstream in(source);
  std::string line, result;
  std::vector<int> replaced(sizes.size(), 0);
  const std::regex equ(R"(^(\s*\.equ\s+)([A-Za-z_][A-Za-z0-9_.]*)(\s*,\s*)[^#]*?(\s*(#.*)?)$)");
  while (std::getline(in, line)) {
    std::smatch match;
    if (std::regex_match(line, match, equ)) {
      // Copy the parts out first: `match` points into `line`, which is rewritten below.
      const std::string prefix = match[1].str(), name = match[2].str(), comma = match[3].str(), comment = match[5].str();
      for (size_t i = 0; i < sizes.size(); ++i) {
        if (name != sizes[i].first) continue;
        line = prefix + name + comma + std::to_string(sizes[i].second) + "  " + comment;
        ++replaced[i];
      }
    }
    result += line + "\n";
  }
  for (size_t i = 0; i < sizes.size(); ++i) EXPECT_EQ(replaced[i], 1) << ".equ " << sizes[i].first;
  return result;
}

}  // namespace npu::testing
