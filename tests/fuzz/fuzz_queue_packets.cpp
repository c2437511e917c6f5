// Fuzzes the command processor's firmware on a simulated chip: the input's
// words go into a command queue's ring as they are (the first word picks the
// queue) and the chip runs until the queue has consumed them, stopped on an
// error, or 200,000 cycles have passed; then RESET. The simulator must not
// crash, hang or report an unknown error code, and must keep working.
#include <cstdint>
#include <cstring>
#include <memory>
#include <vector>

#include "queue_packet_stream.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // One chip for the whole run (SystemC elaborates once per process).
  static npu::SimulatorLink link("tiny");
  if (size < 8) return 0;
  std::vector<uint32_t> words(size / 4);
  std::memcpy(words.data(), data, words.size() * 4);
  const unsigned queue = words[0] & 1;  // tiny has two queues
  words.erase(words.begin());
  npu::testing::run_packet_stream(link, queue, words, 200000);
  return 0;
}

// libsystemc.so refers to sc_main; libFuzzer provides main.
extern "C" int sc_main(int, char*[]) { return 0; }
