// The check that a generated document in docs/ is up to date with the table
// it is generated from, reporting the first differing line.
#pragma once

#include <fstream>
#include <sstream>
#include <string>

#include <gtest/gtest.h>

namespace npu::testing {

inline void expect_generated_doc_is_current(const std::string& relative_path, const std::string& generated,
                                            const std::string& regenerate_command) {
  std::ifstream in(std::string(NPUSIM_SOURCE_DIR) + "/" + relative_path);
  ASSERT_TRUE(in) << relative_path << " is missing (generate it with " << regenerate_command << ")";
  std::stringstream text;
  text << in.rdbuf();
  std::istringstream on_disk(text.str()), expected(generated);
  std::string disk_line, expected_line;
  for (int line = 1;; ++line) {
    const bool more_disk = static_cast<bool>(std::getline(on_disk, disk_line));
    const bool more_expected = static_cast<bool>(std::getline(expected, expected_line));
    if (!more_disk && !more_expected) break;
    ASSERT_TRUE(more_disk == more_expected && disk_line == expected_line)
        << relative_path << " is stale (regenerate with " << regenerate_command << "); first difference at line " << line
        << ":\n  on disk:   " << (more_disk ? disk_line : "<end of file>") << "\n  generated: " << (more_expected ? expected_line : "<end of file>");
  }
}

}  // namespace npu::testing
