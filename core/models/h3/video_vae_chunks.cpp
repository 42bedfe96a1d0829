#include "core/models/h3/video_vae_chunks.h"

#include <algorithm>
#include <memory>
#include <string>
#include <utility>

#include "core/error.h"
#include "core/offload/streamer.h"

namespace ferry::models::h3::vae {
namespace {

constexpr float kImagenetMean[3] = {0.485f, 0.456f, 0.406f};
constexpr float kImagenetStd[3] = {0.229f, 0.224f, 0.225f};
constexpr std::int64_t kChunkLatentFrames = kChunkLatents + kChunkOverlapLatents;  // 7
constexpr std::int64_t kKeptFrames = kChunkMainFrames + kChunkOverlapFrames;       // 22
// A chunk's 28 frames: 3 dropped, 17 main, 3 dropped, 5 overlap.
constexpr std::int64_t kOverlapFirstFrame =
    kChunkLatentFrames * kTemporalRatio - kChunkOverlapFrames;  // 23

// diffusers' _blend weights at position p of an overlap of `extent`: (1 − p/e, p/e) in f32.
float weight_b(std::int64_t p, std::int64_t extent) {
  return static_cast<float>(p) / static_cast<float>(extent);
}
float blend(float a, float b, std::int64_t p, std::int64_t extent) {
  const float wb = weight_b(p, extent);
  return a * (1.0f - wb) + b * wb;
}

// Planar f32 pixels [3, frames, height, width].
struct Frames {
  std::int64_t frames = 0, height = 0, width = 0;
  std::vector<float> v;
  Frames() = default;
  Frames(std::int64_t f, std::int64_t h, std::int64_t w)
      : frames(f), height(h), width(w), v(static_cast<std::size_t>(3 * f * h * w)) {}
  float& at(std::int64_t c, std::int64_t f, std::int64_t y, std::int64_t x) {
    return v[static_cast<std::size_t>(((c * frames + f) * height + y) * width + x)];
  }
  Shape shape() const { return Shape{3, frames, height, width}; }
};

// Which of a chunk's kept frames a decoded frame is (-1: dropped).
std::int64_t kept_index(std::int64_t frame) {
  if (frame >= kChunkPrePadding && frame < kChunkPrePadding + kChunkMainFrames) {
    return frame - kChunkPrePadding;
  }
  if (frame >= kOverlapFirstFrame) return kChunkMainFrames + frame - kOverlapFirstFrame;
  return -1;
}

class Decode {
 public:
  Decode(Backend& backend, const VideoVaeWeights& weights, offload::WeightSource& source,
         memory::Arena& arena, std::span<const float> latent, std::int64_t latent_frames,
         std::int64_t h, std::int64_t w, const DecodeOptions& options)
      : backend_(backend),
        weights_(weights),
        c_(weights.config()),
        source_(source),
        arena_(arena),
        latent_(latent),
        t_(latent_frames),
        h_(h),
        w_(w),
        options_(options),
        shape_(decode_shape(weights.config(), h, w, options.tiles)) {}

  void run(const FrameSink& sink);

 private:
  std::vector<float> latent_tile(std::int64_t chunk, std::int64_t y0, std::int64_t x0) const;
  Frames tile_pixels(const std::vector<float>& rows) const;
  void stitch(std::int64_t r, std::int64_t col, Frames& tile);
  void emit(const FrameSink& sink, std::int64_t first, Frames& frames) const;

  Backend& backend_;
  const VideoVaeWeights& weights_;
  const VideoVaeConfig& c_;
  offload::WeightSource& source_;
  memory::Arena& arena_;
  std::span<const float> latent_;
  std::int64_t t_, h_, w_;
  const DecodeOptions& options_;
  DecodeShape shape_;
  Frames main_, overlap_;  // this chunk's kept frames, stitched
  std::unique_ptr<TileStitcher> stitcher_;
};

// z·std + mean of the chunk's 7 latent frames over one tile.
std::vector<float> Decode::latent_tile(std::int64_t chunk, std::int64_t y0, std::int64_t x0) const {
  const std::int64_t th = shape_.tile_h, tw = shape_.tile_w, C = c_.latent_channels;
  std::vector<float> out(static_cast<std::size_t>(C * kChunkLatentFrames * th * tw));
  std::size_t at = 0;
  for (std::int64_t ch = 0; ch < C; ++ch) {
    const float mean = c_.latents_mean[static_cast<std::size_t>(ch)];
    const float std = c_.latents_std[static_cast<std::size_t>(ch)];
    for (std::int64_t f = 0; f < kChunkLatentFrames; ++f) {
      const std::int64_t frame = chunk * kChunkLatents + f;
      for (std::int64_t y = 0; y < th; ++y) {
        const float* row = latent_.data() + ((ch * t_ + frame) * h_ + y0 + y) * w_ + x0;
        for (std::int64_t x = 0; x < tw; ++x) out[at++] = row[x] * std + mean;
      }
    }
  }
  return out;
}

// The patch rows of a tile-chunk as its kept frames [3, 22, p·th, p·tw].
Frames Decode::tile_pixels(const std::vector<float>& rows) const {
  const std::int64_t p = c_.patch, th = shape_.tile_h, tw = shape_.tile_w;
  Frames out(kKeptFrames, p * th, p * tw);
  const std::int64_t values = c_.patch_values();
  for (std::int64_t t = 0; t < kChunkLatentFrames; ++t) {
    for (std::int64_t y = 0; y < th; ++y) {
      for (std::int64_t x = 0; x < tw; ++x) {
        const float* row = rows.data() + ((t * th + y) * tw + x) * values;
        for (std::int64_t c = 0; c < 3; ++c) {
          for (std::int64_t pt = 0; pt < kTemporalRatio; ++pt) {
            const std::int64_t kept = kept_index(t * kTemporalRatio + pt);
            if (kept < 0) continue;
            for (std::int64_t py = 0; py < p; ++py) {
              const float* src = row + ((c * kTemporalRatio + pt) * p + py) * p;
              float* dst = &out.at(c, kept, y * p + py, x * p);
              std::copy(src, src + p, dst);
            }
          }
        }
      }
    }
  }
  return out;
}

// Blends tile (r, col) and places its kept part in this chunk's frames.
void Decode::stitch(std::int64_t r, std::int64_t col, Frames& tile) {
  const auto out = [&](std::int64_t plane, std::int64_t y) {
    const std::int64_t c = plane / kKeptFrames, f = plane % kKeptFrames;
    return f < kChunkMainFrames ? &main_.at(c, f, y, 0)
                                : &overlap_.at(c, f - kChunkMainFrames, y, 0);
  };
  stitcher_->add(r, col, tile.v, out);
}

// ImageNet de-normalisation (and the clamp) in place, then the sink.
void Decode::emit(const FrameSink& sink, std::int64_t first, Frames& frames) const {
  const auto plane = static_cast<std::size_t>(frames.frames * frames.height * frames.width);
  for (std::size_t c = 0; c < 3; ++c) {
    float* v = frames.v.data() + c * plane;
    for (std::size_t i = 0; i < plane; ++i) {
      const float p = v[i] * kImagenetStd[c] + kImagenetMean[c];
      v[i] = options_.clamp ? std::clamp(p, 0.0f, 1.0f) : p;
    }
  }
  sink(first, frames.shape(), frames.v);
}

void Decode::run(const FrameSink& sink) {
  const std::int64_t chunks = decode_chunks_for(t_);
  const std::int64_t H = h_ * c_.patch, W = w_ * c_.patch;
  stitcher_ = std::make_unique<TileStitcher>(shape_.rows, shape_.cols, 3 * kKeptFrames);
  Frames previous;  // the last chunk's overlap frames, raw
  for (std::int64_t i = 0; i < chunks; ++i) {
    main_ = Frames(kChunkMainFrames, H, W);
    overlap_ = Frames(kChunkOverlapFrames, H, W);
    for (std::size_t r = 0; r < shape_.rows.starts.size(); ++r) {
      for (std::size_t col = 0; col < shape_.cols.starts.size(); ++col) {
        if (options_.cancel != nullptr && options_.cancel->load()) {
          throw Error(ErrorCode::kCancelled, "video decode cancelled");
        }
        const std::vector<float> z =
            latent_tile(i, shape_.rows.starts[r] / c_.patch, shape_.cols.starts[col] / c_.patch);
        const LatentTile tile{z, kChunkLatentFrames, shape_.tile_h, shape_.tile_w};
        Frames pixels = tile_pixels(decode_tile_chunk(backend_, weights_, source_, arena_, tile));
        stitch(static_cast<std::int64_t>(r), static_cast<std::int64_t>(col), pixels);
      }
    }
    if (i > 0) {  // the previous chunk's overlap fades into this one's first frames
      for (std::int64_t c = 0; c < 3; ++c) {
        for (std::int64_t f = 0; f < kChunkOverlapFrames; ++f) {
          for (std::int64_t y = 0; y < H; ++y) {
            for (std::int64_t x = 0; x < W; ++x) {
              float& b = main_.at(c, f, y, x);
              b = blend(previous.at(c, f, y, x), b, f, kChunkOverlapFrames);
            }
          }
        }
      }
    }
    emit(sink, i * kChunkMainFrames, main_);
    previous = std::move(overlap_);
  }
  emit(sink, chunks * kChunkMainFrames, previous);
}

}  // namespace

TileStitcher::TileStitcher(AxisTiles rows, AxisTiles cols, std::int64_t planes)
    : rows_(std::move(rows)),
      cols_(std::move(cols)),
      planes_(planes),
      above_(cols_.starts.size()) {}

std::uint64_t TileStitcher::edge_floats(const AxisTiles& rows, const AxisTiles& cols,
                                        std::int64_t planes) {
  std::int64_t ov_h = 0, ov_w = 0;
  for (std::int64_t o : rows.overlaps) ov_h = std::max(ov_h, o);
  for (std::int64_t o : cols.overlaps) ov_w = std::max(ov_w, o);
  const auto columns = static_cast<std::int64_t>(cols.starts.size());
  // Kept: a row of bottom edges and a right edge; while a tile is added, its own two as well.
  return static_cast<std::uint64_t>(planes *
                                    ((columns + 1) * ov_h * cols.length + 2 * rows.length * ov_w));
}

void TileStitcher::add(std::int64_t r, std::int64_t col, std::vector<float>& tile,
                       const RowOut& out) {
  const std::int64_t TH = rows_.length, TW = cols_.length;
  const auto at = [&](std::vector<float>& v, std::int64_t p, std::int64_t y, std::int64_t x,
                      std::int64_t h, std::int64_t w) -> float& {
    return v[static_cast<std::size_t>((p * h + y) * w + x)];
  };
  const bool last_row = r + 1 == static_cast<std::int64_t>(rows_.starts.size());
  const bool last_col = col + 1 == static_cast<std::int64_t>(cols_.starts.size());
  const std::int64_t ov_below = last_row ? 0 : rows_.overlaps[static_cast<std::size_t>(r)];
  const std::int64_t ov_right = last_col ? 0 : cols_.overlaps[static_cast<std::size_t>(col)];
  // The raw edges the next tiles blend with, before this one is blended.
  std::vector<float> below(static_cast<std::size_t>(planes_ * ov_below * TW));
  std::vector<float> right(static_cast<std::size_t>(planes_ * TH * ov_right));
  for (std::int64_t p = 0; p < planes_; ++p) {
    for (std::int64_t y = 0; y < TH; ++y) {
      for (std::int64_t x = 0; x < TW; ++x) {
        const float v = at(tile, p, y, x, TH, TW);
        if (y >= TH - ov_below) at(below, p, y - (TH - ov_below), x, ov_below, TW) = v;
        if (x >= TW - ov_right) at(right, p, y, x - (TW - ov_right), TH, ov_right) = v;
      }
    }
  }
  if (r > 0) {  // the overlap with the row above, whose bottom edge holds that many rows
    std::vector<float>& above = above_[static_cast<std::size_t>(col)];
    const std::int64_t edge = rows_.overlaps[static_cast<std::size_t>(r - 1)];
    const std::int64_t ov = std::min(edge, TH);
    for (std::int64_t p = 0; p < planes_; ++p) {
      for (std::int64_t y = 0; y < ov; ++y) {
        for (std::int64_t x = 0; x < TW; ++x) {
          float& b = at(tile, p, y, x, TH, TW);
          b = blend(at(above, p, edge - ov + y, x, edge, TW), b, y, ov);
        }
      }
    }
  }
  if (col > 0) {
    const std::int64_t edge = cols_.overlaps[static_cast<std::size_t>(col - 1)];
    const std::int64_t ov = std::min(edge, TW);
    for (std::int64_t p = 0; p < planes_; ++p) {
      for (std::int64_t y = 0; y < TH; ++y) {
        for (std::int64_t x = 0; x < ov; ++x) {
          float& b = at(tile, p, y, x, TH, TW);
          b = blend(at(left_, p, y, edge - ov + x, TH, edge), b, x, ov);
        }
      }
    }
  }
  if (!last_row) above_[static_cast<std::size_t>(col)] = std::move(below);
  if (!last_col) left_ = std::move(right);
  const std::int64_t y0 = rows_.starts[static_cast<std::size_t>(r)];
  const std::int64_t x0 = cols_.starts[static_cast<std::size_t>(col)];
  for (std::int64_t p = 0; p < planes_; ++p) {
    for (std::int64_t y = 0; y < TH - ov_below; ++y) {
      const float* src = &at(tile, p, y, 0, TH, TW);
      std::copy(src, src + (TW - ov_right), out(p, y0 + y) + x0);
    }
  }
}

AxisTiles split_tiles(std::int64_t length, std::int64_t tile, std::int64_t min_overlap,
                      std::int64_t step) {
  AxisTiles a;
  if (tile >= length) {
    a.starts = {0};
    a.length = length;
    return a;
  }
  std::int64_t n = (length + tile - 1) / tile;
  while (tile * n - min_overlap * (n - 1) - length < 0) ++n;
  a.overlaps.assign(static_cast<std::size_t>(n - 1), min_overlap);
  const std::int64_t slack = tile * n - min_overlap * (n - 1) - length;
  for (std::int64_t i = 0; i < slack / step; ++i) {
    a.overlaps[static_cast<std::size_t>(i % (n - 1))] += step;
  }
  a.starts = {0};
  for (std::int64_t i = 0; i + 1 < n; ++i) {
    a.starts.push_back(a.starts.back() + tile - a.overlaps[static_cast<std::size_t>(i)]);
  }
  a.length = tile;
  return a;
}

std::int64_t latent_frames_for(std::int64_t frames) {
  return (frames - kChunkOverlapFrames) / kChunkMainFrames * kChunkLatents + kChunkOverlapLatents;
}

std::int64_t decode_chunks_for(std::int64_t latent_frames) {
  return (latent_frames - kChunkOverlapLatents) / kChunkLatents;
}

DecodeShape decode_shape(const VideoVaeConfig& c, std::int64_t h, std::int64_t w,
                         const TileOptions& tiles) {
  DecodeShape s;
  s.rows = split_tiles(h * c.patch, tiles.tile_px, tiles.min_overlap_px, c.patch);
  s.cols = split_tiles(w * c.patch, tiles.tile_px, tiles.min_overlap_px, c.patch);
  s.tile_h = s.rows.length / c.patch;
  s.tile_w = s.cols.length / c.patch;
  return s;
}

std::uint64_t decode_arena_bytes(const VideoVaeWeights& weights, std::int64_t h, std::int64_t w,
                                 const TileOptions& tiles) {
  const DecodeShape s = decode_shape(weights.config(), h, w, tiles);
  return decoder_arena_bytes(weights.config(), weights.fused_qkv(),
                             kChunkLatentFrames * s.tile_h * s.tile_w);
}

std::uint64_t decode_host_bytes(const VideoVaeConfig& c, std::int64_t h, std::int64_t w,
                                const TileOptions& tiles) {
  const DecodeShape s = decode_shape(c, h, w, tiles);
  const auto floats = [](std::int64_t n) { return static_cast<std::uint64_t>(n) * sizeof(float); };
  const std::int64_t H = h * c.patch, W = w * c.patch;
  const std::int64_t TH = s.rows.length, TW = s.cols.length;
  const std::int64_t tokens = kChunkLatentFrames * s.tile_h * s.tile_w;
  return floats(3 * (kKeptFrames + kChunkOverlapFrames) * H * W) +  // this chunk's, the last's
         TileStitcher::edge_floats(s.rows, s.cols, 3 * kKeptFrames) * sizeof(float) +
         floats(3 * kKeptFrames * TH * TW) +                       // one tile
         floats(tokens * (c.patch_values() + c.latent_channels));  // its rows and latent
}

std::int64_t decode_passes(const VideoVaeConfig& c, std::int64_t latent_frames, std::int64_t h,
                           std::int64_t w, const TileOptions& tiles) {
  return decode_chunks_for(latent_frames) * decode_shape(c, h, w, tiles).tiles();
}

offload::ModelLayout decoder_layout(const VideoVaeWeights& weights, std::int64_t h, std::int64_t w,
                                    const TileOptions& tiles) {
  const VideoVaeConfig& c = weights.config();
  offload::ModelLayout layout;
  layout.name = "MiniMax-H3 video VAE decoder (" + std::to_string(c.layers) + " blocks, width " +
                std::to_string(c.dim) + ")";
  layout.groups = weights.groups();
  layout.activation_bytes = decode_arena_bytes(weights, h, w, tiles);
  return layout;
}

void decode_video(Backend& backend, const VideoVaeWeights& weights, offload::WeightSource& source,
                  memory::Arena& arena, std::span<const float> latent, std::int64_t latent_frames,
                  std::int64_t height, std::int64_t width, const DecodeOptions& options,
                  const FrameSink& sink) {
  const VideoVaeConfig& c = weights.config();
  if (latent_frames < kChunkLatents + kChunkOverlapLatents ||
      (latent_frames - kChunkOverlapLatents) % kChunkLatents != 0) {
    throw Error(ErrorCode::kBadArgument, "the video decoder takes 5n + 2 latent frames, not " +
                                             std::to_string(latent_frames));
  }
  if (height <= 0 || width <= 0 ||
      latent.size() !=
          static_cast<std::size_t>(c.latent_channels * latent_frames * height * width)) {
    throw Error(ErrorCode::kBadArgument,
                "a latent of " + std::to_string(latent.size()) + " values for " +
                    std::to_string(c.latent_channels) + " x " + std::to_string(latent_frames) +
                    " x " + std::to_string(height) + " x " + std::to_string(width));
  }
  if (options.tiles.tile_px % c.patch != 0 || options.tiles.min_overlap_px % c.patch != 0 ||
      options.tiles.min_overlap_px >= options.tiles.tile_px) {
    throw Error(ErrorCode::kBadArgument, "tiles of " + std::to_string(options.tiles.tile_px) +
                                             " px overlapping by " +
                                             std::to_string(options.tiles.min_overlap_px) +
                                             " px: both must be multiples of " +
                                             std::to_string(c.patch) + ", the overlap the smaller");
  }
  Decode d(backend, weights, source, arena, latent, latent_frames, height, width, options);
  d.run(sink);
}

void decode_video(Backend& backend, const VideoVaeWeights& weights, const offload::Plan& plan,
                  std::span<const float> latent, std::int64_t latent_frames, std::int64_t height,
                  std::int64_t width, const DecodeOptions& options, const FrameSink& sink) {
  const offload::ModelLayout layout = decoder_layout(weights, height, width, options.tiles);
  const std::unique_ptr<DeviceBuffer> activations =
      backend.allocate(static_cast<std::size_t>(layout.activation_bytes));
  memory::Arena arena(activations->data(), static_cast<std::size_t>(layout.activation_bytes),
                      backend.device());
  offload::StreamerOptions streamer_options;
  streamer_options.passes = static_cast<std::size_t>(
      decode_passes(weights.config(), latent_frames, height, width, options.tiles));
  offload::WeightStreamer streamer(backend, layout, plan, streamer_options);
  decode_video(backend, weights, streamer, arena, latent, latent_frames, height, width, options,
               sink);
}

}  // namespace ferry::models::h3::vae
