// Autocast on the npu: torch.autocast("npu", dtype=torch.bfloat16) (or float16)
// applies CUDA's policy, from the op lists ATen publishes for every backend
// (ATen/autocast_mode.h): matrix products, convolutions and attention in the
// lower precision (on the tensor core, which on most presets takes no f32);
// norms, losses, softmax, reductions and transcendentals in f32; ops of several
// inputs (addcmul, index_put, ...) at the widest input's dtype. Every other op
// runs as its inputs are. docs/torch.md lists the policy.
#include <ATen/autocast_mode.h>
#include <torch/library.h>

namespace {

using at::autocast::CastPolicy;
// (AT_FORALL_DIFFERENT_REDISPATCH_SIGNATURE writes its signatures with these names unqualified.)
using at::IntArrayRef;
using at::Scalar;
using at::ScalarType;
using at::Tensor;

// As on CUDA: binary_cross_entropy of probabilities that were computed in the lower precision loses
// them near 0 and 1, so autocast refuses it and points at the logits form.
at::Tensor binary_cross_entropy_refused(const at::Tensor&, const at::Tensor&, const std::optional<at::Tensor>&, int64_t) {
  TORCH_CHECK(false,
              "torch.nn.functional.binary_cross_entropy and torch.nn.BCELoss are unsafe to autocast: the probabilities "
              "they take lose precision in bf16 or f16. Use binary_cross_entropy_with_logits (BCEWithLogitsLoss), "
              "which is autocast to float32, or run the loss outside the autocast region.");
}

TORCH_LIBRARY_IMPL(_, AutocastPrivateUse1, m) { m.fallback(torch::CppFunction::makeFallthrough()); }

#define NPU_LOWER_PRECISION(...) KERNEL_PRIVATEUSEONE(__VA_ARGS__, lower_precision_fp)
#define NPU_FP32(...) KERNEL_PRIVATEUSEONE(__VA_ARGS__, fp32)
#define NPU_FP32_SET_OPT_DTYPE(...) KERNEL_PRIVATEUSEONE(__VA_ARGS__, fp32_set_opt_dtype)
#define NPU_FP32_APPEND_DTYPE(...) KERNEL_DIFFERENT_REDISPATCH_SIGNATURE_PRIVATEUSEONE(__VA_ARGS__)
#define NPU_PROMOTE(...) KERNEL_PRIVATEUSEONE(__VA_ARGS__, promote)

TORCH_LIBRARY_IMPL(aten, AutocastPrivateUse1, m) {
  AT_FORALL_LOWER_PRECISION_FP(NPU_LOWER_PRECISION)
  AT_FORALL_FP32(NPU_FP32)
  AT_FORALL_FP32_SET_OPT_DTYPE(NPU_FP32_SET_OPT_DTYPE)
  AT_FORALL_DIFFERENT_REDISPATCH_SIGNATURE(NPU_FP32_APPEND_DTYPE)
  AT_FORALL_PROMOTE(NPU_PROMOTE)
  m.impl(TORCH_SELECTIVE_NAME("aten::binary_cross_entropy"), TORCH_FN(binary_cross_entropy_refused));
}

}  // namespace
