// Spatial tiling of the VAE decode and encode: the latent grid is cut into overlapping square
// tiles, each tile is decoded (encoded) on its own (all frames, its own caches) and its pixels
// (latents) are blended into the output with weights that ramp linearly across the overlaps.
// Memory then follows the tile, not the frame; the result is close to, not equal to, the untiled
// one (attention and convolutions see only their tile), which stays the reference.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "core/models/wan/vae.h"

namespace ferry::models::wan {

struct VaeTiling {
  std::int64_t tile = 0;     // tile side in latent positions (the planner chooses it)
  std::int64_t overlap = 0;  // latent positions neighbouring tiles share (< tile)
};

// Where tiles start along an axis of `size` latent positions: every tile - overlap, the last one
// moved back to end at `size` (one tile when the axis fits in one).
std::vector<std::int64_t> vae_tile_starts(std::int64_t size, const VaeTiling& tiling);

// Decodes latent [z, T, h, w] tile by tile into pixels [3, F, H, W] on the host, clamped to
// [-1, 1]. Throws Error(kBadArgument) for a tiling with tile ≤ 0 or overlap outside [0, tile).
void decode_tiled(WanVae& vae, Backend& backend, const Tensor& latent, memory::Arena& arena,
                  const VaeTiling& tiling, std::span<float> pixels);

// Encodes video [3, F, H, W] (on the backend) tile by tile into latent [z, T, H/s, W/s] (on the
// backend); tiles and overlap in latent positions as for the decode.
void encode_tiled(WanVae& vae, Backend& backend, const Tensor& video, memory::Arena& arena,
                  const VaeTiling& tiling, const Tensor& latent);

// Arena bytes decode_tiled takes for a latent of t frames and h × w positions: one tile's
// latent (and the band of rows it is cut from) plus one tile's decode
// (WanVae::decode_arena_bytes).
std::size_t tiled_decode_arena_bytes(const VaeWeights& weights, const VaeTiling& tiling,
                                     std::int64_t t, std::int64_t h, std::int64_t w);

// Arena bytes encode_tiled takes for `frames` frames of height × width pixels.
std::size_t tiled_encode_arena_bytes(const VaeWeights& weights, const VaeTiling& tiling,
                                     std::int64_t frames, std::int64_t height, std::int64_t width);

}  // namespace ferry::models::wan
