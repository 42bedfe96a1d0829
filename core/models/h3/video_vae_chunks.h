// H3's video decode as the reference runs it (minimax_h3.md §E.4, diffusers' _decode,
// _decode_clip, _split_tiles, _stitch_tiles): T' = 5n + 2 latent frames in n temporal chunks of 7
// latents (28 frames: 3 dropped in front, 17 handed out, the last 5 cross-faded into the next
// chunk's first 5), each chunk in spatial tiles of 256 pixels (16 latent positions) whose overlaps
// are blended linearly — each tile with the raw, un-blended tiles above and to its left, as the
// reference does. Frames leave chunk by chunk (17, then 5 more after the last chunk): the host
// holds one chunk's 22 frames, never the video.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "core/backend/backend.h"
#include "core/memory/arena.h"
#include "core/models/h3/video_vae_decoder.h"
#include "core/models/h3/video_vae_weights.h"
#include "core/offload/plan.h"
#include "core/offload/weight_source.h"

namespace ferry::models::h3::vae {

// The tile geometry (pixels): the release's 256 with overlaps of at least 64, widened in whole
// latent positions so the tiles cover the frame exactly.
struct TileOptions {
  std::int64_t tile_px = 256;
  std::int64_t min_overlap_px = 64;
};

// Tiles along an axis of `length` pixels (diffusers' _split_tiles): their starts, their common
// length (`length` itself when one tile covers it) and the overlaps between neighbours.
struct AxisTiles {
  std::vector<std::int64_t> starts;
  std::int64_t length = 0;
  std::vector<std::int64_t> overlaps;  // starts.size() - 1 of them
};
AxisTiles split_tiles(std::int64_t length, std::int64_t tile, std::int64_t min_overlap,
                      std::int64_t step);

// diffusers' _stitch_tiles, a tile at a time, for any stack of planes [planes, H, W] (a
// tile-chunk's colour frames; an encoded tile's latent channels): each tile's top rows blended
// with the bottom rows of the raw tile above, then its left columns with the right columns of the
// raw tile to its left (both un-blended, as the reference does), its bottom and right overlaps
// cropped unless it is last, the rest written out. Tiles come row by row, left to right; it keeps
// only the raw edges the next tiles need. Axis tiles in the planes' units.
class TileStitcher {
 public:
  // Where row y of plane p of the output starts.
  using RowOut = std::function<float*(std::int64_t plane, std::int64_t y)>;

  TileStitcher(AxisTiles rows, AxisTiles cols, std::int64_t planes);
  // Tile (r, c), raw [planes, rows.length, cols.length]: blended in place and written through
  // `out`.
  void add(std::int64_t r, std::int64_t c, std::vector<float>& tile, const RowOut& out);
  // Floats it keeps between tiles at most.
  static std::uint64_t edge_floats(const AxisTiles& rows, const AxisTiles& cols,
                                   std::int64_t planes);

 private:
  AxisTiles rows_, cols_;
  std::int64_t planes_;
  std::vector<std::vector<float>> above_;  // per column: the raw bottom rows of the tile above
  std::vector<float> left_;                // the raw right columns of the tile to the left
};

// Latent frames ↔ frames (§E.5): 17n + 5 frames ↔ 5n + 2 latents ↔ n chunks.
std::int64_t latent_frames_for(std::int64_t frames);
std::int64_t decode_chunks_for(std::int64_t latent_frames);

struct DecodeOptions {
  TileOptions tiles;
  bool clamp = true;  // pixels clamped to [0, 1] (the pipeline's); off to compare raw values
  const std::atomic<bool>* cancel = nullptr;
};

// Called with the index of the first frame and the frames [3, n, H, W] (f32, RGB in [0, 1] after
// ImageNet de-normalisation), valid during the call.
using FrameSink = std::function<void(std::int64_t first_frame, const Shape& shape,
                                     std::span<const float> pixels)>;

// Decodes latent [channels, T', h, w] (normalised, as the DiT hands it over; T' = 5n + 2) through
// `source` (built on weights' decoder groups, one pass per tile-chunk: decode_passes of them)
// with activations from `arena` (decoder_arena_bytes of one tile). Error(kBadArgument) when T' is
// not 5n + 2 or the latent does not match the model; kCancelled; kIo from the source.
void decode_video(Backend& backend, const VideoVaeWeights& weights, offload::WeightSource& source,
                  memory::Arena& arena, std::span<const float> latent, std::int64_t latent_frames,
                  std::int64_t height, std::int64_t width, const DecodeOptions& options,
                  const FrameSink& sink);

// The same with a streamer of its own under `plan` (its passes set) and an arena of exactly the
// estimate.
void decode_video(Backend& backend, const VideoVaeWeights& weights, const offload::Plan& plan,
                  std::span<const float> latent, std::int64_t latent_frames, std::int64_t height,
                  std::int64_t width, const DecodeOptions& options, const FrameSink& sink);

// What a decode of a latent of h × w positions does: its tiles per chunk and their size in latent
// positions, the arena of one tile-chunk, the host memory it holds besides the sink's.
struct DecodeShape {
  AxisTiles rows, cols;                 // in pixels
  std::int64_t tile_h = 0, tile_w = 0;  // latent positions
  std::int64_t tiles() const {
    return static_cast<std::int64_t>(rows.starts.size() * cols.starts.size());
  }
};
DecodeShape decode_shape(const VideoVaeConfig& config, std::int64_t h, std::int64_t w,
                         const TileOptions& tiles = {});
std::uint64_t decode_arena_bytes(const VideoVaeWeights& weights, std::int64_t h, std::int64_t w,
                                 const TileOptions& tiles = {});
// Host bytes decode_video holds: the chunk's 22 frames, the raw tile strips kept for blending,
// one tile-chunk's decoded tile and its patch rows, the latent tile.
std::uint64_t decode_host_bytes(const VideoVaeConfig& config, std::int64_t h, std::int64_t w,
                                const TileOptions& tiles = {});
// Passes over the decoder's groups: chunks × tiles.
std::int64_t decode_passes(const VideoVaeConfig& config, std::int64_t latent_frames, std::int64_t h,
                           std::int64_t w, const TileOptions& tiles = {});

// The decoder's layout for the offload engine, its arena that of one tile at this size.
offload::ModelLayout decoder_layout(const VideoVaeWeights& weights, std::int64_t h, std::int64_t w,
                                    const TileOptions& tiles = {});

}  // namespace ferry::models::h3::vae
