#include "core/models/wan/denoise.h"

#include <memory>
#include <optional>
#include <vector>

#include "core/error.h"

namespace ferry::models::wan {

int expert_for_timestep(float t, double boundary) {
  return static_cast<double>(t) >= boundary * 1000.0 ? 0 : 1;
}

std::array<int, 2> expert_steps(const DenoiseSettings& settings) {
  const Sampler schedule(settings.steps, settings.shift, settings.sampler, 0);
  std::array<int, 2> steps{0, 0};
  for (const float t : schedule.timesteps()) ++steps[expert_for_timestep(t, settings.boundary)];
  return steps;
}

bool any_guidance(const DenoiseSettings& settings) {
  const std::array<int, 2> steps = expert_steps(settings);
  return (steps[0] > 0 && guidance_enabled(settings.guide_scale)) ||
         (steps[1] > 0 && guidance_enabled(settings.low_noise_guide_scale));
}

int denoise(Backend& backend, WanDit& dit, offload::WeightSource& dit_weights, memory::Arena& arena,
            std::span<const Tensor> contexts, const LatentGrid& grid, std::span<const float> z0,
            const DenoiseSettings& settings, std::span<float> latent, const DenoiseHooks& hooks) {
  DenoiseSettings one = settings;
  one.boundary = 0.0;
  return denoise(
      backend,
      [&](int) {
        return DitPass{dit, dit_weights, arena};
      },
      contexts, grid, DenoiseConditioning{z0, {}}, one, latent, hooks);
}

int denoise(Backend& backend, const std::function<DitPass(int expert)>& expert,
            std::span<const Tensor> contexts, const LatentGrid& grid,
            const DenoiseConditioning& conditioning, const DenoiseSettings& settings,
            std::span<float> latent, const DenoiseHooks& hooks) {
  const std::span<const float> z0 = conditioning.z0, y = conditioning.y;
  const std::size_t frame = grid.size() / static_cast<std::size_t>(grid.frames);
  const std::size_t per_channel = grid.size() / static_cast<std::size_t>(grid.channels);
  const bool guided = any_guidance(settings);
  if (contexts.size() != (guided ? 2u : 1u) || latent.size() != grid.size() ||
      (!z0.empty() && z0.size() != frame) || y.size() % per_channel != 0) {
    throw Error(ErrorCode::kInternal, "denoise: contexts, latent, z0 or y do not match the grid");
  }
  const bool image = !z0.empty();
  const Ti2vMode mode = image ? Ti2vMode::kImageToVideo : Ti2vMode::kTextToVideo;

  // The DiT's input: the latent's channels, then y's (constant: uploaded once).
  const auto in_channels = static_cast<std::int64_t>(grid.channels + y.size() / per_channel);
  const Shape in_shape{in_channels, grid.frames, grid.height, grid.width};
  const Shape out_shape{grid.channels, grid.frames, grid.height, grid.width};
  const std::size_t bytes = latent.size() * sizeof(float);
  const std::size_t in_bytes = bytes + y.size() * sizeof(float);
  const std::unique_ptr<DeviceBuffer> memory = backend.allocate(in_bytes + 2 * bytes);
  auto* base = static_cast<std::byte*>(memory->data());
  const Tensor x{base, DType::kF32, in_shape, backend.device()};
  const Tensor x_latent{base, DType::kF32, out_shape, backend.device()};
  const Tensor velocities[2] = {
      Tensor{base + in_bytes, DType::kF32, out_shape, backend.device()},
      Tensor{base + in_bytes + bytes, DType::kF32, out_shape, backend.device()}};
  if (!y.empty()) {
    const Shape y_shape{in_channels - grid.channels, grid.frames, grid.height, grid.width};
    backend.upload(Tensor{base + bytes, DType::kF32, y_shape, backend.device()}, y.data());
  }

  Sampler sampler(settings.steps, settings.shift, settings.sampler, latent.size());
  std::vector<float> cond(latent.size()), uncond(guided ? latent.size() : 0),
      velocity(latent.size());
  std::vector<float> timesteps(image ? grid.tokens() : 1);
  std::optional<DitPass> pass;
  int current_expert = -1;
  int evaluations = 0;
  for (int i = 0; i < settings.steps; ++i) {
    const float t = sampler.timestep();
    const int e = expert_for_timestep(t, settings.boundary);
    if (e != current_expert) {
      pass.reset();  // the caller releases the previous expert in expert(e)
      pass.emplace(expert(e));
      current_expert = e;
    }
    const float guide_scale = e == 0 ? settings.guide_scale : settings.low_noise_guide_scale;
    const bool guided_step = guidance_enabled(guide_scale);
    const std::size_t branches = guided_step ? 2 : 1;
    if (hooks.before_step) hooks.before_step(i);
    if (image) {
      ti2v_token_timesteps(grid, mode, t, timesteps);
    } else {
      timesteps[0] = t;
    }
    backend.upload(x_latent, latent.data());
    pass->dit.forward(pass->weights, pass->arena, x, timesteps, contexts.first(branches),
                      std::span(velocities, branches), settings.chunk_tokens);
    evaluations += static_cast<int>(branches);
    if (guided_step) {
      backend.download(velocities[0], cond.data());
      backend.download(velocities[1], uncond.data());
      apply_guidance(cond, uncond, guide_scale, velocity);
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
