// H3's ViT video decoder on one tile-chunk (minimax_h3.md §E.3): a latent tile of T × h × w
// positions (T = 7 for a chunk) becomes T·h·w tokens plus the registers and one zero token,
// through the blocks (full attention over the tile-chunk, RoPE on 3/4 of each head with the
// tile's own normalised coordinates), the final LayerNorm and the patch projection, on a Backend,
// the groups of VideoVaeWeights delivered by a WeightSource (streamed block by block or resident:
// the same bits either way).
//
// Numerics: f32 activations throughout (the release is f32, and diffusers keeps the norms, the
// residual stream and its scales in f32 even under bf16); weights as stored (f32, f16, bf16, or
// NF4 dequantised on the fly by Backend::linear).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "core/backend/backend.h"
#include "core/memory/arena.h"
#include "core/models/h3/video_vae_weights.h"
#include "core/offload/weight_source.h"

namespace ferry::models::h3::vae {

// A latent tile on the host: [channels, frames, height, width] f32, already de-normalised
// (z·std + mean).
struct LatentTile {
  std::span<const float> values;
  std::int64_t frames = 0, height = 0, width = 0;
  std::int64_t tokens() const { return frames * height * width; }
};

// One pass over `source` (built on weights' decoder groups) with activations from `arena` (at
// least decoder_arena_bytes of the tile): the patch projection's rows [T·h·w, 3·4·p·p] f32 in
// token order (t, y, x), each row's values in (colour, frame, row, column) order.
// Error(kBadArgument) when the tile does not match the model; kCancelled, kIo from the source.
std::vector<float> decode_tile_chunk(Backend& backend, const VideoVaeWeights& weights,
                                     offload::WeightSource& source, memory::Arena& arena,
                                     const LatentTile& tile);

// The arena bytes decode_tile_chunk takes for a tile of `tokens` latent positions: its peak,
// exactly (tests compare it with Arena::peak).
std::uint64_t decoder_arena_bytes(const VideoVaeConfig& config, bool fused_qkv,
                                  std::int64_t tokens);

// The rotary angles' cosines and sines of a tile's tokens (§E.3): per token [t | h | w] × the
// frequencies 1/θ^(6k/R), times 2π times the axis coordinate 2(i + 0.5)/n − 1; the registers and
// the zero token at 0. [tokens + registers + 1, R/2] each, f32.
struct RopeTables {
  std::vector<float> cos, sin;
};
RopeTables decoder_rope_tables(const VideoVaeConfig& config, std::int64_t frames,
                               std::int64_t height, std::int64_t width);

}  // namespace ferry::models::h3::vae
