// Wan 2.2 TI2V-5B's frame-0 conditioning (wan.md §B.8, official textimage2video.py with
// utils.masks_like(zero=True)). In image-to-video the first latent frame is the encoded image
// z0: it replaces the noise before the loop and again after every sampler step, and its tokens
// are given timestep 0 while the rest get the step's t (the same for the cond and uncond passes).
// In text-to-video every token gets t and nothing is replaced.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace ferry::models::wan {

// A latent [channels, frames, height, width], row-major.
struct LatentGrid {
  int channels = 0;
  int frames = 0;
  int height = 0;
  int width = 0;

  std::size_t size() const;
  // DiT tokens: frames · height/2 · width/2 (the 1×2×2 patch).
  std::size_t tokens() const;
};

enum class Ti2vMode { kTextToVideo, kImageToVideo };

// masks_like's second mask: 0 on frame 0 in image-to-video, 1 everywhere else; [C, T, H, W].
std::vector<float> ti2v_mask(const LatentGrid& grid, Ti2vMode mode);

// The DiT's per-token timesteps at step timestep `t`, in token order (frame, patch row, patch
// column): 0 for frame-0 tokens in image-to-video, t otherwise, then t for the padding up to
// out.size() (the sequence length, >= grid.tokens()). fp32 as the official tensor (an official
// integer timestep is exact in it; a distilled one is fractional).
// Throws Error(kBadArgument) for an odd height/width or a too-short `out`.
void ti2v_token_timesteps(const LatentGrid& grid, Ti2vMode mode, float t, std::span<float> out);
std::vector<float> ti2v_token_timesteps(const LatentGrid& grid, Ti2vMode mode, float t);

// sample = (1 - mask)·z0 + mask·sample, z0 one frame [C, 1, H, W] broadcast over frames: frame 0
// becomes z0, the others keep their values. Call it on the initial noise and after every
// sampler step in image-to-video. Computed as the official blend (not a copy) so that even
// signed zeros and non-finite values come out the same.
void ti2v_insert_frame0(const LatentGrid& grid, std::span<const float> z0, std::span<float> sample);

}  // namespace ferry::models::wan
