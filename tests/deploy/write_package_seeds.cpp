// Writes the seeds of the package fuzzer (tests/fuzz/fuzz_package.cpp) into
// the directory given: the runner tests' package as a file, and as the
// payload alone (the fuzzer reads its input both ways).
#include <fstream>
#include <iostream>

#include "package.pb.h"
#include "test_package.h"

int main(int argc, char** argv) {
  if (argc != 2) {
    std::cerr << "usage: write_package_seeds DIRECTORY\n";
    return 2;
  }
  const std::string directory = argv[1];
  const npu::deploy::Package package = npu::deploy::testing::make_package("tiny");
  std::ofstream(directory + "/runner_package.npupkg", std::ios::binary) << package.serialize();
  std::ofstream(directory + "/runner_package.payload", std::ios::binary) << package.raw().SerializeAsString();
  return 0;
}
