#include "core/models/wan/request_rules.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/io/detail/os_file.h"
#include "core/models/lora/distill_name.h"
#include "core/models/wan/flow_schedule.h"
#include "core/models/wan/sampler.h"

namespace ferry::models::wan {
namespace {

[[noreturn]] void bad(const std::string& message) {
  throw Error(ErrorCode::kBadArgument, message);
}

// The default size of a model's videos (wan.md §D.4, formats_lora_moe.md §6.1): TI2V-5B
// 1280×704, A14B 1280×720 (I2V: its area), the others 832×480.
void default_size(const ModelSet& set, int& width, int& height) {
  const DitConfig& c = set.dit_config;
  if (c.in_dim == 48) {
    width = 1280;
    height = 704;
  } else if (set.two_experts()) {
    width = 1280;
    height = 720;
  } else {
    width = 832;
    height = 480;
  }
}

std::string number_text(double value) {
  char text[32];
  std::snprintf(text, sizeof text, "%g", value);
  return text;
}

// What a request asks that a step-distilled recipe does not want (formats_lora_moe.md §5): CFG
// with the distilled sampler, and a distillation LoRA (told by its name) run any other way.
std::vector<std::string> distillation_warnings(const ResolvedRequest& r) {
  std::vector<std::string> out;
  const bool distilled = parse_sampler_kind(r.sampler) == SamplerKind::kDistilled;
  const bool guided = guidance_enabled(r.guide_scale);
  if (distilled && guided) {
    out.push_back("guide scale " + number_text(r.guide_scale) +
                  " with the distilled sampler: CFG with a distilled sampler doubles each step's "
                  "cost and usually burns the image (guide scale 1 turns it off)");
  }
  for (const LoraChoice& lora : r.request.loras) {
    const int steps = lora::distilled_steps(lora.path);
    if (steps == 0 || (distilled && r.steps <= 8 && !guided)) continue;
    std::string asked = "the " + r.sampler + " sampler, " + std::to_string(r.steps) +
                        " steps, guide scale " + number_text(r.guide_scale);
    out.push_back(io::detail::display(lora.path.filename()) + " is a step-distillation LoRA (" +
                  std::to_string(steps) + " steps, no CFG) but this run asks for " + asked +
                  ": choose the distill4 sampler with " + std::to_string(steps) +
                  " steps and guide scale 1, or expect a slow run and a burnt image");
  }
  return out;
}

// A start image so far from the video's shape that the size rule gives a side outside the model's
// limits (a 10×4000 strip): refused, saying why, rather than made into a 0-pixel or 20000-pixel
// video.
void check_image_size(int image_width, int image_height, const ResolvedRequest& r,
                      const RequestRules& rules) {
  const auto inside = [&](int side) { return side >= rules.min_size && side <= rules.max_size; };
  if (inside(r.width) && inside(r.height)) return;
  bad("the start image is " + std::to_string(image_width) + "×" + std::to_string(image_height) +
      ": a video of its shape with about " + std::to_string(r.request.width) + "×" +
      std::to_string(r.request.height) + " pixels' area would have a side outside " +
      std::to_string(rules.min_size) + "–" + std::to_string(rules.max_size) +
      " px; crop the image closer to the video's shape");
}

}  // namespace

const std::string_view kWanDefaultNegativePrompt =
    "色调艳丽，过曝，静态，细节模糊不清，字幕，风格，作品，画作，画面，静止，整体发灰，最差质量，"
    "低质量，JPEG压缩残留，丑陋的，残缺的，多余的手指，画得不好的手部，画得不好的脸部，畸形的，毁容"
    "的，形态畸形的肢体，手指融合，静止不动的画面，杂乱的背景，三条腿，背景人很多，倒着走";

void best_output_size(int image_width, int image_height, std::int64_t area, int& width,
                      int& height) {
  constexpr double kStep = 32;
  const double a = static_cast<double>(area);
  const double ratio = static_cast<double>(image_width) / image_height;
  const double ow = std::sqrt(a * ratio);
  const double oh = a / ow;
  // Width first, then height first; keep the one whose aspect is closer to the image's.
  // A side under one step (an extreme aspect) gives 0 and its partner an absurd size, never a
  // division by zero: the caller refuses sizes outside the model's limits.
  constexpr double kAbsurd = 1e9;
  const double ow1 = std::floor(ow / kStep) * kStep;
  const double oh1 = ow1 > 0 ? std::min(std::floor(a / ow1 / kStep) * kStep, kAbsurd) : kAbsurd;
  const double oh2 = std::floor(oh / kStep) * kStep;
  const double ow2 = oh2 > 0 ? std::min(std::floor(a / oh2 / kStep) * kStep, kAbsurd) : kAbsurd;
  const double r1 = ow1 / oh1, r2 = ow2 / oh2;
  if (std::max(ratio / r1, r1 / ratio) < std::max(ratio / r2, r2 / ratio)) {
    width = static_cast<int>(ow1);
    height = static_cast<int>(oh1);
  } else {
    width = static_cast<int>(ow2);
    height = static_cast<int>(oh2);
  }
}

void a14b_output_size(int image_width, int image_height, std::int64_t area, int& width,
                      int& height) {
  // image2video.py: lat_h = round(sqrt(max_area·aspect) // 8 // 2 · 2), h = 8·lat_h (floats,
  // floor division), aspect = h0/w0; the same for the width with 1/aspect.
  const double aspect = static_cast<double>(image_height) / image_width;
  const auto latent_side = [](double pixels) {
    return std::floor(std::floor(pixels / 8.0) / 2.0) * 2.0;
  };
  const double a = static_cast<double>(area);
  height = static_cast<int>(std::min(8.0 * latent_side(std::sqrt(a * aspect)), 1e9));
  width = static_cast<int>(std::min(8.0 * latent_side(std::sqrt(a / aspect)), 1e9));
}

RequestRules request_rules(const ModelSet& set) {
  const DitConfig& c = set.dit_config;
  const SamplingDefaults* found = find_sampling_defaults(c.name);
  const SamplingDefaults d =
      found != nullptr ? *found : (c.in_dim == 48 ? kSamplingTI2V_5B : kSamplingT2V_1_3B);
  RequestRules rules;
  rules.size_multiple = rules.min_size = c.in_dim == 48 ? 32 : 16;
  rules.max_size = 4096;
  rules.frames_step = 4;
  rules.max_frames = 1001;
  rules.max_shift = kMaxFlowShift;
  rules.takes_start_image = c.in_dim == 48 || c.in_dim == kI2V_A14B.in_dim;
  rules.takes_end_image = c.in_dim == kI2V_A14B.in_dim;
  rules.two_experts = set.two_experts();
  rules.expert_boundary = set.two_experts() ? d.boundary : 0.0;
  rules.sampler = std::string(to_string(d.sampler));
  rules.samplers = {rules.sampler};
  for (const SamplerKind kind :
       {SamplerKind::kUniPC, SamplerKind::kEuler, SamplerKind::kDistilled}) {
    if (kind != d.sampler) rules.samplers.emplace_back(to_string(kind));
  }
  rules.sampler_defaults.push_back({std::string(to_string(SamplerKind::kDistilled)),
                                    kDistilledSteps, kDistilledGuideScale, kDistilledShift});
  default_size(set, rules.width, rules.height);
  rules.frames = d.frames;
  rules.fps = d.fps;
  rules.steps = d.steps;
  rules.guide_scale = d.guide_scale;
  rules.low_noise_guide_scale = set.two_experts() ? d.guide_scale_low_noise : d.guide_scale;
  rules.shift = d.shift;
  if (set.is_demo()) {
    rules.width = rules.height = 256;
    rules.frames = 17;
    rules.steps = 8;
  }
  // The official sizes first (wan.md §D.4), then smaller ones for quick tries.
  const std::pair<int, int> official[] = {{1280, 704}, {704, 1280}, {1280, 720},  {720, 1280},
                                          {832, 480},  {480, 832},  {1024, 1024}, {640, 640},
                                          {512, 512},  {256, 256}};
  for (const auto& [w, h] : official) {
    if (rules.size_allowed(w, h)) rules.sizes.emplace_back(w, h);
  }
  return rules;
}

ResolvedRequest resolve(const GenerationRequest& request, const ModelSet& set,
                        std::optional<std::pair<int, int>> image_size) {
  const DitConfig& c = set.dit_config;
  const RequestRules rules = request_rules(set);
  ResolvedRequest r;
  r.request = request;
  r.negative_prompt = request.negative_prompt.empty() ? std::string(kWanDefaultNegativePrompt)
                                                      : request.negative_prompt;
  if (request.image && !rules.takes_start_image) {
    bad("a start image needs an image-to-video model (Wan 2.2 TI2V-5B or A14B I2V); " +
        std::string(c.name) + " makes videos from text only");
  }
  const bool i2v_experts = c.in_dim == kI2V_A14B.in_dim;
  if (i2v_experts && !request.image) {
    bad(std::string(c.name) + " makes a video from a start image: give one (--image FILE)");
  }
  if (request.end_image && !rules.takes_end_image) {
    bad("an end image needs a first-last-frame model (Wan 2.2 A14B I2V); " + std::string(c.name) +
        " takes a start image only");
  }
  // Defaults are the model's own, not the demo's: a request says what it wants.
  default_size(set, r.width, r.height);
  if (request.width != 0 || request.height != 0) {
    if (request.width <= 0 || request.height <= 0) bad("give both --width and --height");
    r.width = request.width;
    r.height = request.height;
  }
  if (image_size) {
    // The official image-to-video paths: the size only sets the area; the aspect is the image's.
    const auto [image_width, image_height] = *image_size;
    const std::int64_t area = static_cast<std::int64_t>(r.width) * r.height;
    if (i2v_experts) {
      a14b_output_size(image_width, image_height, area, r.width, r.height);
    } else {
      best_output_size(image_width, image_height, area, r.width, r.height);
    }
    check_image_size(image_width, image_height, r, rules);
  }
  const SamplingDefaults* found = find_sampling_defaults(c.name);
  const SamplingDefaults d =
      found != nullptr ? *found : (c.in_dim == 48 ? kSamplingTI2V_5B : kSamplingT2V_1_3B);
  r.frames = request.frames != 0 ? request.frames : d.frames;
  r.fps = request.fps != 0 ? request.fps : d.fps;
  r.sampler = request.sampler.value_or(rules.sampler);
  // The distilled sampler's own defaults: the recipe's, not the model's (50 steps with CFG).
  const bool distilled = parse_sampler_kind(r.sampler) == SamplerKind::kDistilled;
  r.steps = request.steps != 0 ? request.steps : (distilled ? kDistilledSteps : d.steps);
  r.guide_scale = request.guide_scale.value_or(distilled ? kDistilledGuideScale : d.guide_scale);
  r.low_noise_guide_scale = request.low_noise_guide_scale.value_or(
      request.guide_scale || distilled || !set.two_experts() ? r.guide_scale
                                                             : d.guide_scale_low_noise);
  r.shift = request.shift.value_or(distilled ? kDistilledShift : d.shift);
  check_request(r, rules, std::string(c.name));
  r.warnings = distillation_warnings(r);

  const int spatial = c.in_dim == 48 ? 16 : 8;
  r.latent_frames = (r.frames - 1) / 4 + 1;
  r.latent_height = r.height / spatial;
  r.latent_width = r.width / spatial;
  return r;
}

}  // namespace ferry::models::wan
