// One DMA channel of a core: 3-D strided copies between global and local
// memory, local-to-local, global-to-global, core-to-core sends over the NoC,
// and gathers. Transfers are split into requests; up to
// max_outstanding_requests are in flight, one is issued per cycle, and the
// channel yields to the simulation every step_bytes so that concurrent
// transfers interleave on the links and channels they share.
#pragma once

#include <tlm>
#include <tlm_utils/simple_initiator_socket.h>

#include <vector>

#include "core_directory.h"
#include "engine.h"
#include "local_memory.h"
#include "timing_extension.h"

namespace npu::sim {

class DmaEngine : public Engine {
 public:
  tlm_utils::simple_initiator_socket<DmaEngine> noc;  // to the NoC: DRAM and other cores

  DmaEngine(sc_core::sc_module_name name, ChipContext& context, unsigned core, unsigned channel, Semaphores& semaphores,
            EngineStats& stats, uint64_t trace_track, LocalMemory& local, const CoreDirectory& directory, class Dram& dram);
  ~DmaEngine() override;

 protected:
  Outcome execute(const Command& command, uint64_t start) override;

 private:
  struct Row {
    uint64_t src;
    uint64_t dst;
    uint64_t bytes;
  };
  enum class Space { Global, Local, Remote };

  std::optional<FaultRecord> check(const Command& command, Space space, uint64_t address, uint64_t bytes, unsigned remote_core) const;
  // Whether one memory of `space` holds [address, address + bytes), so that no
  // access within it can fault (false where unsure: the caller checks each row).
  bool holds(Space space, uint64_t address, unsigned __int128 bytes, unsigned remote_core) const;
  // Issues one request: reads `bytes` at src (from its space) and writes them at dst; returns completion.
  uint64_t request(Space src_space, uint64_t src, Space dst_space, uint64_t dst, uint64_t bytes, uint64_t issue, unsigned remote_core,
                   std::optional<FaultRecord>* fault, const Command& command);
  uint64_t noc_transport(tlm::tlm_command direction, uint64_t address, uint8_t* data, uint64_t bytes, uint64_t ready, bool* ok);

  LocalMemory& local_;
  const CoreDirectory& directory_;
  Dram& dram_;
  std::vector<uint8_t> buffer_;
  TimingExtension timing_;
  tlm::tlm_generic_payload payload_;
  uint64_t noc_wait_ = 0, dram_wait_ = 0, sram_wait_ = 0;
};

}  // namespace npu::sim
