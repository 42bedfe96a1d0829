// The denoising loop (wan.md §D): the sampler's steps, each a classifier-free-guidance pair of
// DiT passes made in one streamer pass (both contexts on every loaded block) — or the conditional
// pass alone when the guide scale is 1 (guidance_enabled) — the guidance combination and the
// sampler step on the host in fp32, and TI2V's frame-0 re-insertion. Wan 2.2 A14B's two experts
// (formats_lora_moe.md §6.2): the high-noise expert while the step's timestep is at least
// boundary·1000, then the low-noise one, each with its guide scale; the caller hands out each
// expert when its first step comes (and releases the first before building the second). A14B
// I2V's conditioning (§6.3) rides along as extra input channels. The Generator runs it with the
// real noise and text; the trajectory tests run it with the reference's.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <span>

#include "core/backend/backend.h"
#include "core/memory/arena.h"
#include "core/models/wan/dit.h"
#include "core/models/wan/sampler.h"
#include "core/models/wan/ti2v.h"
#include "core/offload/weight_source.h"

namespace ferry::models::wan {

struct DenoiseSettings {
  int steps = 50;
  double shift = 5.0;
  SamplerKind sampler = SamplerKind::kUniPC;
  float guide_scale = 5.0f;  // two experts: the high-noise expert's
  // Two experts: the low-noise expert (1) denoises the steps whose timestep is below
  // boundary·1000, with this guide scale. Boundary 0: one expert (0) runs every step.
  double boundary = 0.0;
  float low_noise_guide_scale = 5.0f;
  std::int64_t chunk_tokens = 0;
};

// The expert of a step at timestep `t`: 0 (the high-noise one, or the only one) while
// t >= boundary·1000 (the official rule, on the sampler's own timestep), else 1.
int expert_for_timestep(float t, double boundary);
// The steps each expert runs under `settings` ({steps, 0} for one expert): the passes each
// expert's weight source must serve.
std::array<int, 2> expert_steps(const DenoiseSettings& settings);
// Whether any step of `settings` runs classifier-free guidance (then the unconditional context
// is needed).
bool any_guidance(const DenoiseSettings& settings);

// The DiT a step runs on, where its weights come from, and its working memory (an arena of
// dit_activation_bytes for the grid's tokens, the contexts and the distinct timesteps).
struct DitPass {
  WanDit& dit;
  offload::WeightSource& weights;
  memory::Arena& arena;
};

// What a denoise conditions on besides the text.
struct DenoiseConditioning {
  // TI2V image-to-video: the encoded start image, one latent frame [C, 1, h, w].
  std::span<const float> z0;
  // A14B I2V: the mask and the conditioning video's latent [4 + C, T, h, w] (i2v_condition),
  // appended to the latent's channels as the DiT's input (x first, then these).
  std::span<const float> y;
};

struct DenoiseHooks {
  // Before step `step` (0-based) starts; may throw (a cancel).
  std::function<void(int step)> before_step;
  // After it, with the step's estimate of the clean latent (x0 = x - sigma·v, before the
  // sampler moved x) — the preview's source.
  std::function<void(int step, std::span<const float> x0)> after_step;
};

// `latent` [C, T, h, w] holds the initial noise (TI2V image-to-video: with z0 already in frame 0)
// and receives the result. contexts = {conditional, unconditional} text embeddings on the backend
// ([L, text_dim] each), or {conditional} alone when !guidance_enabled(settings.guide_scale). `z0`
// is the encoded start image in image-to-video, empty otherwise. The weights (a streamer, say)
// must serve at least `settings.steps` passes over the DiT's layout; the arena must hold
// dit_activation_bytes for the grid's tokens, the contexts (branches) and the distinct timesteps
// (2 in image-to-video, else 1). Returns the DiT evaluations made: a step with guidance makes two
// (conditional and unconditional), one without.
int denoise(Backend& backend, WanDit& dit, offload::WeightSource& dit_weights, memory::Arena& arena,
            std::span<const Tensor> contexts, const LatentGrid& grid, std::span<const float> z0,
            const DenoiseSettings& settings, std::span<float> latent,
            const DenoiseHooks& hooks = {});

// The same with experts: `expert(e)` is called once for each expert, before its first step (the
// high-noise one first), and its DitPass serves that expert's steps (expert_steps).
// `grid.channels` is the latent's (the DiT's output); the DiT's input has y's channels more.
int denoise(Backend& backend, const std::function<DitPass(int expert)>& expert,
            std::span<const Tensor> contexts, const LatentGrid& grid,
            const DenoiseConditioning& conditioning, const DenoiseSettings& settings,
            std::span<float> latent, const DenoiseHooks& hooks = {});

}  // namespace ferry::models::wan
