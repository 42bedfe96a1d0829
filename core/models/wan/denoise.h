// The denoising loop (wan.md §D): the sampler's steps, each a classifier-free-guidance pair of
// DiT passes made in one streamer pass (both contexts on every loaded block) — or the conditional
// pass alone when the guide scale is 1 (guidance_enabled) — the guidance combination and the
// sampler step on the host in fp32, and TI2V's frame-0 re-insertion. The Generator runs it with
// the real noise and text; the trajectory tests run it with the reference's.
#pragma once

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
  float guide_scale = 5.0f;
  std::int64_t ffn_chunk_tokens = 0;
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

}  // namespace ferry::models::wan
