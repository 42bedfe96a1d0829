// A Backend that computes nothing: the VAE and the DiT run their layer sequences on it, with an
// Arena that has no memory behind it, to learn the VAE's cache slots and to measure the arena
// bytes a real run takes (the same code path, so the estimate is the measured peak, not a model
// of it: WanVae::decode_arena_bytes, WanDit::measure_activation_bytes).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "core/backend/backend.h"
#include "core/memory/arena.h"

namespace ferry::models::wan {

class ShapeBackend final : public Backend {
 public:
  Device device() const override { return Device::kCpu; }
  std::string name() const override { return "shapes only"; }
  std::unique_ptr<DeviceBuffer> allocate(std::size_t bytes) override;
  void upload(const Tensor&, const void*) override {}
  void download(const Tensor&, void*) override {}
  void synchronize() override {}
  memory::HostAllocator& host_allocator() override;
  std::unique_ptr<CopyQueue> create_copy_queue() override;
  void wait_for(memory::Fence&) override {}
  std::shared_ptr<memory::Fence> record_compute() override;
  void linear(const Tensor&, const Tensor&, const Tensor*, const Tensor&, const WeightScaling&) override {}
  void linear_add(const Tensor&, const Tensor&, const Tensor&, const WeightScaling&) override {}
  void rms_norm(const Tensor&, const Tensor&, float, const Tensor&) override {}
  void layer_norm(const Tensor&, const Tensor*, const Tensor*, float, const Tensor&) override {}
  void channel_rms_norm(const Tensor&, const Tensor&, const Tensor&) override {}
  void modulate(const Tensor&, const Tensor&, const Tensor&, const Tensor&) override {}
  void gated_add(const Tensor&, const Tensor&, const Tensor*) override {}
  void add_scaled(const Tensor&, const Tensor&, float) override {}
  void add(const Tensor&, const Tensor&, const Tensor&) override {}
  void mul(const Tensor&, const Tensor&, const Tensor&) override {}
  void gelu_tanh(const Tensor&, const Tensor&) override {}
  void gelu_erf(const Tensor&, const Tensor&) override {}
  void silu(const Tensor&, const Tensor&) override {}
  void clamp(const Tensor&, float, float, const Tensor&) override {}
  void tanh_clamp(const Tensor&, float, const Tensor&) override {}
  void softmax(const Tensor&, const Tensor&) override {}
  void convert(const Tensor&, const Tensor&) override {}
  void attention(const Tensor&, const Tensor&, const Tensor&, float, const Tensor*, bool,
                 const Tensor&) override {}
  void rope_halves(const Tensor&, const Tensor&, const Tensor&) override {}
  void rope_3d(const Tensor&, const RopeGrid&) override {}
  void conv3d(const Tensor&, const Tensor&, const Tensor*, const Conv3dParams&,
              const Tensor&) override {}
  void upsample_nearest_2x(const Tensor&, const Tensor&) override {}
  void avg_down_3d(const Tensor&, int, int, const Tensor&) override {}
  void dup_up_3d(const Tensor&, int, int, const Tensor&) override {}
  void permute(const Tensor&, const std::vector<int>&, const Tensor&) override {}
  void concat(const Tensor&, const Tensor&, int, const Tensor&) override {}
  void slice(const Tensor&, int, std::int64_t, const Tensor&) override {}
  void embedding(const Tensor&, const Tensor&, const Tensor&) override {}
};

// An arena with no memory behind it (its tensors must never be read or written): for runs on a
// ShapeBackend.
memory::Arena shapes_only_arena();

}  // namespace ferry::models::wan
