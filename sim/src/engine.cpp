#include "engine.h"

#include "chip_trace.h"
#include "npusim/isa/printer.h"

namespace npu::sim {

std::string instruction_text(uint64_t word) { return isa::describe_word(word, 0, nullptr); }

Engine::Engine(sc_core::sc_module_name name, ChipContext& context, unsigned core, std::string display_name, Semaphores& semaphores,
               EngineStats& stats, unsigned engine_index)
    : sc_module(name),
      context_(context),
      timer_(context.new_timer()),
      core_(core),
      semaphores_(semaphores),
      stats_(stats),
      display_name_(std::move(display_name)),
      engine_index_(engine_index),
      capacity_(context.config.core.control.queue_depth),
      deferred_signal_slot_(context.new_slot()) {
  context.reset_notifies(popped_);
  context.reset_notifies(idle_);
  stats_.name = display_name_;
  SC_THREAD(run);
  SC_METHOD(raise_due_signals);
  sensitive << deferred_signal_due_;
  dont_initialize();
}

void Engine::raise_due_signals() {
  const uint64_t now = context_.now_cycle();
  while (!deferred_signals_.empty() && deferred_signals_.front().cycle <= now) {
    semaphores_.signal(deferred_signals_.front().semaphore, is_dma_);
    deferred_signals_.pop_front();
  }
  if (!deferred_signals_.empty()) deferred_signal_due_.notify(context_.until(deferred_signals_.front().cycle, deferred_signal_slot_));
}

void Engine::push(const Command& command) {
  queue_.push_back(command);
  pushed_.notify(sc_core::SC_ZERO_TIME);
}

void Engine::reset() {
  queue_.clear();
  busy_ = false;
  waiting_on_ = -1;
  forget_pending_results();
  deferred_signals_.clear();
  deferred_signal_due_.cancel();
}

FaultRecord Engine::fault_for(const Command& command, FaultKind kind, std::string message) const {
  FaultRecord fault;
  fault.kind = kind;
  fault.core = static_cast<int>(core_);
  fault.engine = display_name_;
  fault.pc = command.pc;
  fault.instruction = instruction_text(command.word);
  fault.message = std::move(message);
  return fault;
}

FaultRecord Engine::fault_from(const Command& command, const FaultRecord& problem, const std::string& prefix) const {
  FaultRecord fault = fault_for(command, problem.kind, prefix + problem.message);
  fault.has_address = problem.has_address;
  fault.address = problem.address;
  return fault;
}

void Engine::run() {
  for (;;) {
    while (queue_.empty()) {
      const uint64_t generation = context_.generation();
      if (!wait_for_results()) {
        context_.park(generation);  // (a reset empties the queue)
        continue;
      }
      if (!queue_.empty()) break;
      busy_ = false;
      idle_.notify(sc_core::SC_ZERO_TIME);
      sc_core::wait(pushed_);
    }
    busy_ = true;
    const uint64_t generation = context_.generation();
    const Command command = queue_.front();  // a copy: a reset empties the queue under us
    // A reset during the command abandons it whatever serve() says: a serve whose last wait had nothing left
    // to wait for (its end already past when an earlier wait saw the reset) returned true, and the pop below
    // then took a command of the next launch off its queue, or a queue the reset had emptied (its size wrapped
    // and the control unit found it full for ever: the next launch deadlocked).
    if (!serve(command) || context_.generation() != generation) {
      // A fault or reset abandoned the command: wait for the reset, which empties the queue.
      context_.park(generation);
      continue;
    }
    queue_.pop_front();
    popped_.notify(sc_core::SC_ZERO_TIME);
  }
}

bool Engine::wait_for_results() {
  const uint64_t start = context_.now_cycle(), ready = results_ready_cycle();
  if (ready <= start) return true;
  if (!context_.wait_until(ready, timer_)) return false;
  // The wait is the engine's own work (the tensor core's drain): busy, and a span of its own.
  stats_.busy_cycles += ready - start;
  if (context_.trace) context_.trace->named_span(context_.trace->engine_track(core_, engine_index_), start, ready, "drain", {});
  return true;
}

bool Engine::serve(const Command& command) {
  if (!context_.wait_until(command.dispatch_cycle, timer_)) return false;
  const uint64_t start = context_.now_cycle();
  if (command.opcode == isa::Opcode::WAIT) {
    const auto semaphore = static_cast<unsigned>(command.operands[1]);
    waiting_on_ = static_cast<int>(semaphore);
    while (semaphores_.value[semaphore] == 0)
      if (!context_.wait_on(semaphores_.changed[semaphore])) return false;
    waiting_on_ = -1;
    --semaphores_.value[semaphore];
    const uint64_t waited = context_.now_cycle() - start;
    if (waited > 0) {
      const StallReason reason = semaphores_.signalled_by_dma[semaphore] ? StallReason::DmaData : StallReason::Semaphore;
      add_stall(reason, waited);
      if (context_.trace)
        context_.trace->span(context_.trace->engine_track(core_, engine_index_), start, start + waited, "wait s" + std::to_string(semaphore),
                             command.pc, command.word, {{"stall", stall_reason_name(reason)}});
    }
    return true;
  }
  if (command.opcode == isa::Opcode::SIGNAL) {
    const auto semaphore = static_cast<unsigned>(command.operands[1]);
    const uint64_t ready = results_ready_cycle();
    if (ready <= start) {
      semaphores_.signal(semaphore, is_dma_);
    } else {
      if (deferred_signals_.empty()) deferred_signal_due_.notify(context_.until(ready, deferred_signal_slot_));
      deferred_signals_.push_back({ready, semaphore});
    }
    return true;
  }
  const auto stalls_before = stats_.stall_cycles;  // (an instruction's own stalls: a DMA's waits for DRAM, NoC and banks)
  Outcome outcome = execute(command, start);
  if (outcome.fault) {
    context_.raise_fault(std::move(*outcome.fault));
    return false;
  }
  if (!context_.wait_until(outcome.end_cycle, timer_)) return false;
  ++stats_.instructions;
  stats_.busy_cycles += outcome.end_cycle - start;
  if (context_.trace) {
    const std::string name = outcome.span_name.empty() ? isa::find_instruction(command.opcode)->mnemonic : outcome.span_name;
    std::vector<trace::Arg> args;
    describe_work(args);
    for (size_t r = 0; r < stalls_before.size(); ++r)
      if (const uint64_t stalled = stats_.stall_cycles[r] - stalls_before[r])
        args.push_back({std::string("stall.") + stall_reason_name(static_cast<StallReason>(r)), std::to_string(stalled)});
    context_.trace->span(context_.trace->engine_track(core_, engine_index_), start, outcome.end_cycle, name, command.pc, command.word,
                         std::move(args));
  }
  return true;
}

}  // namespace npu::sim
