// One DMA channel of a core: 3-D strided copies between global and local
// memory, local-to-local, global-to-global, core-to-core sends over the NoC,
// and gathers. Transfers are split into requests; up to
// max_outstanding_requests are in flight, one is issued per cycle, and the
// channel yields to the simulation every step_bytes so that concurrent
// transfers interleave on the links and channels they share. Each request is
// timed through the NoC and the memories' TLM sockets; with DmaTiming::PerStep,
// a transfer between DRAM and the scratchpad is timed a step at a time instead
// (dma_steps.cpp), with DmaTiming::PerWindow a window at a time (dma_windows.cpp);
// under either, a core-to-core send's banks are timed a step at a time (dma_sends.cpp).
#pragma once

#include <tlm>
#include <tlm_utils/simple_initiator_socket.h>

#include <vector>

#include "core_directory.h"
#include "dma_rows.h"
#include "dram.h"
#include "dram_interleave.h"
#include "engine.h"
#include "local_memory.h"
#include "timing_extension.h"

namespace npu::sim {

class DmaEngine : public Engine {
 public:
  tlm_utils::simple_initiator_socket<DmaEngine> noc;  // to the NoC: DRAM and other cores

  DmaEngine(sc_core::sc_module_name name, ChipContext& context, unsigned core, unsigned channel, Semaphores& semaphores,
            EngineStats& stats, unsigned engine_index, LocalMemory& local, const CoreDirectory& directory, class Dram& dram);
  ~DmaEngine() override;

 protected:
  Outcome execute(const Command& command, uint64_t start) override;
  void describe_work(std::vector<trace::Arg>& args) const override {
    args.push_back({"bytes", std::to_string(last_bytes_)});
    args.push_back({"dram_bytes", std::to_string(last_dram_bytes_)});
    if (last_send_core_ >= 0) {  // (a dma.send: whose semaphore it raises, for a trace's cross-core critical path)
      args.push_back({"to_core", std::to_string(last_send_core_)});
      args.push_back({"sem", std::to_string(last_send_sem_)});
    }
  }

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

  // What the per-step and per-window models share (dma_bursts.cpp). The NoC and the scratchpad see a
  // burst of requests to one DRAM channel (a step's, a window's share) as one cut-through transfer that
  // holds each link, and the banks, for the cycles its requests would hold them one by one.
  struct BurstPath {
    MeshPosition port;  // of the channel's controller
    unsigned hops;      // from this core to it
    uint64_t bytes, link_cycles, sram_cycles, first_local, first_bytes, last_bytes;
    uint64_t wait_weight;  // how many times the waits it meets count (per window: its requests)
  };
  struct BurstEnds {
    uint64_t first, last;
  };
  // A load's data, its first and last request's off the DRAM bus at first_read and last_read, over the
  // links into the scratchpad: when the first and the last request's bytes are in.
  BurstEnds into_scratchpad(const BurstPath& path, uint64_t first_read, uint64_t last_read);
  // A store's requests, issued from first_issue to last_issue, read out of the scratchpad no faster and
  // over the links: when the first and the last reach the DRAM controller.
  BurstEnds to_controller(const BurstPath& path, uint64_t first_issue, uint64_t last_issue);
  // The bytes a transfer moves, gathered while they continue each other on both sides, moved in one copy.
  struct PendingCopy {
    uint64_t global = 0, local = 0, bytes = 0;
  };
  // Adds [global, +bytes) and [local, +bytes) to `copy`, moving what it held first unless they continue it.
  void add_to_copy(PendingCopy& copy, bool load, uint64_t global, uint64_t local, uint64_t bytes);
  // Moves what `copy` holds (from DRAM to the scratchpad for a load) and empties it. A store of bytes
  // that work in the background is still writing (the tensor core's results, converted there) joins the
  // batch below instead of waiting for that work.
  void move_copy(PendingCopy& copy, bool load);
  // Hands the batch of stores that move_copy deferred to the background (ChipContext::background), as one
  // item after the work they wait for: before the transfer yields (so that no other thread acts between a
  // row's deferral and its hand-over) and where it ends.
  void hand_over_stores();
  // Adds a transfer's waits (noc_wait_, dram_wait_, sram_wait_) to the stall statistics, for its `requests` requests.
  void add_request_stalls(uint64_t requests);

  // DmaTiming::PerStep (dma_steps.cpp): a transfer between DRAM at `global`
  // and the scratchpad at `local` (a load when `load`), every row inside them
  // (checked), cut into requests as the per-request model cuts them; each
  // step's requests to one DRAM channel are timed as one burst.
  Outcome transfer_in_steps(DmaRows& rows, bool load, uint64_t global, uint64_t local, uint64_t n0, uint64_t start);
  // Times the step's requests (in channel_bursts_), the first issued at
  // `issue`; returns when the last is done. Estimates each request's
  // completion into in_flight_ (its slot), for the window of later steps.
  uint64_t time_step(bool load, uint64_t issue);
  struct ChannelBurst {
    std::vector<Dram::BurstRequest> requests;  // the step's requests to one DRAM channel, in order
    std::vector<size_t> slots;                 // each request's slot in in_flight_
    uint64_t first_local = 0, bytes = 0;
    // What its requests would hold one by one, each rounded up to whole cycles: every NoC link on its route,
    // and the scratchpad's banks.
    uint64_t link_cycles = 0, sram_cycles = 0;
  };

  // DmaTiming::PerStep and PerWindow for dma.send (dma_sends.cpp): this core's scratchpad at `src` to
  // `remote_core`'s at `dst`, every row inside them (checked); the banks at both ends a step of requests
  // at a time, the links a request at a time.
  // It raises the send's semaphore at `remote_core` when done, as the per-request model does.
  Outcome send_in_steps(DmaRows& rows, uint64_t src, uint64_t dst, unsigned remote_core, uint64_t n0, uint64_t start, const Command& command);
  // A dma.send's end: waits for `end`, then raises its semaphore at `remote_core` (not after a reset).
  void raise_at_receiver(const Command& command, unsigned remote_core, uint64_t end);

  // DmaTiming::PerWindow (dma_windows.cpp): the same transfers as per step, cut into requests as the
  // per-request model cuts them, timed a window of max_outstanding_requests requests at a time, each
  // DRAM channel's share of a window in closed form.
  Outcome transfer_in_windows(DmaRows& rows, bool load, uint64_t global, uint64_t local, uint64_t n0, uint64_t start);
  struct WindowTimes {
    uint64_t first_done, done;
  };
  // Times the window's shares (in channel_windows_), request i issued at start + i * spacing_256ths / 256.
  WindowTimes time_window(bool load, uint64_t start, uint64_t spacing_256ths);
  // Requests of a window to one DRAM channel, all in one DRAM row: the first and last are the window's
  // requests first_index and last_index (in a row's cut: indices and first_local from the row's start).
  struct SharePiece {
    unsigned channel;
    uint64_t first_index, last_index, requests, bytes, bus, link, sram;  // (bus, link, sram: cycles, summed)
    uint64_t first_local, first_bytes, last_bytes, first_bus, last_bus;
    uint64_t row_span;  // Dram::row_span()
  };
  struct ChannelWindow {
    Dram::WindowShare dram;
    uint64_t first_local = 0, first_index = 0, first_bytes = 0, last_index = 0, last_bytes = 0;
    uint64_t link_cycles = 0, sram_cycles = 0;  // as ChannelBurst's
    uint64_t ready = 0;  // request i of the window reaches the controller at ready + i * spacing / 256 (uncontended)
    uint64_t last_row_span = 0;
  };

  LocalMemory& local_;
  const CoreDirectory& directory_;
  Dram& dram_;
  std::vector<uint8_t> buffer_;
  // Stores move_copy deferred (functional runs), in order, and the spans of addresses they read and write.
  struct DeferredStore {
    uint8_t* dram;
    const uint8_t* local;
    uint64_t bytes;
  };
  std::vector<DeferredStore> deferred_stores_;
  uint64_t deferred_local_begin_ = 0, deferred_local_end_ = 0, deferred_global_begin_ = 0, deferred_global_end_ = 0;
  TimingExtension timing_;
  tlm::tlm_generic_payload payload_;
  uint64_t noc_wait_ = 0, dram_wait_ = 0, sram_wait_ = 0;
  uint64_t last_bytes_ = 0, last_dram_bytes_ = 0;  // what the last transfer moved, and read or wrote in DRAM (its trace span)
  int64_t last_send_core_ = -1, last_send_sem_ = 0;  // the last dma.send's core and semaphore (-1: not a send)
  std::vector<ChannelBurst> channel_bursts_;  // the step's requests by DRAM channel (offset: cycles after the step's first issue)
  std::vector<unsigned> step_channels_;       // the channels the step (or window) uses, in order of first use
  std::vector<ChannelWindow> channel_windows_;  // the window's requests by DRAM channel
  std::vector<SharePiece> row_pieces_;          // a row's cut, by channel (transfer_in_windows)
  const unsigned stream_;                       // this channel's number on the chip, from 1 (Dram::window_row)
  // The last max_outstanding_requests requests' completion cycles, a ring, as the per-request model keeps
  // them; per step, estimated from its bursts.
  std::vector<uint64_t> in_flight_;
  std::vector<uint64_t> dram_done_;  // per request of a burst (Dram::access_burst)
  const DramInterleave interleave_;
};

}  // namespace npu::sim
