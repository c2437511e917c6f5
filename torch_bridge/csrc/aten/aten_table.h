// ATen registrations derived from the compiler's op table (aten_table.cpp).
#pragma once

#include <string>
#include <vector>

namespace npusim {

struct TableRegistrations {
  std::vector<std::string> table;    // functional overloads of ops.def's elementwise rows ("eq.Scalar")
  std::vector<std::string> derived;  // in-place and out= forms of ops with a functional npu kernel ("exp_", "mm.out")
};
// Registers, once, the npu kernels aten_table.cpp derives (after every kernel registered by hand,
// which takes precedence); returns their names.
TableRegistrations register_table_ops();

}  // namespace npusim
