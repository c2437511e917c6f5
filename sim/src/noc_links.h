// The mesh's links by index, as the NoC keeps them: (y * mesh_cols + x) * 4 + direction, the link out of
// router (x, y) towards East, West, North or South. Named "(x,y)E" in statistics and traces.
#pragma once

#include <cstddef>
#include <string>

namespace npu::sim {

enum NocDirection { East, West, North, South };

inline size_t noc_link_index(unsigned mesh_cols, unsigned x, unsigned y, NocDirection direction) {
  return (static_cast<size_t>(y) * mesh_cols + x) * 4 + direction;
}

inline std::string noc_link_name(unsigned mesh_cols, size_t index) {
  static const char* const arrows[] = {"E", "W", "N", "S"};
  const size_t node = index / 4;
  return "(" + std::to_string(node % mesh_cols) + "," + std::to_string(node / mesh_cols) + ")" + arrows[index % 4];
}

}  // namespace npu::sim
