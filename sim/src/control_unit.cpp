#include "control_unit.h"

#include "chip_trace.h"
#include "npusim/isa/printer.h"

namespace npu::sim {

using isa::Opcode;

ControlUnit::ControlUnit(sc_core::sc_module_name name, ChipContext& context, unsigned core, Semaphores& semaphores,
                         EngineStats& stats, unsigned engine_index, LocalMemory& local)
    : sc_module(name),
      context_(context),
      timer_(context.new_timer()),
      core_(core),
      semaphores_(semaphores),
      stats_(stats),
      engine_index_(engine_index),
      local_(local) {
  stats_.name = "control";
  SC_THREAD(run);
}

void ControlUnit::attach_engines(std::vector<Engine*> dma_channels, Engine* tensor_core, Engine* vector_unit) {
  dma_channels_ = std::move(dma_channels);
  tensor_core_ = tensor_core;
  vector_unit_ = vector_unit;
  all_engines_ = dma_channels_;
  all_engines_.push_back(tensor_core_);
  all_engines_.push_back(vector_unit_);
}

void ControlUnit::start(const Launch& launch) {
  launch_ = launch;
  decoded_.assign(launch.code->size(), std::nullopt);
  registers_.fill(0);
  // Every launch starts with the core's semaphores at 0, whatever the last
  // one left (a double-buffering kernel ends with its FREE tokens unspent).
  // All cores of a launch start in the same delta, before any of them runs,
  // so no dma.send of the new launch can be lost to this.
  semaphores_.reset();
  pc_ = 0;
  finished_ = false;
  blocked_on_.clear();
  full_queue_ = nullptr;
  start_event_.notify(sc_core::SC_ZERO_TIME);
}

void ControlUnit::run() {
  for (;;) {
    sc_core::wait(start_event_);
    execute_program();
  }
}

Engine* ControlUnit::engine_for(isa::EngineId id) const {
  switch (id) {
    case isa::EngineId::Tc: return tensor_core_;
    case isa::EngineId::Vec: return vector_unit_;
    case isa::EngineId::Ctl: return nullptr;
    default: {
      const auto channel = static_cast<size_t>(id) - static_cast<size_t>(isa::EngineId::Dma0);
      return channel < dma_channels_.size() ? dma_channels_[channel] : nullptr;
    }
  }
}

void ControlUnit::fault(FaultKind kind, const std::string& message, uint64_t word) {
  FaultRecord record;
  record.kind = kind;
  record.core = static_cast<int>(core_);
  record.engine = "control";
  record.pc = pc_;
  record.instruction = word ? isa::describe_word(word, 0, nullptr) : "";
  record.message = message;
  record.cycle = local_cycle_;
  context_.raise_fault(std::move(record));
}

bool ControlUnit::drain() {
  for (Engine* engine : all_engines_)
    while (!engine->idle())
      if (!context_.wait_on(engine->went_idle())) return false;
  return true;
}

void ControlUnit::execute_program() {
  const ControlUnitConfig& config = context_.config.core.control;
  const std::vector<uint64_t>& code = *launch_.code;
  local_cycle_ = context_.now_cycle();
  const uint64_t launch_cycle = local_cycle_;
  local_.take_footprint();  // (what a program before this one, or an abandoned one, touched)
  // Time the control unit spends blocked, by reason, with a trace span named by what(): a string only
  // where a trace is written.
  const auto blocked = [&](StallReason reason, const auto& what, uint64_t since) {
    const uint64_t now = context_.now_cycle();
    stats_.stall_cycles[static_cast<size_t>(reason)] += now - since;
    if (context_.trace && now > since)
      context_.trace->named_span(context_.trace->engine_track(core_, engine_index_), since, now, what(), {{"stall", stall_reason_name(reason)}});
    local_cycle_ = std::max(local_cycle_, now);
    blocked_on_.clear();
    full_queue_ = nullptr;
  };

  for (;;) {
    if (pc_ < 0 || static_cast<uint64_t>(pc_) >= code.size()) {
      fault(FaultKind::InvalidInstruction,
            "pc " + std::to_string(pc_) + " is outside the code section (" + std::to_string(code.size()) + " instructions; missing halt?)", 0);
      return;
    }
    const uint64_t word = code[static_cast<size_t>(pc_)];
    std::optional<isa::Instruction>& decoded = decoded_[static_cast<size_t>(pc_)];
    if (!decoded) {
      std::string error;
      decoded = isa::decode(word, &error);
      if (!decoded) {
        fault(FaultKind::InvalidInstruction, error, word);
        return;
      }
    }
    if (local_cycle_ >= context_.now_cycle() + context_.config.simulation.quantum_cycles) {
      // Bound the run-ahead, so that a scalar-only loop still lets time (and the watchdog) advance.
      if (!context_.wait_until(local_cycle_, timer_)) return;
    }
    const isa::Instruction& in = *decoded;
    const auto& ops = in.operands;
    local_cycle_ += config.issue_cycles;
    ++stats_.instructions;
    stats_.busy_cycles += config.issue_cycles;
    int64_t next_pc = pc_ + 1;
    const auto reg = [&](size_t index) { return registers_[static_cast<size_t>(ops[index])]; };
    const auto set = [&](uint64_t value) {
      if (ops[0] != 0) registers_[static_cast<size_t>(ops[0])] = value;  // r0 stays zero
    };
    const auto branch = [&](bool taken, size_t offset_index) {
      if (!taken) return;
      next_pc = pc_ + ops[offset_index];
      local_cycle_ += config.branch_taken_cycles;
      stats_.busy_cycles += config.branch_taken_cycles;
    };
    const auto imm = [&](size_t index) { return static_cast<uint64_t>(ops[index]); };

    switch (in.opcode) {
      case Opcode::NOP: break;
      case Opcode::LI: set(imm(1)); break;
      case Opcode::LIH: set((reg(0) & 0xffffffffu) | (imm(1) << 32)); break;
      case Opcode::LA: {
        const auto& addresses = *launch_.symbol_addresses;
        const auto index = static_cast<size_t>(ops[1]);
        if (index >= addresses.size() || addresses[index] == UINT64_MAX) {
          fault(FaultKind::ExecutionError, "symbol " + std::to_string(index) + " is not bound to a buffer", word);
          return;
        }
        set(addresses[index]);
        break;
      }
      case Opcode::CSRR: {
        const auto csr = static_cast<isa::Csr>(ops[1]);
        if (csr == isa::Csr::CoreId) set(launch_.rank);
        else if (csr == isa::Csr::NumCores) set(launch_.cores->size());
        else if (csr == isa::Csr::Cycle) set(local_cycle_);
        else set(launch_.args[static_cast<size_t>(ops[1]) - static_cast<size_t>(isa::Csr::Arg0)]);
        break;
      }
      case Opcode::MOV: set(reg(1)); break;
      case Opcode::ADD: set(reg(1) + reg(2)); break;
      case Opcode::SUB: set(reg(1) - reg(2)); break;
      case Opcode::MUL: set(reg(1) * reg(2)); break;
      case Opcode::AND: set(reg(1) & reg(2)); break;
      case Opcode::OR: set(reg(1) | reg(2)); break;
      case Opcode::XOR: set(reg(1) ^ reg(2)); break;
      case Opcode::SHL: set(reg(1) << (reg(2) & 63)); break;
      case Opcode::SHR: set(reg(1) >> (reg(2) & 63)); break;
      case Opcode::MIN: set(static_cast<int64_t>(reg(1)) < static_cast<int64_t>(reg(2)) ? reg(1) : reg(2)); break;
      case Opcode::MAX: set(static_cast<int64_t>(reg(1)) > static_cast<int64_t>(reg(2)) ? reg(1) : reg(2)); break;
      case Opcode::ADDI: set(reg(1) + imm(2)); break;
      case Opcode::MULI: set(reg(1) * imm(2)); break;
      case Opcode::SHLI: set(reg(1) << imm(2)); break;
      case Opcode::SHRI: set(reg(1) >> imm(2)); break;
      case Opcode::ANDI: set(reg(1) & imm(2)); break;
      case Opcode::ORI: set(reg(1) | imm(2)); break;
      case Opcode::XORI: set(reg(1) ^ imm(2)); break;
      case Opcode::DIVU:
      case Opcode::REMU:
        if (reg(2) == 0) {
          fault(FaultKind::ExecutionError, "scalar division by zero", word);
          return;
        }
        set(in.opcode == Opcode::DIVU ? reg(1) / reg(2) : reg(1) % reg(2));
        break;
      case Opcode::BEQ: branch(reg(0) == reg(1), 2); break;
      case Opcode::BNE: branch(reg(0) != reg(1), 2); break;
      case Opcode::BLT: branch(static_cast<int64_t>(reg(0)) < static_cast<int64_t>(reg(1)), 2); break;
      case Opcode::BGE: branch(static_cast<int64_t>(reg(0)) >= static_cast<int64_t>(reg(1)), 2); break;
      case Opcode::JMP: branch(true, 0); break;
      case Opcode::DBNZ: {
        const uint64_t value = reg(0) - 1;
        set(value);
        branch(value != 0, 1);
        break;
      }
      case Opcode::FENCE: {
        if (!context_.wait_until(local_cycle_, timer_)) return;
        const uint64_t since = context_.now_cycle();
        blocked_on_ = "fence";
        if (!drain()) return;
        blocked(StallReason::Fence, [] { return std::string("fence"); }, since);
        break;
      }
      case Opcode::BARRIER: {
        if (!context_.wait_until(local_cycle_, timer_)) return;
        const uint64_t since = context_.now_cycle();
        blocked_on_ = "barrier " + std::to_string(ops[0]);
        if (!launch_.barrier->arrive(static_cast<unsigned>(ops[0]), context_)) return;
        blocked(StallReason::Barrier, [&] { return "barrier " + std::to_string(ops[0]); }, since);
        break;
      }
      case Opcode::HALT: {
        if (!context_.wait_until(local_cycle_, timer_)) return;
        const uint64_t since = context_.now_cycle();
        blocked_on_ = "halt (draining engine queues)";
        if (!drain()) return;
        blocked(StallReason::Fence, [] { return std::string("drain"); }, since);
        finished_ = true;
        finish_cycle_ = context_.now_cycle();
        const uint64_t footprint = local_.take_footprint();
        if (context_.trace) {
          context_.trace->named_span(context_.trace->engine_track(core_, engine_index_), launch_cycle, finish_cycle_, launch_.name);
          context_.trace->scratchpad_footprint(core_, launch_cycle, finish_cycle_, footprint);
        }
        finished_event_.notify(sc_core::SC_ZERO_TIME);
        if (halt_listener_) halt_listener_->notify(sc_core::SC_ZERO_TIME);
        return;
      }
      default: {
        // Semaphore operations on the control unit itself happen in its own time.
        const bool is_sync = in.opcode == Opcode::SIGNAL || in.opcode == Opcode::WAIT;
        const auto engine_id = is_sync ? static_cast<isa::EngineId>(ops[0]) : isa::EngineId::Ctl;
        if (is_sync && engine_id == isa::EngineId::Ctl) {
          if (!context_.wait_until(local_cycle_, timer_)) return;
          const auto semaphore = static_cast<unsigned>(ops[1]);
          if (in.opcode == Opcode::SIGNAL) {
            semaphores_.signal(semaphore, false);
          } else {
            const uint64_t since = context_.now_cycle();
            blocked_on_ = "s" + std::to_string(semaphore);
            while (semaphores_.value[semaphore] == 0)
              if (!context_.wait_on(semaphores_.changed[semaphore])) return;
            --semaphores_.value[semaphore];
            blocked(StallReason::Semaphore, [&] { return "wait s" + std::to_string(semaphore); }, since);
          }
          break;
        }
        const isa::InstructionSpec* spec = isa::find_instruction(in.opcode);
        Engine* target = nullptr;
        if (is_sync) {
          target = engine_for(engine_id);
        } else if (spec->engine == isa::Engine::Dma) {
          const auto channel = static_cast<size_t>(ops[0]);
          target = channel < dma_channels_.size() ? dma_channels_[channel] : nullptr;
        } else if (spec->engine == isa::Engine::Tensor) {
          target = tensor_core_;
        } else if (spec->engine == isa::Engine::Vector) {
          target = vector_unit_;
        }
        if (target == nullptr) {
          fault(FaultKind::InvalidInstruction,
                "names a DMA channel this chip does not have (" + std::to_string(dma_channels_.size()) + " channels)", word);
          return;
        }
        Command command;
        command.opcode = in.opcode;
        command.pc = pc_;
        command.word = word;
        for (size_t i = 0; i < spec->operands.size(); ++i)
          command.operands[i] = spec->operands[i].kind == isa::OperandKind::Reg ? static_cast<int64_t>(reg(i)) : ops[i];
        if (in.opcode == Opcode::DMA_SEND) {
          // Programs name cores by their id within the launch; the NoC by physical core.
          const size_t target_core = operand_index(in.opcode, "core");
          const uint64_t id = static_cast<uint64_t>(command.operands[target_core]);
          if (id >= launch_.cores->size()) {
            fault(FaultKind::ExecutionError,
                  "dma.send to core " + std::to_string(id) + ", but the launch has " + std::to_string(launch_.cores->size()) + " cores", word);
            return;
          }
          command.operands[target_core] = (*launch_.cores)[static_cast<size_t>(id)];
        }
        if (target->full()) {
          uint64_t since = context_.now_cycle();
          full_queue_ = target;
          if (local_cycle_ > since) {
            // Ahead of the chip: the queue may have space by local_cycle_. Waiting until then and then for
            // space wakes this thread twice where the queue stays full past local_cycle_ (most of the time,
            // in a long kernel); waiting for space with the timer armed wakes it once, and it acts at the
            // same times (wake slots: ChipContext::new_slot).
            context_.arm(local_cycle_, timer_);
            if (!context_.wait_on(target->popped()) || !context_.wait_armed(local_cycle_, timer_)) return;
            since = local_cycle_;
          }
          while (target->full())
            if (!context_.wait_on(target->popped())) return;
          blocked(StallReason::QueueFull, [&] { return "queue full: " + target->display_name(); }, since);
        }
        command.dispatch_cycle = local_cycle_;
        target->push(command);
        break;
      }
    }
    pc_ = next_pc;
  }
}

}  // namespace npu::sim
