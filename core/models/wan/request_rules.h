// What a Wan model accepts and does by default (wan.md §D.4): sizes (multiples of 32 for TI2V-5B,
// of 16 for Wan 2.1), frames 4k+1, the official sampling defaults, the default negative prompt,
// and the start image's size rule (§B.8). The engine's rules: the app and the CLI ask for them
// through the session, never restate them.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>
#include <utility>

#include "core/models/request.h"
#include "core/models/wan/model_set.h"

namespace ferry::models::wan {

// The official default negative prompt (W21/W22 shared_config.py), used when none is given.
extern const std::string_view kWanDefaultNegativePrompt;

// Wan 2.2's size for a start image when none is asked for (wan.md §B.8): the multiple of 32 in
// each axis with about `area` pixels whose aspect ratio is closest to the image's.
void best_output_size(int image_width, int image_height, std::int64_t area, int& width,
                      int& height);

// Wan 2.2 A14B I2V's size for a start image (official image2video.py, formats_lora_moe.md §6.3):
// about `area` pixels at the image's aspect, each side a multiple of 16 rounded down.
void a14b_output_size(int image_width, int image_height, std::int64_t area, int& width,
                      int& height);

// The rules and defaults of the model in `set` (the demo model's defaults are small: 17 frames,
// 8 steps, 256×256).
RequestRules request_rules(const ModelSet& set);

// Fills the defaults of the model in `set` and checks the request's settings: the rules above,
// a start image only for TI2V. (The prompt and the output are the pipeline's: check_run_inputs.)
// `image_size` is the start image's (width, height) when there is one. Error(kBadArgument) naming
// the setting and what is allowed.
ResolvedRequest resolve(const GenerationRequest& request, const ModelSet& set,
                        std::optional<std::pair<int, int>> image_size);

}  // namespace ferry::models::wan
