#include "scan.h"

#include <ATen/Functions.h>

namespace npusim {

at::Tensor inclusive_scan(const at::Tensor& x, const std::function<at::Tensor(const at::Tensor&, const at::Tensor&)>& combine) {
  at::Tensor scan = x;
  const int64_t length = x.size(-1);
  for (int64_t s = 1; s < length; s *= 2)
    scan = at::cat({scan.narrow(-1, 0, s), combine(scan.narrow(-1, 0, length - s), scan.narrow(-1, s, length - s))}, -1);
  return scan;
}

}  // namespace npusim
