#include <stdexcept>
#include <string>
#include <string_view>

#include "npusim/traces/writers.h"

namespace npu::trace {
namespace {

bool ends_with(std::string_view text, std::string_view suffix) {
  return text.size() >= suffix.size() && text.substr(text.size() - suffix.size()) == suffix;
}

}  // namespace

void write_trace(const Trace& trace, const std::string& path) {
  if (ends_with(path, ".pftrace") || ends_with(path, ".perfetto-trace")) {
    write_perfetto(trace, path);
  } else if (ends_with(path, ".json")) {
    write_chrome_json(trace, path);
  } else {
    throw std::invalid_argument("write_trace: cannot tell the format of '" + path +
                                "': use .pftrace or .perfetto-trace (Perfetto) or .json (Chrome JSON)");
  }
}

}  // namespace npu::trace
