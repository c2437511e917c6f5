#include "atomic_file.h"

#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <stdexcept>

namespace npu::trace {
namespace {

// Unique per process and call, so concurrent writers of one path do not
// share a temporary.
std::string temporary_name(const std::string& path) {
  static std::atomic<unsigned> counter{0};
  return path + ".tmp." + std::to_string(::getpid()) + "." + std::to_string(counter++);
}

}  // namespace

void write_file_atomically(const std::string& path, const std::string& contents) {
  const std::string temporary = temporary_name(path);
  const auto fail = [&](const std::string& what) {
    // iostreams do not promise errno, but on POSIX the failing call sets it.
    const std::string reason = errno != 0 ? std::strerror(errno) : "I/O error";
    std::remove(temporary.c_str());
    throw std::runtime_error("cannot " + what + " '" + path + "': " + reason);
  };
  errno = 0;
  {
    std::ofstream out(temporary, std::ios::binary | std::ios::trunc);
    if (!out) fail("create");
    out.write(contents.data(), static_cast<std::streamsize>(contents.size()));
    out.close();
    if (!out) fail("write");
  }
  if (std::rename(temporary.c_str(), path.c_str()) != 0) fail("replace");
}

}  // namespace npu::trace
