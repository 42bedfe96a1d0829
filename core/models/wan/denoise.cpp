#include "core/models/wan/denoise.h"

#include <memory>
#include <vector>

#include "core/error.h"

namespace ferry::models::wan {

int denoise(Backend& backend, WanDit& dit, offload::WeightSource& dit_weights, memory::Arena& arena,
            std::span<const Tensor> contexts, const LatentGrid& grid, std::span<const float> z0,
            const DenoiseSettings& settings, std::span<float> latent, const DenoiseHooks& hooks) {
  const bool guided = guidance_enabled(settings.guide_scale);
  const std::size_t branches = guided ? 2 : 1;
  if (contexts.size() != branches || latent.size() != grid.size() ||
      (!z0.empty() && z0.size() != grid.size() / static_cast<std::size_t>(grid.frames))) {
    throw Error(ErrorCode::kInternal, "denoise: contexts, latent or z0 do not match the grid");
  }
  const bool image = !z0.empty();
  const Ti2vMode mode = image ? Ti2vMode::kImageToVideo : Ti2vMode::kTextToVideo;

  const Shape shape{grid.channels, grid.frames, grid.height, grid.width};
  const std::size_t bytes = latent.size() * sizeof(float);
  const std::unique_ptr<DeviceBuffer> memory = backend.allocate(3 * bytes);
  auto* base = static_cast<std::byte*>(memory->data());
  const Tensor x{base, DType::kF32, shape, backend.device()};
  const Tensor velocities[2] = {Tensor{base + bytes, DType::kF32, shape, backend.device()},
                                Tensor{base + 2 * bytes, DType::kF32, shape, backend.device()}};

  Sampler sampler(settings.steps, settings.shift, settings.sampler, latent.size());
  std::vector<float> cond(latent.size()), uncond(guided ? latent.size() : 0),
      velocity(latent.size());
  std::vector<float> timesteps(image ? grid.tokens() : 1);
  int evaluations = 0;
  for (int i = 0; i < settings.steps; ++i) {
    if (hooks.before_step) hooks.before_step(i);
    const float t = sampler.timestep();
    if (image) {
      ti2v_token_timesteps(grid, mode, t, timesteps);
    } else {
      timesteps[0] = t;
    }
    backend.upload(x, latent.data());
    dit.forward(dit_weights, arena, x, timesteps, contexts, std::span(velocities, branches),
                settings.ffn_chunk_tokens);
    evaluations += static_cast<int>(branches);
    if (guided) {
      backend.download(velocities[0], cond.data());
      backend.download(velocities[1], uncond.data());
      apply_guidance(cond, uncond, settings.guide_scale, velocity);
    } else {
      backend.download(velocities[0], velocity.data());  // the conditional velocity, as it is
    }
    if (hooks.after_step) {
      const float sigma = sampler.sigmas()[static_cast<std::size_t>(i)];
      for (std::size_t k = 0; k < latent.size(); ++k) cond[k] = latent[k] - sigma * velocity[k];
    }
    sampler.step(velocity, latent);
    if (image) ti2v_insert_frame0(grid, z0, latent);
    if (hooks.after_step) hooks.after_step(i, cond);
  }
  return evaluations;
}

}  // namespace ferry::models::wan
