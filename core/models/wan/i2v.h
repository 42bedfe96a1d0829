// Wan 2.2 A14B image-to-video and first–last-frame conditioning (formats_lora_moe.md §6.3–§6.4,
// official image2video.py; the end frame as diffusers' `last_image`). The DiT reads 36 channels:
// the noisy latent (16), a 4-channel mask saying which pixel frames are given, and the Wan 2.1 VAE
// latent of the conditioning video (16) — the start image, zeros, and the end image when given.
// Nothing is written into the latent while sampling (unlike TI2V-5B): the model redraws frame 0.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "core/media/image.h"

namespace ferry::models::wan {

// The mask [4, T, h, w] for `frames` pixel frames (T = (frames - 1)/4 + 1): pixel frame 0 is given,
// and the last one too when `end_frame`; the first frame's flag repeated three more times, then
// every frame's, folded into groups of four (m[c, t] = p[0] for t = 0, p[4t + c - 3] after).
std::vector<float> i2v_mask(int frames, std::int64_t latent_height, std::int64_t latent_width,
                            bool end_frame);

// The image as the official code feeds it: to [-1, 1] (x/255 - 0.5)/0.5 in f32, then resized to
// width × height by bicubic interpolation as torch's F.interpolate(mode="bicubic",
// align_corners=False) does it (A = -0.75, borders clamped, no antialiasing, no crop, not
// clamped after). Planar [3, height, width].
std::vector<float> bicubic_resize(const media::RgbImage& image, int width, int height);

// The conditioning video [3, frames, height, width]: `start` in frame 0, `end` (when not empty)
// in the last frame, zeros elsewhere; each a bicubic_resize output.
std::vector<float> i2v_conditioning_video(std::span<const float> start, std::span<const float> end,
                                          int frames, int width, int height);

// y = concat(mask, latent) along channels: [4 + C, T, h, w] from the mask [4, T, h, w] and the
// conditioning video's latent [C, T, h, w].
std::vector<float> i2v_condition(std::span<const float> mask, std::span<const float> latent);

}  // namespace ferry::models::wan
