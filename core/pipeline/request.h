// What a user asks for — prompt, optional start image, size, frames, sampling settings, preset,
// output — and the same request with every default filled in from the model (wan.md §D.4) and
// checked, before any weight is read.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/models/wan/sampler.h"
#include "core/pipeline/model_set.h"

namespace ferry::pipeline {

// The official default negative prompt (W21/W22 shared_config.py), used when none is given.
extern const std::string_view kWanDefaultNegativePrompt;

struct GenerationRequest {
  std::vector<std::filesystem::path> model;  // a folder, or the parts' files
  std::string prompt;
  std::string negative_prompt;                 // empty: kWanDefaultNegativePrompt
  std::optional<std::filesystem::path> image;  // TI2V start image (PNG, JPEG, WebP)
  // 0 (or unset) takes the model's default.
  int width = 0;
  int height = 0;
  int frames = 0;
  int fps = 0;
  int steps = 0;
  std::optional<float> guide_scale;
  std::optional<double> shift;
  std::optional<models::wan::SamplerKind> sampler;
  std::uint64_t seed = 0;
  std::string preset = "auto";
  std::filesystem::path output;       // the .mp4; a JSON sidecar goes next to it
  std::filesystem::path stats_jsonl;  // one line per step; empty: none
};

// A request with nothing left to choose.
struct ResolvedRequest {
  GenerationRequest request;  // as given
  std::string negative_prompt;
  int width = 0, height = 0, frames = 0, fps = 0, steps = 0;
  float guide_scale = 0;
  double shift = 0;
  models::wan::SamplerKind sampler = models::wan::SamplerKind::kUniPC;
  std::int64_t latent_frames = 0, latent_height = 0, latent_width = 0;
};

// Wan 2.2's size for a start image when none is asked for (wan.md §B.8): the multiple of 32 in
// each axis with about `area` pixels whose aspect ratio is closest to the image's.
void best_output_size(int image_width, int image_height, std::int64_t area, int& width,
                      int& height);

// Fills the defaults of the model in `set` and checks the request: prompt not empty, sizes
// multiples of the model's 32 (TI2V: 32; Wan 2.1: 16), frames of the form 4k+1, steps 1..1000,
// guide scale 0..50, shift in (0, 100], an output path ending in media::video_extension()
// (.mp4; .avi in builds without FFmpeg) whose folder exists.
// `image_size` is the start image's (width, height) when there is one. Error(kBadArgument)
// naming the setting and what is allowed.
ResolvedRequest resolve(const GenerationRequest& request, const ModelSet& set,
                        std::optional<std::pair<int, int>> image_size);

}  // namespace ferry::pipeline
