// Issue 14, point 5: after the first step, a step allocates nothing (architecture.md §3 rule 3),
// counted on every thread by the replaced operator new of counting_allocator.cpp while real
// forwards of the tiny test models run on the CPU backend:
//   - the Wan DiT (tests/data/wan/dit, TI2V-like): CFG forwards (two contexts) with per-token
//     timesteps, blocks streamed from disk; a step is a forward;
//   - the umT5 encoder (tests/data/umt5/encoder): two prompts, blocks streamed from disk; a step
//     is a block (the encoder runs once per prompt, so its steady state is block after block);
//   - the Wan 2.1 and 2.2 VAE decoders (tests/data/wan/vae): a step is a chunk (one latent frame)
//     of VaeChunkDecoder, as the tiled streaming decode runs them, in f32 and bf16 activations.
// The first step may allocate (tables sized once, per-thread scratch); every later one must not.
// Each test prints the allocations of every step.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "core/backend/cpu/cpu_backend.h"
#include "core/io/tensor_set.h"
#include "core/memory/arena.h"
#include "core/models/umt5/encoder.h"
#include "core/models/wan/dit.h"
#include "core/models/wan/vae.h"
#include "core/offload/streamer.h"
#include "core/tensor/convert.h"
#include "tests/memory/counting/counting_allocator.h"
#include "tests/test_support.h"

namespace ferry::test {
namespace {

using offload::Placement;
using offload::Plan;

// A backend tensor with its own memory, filled from f32 values.
struct Owned {
  std::unique_ptr<DeviceBuffer> memory;
  Tensor tensor;
  Owned(Backend& backend, DType dtype, const Shape& shape, const std::vector<float>& values = {}) {
    memory = backend.allocate(static_cast<std::size_t>(shape.numel()) * dtype_size(dtype));
    tensor = Tensor{memory->data(), dtype, shape, backend.device()};
    if (!values.empty()) {
      std::vector<std::byte> raw(tensor.bytes());
      convert_from_f32(values.data(), dtype, raw.data(), values.size());
      backend.upload(tensor, raw.data());
    }
  }
};

// Deterministic values in [-1.5, 1.5].
std::vector<float> pattern(std::size_t n, std::size_t seed) {
  std::vector<float> v(n);
  for (std::size_t i = 0; i < n; ++i) {
    v[i] = static_cast<float>(static_cast<int>((i * 37 + seed * 11) % 31) - 15) / 10.0f;
  }
  return v;
}

// A plan that streams every group but the always-resident ones from disk through small staging
// slots (several chunks per tensor), so the streamer's IO thread and copy worker run each step.
Plan streamed_plan(const offload::ModelLayout& layout) {
  Plan plan;
  plan.look_ahead = 1;
  plan.read_method = offload::ReadMethod::kMapped;
  std::uint64_t largest = 0;
  for (const offload::LayerGroup& g : layout.groups) {
    const Placement p = g.always_resident ? Placement::kDevice : Placement::kDisk;
    plan.placement.push_back(p);
    if (p != Placement::kDevice) largest = std::max(largest, g.slot_bytes());
  }
  plan.device_slots = 2;
  plan.device_slot_bytes = largest;
  plan.staging_slots = 3;
  plan.staging_slot_bytes = 16 << 10;
  return plan;
}

// Each step's allocations, printed as "step 2: 0, step 3: 0, ..." and checked to be none.
void expect_none_after_the_first(const char* what, const std::vector<std::uint64_t>& per_step,
                                 std::uint64_t first, const std::string& site) {
  std::string line;
  for (std::size_t i = 0; i < per_step.size(); ++i) {
    line += (i == 0 ? "" : ", ") + std::string("step ") + std::to_string(i + 2) + ": " +
            std::to_string(per_step[i]);
  }
  std::printf("[%s] heap allocations: step 1: %llu; %s\n", what,
              static_cast<unsigned long long>(first), line.c_str());
  std::uint64_t later = 0;
  for (std::uint64_t n : per_step) later += n;
  EXPECT_EQ(later, 0u) << what << ": a step after the first allocated (last size "
                       << last_counted_allocation_size() << "); the first allocation counted:\n"
                       << site;
}

// Where the counting test's blocks go, so the compiler cannot pair a new with its delete and
// leave both out.
std::atomic<long*> g_escape{nullptr};

TEST(ForwardAllocations, counting_allocator_counts_every_thread) {
  start_counting_allocations();
  g_escape = new long(3);
  std::thread([] { delete g_escape.exchange(new long(4)); }).join();
  const std::uint64_t counted = stop_counting_allocations();
  delete g_escape.exchange(nullptr);
  EXPECT_GE(counted, 2u);
}

TEST(ForwardAllocations, a_dit_cfg_step_allocates_nothing_after_the_first) {
  const auto set = io::TensorSet::open(data_path("wan/dit/ti2v.safetensors.index.json"));
  const auto reference = io::TensorSet::open(data_path("wan/dit/ti2v_reference.safetensors"));
  const offload::ModelLayout layout = models::wan::dit_model_layout(set, 1, 1, 1, 0);
  cpu::CpuBackend backend;
  models::wan::WanDit model(backend, set, layout);
  const models::wan::DitConfig& c = model.config();

  // The reference's latent shape and per-token timesteps (frame 0 at t = 0, the rest at 999).
  const io::TensorInfo& x_info = *reference.at("x").tensor;
  const Shape latent_shape{
      static_cast<std::int64_t>(x_info.shape[0]), static_cast<std::int64_t>(x_info.shape[1]),
      static_cast<std::int64_t>(x_info.shape[2]), static_cast<std::int64_t>(x_info.shape[3])};
  const std::int64_t tokens = latent_shape[1] * (latent_shape[2] / 2) * (latent_shape[3] / 2);
  std::vector<float> t(static_cast<std::size_t>(tokens), 999.0f);
  std::fill(t.begin(), t.begin() + tokens / latent_shape[1], 0.0f);

  const auto text = static_cast<std::int64_t>(c.text_dim);
  const Owned latent(backend, DType::kF32, latent_shape,
                     pattern(static_cast<std::size_t>(latent_shape.numel()), 1));
  const Owned cond(backend, DType::kBF16, Shape{7, text}, pattern(7 * c.text_dim, 2));
  const Owned uncond(backend, DType::kBF16, Shape{3, text}, pattern(3 * c.text_dim, 3));
  const Shape velocity_shape{static_cast<std::int64_t>(c.out_dim), latent_shape[1], latent_shape[2],
                             latent_shape[3]};
  const Owned v_cond(backend, DType::kF32, velocity_shape);
  const Owned v_uncond(backend, DType::kF32, velocity_shape);
  const Tensor contexts[] = {cond.tensor, uncond.tensor};
  const Tensor velocities[] = {v_cond.tensor, v_uncond.tensor};

  constexpr int kSteps = 5;
  offload::StreamerOptions options;
  options.passes = kSteps;
  offload::WeightStreamer streamer(backend, layout, streamed_plan(layout), options);
  const std::uint64_t arena_bytes = models::wan::dit_activation_bytes(c, tokens, 0, 2, 2);
  auto arena_memory = backend.allocate(arena_bytes);
  memory::Arena arena(arena_memory->data(), arena_bytes, backend.device());

  std::vector<float> first_velocity(static_cast<std::size_t>(velocity_shape.numel()));
  std::vector<float> velocity(first_velocity.size());
  start_counting_allocations();
  model.forward(streamer, arena, latent.tensor, t, contexts, velocities);
  const std::uint64_t first = stop_counting_allocations();
  backend.download(v_cond.tensor, first_velocity.data());
  std::vector<std::uint64_t> per_step;
  std::string site;
  for (int step = 2; step <= kSteps; ++step) {
    start_counting_allocations();
    model.forward(streamer, arena, latent.tensor, t, contexts, velocities);
    per_step.push_back(stop_counting_allocations());
    if (per_step.back() != 0 && site.empty()) site = first_counted_allocation_site();
    backend.download(v_cond.tensor, velocity.data());
    EXPECT_EQ(velocity, first_velocity) << "step " << step << " computed something else";
  }
  expect_none_after_the_first("tiny DiT, CFG forward", per_step, first, site);
}

// The umT5 test's hook, called as each group is acquired (blocks 0 .. blocks - 1, then the final
// norm): a counting window runs from one block's acquire to the next group's, so window k holds
// block k's compute, its release and the reads the IO thread made meanwhile.
struct BlockCounter {
  std::size_t acquired = 0;
  std::size_t blocks = 0;
  std::vector<std::uint64_t> per_block;
  std::uint64_t first = 0;
  std::string site;
};

void count_blocks(offload::StreamStage stage, void* context) {
  if (stage != offload::StreamStage::kCompute) return;
  auto& c = *static_cast<BlockCounter*>(context);
  ++c.acquired;  // group c.acquired - 1 is ready
  if (c.acquired >= 2) {
    const std::uint64_t n = stop_counting_allocations();
    if (n != 0 && c.acquired >= 3 && c.site.empty()) c.site = first_counted_allocation_site();
    if (c.acquired == 2) {
      c.first = n;
    } else {
      c.per_block.push_back(n);
    }
  }
  if (c.acquired <= c.blocks) start_counting_allocations();
}

TEST(ForwardAllocations, a_umt5_block_allocates_nothing_after_the_first) {
  const auto set = io::TensorSet::open(data_path("umt5/encoder/official.safetensors"));
  const auto weights = models::umt5::EncoderWeights::from(set);
  cpu::CpuBackend backend;
  BlockCounter counter;
  counter.blocks = static_cast<std::size_t>(weights.config().layers);
  ASSERT_GE(counter.blocks, 3u);
  models::umt5::EncodeOptions options;
  options.streamer.stage_hook = count_blocks;
  options.streamer.hook_context = &counter;
  // The prompt and a negative prompt, as the pipeline encodes them (ids within the tiny table).
  std::vector<std::vector<std::int32_t>> prompts(2);
  for (std::int32_t i = 0; i < 37; ++i) prompts[0].push_back((i * 53 + 7) % 1000 + 2);
  for (std::int32_t i = 0; i < 11; ++i) prompts[1].push_back((i * 31 + 5) % 1000 + 2);
  prompts[0].push_back(1);  // EOS
  prompts[1].push_back(1);

  // Counting starts when block 0 is acquired: the hook opens the first window there.
  const models::umt5::EncodeResult result = models::umt5::encode(
      backend, weights, streamed_plan(weights.model_layout()), prompts, options);
  ASSERT_EQ(result.embeddings.size(), 2u);
  ASSERT_EQ(counter.per_block.size(), counter.blocks - 1);
  expect_none_after_the_first("tiny umT5, blocks", counter.per_block, counter.first, counter.site);
}

void expect_vae_chunks_allocate_nothing(const char* file, DType activations, const char* what) {
  const auto set = io::TensorSet::open(data_path(std::string("wan/vae/") + file));
  cpu::CpuBackend backend;
  const models::wan::VaeWeights weights = models::wan::VaeWeights::load(backend, set);
  models::wan::VaeOptions options;
  options.activations = activations;
  models::wan::WanVae vae(backend, weights, options);
  const std::int64_t z = weights.config().z_dim, h = 4, w = 6;
  constexpr int kChunks = 6;
  std::vector<Owned> frames;
  for (int i = 0; i < kChunks; ++i) {
    frames.emplace_back(backend, DType::kF32, Shape{z, 1, h, w},
                        pattern(static_cast<std::size_t>(z * h * w), static_cast<std::size_t>(i)));
  }
  const std::size_t arena_bytes = models::wan::WanVae::decode_arena_bytes(weights, h, w, options);
  auto arena_memory = backend.allocate(arena_bytes);
  memory::Arena arena(arena_memory->data(), arena_bytes, backend.device());
  models::wan::VaeChunkDecoder decoder(vae, h, w);
  decoder.take_caches(arena);
  const std::size_t above_caches = arena.mark();

  std::uint64_t first = 0;
  std::vector<std::uint64_t> per_step;
  std::string site;
  for (int i = 0; i < kChunks; ++i) {
    start_counting_allocations();
    const Tensor pixels = decoder.decode_next(frames[static_cast<std::size_t>(i)].tensor, arena);
    const std::uint64_t n = stop_counting_allocations();
    EXPECT_EQ(pixels.shape[1], i == 0 ? 1 : 4);
    arena.release_to(above_caches);
    if (i == 0) {
      first = n;
    } else {
      per_step.push_back(n);
      if (n != 0 && site.empty()) site = first_counted_allocation_site();
    }
  }
  expect_none_after_the_first(what, per_step, first, site);
}

TEST(ForwardAllocations, a_vae_decode_chunk_allocates_nothing_after_the_first) {
  expect_vae_chunks_allocate_nothing("wan21_tiny.safetensors", DType::kF32, "tiny Wan 2.1 VAE");
  expect_vae_chunks_allocate_nothing("wan22_tiny.safetensors", DType::kF32, "tiny Wan 2.2 VAE");
  expect_vae_chunks_allocate_nothing("wan22_tiny.safetensors", DType::kBF16,
                                     "tiny Wan 2.2 VAE, bf16 activations");
}

}  // namespace
}  // namespace ferry::test
