// What a Wan pipeline's denoising loop calls: a flow-matching sampler over the official schedule
// (wan.md §D) or a step-distilled one (flow_distill.h), classifier-free guidance, and the official
// sampling defaults per model (§D.4).
//
//   Sampler sampler(steps, shift, SamplerKind::kUniPC, latent.size());
//   for (float t : sampler.timesteps()) {
//     ...cond and uncond DiT passes at t (TI2V: per-token timesteps, ti2v.h); the cond pass only
//        when !guidance_enabled(guide_scale)...
//     apply_guidance(v_cond, v_uncond, guide_scale, v);
//     sampler.step(v, latent);
//     ...TI2V image-to-video: ti2v_insert_frame0(grid, z0, latent)...
//   }
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string_view>
#include <variant>

#include "core/models/wan/flow_distill.h"
#include "core/models/wan/flow_euler.h"
#include "core/models/wan/flow_schedule.h"
#include "core/models/wan/flow_unipc.h"

namespace ferry::models::wan {

// kDistilled: the LightX2V / Lightning step-distilled recipe (flow_distill.h) — distill_step_list
// (steps) on the distilled table, the x0 Euler update — for models or LoRAs distilled to few steps.
enum class SamplerKind { kUniPC, kEuler, kDistilled };

// "unipc", "euler", "distill4".
std::string_view to_string(SamplerKind kind);
// The names above; nullopt for anything else.
std::optional<SamplerKind> parse_sampler_kind(std::string_view name);

// What the distilled recipe runs with unless asked otherwise (LightX2V's distill configs,
// Lightning's wan_t2v_A14B.py: 4 steps, shift 5, no CFG).
inline constexpr int kDistilledSteps = 4;
inline constexpr double kDistilledShift = 5.0;
inline constexpr float kDistilledGuideScale = 1.0f;

// Whether a guide scale asks for classifier-free guidance: not within 1e-6 of 1 (Lightning's
// use_cfg). Without it a step is one conditional DiT pass, and no negative prompt is encoded.
bool guidance_enabled(float guide_scale);

class Sampler {
 public:
  // Throws Error(kBadArgument) for steps < 1 (kDistilled: outside [1, 1000]) or a shift outside
  // (0, kMaxFlowShift].
  Sampler(int steps, double shift, SamplerKind kind, std::size_t sample_size);

  SamplerKind kind() const { return kind_; }
  int steps() const { return static_cast<int>(schedule_.timesteps.size()); }
  std::span<const float> sigmas() const { return schedule_.sigmas; }        // steps + 1
  std::span<const float> timesteps() const { return schedule_.timesteps; }  // steps
  int step_index() const;  // the next step, 0-based
  bool done() const { return step_index() >= steps(); }
  // The DiT timestep of the next step (official samplers: an integer).
  float timestep() const;

  // sample: x_i in, x_{i+1} out, in place; allocates nothing.
  void step(std::span<const float> velocity, std::span<float> sample);

 private:
  SamplerKind kind_;
  FlowSchedule schedule_;
  std::variant<FlowUniPC, FlowEuler, FlowX0Euler> solver_;
};

// out = uncond + scale·(cond - uncond), elementwise in fp32 in that order (the official
// pipelines'). `out` may be `cond` or `uncond`. Throws Error(kBadArgument) on a size mismatch.
void apply_guidance(std::span<const float> cond, std::span<const float> uncond, float scale,
                    std::span<float> out);

// The official defaults (wan.md §D.4; the members' defaults are T2V-1.3B's). Two-expert models
// (A14B) use the high-noise expert and guide scale while t >= boundary·1000, the low-noise ones
// after; single models have boundary 0 and equal scales.
struct SamplingDefaults {
  std::string_view model;
  int steps = 50;
  double shift = 5.0;
  float guide_scale = 5.0f;            // the high-noise expert's for two-expert models
  float guide_scale_low_noise = 5.0f;  // the low-noise expert's
  double boundary = 0.0;
  SamplerKind sampler = SamplerKind::kUniPC;
  int frames = 81;
  int fps = 16;
};

inline constexpr SamplingDefaults kSamplingT2V_1_3B{.model = "t2v-1.3b"};
inline constexpr SamplingDefaults kSamplingTI2V_5B{.model = "ti2v-5b", .frames = 121, .fps = 24};
inline constexpr SamplingDefaults kSamplingT2V_14B{.model = "t2v-14b"};
// Shift 3.0 at 480p (wan.md §D.4).
inline constexpr SamplingDefaults kSamplingI2V_14B{.model = "i2v-14b", .steps = 40};
inline constexpr SamplingDefaults kSamplingT2V_A14B{.model = "t2v-a14b",
                                                    .steps = 40,
                                                    .shift = 12.0,
                                                    .guide_scale = 4.0f,
                                                    .guide_scale_low_noise = 3.0f,
                                                    .boundary = 0.875};
inline constexpr SamplingDefaults kSamplingI2V_A14B{.model = "i2v-a14b",
                                                    .steps = 40,
                                                    .guide_scale = 3.5f,
                                                    .guide_scale_low_noise = 3.5f,
                                                    .boundary = 0.900};

// By model name (DitConfig::name for the models Ferry runs); nullptr for an unknown name.
const SamplingDefaults* find_sampling_defaults(std::string_view model);

}  // namespace ferry::models::wan
