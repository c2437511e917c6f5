#include "host_link.h"

#include <algorithm>

#include "chip_trace.h"

namespace npu::sim {
namespace {
// Memory transfers cross the link in chunks of this size: each chunk is
// forwarded into the NoC whole, so the size bounds the store-and-forward delay
// at the link's node, and lets a long copy share the NoC and DRAM with the cores.
constexpr uint64_t kChunkBytes = 512;
}  // namespace

HostLink::HostLink(sc_core::sc_module_name name, ChipContext& context)
    : sc_module(name), noc("noc"), registers("registers"), context_(context) {
  serve_slot_ = context.new_slot();
  deliver_slot_ = context.new_slot();
  SC_THREAD(run);
  SC_THREAD(deliver);
}

void HostLink::deliver_arrived() {
  while (!in_flight_.empty() && in_flight_.front().arrival_cycle <= context_.now_cycle()) {
    PostedWrite write = in_flight_.front();
    in_flight_.pop_front();
    uint64_t done = 0;
    transport(registers, tlm::TLM_WRITE_COMMAND, write.offset, reinterpret_cast<uint8_t*>(&write.value), 4, context_.now_cycle(), &done);
  }
}

void HostLink::deliver() {
  for (;;) {
    if (in_flight_.empty()) sc_core::wait(posted_);
    else sc_core::wait(context_.until(in_flight_.front().arrival_cycle, deliver_slot_), posted_);
    deliver_arrived();
  }
}

void HostLink::submit(Request* request) {
  pending_.push_back(request);
  submitted_.notify(sc_core::SC_ZERO_TIME);
}

bool HostLink::transport(tlm_utils::simple_initiator_socket<HostLink>& socket, tlm::tlm_command command, uint64_t address, uint8_t* data,
                         uint64_t bytes, uint64_t ready, uint64_t* done) {
  tlm::tlm_generic_payload payload;
  payload.set_command(command);
  payload.set_address(address);
  payload.set_data_ptr(data);
  payload.set_data_length(static_cast<unsigned>(bytes));
  payload.set_streaming_width(static_cast<unsigned>(bytes));
  payload.set_response_status(tlm::TLM_INCOMPLETE_RESPONSE);
  sc_core::sc_time delay = context_.until(ready);
  socket->b_transport(payload, delay);
  *done = context_.cycle_of(delay);
  return payload.get_response_status() == tlm::TLM_OK_RESPONSE;
}

// The link keeps working while the chip is faulted (the host must be able to
// read the fault and reset the chip), so it waits on plain time, not on the
// chip context's fault-aware waits.
void HostLink::serve(Request& request) {
  const HostLinkConfig& config = context_.config.host_link;
  const uint64_t now = context_.now_cycle();
  uint64_t done = now;
  bytes_ += request.kind == Request::Kind::ReadMemory || request.kind == Request::Kind::WriteMemory ? request.bytes : 4;
  switch (request.kind) {
    case Request::Kind::WriteRegister:
      if (request.posted) {
        // One cycle onto the link (a 4-byte write), then it is in flight.
        const uint64_t sent = to_device_.reserve(now, 1) + 1;
        in_flight_.push_back({sent + config.latency_cycles, static_cast<uint32_t>(request.address), request.value});
        posted_.notify(sc_core::SC_ZERO_TIME);
        sc_core::wait(context_.until(sent, serve_slot_));
        return;
      }
      [[fallthrough]];
    case Request::Kind::ReadRegister: {
      // The access happens when it reaches the device; a read's value takes another crossing back.
      sc_core::wait(context_.until(now + config.latency_cycles, serve_slot_));
      deliver_arrived();  // posted writes sent before this request reach the device before it
      const bool is_read = request.kind == Request::Kind::ReadRegister;
      uint32_t value = request.value;
      request.ok = transport(registers, is_read ? tlm::TLM_READ_COMMAND : tlm::TLM_WRITE_COMMAND, request.address,
                             reinterpret_cast<uint8_t*>(&value), 4, context_.now_cycle(), &done);
      request.value = value;
      if (is_read) sc_core::wait(context_.until(context_.now_cycle() + config.latency_cycles, serve_slot_));
      return;
    }
    case Request::Kind::WriteMemory:
    case Request::Kind::ReadMemory: {
      const bool is_write = request.kind == Request::Kind::WriteMemory;
      uint64_t issue = now;
      for (uint64_t offset = 0; offset < request.bytes && request.ok; offset += kChunkBytes) {
        const uint64_t chunk = std::min(kChunkBytes, request.bytes - offset);
        const uint64_t serialization = ceil_div(chunk, config.bytes_per_cycle);
        uint64_t finished = 0;
        if (is_write) {
          const uint64_t sent = to_device_.reserve(issue, serialization);
          issue = sent + serialization;
          request.ok = transport(noc, tlm::TLM_WRITE_COMMAND, request.address + offset, request.data + offset, chunk,
                                 sent + serialization + config.latency_cycles, &finished);
        } else {
          uint64_t fetched = 0;
          request.ok = transport(noc, tlm::TLM_READ_COMMAND, request.address + offset, request.data + offset, chunk,
                                 issue + config.latency_cycles, &fetched);
          finished = to_host_.reserve(fetched, serialization) + serialization + config.latency_cycles;
          ++issue;
        }
        done = std::max(done, finished);
        // Keep the rest of the chip in step with long transfers.
        sc_core::wait(context_.until(issue, serve_slot_));
      }
      if (request.ok) note_transfer({now, done, request.address, request.bytes, is_write, false});
      if (!(request.posted && is_write)) sc_core::wait(context_.until(done, serve_slot_));
      return;
    }
  }
}

uint64_t HostLink::reserve_transfer(bool to_device, uint64_t address, uint64_t bytes, uint64_t ready_cycle) {
  const HostLinkConfig& config = context_.config.host_link;
  const uint64_t serialization = ceil_div(bytes, config.bytes_per_cycle);
  bytes_ += bytes;
  Timeline& direction = to_device ? to_device_ : to_host_;
  const uint64_t start = direction.reserve(ready_cycle, serialization);
  const uint64_t arrival = start + serialization + config.latency_cycles;
  note_transfer({start, arrival, address, bytes, to_device, true});
  return arrival;
}

void HostLink::note_transfer(const HostTransfer& transfer) {
  if (recording_) recorded_.push_back(transfer);
  if (context_.trace) context_.trace->host_transfer(transfer);
}

void HostLink::run() {
  for (;;) {
    while (pending_.empty()) sc_core::wait(submitted_);
    Request* request = pending_.front();
    pending_.pop_front();
    serve(*request);
    request->done = true;
    sc_core::sc_pause();
  }
}

}  // namespace npu::sim
