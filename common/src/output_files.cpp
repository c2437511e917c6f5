#include "npusim/common/output_files.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace npu {
namespace {

[[noreturn]] void fail(const std::string& what, const std::string& path, int error) {
  throw OutputFileError("cannot " + what + " '" + path + "': " + std::strerror(error));
}

const char* kind_of(mode_t mode) {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISSOCK(mode)) return "a socket";
  return "not a regular file";
}

std::string directory_of(const std::string& path) {
  const size_t slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  return slash == 0 ? "/" : path.substr(0, slash);
}

// The path to write: a symbolic link's target (so that the link stays a link), else `path` itself.
std::string resolved(const std::string& path) {
  struct stat status {};
  if (::lstat(path.c_str(), &status) != 0 || !S_ISLNK(status.st_mode)) return path;
  char target[PATH_MAX];
  if (::realpath(path.c_str(), target) != nullptr) return target;
  // A dangling link: write where it points (relative to the link's directory).
  const ssize_t length = ::readlink(path.c_str(), target, sizeof target - 1);
  if (length <= 0) fail("resolve", path, errno);
  const std::string link_target(target, size_t(length));
  return link_target[0] == '/' ? link_target : directory_of(path) + "/" + link_target;
}

// The mode of an existing file, or what a new one gets (0666 less the umask).
mode_t mode_for(const std::string& path) {
  struct stat status {};
  if (::stat(path.c_str(), &status) == 0) return status.st_mode & 07777;
  const mode_t mask = ::umask(0);
  ::umask(mask);
  return 0666 & ~mask;
}

}  // namespace

void check_output_path(const std::string& path) {
  if (path.empty()) throw OutputFileError("an output path is empty");
  const std::string target = resolved(path);
  struct stat status {};
  if (::stat(target.c_str(), &status) == 0) {
    if (!S_ISREG(status.st_mode))
      throw OutputFileError("cannot write '" + path + "': it is " + kind_of(status.st_mode) + ", not a regular file (not replaced)");
    return;
  }
  if (errno != ENOENT) fail("write", path, errno);
  const std::string directory = directory_of(target);
  if (::stat(directory.c_str(), &status) != 0) fail("write", path, errno);
  if (!S_ISDIR(status.st_mode)) fail("write", path, ENOTDIR);
}

OutputFiles::~OutputFiles() {
  for (const Staged& staged : staged_) std::remove(staged.temporary.c_str());
}

void OutputFiles::stage(const std::string& path, std::string_view contents) {
  check_output_path(path);
  const std::string target = resolved(path);
  const size_t slash = target.rfind('/');
  const std::string name = slash == std::string::npos ? target : target.substr(slash + 1);
  std::string temporary = directory_of(target) + "/." + name + ".tmp.XXXXXX";
  const int fd = ::mkstemp(temporary.data());
  if (fd < 0) fail("write", path, errno);
  const auto give_up = [&](const char* what, int error) {
    ::close(fd);
    std::remove(temporary.c_str());
    fail(what, path, error);
  };
  if (::fchmod(fd, mode_for(target)) != 0) give_up("write", errno);
  size_t written = 0;
  while (written < contents.size()) {
    const ssize_t n = ::write(fd, contents.data() + written, contents.size() - written);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) give_up("write", n < 0 ? errno : EIO);
    written += size_t(n);
  }
  if (::fsync(fd) != 0 && errno != EINVAL && errno != EROFS) give_up("write", errno);
  if (::close(fd) != 0) {
    const int error = errno;
    std::remove(temporary.c_str());
    fail("write", path, error);
  }
  staged_.push_back({target, std::move(temporary)});
}

void OutputFiles::commit() {
  for (size_t i = 0; i < staged_.size(); ++i) {
    if (std::rename(staged_[i].temporary.c_str(), staged_[i].path.c_str()) != 0) {
      const int error = errno;
      const std::string path = staged_[i].path;
      staged_.erase(staged_.begin(), staged_.begin() + long(i));  // those are in place; the destructor removes the rest
      fail("replace", path, error);
    }
  }
  staged_.clear();
}

void write_file_atomically(const std::string& path, std::string_view contents) {
  OutputFiles files;
  files.stage(path, contents);
  files.commit();
}

}  // namespace npu
