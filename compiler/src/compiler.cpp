#include "npusim/compiler/compiler.h"

#include "attention.h"
#include "conv.h"
#include "depthwise.h"
#include "elementwise.h"
#include "gather.h"
#include "im2col.h"
#include "matmul.h"
#include "random.h"
#include "rowwise.h"
#include "select.h"
#include "npusim/isa/printer.h"

namespace npu::compiler {

namespace {

// Each op's lowering, by its family in ops.def: a new op of a family needs only its row there.
using Lowering = Kernel (*)(const OpDesc&, const sim::ChipConfig&);
Lowering lowering_of(OpKind kind) {
  switch (kind) {
#define NPU_ELEMENTWISE_OP(ID, ...) case OpKind::ID: return lower_elementwise;
#define NPU_CHAIN_OP(ID, ...) case OpKind::ID: return lower_elementwise;
#define NPU_MATMUL_OP(ID, ...) case OpKind::ID: return lower_matmul;
#define NPU_ROW_OP(ID, ...) case OpKind::ID: return lower_row_op;
#define NPU_ATTENTION_OP(ID, ...) case OpKind::ID: return lower_attention;
#define NPU_SELECT_OP(ID, ...) case OpKind::ID: return lower_where;
#define NPU_GATHER_OP(ID, ...) case OpKind::ID: return lower_embedding;
#define NPU_WINDOW_OP(ID, ...) case OpKind::ID: return lower_im2col;
#define NPU_DEPTHWISE_OP(ID, ...) case OpKind::ID: return lower_depthwise;
#define NPU_CONV_OP(ID, ...) case OpKind::ID: return lower_conv2d;
#define NPU_RANDOM_OP(ID, ...) case OpKind::ID: return lower_random;
#define NPU_RANGE_OP(ID, ...) case OpKind::ID: return lower_random;
#include "ops.def"
  }
  throw std::invalid_argument("op kind " + std::to_string(int(kind)) + " has no lowering");
}

}  // namespace

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
  auto kernel = std::make_shared<const Kernel>(lowering_of(op.kind)(op, config_));
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
