// Output files written whole or not at all. Every file a tool or a library
// writes for a user goes through here, so that a failure (a full disk, an
// unwritable directory, a crash halfway) leaves whatever was at the path
// before untouched, and no tool replaces what is not a regular file.
#pragma once

#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace npu {

class OutputFileError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Throws OutputFileError when `path` cannot be an output: it exists and is not
// a regular file (a directory, a device such as /dev/null, a FIFO, a socket),
// or its directory does not exist. Tools call it for each output before they
// start work, so that a bad path costs nothing. A symbolic link stands for its
// target.
void check_output_path(const std::string& path);

// A set of outputs that appear together: each stage() writes a temporary file
// beside its path (same directory, so the rename cannot cross file systems),
// every write checked and flushed to disk; commit() renames them all into
// place. Destroyed before commit(), it removes its temporaries: the paths keep
// what they had. (Between two renames of commit() a crash can leave the first
// output new and the second old; neither is ever partial.)
class OutputFiles {
 public:
  OutputFiles() = default;
  OutputFiles(const OutputFiles&) = delete;
  OutputFiles& operator=(const OutputFiles&) = delete;
  ~OutputFiles();

  // Throws OutputFileError, naming the path and the reason; nothing staged before is lost.
  void stage(const std::string& path, std::string_view contents);
  void commit();

 private:
  struct Staged {
    std::string path;       // where it goes (a link's target)
    std::string temporary;  // where it is now
  };
  std::vector<Staged> staged_;
};

// One output: OutputFiles with one stage() and its commit().
void write_file_atomically(const std::string& path, std::string_view contents);

}  // namespace npu
