// Spatial tiling of the VAE decode and encode: the latent grid is cut into overlapping square
// tiles, each tile is decoded (encoded) on its own (all frames, its own caches) and its pixels
// (latents) are blended into the output with weights that ramp linearly across the overlaps.
// Memory then follows the tile, not the frame; the result is close to, not equal to, the untiled
// one (attention and convolutions see only their tile), which stays the reference.
#pragma once

#include <cstdint>
#include <functional>
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

// Called once per chunk with its first frame index and its pixels [3, n, H, W] on the host,
// clamped to [-1, 1], valid during the call.
using VaeFrameSink = std::function<void(std::int64_t first_frame, const Shape& shape,
                                        std::span<const float> pixels)>;

// Where the chunk-major decode keeps each tile's caches between chunks.
enum class VaeTileCaches {
  kDevice,  // every tile's cache slots stay in the arena (more device memory, no copies)
  kHost,    // parked in host memory after each step, uploaded again for the next (one tile's
            // slots in the arena)
};

// The same decode as decode_tiled (the same pixels, bit for bit), chunk-major: latent frame k of
// every tile before frame k + 1 of any, each tile with its own caches, so a chunk's frames go to
// `sink` as soon as its tiles are done and the caller never holds the whole video. A tile at
// least as large as the latent gives the untiled decode.
void decode_tiled_chunks(WanVae& vae, const Tensor& latent, memory::Arena& arena,
                         const VaeTiling& tiling, VaeTileCaches caches, const VaeFrameSink& sink);

// Arena bytes decode_tiled_chunks takes for a latent of h × w positions (any frame count): the
// cache slots (one tile's, or every tile's with VaeTileCaches::kDevice), one latent frame and
// its cuts, and one tile's chunk. `options` (here and below): the WanVae's.
std::size_t tiled_chunks_decode_arena_bytes(const VaeWeights& weights, const VaeTiling& tiling,
                                            std::int64_t h, std::int64_t w, VaeTileCaches caches,
                                            const VaeOptions& options = {});

// Host bytes decode_tiled_chunks holds besides the sink's: the parked caches of every tile
// (VaeTileCaches::kHost), one chunk of output frames, one tile's chunk and the blend weights.
std::size_t tiled_chunks_decode_host_bytes(const VaeWeights& weights, const VaeTiling& tiling,
                                           std::int64_t h, std::int64_t w, VaeTileCaches caches,
                                           const VaeOptions& options = {});

// Host bytes decode_tiled holds besides its output [3, F, H, W]: the blend weights and one tile's
// chunk.
std::size_t tiled_decode_host_bytes(const VaeWeights& weights, const VaeTiling& tiling,
                                    std::int64_t h, std::int64_t w);

// Encodes video [3, F, H, W] (on the backend) tile by tile into latent [z, T, H/s, W/s] (on the
// backend); tiles and overlap in latent positions as for the decode.
void encode_tiled(WanVae& vae, Backend& backend, const Tensor& video, memory::Arena& arena,
                  const VaeTiling& tiling, const Tensor& latent);

// Arena bytes decode_tiled takes for a latent of t frames and h × w positions: one tile's
// latent (and the band of rows it is cut from) plus one tile's decode
// (WanVae::decode_arena_bytes).
std::size_t tiled_decode_arena_bytes(const VaeWeights& weights, const VaeTiling& tiling,
                                     std::int64_t t, std::int64_t h, std::int64_t w,
                                     const VaeOptions& options = {});

// Arena bytes encode_tiled takes for `frames` frames of height × width pixels.
std::size_t tiled_encode_arena_bytes(const VaeWeights& weights, const VaeTiling& tiling,
                                     std::int64_t frames, std::int64_t height, std::int64_t width,
                                     const VaeOptions& options = {});

}  // namespace ferry::models::wan
