#include "npusim/compiler/compiler.h"

#include "attention.h"
#include "elementwise.h"
#include "gather.h"
#include "im2col.h"
#include "matmul.h"
#include "random.h"
#include "rowwise.h"
#include "select.h"
#include "npusim/isa/printer.h"

namespace npu::compiler {

Compiler::Compiler(sim::ChipConfig config) : config_(std::move(config)) {}

std::shared_ptr<const Kernel> Compiler::compile(const OpDesc& op) {
  // The config is fixed for the compiler's life, so the op's key is the whole cache key.
  const std::string key = op.key();
  {
    const std::lock_guard<std::mutex> lock(mutex_);
    const auto it = cache_.find(key);
    if (it != cache_.end()) {
      ++stats_.hits;
      return it->second;
    }
  }
  auto kernel = std::make_shared<const Kernel>(op.kind == OpKind::MATMUL      ? lower_matmul(op, config_)
                                               : op.kind == OpKind::ATTENTION ? lower_attention(op, config_)
                                               : op.kind == OpKind::WHERE     ? lower_where(op, config_)
                                               : op.kind == OpKind::EMBEDDING ? lower_embedding(op, config_)
                                               : op.kind == OpKind::IM2COL    ? lower_im2col(op, config_)
                                               : is_random_op(op.kind) || op.kind == OpKind::ARANGE ? lower_random(op, config_)
                                               : is_row_op(op.kind)           ? lower_row_op(op, config_)
                                                                              : lower_elementwise(op, config_));
  const std::lock_guard<std::mutex> lock(mutex_);
  // Another thread may have compiled the same op meanwhile: every caller gets the cached kernel, so that one
  // op has one kernel (callers may key what they derive from it, loaded programs, by its identity).
  const auto [it, inserted] = cache_.emplace(key, std::move(kernel));
  if (inserted) ++stats_.misses;
  else ++stats_.hits;
  stats_.entries = cache_.size();
  return it->second;
}

CacheStats Compiler::cache_stats() const {
  const std::lock_guard<std::mutex> lock(mutex_);
  return stats_;
}

std::string Compiler::listing(const Kernel& kernel) {
  std::string text = "# " + kernel.plan;
  for (size_t i = 0; i < text.size(); ++i)
    if (text[i] == '\n' && i + 1 < text.size()) text.insert(i + 1, "# ");
  text += "# launch on " + std::to_string(kernel.cores) + " cores" +
          (kernel.cores_exchange_data ? std::string(" (exactly cores 0.." + std::to_string(kernel.cores - 1) + ": they send each other data)") : "") + "\n";
  for (const isa::CodeSection& section : kernel.program.code) {
    if (kernel.program.code.size() > 1) {  // code per core (the matmul that shares B: per member of a group)
      text += "# code for cores";
      for (unsigned core = 0; core < 64; ++core)
        if (section.core_mask >> core & 1) text += " " + std::to_string(core);
      text += "\n";
    }
    for (size_t pc = 0; pc < section.words.size(); ++pc) {
      std::string number = std::to_string(pc);
      text += std::string(number.size() < 5 ? 5 - number.size() : 0, ' ') + number + ":  " + isa::describe_word(section.words[pc], pc, nullptr) + "\n";
    }
  }
  return text;
}

}  // namespace npu::compiler
