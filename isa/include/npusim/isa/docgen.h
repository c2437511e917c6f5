// docs/isa.md, generated from the instruction table.
#pragma once

#include <string>

namespace npu::isa {

std::string generate_isa_markdown();

}  // namespace npu::isa
