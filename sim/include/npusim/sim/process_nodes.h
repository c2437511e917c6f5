// The process nodes the energy model knows (TechnologyConfig.process_nm): each node's nominal supply, and
// its area and dynamic energy against 45 nm, each at its own nominal supply. Header-only, so that the
// config loader checks a node against the same table the energy model scales by.
#pragma once

#include <cstdint>
#include <optional>

namespace npu::sim {

struct NodeScaling {
  uint32_t nm;
  uint32_t nominal_mv;  // energies below are at this supply; another scales dynamic energy by (V / nominal)^2
  double area;
  double energy;
};

// Area: [Stillmaker] A. Stillmaker, B. Baas, "Scaling equations for the accurate prediction of CMOS device
// performance from 180 nm to 7 nm", Integration 58 (2017), as Accelergy-Project/hwcomponents
// (scaling/techscaling.py) transcribes the fits.
// Energy: at 7 nm, 0.348: the geometric mean of the eight operations that both Horowitz (ISSCC 2014, 45 nm)
// and Jouppi et al. (TPUv4i, ISCA 2021, Table 2, 7 nm) price (int8/int32 add and multiply, fp16/fp32 add
// and multiply; ratios 0.23 to 0.48). Between, Stillmaker's energy fits at a fixed 0.9 V (0.641, 0.238,
// 0.187, 0.150, 0.127 and 0.102 at 7 nm) raised to the power 0.462 that takes 0.102 to 0.348: their shape,
// through both published ends. (Stillmaker's device fits alone put 7 nm at 0.102, a third of what the
// TPUv4i table shows for whole arithmetic units.)
// Nominal supplies: 45 nm 0.9 V (Horowitz's table); 20, 14, 10 and 7 nm from Villa et al., "Scaling the
// power wall", SC14, Table II (0.85, 0.75, 0.725, 0.70 V); 32 and 16 nm between their neighbours.
inline constexpr NodeScaling kProcessNodes[] = {
    {45, 900, 1.0, 1.0},    {32, 875, 0.46, 0.814}, {20, 850, 0.21, 0.515}, {16, 775, 0.19, 0.461},
    {14, 750, 0.17, 0.416}, {10, 725, 0.10, 0.385}, {7, 700, 0.059, 0.348},
};
inline constexpr const char* kProcessNodeNames = "45, 32, 20, 16, 14, 10 or 7";

inline std::optional<NodeScaling> process_node(uint32_t nm) {
  for (const NodeScaling& node : kProcessNodes)
    if (node.nm == nm) return node;
  return std::nullopt;
}

}  // namespace npu::sim
