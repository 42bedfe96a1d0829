#include "core/models/wan/sampler.h"

#include <string>

#include "core/error.h"
#include "core/models/wan/no_fp_contraction.h"  // last: it applies to what follows

namespace ferry::models::wan {
namespace {

std::variant<FlowUniPC, FlowEuler> make_solver(SamplerKind kind, const FlowSchedule& schedule,
                                               std::size_t sample_size) {
  if (kind == SamplerKind::kEuler) return FlowEuler(schedule.sigmas);
  return FlowUniPC(schedule.sigmas, sample_size);
}

}  // namespace

std::string_view to_string(SamplerKind kind) {
  return kind == SamplerKind::kEuler ? "euler" : "unipc";
}

std::optional<SamplerKind> parse_sampler_kind(std::string_view name) {
  if (name == "unipc") return SamplerKind::kUniPC;
  if (name == "euler") return SamplerKind::kEuler;
  return std::nullopt;
}

Sampler::Sampler(int steps, double shift, SamplerKind kind, std::size_t sample_size)
    : kind_(kind),
      schedule_(flow_schedule(steps, shift)),
      solver_(make_solver(kind, schedule_, sample_size)) {}

int Sampler::step_index() const {
  return std::visit([](const auto& solver) { return solver.step_index(); }, solver_);
}

std::int64_t Sampler::timestep() const {
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
