// The npu's random number generators: a seed and a counter offset, as PyTorch's CUDA generator holds
// (generator.h).
#include "generator.h"

#include <ATen/Functions.h>
#include <ATen/core/DistributionsHelper.h>
#include <ATen/core/GeneratorForPrivateuseone.h>
#include <c10/core/GeneratorImpl.h>

#include <cstring>
#include <mutex>


namespace npusim {
namespace {

class NpuGenerator final : public c10::GeneratorImpl {
 public:
  explicit NpuGenerator(uint64_t seed_in = c10::default_rng_seed_val)
      : c10::GeneratorImpl(c10::Device(c10::DeviceType::PrivateUse1, 0), c10::DispatchKeySet(c10::DispatchKey::PrivateUse1)), seed_(seed_in) {}

  void set_current_seed(uint64_t seed_in) override { seed_ = seed_in, offset_ = 0; }
  uint64_t current_seed() const override { return seed_; }
  void set_offset(uint64_t offset) override { offset_ = offset; }
  uint64_t get_offset() const override { return offset_; }
  uint64_t seed() override {
    set_current_seed(c10::detail::getNonDeterministicRandom());
    return seed_;
  }
  // The state: seed then offset, little-endian u64s, as a u8 CPU tensor of 16 bytes.
  void set_state(const c10::TensorImpl& state) override {
    TORCH_CHECK(state.dtype() == caffe2::TypeMeta::Make<uint8_t>() && state.numel() == 16 && state.is_contiguous(),
                "npu: an RNG state is a contiguous uint8 tensor of 16 bytes (seed, offset); got ", state.numel(), " elements");
    const auto* bytes = static_cast<const uint8_t*>(state.data());
    std::memcpy(&seed_, bytes, 8);
    std::memcpy(&offset_, bytes + 8, 8);
  }
  c10::intrusive_ptr<c10::TensorImpl> get_state() const override {
    at::Tensor state = at::empty({16}, at::TensorOptions().dtype(at::kByte));
    std::memcpy(state.data_ptr(), &seed_, 8);
    std::memcpy(static_cast<uint8_t*>(state.data_ptr()) + 8, &offset_, 8);
    return state.getIntrusivePtr();
  }
  static c10::DeviceType device_type() { return c10::DeviceType::PrivateUse1; }

  // The counters of one launch: returns their first.
  uint64_t reserve(uint64_t counters) {
    const uint64_t first = offset_;
    offset_ += counters;
    return first;
  }

 private:
  NpuGenerator* clone_impl() const override {
    auto* copy = new NpuGenerator(seed_);
    copy->offset_ = offset_;
    return copy;
  }
  uint64_t seed_;
  uint64_t offset_ = 0;
};

}  // namespace

const at::Generator& default_npu_generator() {
  static const at::Generator generator = at::make_generator<NpuGenerator>();
  return generator;
}
at::Generator new_npu_generator() { return at::make_generator<NpuGenerator>(); }

std::pair<uint64_t, uint64_t> reserve_random_counters(const std::optional<at::Generator>& generator, uint64_t counters) {
  auto* gen = at::get_generator_or_default<NpuGenerator>(generator, default_npu_generator());
  const std::lock_guard<std::mutex> lock(gen->mutex_);
  return {gen->current_seed(), gen->reserve(counters)};
}

}  // namespace npusim
