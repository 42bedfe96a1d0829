#include "core/models/wan/sampler.h"

#include <cmath>
#include <string>

#include "core/error.h"
#include "core/models/wan/no_fp_contraction.h"  // last: it applies to what follows

namespace ferry::models::wan {
namespace {

FlowSchedule make_schedule(int steps, double shift, SamplerKind kind) {
  if (kind == SamplerKind::kDistilled) return distilled_schedule(distill_step_list(steps), shift);
  return flow_schedule(steps, shift);
}

std::variant<FlowUniPC, FlowEuler, FlowX0Euler> make_solver(SamplerKind kind,
                                                            const FlowSchedule& schedule,
                                                            std::size_t sample_size) {
  switch (kind) {
    case SamplerKind::kEuler:
      return FlowEuler(schedule.sigmas);
    case SamplerKind::kDistilled:
      return FlowX0Euler(schedule.sigmas);
    case SamplerKind::kUniPC:
      break;
  }
  return FlowUniPC(schedule.sigmas, sample_size);
}

}  // namespace

std::string_view to_string(SamplerKind kind) {
  switch (kind) {
    case SamplerKind::kEuler:
      return "euler";
    case SamplerKind::kDistilled:
      return "distill4";
    case SamplerKind::kUniPC:
      break;
  }
  return "unipc";
}

std::optional<SamplerKind> parse_sampler_kind(std::string_view name) {
  for (const SamplerKind kind :
       {SamplerKind::kUniPC, SamplerKind::kEuler, SamplerKind::kDistilled}) {
    if (name == to_string(kind)) return kind;
  }
  return std::nullopt;
}

bool guidance_enabled(float guide_scale) {
  return !(std::fabs(guide_scale - 1.0f) <= 1e-6f);
}

Sampler::Sampler(int steps, double shift, SamplerKind kind, std::size_t sample_size)
    : kind_(kind),
      schedule_(make_schedule(steps, shift, kind)),
      solver_(make_solver(kind, schedule_, sample_size)) {}

int Sampler::step_index() const {
  return std::visit([](const auto& solver) { return solver.step_index(); }, solver_);
}

float Sampler::timestep() const {
  if (done()) throw Error(ErrorCode::kBadArgument, "the sampler has taken every step");
  return schedule_.timesteps[static_cast<std::size_t>(step_index())];
}

void Sampler::step(std::span<const float> velocity, std::span<float> sample) {
  std::visit([&](auto& solver) { solver.step(velocity, sample); }, solver_);
}

void apply_guidance(std::span<const float> cond, std::span<const float> uncond, float scale,
                    std::span<float> out) {
  if (cond.size() != uncond.size() || out.size() != cond.size()) {
    throw Error(ErrorCode::kBadArgument,
                "guidance: cond, uncond and out differ in size (" + std::to_string(cond.size()) +
                    ", " + std::to_string(uncond.size()) + ", " + std::to_string(out.size()) + ")");
  }
  for (std::size_t k = 0; k < out.size(); ++k) {
    const float diff = cond[k] - uncond[k];
    const float scaled = scale * diff;
    out[k] = uncond[k] + scaled;
  }
}

const SamplingDefaults* find_sampling_defaults(std::string_view model) {
  for (const SamplingDefaults* d : {&kSamplingT2V_1_3B, &kSamplingTI2V_5B, &kSamplingT2V_14B,
                                    &kSamplingI2V_14B, &kSamplingT2V_A14B, &kSamplingI2V_A14B}) {
    if (d->model == model) return d;
  }
  return nullptr;
}

}  // namespace ferry::models::wan
