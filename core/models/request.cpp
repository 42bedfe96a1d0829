#include "core/models/request.h"

#include <algorithm>
#include <string>

#include "core/error.h"
#include "core/io/detail/os_file.h"
#include "core/media/video_writer.h"

namespace ferry::models {
namespace {

namespace fs = std::filesystem;

[[noreturn]] void bad(const std::string& message) {
  throw Error(ErrorCode::kBadArgument, message);
}

void check_folder_exists(const fs::path& file, const std::string& what) {
  const fs::path folder = file.has_parent_path() ? file.parent_path() : ".";
  std::error_code ec;
  if (!fs::is_directory(folder, ec)) bad(what + io::detail::display(folder) + " does not exist");
}

}  // namespace

FrameMode frame_mode(bool start_image, bool end_image) {
  if (start_image && end_image) return FrameMode::kFirstLast;
  if (start_image) return FrameMode::kFirstFrame;
  if (end_image) return FrameMode::kLastFrame;
  return FrameMode::kText;
}

bool RequestRules::size_allowed(int w, int h) const {
  const auto ok = [this](int v) {
    return v % size_multiple == 0 && v >= min_size && v <= max_size;
  };
  return ok(w) && ok(h);
}

bool RequestRules::frames_allowed(int f) const {
  return f >= frames_offset && f <= max_frames && (f - frames_offset) % frames_step == 0;
}

void check_end_image(const GenerationRequest& request, const RequestRules& rules,
                     const std::string& model) {
  if (request.end_image && !request.image && !rules.end_image_alone) {
    bad("an end image needs a start image for " + model +
        ": the video goes from the start image to the end image");
  }
}

void check_request(const ResolvedRequest& r, const RequestRules& rules, const std::string& model) {
  if (!rules.size_allowed(r.width, r.height)) {
    bad("width and height must be multiples of " + std::to_string(rules.size_multiple) +
        " between " + std::to_string(rules.min_size) + " and " + std::to_string(rules.max_size) +
        " for " + model + ", not " + std::to_string(r.width) + "x" + std::to_string(r.height));
  }
  if (!rules.frames_allowed(r.frames)) {
    const auto nth = [&](int k) {
      return std::to_string(rules.frames_offset + k * rules.frames_step);
    };
    bad("frames must be of the form " + std::to_string(rules.frames_step) + "k+" +
        std::to_string(rules.frames_offset % rules.frames_step) + " (" + nth(0) + ", " + nth(1) +
        ", " + nth(2) + ", …) up to " + std::to_string(rules.max_frames) + " for " + model +
        ", not " + std::to_string(r.frames));
  }
  check_end_image(r.request, rules, model);
  if (!r.request.soundtrack_wav.empty() && !rules.makes_sound) {
    bad(model + " makes silent videos: there is no soundtrack to write to " +
        io::detail::display(r.request.soundtrack_wav) + " (--wav)");
  }
  if (r.fps < 1 || r.fps > 120) bad("fps must be 1 to 120, not " + std::to_string(r.fps));
  if (r.steps < 1 || r.steps > rules.max_steps) {
    bad("steps must be 1 to " + std::to_string(rules.max_steps) + ", not " +
        std::to_string(r.steps));
  }
  if (!(r.guide_scale >= 0.0f && r.guide_scale <= rules.max_guide_scale)) {
    bad("the guide scale (--cfg) must be 0 to " + std::to_string(rules.max_guide_scale) + ", not " +
        std::to_string(r.guide_scale));
  }
  if (!(r.low_noise_guide_scale >= 0.0f && r.low_noise_guide_scale <= rules.max_guide_scale)) {
    bad("the low-noise expert's guide scale (--cfg-low) must be 0 to " +
        std::to_string(rules.max_guide_scale) + ", not " + std::to_string(r.low_noise_guide_scale));
  }
  if (r.request.low_noise_guide_scale && !rules.two_experts) {
    bad(model + " has one expert: --cfg-low is for two-expert models (Wan 2.2 A14B)");
  }
  if (!(r.shift > 0.0 && r.shift <= rules.max_shift)) {
    bad("shift must be above 0 and at most " + std::to_string(rules.max_shift) + ", not " +
        std::to_string(r.shift));
  }
  if (std::find(rules.samplers.begin(), rules.samplers.end(), r.sampler) == rules.samplers.end()) {
    std::string names;
    for (const std::string& s : rules.samplers) names += (names.empty() ? "" : " or ") + s;
    bad("--sampler is " + names + ", not '" + r.sampler + "'");
  }
}

void check_run_inputs(const GenerationRequest& request) {
  if (request.prompt.find_first_not_of(" \t\r\n") == std::string::npos) {
    bad("the prompt is empty: describe the video to make");
  }
  const fs::path& output = request.output;
  const std::string extension(media::video_extension());
  if (output.empty()) bad("no output file given (--out FILE" + extension + ")");
  if (output.extension() != extension) {
    bad("this build writes " + extension + " videos: the output must end in " + extension +
        ", not " + io::detail::display(output));
  }
  check_folder_exists(output, "the output folder ");
  const fs::path& wav = request.soundtrack_wav;
  if (!wav.empty()) {
    if (wav.extension() != ".wav") {
      bad("the soundtrack is written as a .wav file, not " + io::detail::display(wav) + " (--wav)");
    }
    if (wav.lexically_normal() == output.lexically_normal()) {
      bad("the soundtrack and the video cannot both be " + io::detail::display(wav));
    }
    check_folder_exists(wav, "the soundtrack's folder ");
  }
}

}  // namespace ferry::models
