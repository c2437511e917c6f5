// The npu's random number generators (random.cpp).
#pragma once

#include <ATen/core/Generator.h>

namespace npusim {

const at::Generator& default_npu_generator();
at::Generator new_npu_generator();

}  // namespace npusim
