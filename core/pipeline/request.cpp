#include "core/pipeline/request.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "core/error.h"
#include "core/io/detail/os_file.h"
#include "core/media/video_writer.h"

namespace ferry::pipeline {
namespace {

namespace fs = std::filesystem;

[[noreturn]] void bad(const std::string& message) {
  throw Error(ErrorCode::kBadArgument, message);
}

// The default size of a model's videos (wan.md §D.4): TI2V-5B 1280×704, the others 832×480.
void default_size(const models::wan::DitConfig& c, int& width, int& height) {
  if (c.in_dim == 48) {
    width = 1280;
    height = 704;
  } else {
    width = 832;
    height = 480;
  }
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
  const double ow1 = std::floor(ow / kStep) * kStep;
  const double oh1 = std::floor(a / ow1 / kStep) * kStep;
  const double oh2 = std::floor(oh / kStep) * kStep;
  const double ow2 = std::floor(a / oh2 / kStep) * kStep;
  const double r1 = ow1 / oh1, r2 = ow2 / oh2;
  if (std::max(ratio / r1, r1 / ratio) < std::max(ratio / r2, r2 / ratio)) {
    width = static_cast<int>(ow1);
    height = static_cast<int>(oh1);
  } else {
    width = static_cast<int>(ow2);
    height = static_cast<int>(oh2);
  }
}

ResolvedRequest resolve(const GenerationRequest& request, const ModelSet& set,
                        std::optional<std::pair<int, int>> image_size) {
  ResolvedRequest r;
  r.request = request;
  const models::wan::DitConfig& c = set.dit_config;
  const auto* defaults = models::wan::find_sampling_defaults(c.name);
  const models::wan::SamplingDefaults d =
      defaults != nullptr
          ? *defaults
          : (c.in_dim == 48 ? models::wan::kSamplingTI2V_5B : models::wan::kSamplingT2V_1_3B);

  if (request.prompt.find_first_not_of(" \t\r\n") == std::string::npos) {
    bad("the prompt is empty: describe the video to make");
  }
  r.negative_prompt = request.negative_prompt.empty() ? std::string(kWanDefaultNegativePrompt)
                                                      : request.negative_prompt;

  if (request.image && c.in_dim != 48) {
    bad("a start image needs an image-to-video model (Wan 2.2 TI2V-5B); " + std::string(c.name) +
        " makes videos from text only");
  }
  default_size(c, r.width, r.height);
  if (request.width != 0 || request.height != 0) {
    if (request.width <= 0 || request.height <= 0) bad("give both --width and --height");
    r.width = request.width;
    r.height = request.height;
  }
  if (image_size) {
    // The official image-to-video path: the size only sets the area; the aspect is the image's.
    best_output_size(image_size->first, image_size->second,
                     static_cast<std::int64_t>(r.width) * r.height, r.width, r.height);
  }
  const int multiple = c.in_dim == 48 ? 32 : 16;
  if (r.width % multiple != 0 || r.height % multiple != 0 || r.width < multiple ||
      r.height < multiple || r.width > 4096 || r.height > 4096) {
    bad("width and height must be multiples of " + std::to_string(multiple) + " between " +
        std::to_string(multiple) + " and 4096 for " + std::string(c.name) + ", not " +
        std::to_string(r.width) + "x" + std::to_string(r.height));
  }
  r.frames = request.frames != 0 ? request.frames : d.frames;
  if (r.frames < 1 || r.frames > 1001 || (r.frames - 1) % 4 != 0) {
    bad("frames must be of the form 4k+1 (1, 5, …, 81, 121) up to 1001, not " +
        std::to_string(r.frames));
  }
  r.fps = request.fps != 0 ? request.fps : d.fps;
  if (r.fps < 1 || r.fps > 120) bad("fps must be 1 to 120, not " + std::to_string(r.fps));
  r.steps = request.steps != 0 ? request.steps : d.steps;
  if (r.steps < 1 || r.steps > 1000) bad("steps must be 1 to 1000, not " + std::to_string(r.steps));
  r.guide_scale = request.guide_scale.value_or(d.guide_scale);
  if (!(r.guide_scale >= 0.0f && r.guide_scale <= 50.0f)) {
    bad("the guide scale (--cfg) must be 0 to 50, not " + std::to_string(r.guide_scale));
  }
  r.shift = request.shift.value_or(d.shift);
  if (!(r.shift > 0.0 && r.shift <= models::wan::kMaxFlowShift)) {
    bad("shift must be above 0 and at most " + std::to_string(models::wan::kMaxFlowShift) +
        ", not " + std::to_string(r.shift));
  }
  r.sampler = request.sampler.value_or(d.sampler);

  const std::string extension(media::video_extension());
  if (request.output.empty()) bad("no output file given (--out FILE" + extension + ")");
  if (request.output.extension() != extension) {
    bad("this build writes " + extension + " videos: the output must end in " + extension +
        ", not " + io::detail::display(request.output));
  }
  const fs::path folder = request.output.has_parent_path() ? request.output.parent_path() : ".";
  std::error_code ec;
  if (!fs::is_directory(folder, ec)) {
    bad("the output folder " + io::detail::display(folder) + " does not exist");
  }

  const int spatial = c.in_dim == 48 ? 16 : 8;
  r.latent_frames = (r.frames - 1) / 4 + 1;
  r.latent_height = r.height / spatial;
  r.latent_width = r.width / spatial;
  return r;
}

}  // namespace ferry::pipeline
