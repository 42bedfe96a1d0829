#include "core/models/wan/vae_tiling.h"

#include <algorithm>
#include <string>

#include "core/error.h"

namespace ferry::models::wan {
namespace {

void check(const VaeTiling& tiling) {
  if (tiling.tile <= 0 || tiling.overlap < 0 || tiling.overlap >= tiling.tile) {
    throw Error(ErrorCode::kBadArgument,
                "VAE tiling needs tile > 0 and 0 ≤ overlap < tile (got tile " +
                    std::to_string(tiling.tile) + ", overlap " + std::to_string(tiling.overlap) +
                    ")");
  }
}

// One tile's extent along an axis, in latent positions.
struct Span {
  std::int64_t start, size;
};

std::vector<Span> spans(std::int64_t size, const VaeTiling& tiling) {
  std::vector<Span> out;
  for (std::int64_t start : vae_tile_starts(size, tiling))
    out.push_back({start, std::min(tiling.tile, size)});
  return out;
}

// Blend weight of pixel i of a tile of `n` pixels along one axis: rises from ~0 to 1 across the
// first `ramp` pixels when a tile lies before it, falls likewise at the end when one lies after.
float ramp_weight(std::int64_t i, std::int64_t n, std::int64_t ramp, bool before, bool after) {
  float w = 1.0f;
  if (ramp > 0 && before)
    w = std::min(w, (static_cast<float>(i) + 0.5f) / static_cast<float>(ramp));
  if (ramp > 0 && after)
    w = std::min(w, (static_cast<float>(n - i) - 0.5f) / static_cast<float>(ramp));
  return w;
}

// The blend weights of one tile of th × tw positions (ramps of `ramp` positions on the sides
// that have a neighbouring tile), added to `sum` (the whole grid's, `width` wide) at (y0, x0).
void tile_weights(std::int64_t th, std::int64_t tw, std::int64_t ramp, bool top, bool bottom,
                  bool left, bool right, std::vector<float>& weights, std::vector<float>& sum,
                  std::int64_t y0, std::int64_t x0, std::int64_t width) {
  weights.resize(static_cast<std::size_t>(th * tw));
  for (std::int64_t y = 0; y < th; ++y) {
    const float wy = ramp_weight(y, th, ramp, top, bottom);
    for (std::int64_t x = 0; x < tw; ++x) {
      const float wx = ramp_weight(x, tw, ramp, left, right);
      weights[static_cast<std::size_t>(y * tw + x)] = wy * wx;
      sum[static_cast<std::size_t>((y0 + y) * width + x0 + x)] += wy * wx;
    }
  }
}

// dst[planes, H, W] at (y0, x0) += weights · src[planes, th, tw].
void accumulate(const float* src, std::int64_t planes, std::int64_t th, std::int64_t tw,
                const std::vector<float>& weights, float* dst, std::int64_t height,
                std::int64_t width, std::int64_t y0, std::int64_t x0) {
  for (std::int64_t p = 0; p < planes; ++p) {
    for (std::int64_t y = 0; y < th; ++y) {
      float* out = dst + (p * height + y0 + y) * width + x0;
      const float* in = src + (p * th + y) * tw;
      const float* wt = weights.data() + y * tw;
      for (std::int64_t x = 0; x < tw; ++x) out[x] += wt[x] * in[x];
    }
  }
}

}  // namespace

std::vector<std::int64_t> vae_tile_starts(std::int64_t size, const VaeTiling& tiling) {
  check(tiling);
  std::vector<std::int64_t> starts;
  if (size <= tiling.tile) return {0};
  const std::int64_t stride = tiling.tile - tiling.overlap;
  for (std::int64_t s = 0;; s += stride) {
    if (s + tiling.tile >= size) {
      starts.push_back(size - tiling.tile);
      break;
    }
    starts.push_back(s);
  }
  return starts;
}

void decode_tiled(WanVae& vae, Backend& backend, const Tensor& latent, memory::Arena& arena,
                  const VaeTiling& tiling, std::span<float> pixels) {
  check(tiling);
  require(latent.dtype == DType::kF32 && latent.shape.rank() == 4, "decode_tiled",
          "latent must be F32 [z, T, h, w]");
  const std::int64_t z = latent.shape[0], t = latent.shape[1], h = latent.shape[2],
                     w = latent.shape[3];
  const std::int64_t s = vae.config().spatial;
  const std::int64_t frames = vae_pixel_frames(t), height = h * s, width = w * s,
                     plane = height * width;
  if (static_cast<std::int64_t>(pixels.size()) != 3 * frames * plane) {
    throw Error(ErrorCode::kInternal, "decode_tiled: the pixel buffer does not hold [3, F, H, W]");
  }
  std::fill(pixels.begin(), pixels.end(), 0.0f);
  std::vector<float> weight_sum(static_cast<std::size_t>(plane), 0.0f);
  std::vector<float> tile_weight;
  std::vector<float> chunk;
  const std::int64_t ramp = tiling.overlap * s;
  const std::vector<Span> rows = spans(h, tiling), cols = spans(w, tiling);

  for (std::size_t ry = 0; ry < rows.size(); ++ry) {
    for (std::size_t cx = 0; cx < cols.size(); ++cx) {
      const Span row = rows[ry], col = cols[cx];
      const std::int64_t th = row.size * s, tw = col.size * s;
      tile_weights(th, tw, ramp, ry > 0, ry + 1 < rows.size(), cx > 0, cx + 1 < cols.size(),
                   tile_weight, weight_sum, row.start * s, col.start * s, width);
      const std::size_t mark = arena.mark();
      const Tensor band = arena.allocate(DType::kF32, Shape{z, t, row.size, w});
      backend.slice(latent, 2, row.start, band);
      const Tensor tile = arena.allocate(DType::kF32, Shape{z, t, row.size, col.size});
      backend.slice(band, 3, col.start, tile);
      vae.decode_chunks(tile, arena, [&](std::int64_t first, const Tensor& px) {
        chunk.resize(static_cast<std::size_t>(px.numel()));
        backend.download(px, chunk.data());
        const std::int64_t n = px.shape[1];
        for (std::int64_t c = 0; c < 3; ++c) {
          accumulate(chunk.data() + c * n * th * tw, n, th, tw, tile_weight,
                     pixels.data() + (c * frames + first) * plane, height, width, row.start * s,
                     col.start * s);
        }
      });
      arena.release_to(mark);
    }
  }
  for (std::int64_t c = 0; c < 3 * frames; ++c) {
    float* p = pixels.data() + c * plane;
    for (std::int64_t i = 0; i < plane; ++i) {
      p[i] = std::clamp(p[i] / weight_sum[static_cast<std::size_t>(i)], -1.0f, 1.0f);
    }
  }
}

void decode_tiled_chunks(WanVae& vae, const Tensor& latent, memory::Arena& arena,
                         const VaeTiling& tiling, VaeTileCaches caches, const VaeFrameSink& sink) {
  check(tiling);
  require(latent.dtype == DType::kF32 && latent.shape.rank() == 4, "decode_tiled_chunks",
          "latent must be F32 [z, T, h, w]");
  Backend& backend = vae.backend();
  const std::int64_t z = latent.shape[0], t = latent.shape[1], h = latent.shape[2],
                     w = latent.shape[3];
  const std::int64_t s = vae.config().spatial;
  const std::int64_t height = h * s, width = w * s, plane = height * width;
  const std::int64_t ramp = tiling.overlap * s;
  const std::vector<Span> rows = spans(h, tiling), cols = spans(w, tiling);
  const std::int64_t th = rows.front().size * s, tw = cols.front().size * s;

  // Every tile's blend weights, once: they do not change from chunk to chunk.
  std::vector<float> weight_sum(static_cast<std::size_t>(plane), 0.0f);
  std::vector<std::vector<float>> weights;
  std::vector<VaeChunkDecoder> decoders;
  for (std::size_t ry = 0; ry < rows.size(); ++ry) {
    for (std::size_t cx = 0; cx < cols.size(); ++cx) {
      weights.emplace_back();
      tile_weights(th, tw, ramp, ry > 0, ry + 1 < rows.size(), cx > 0, cx + 1 < cols.size(),
                   weights.back(), weight_sum, rows[ry].start * s, cols[cx].start * s, width);
      decoders.emplace_back(vae, rows[ry].size, cols[cx].size);
    }
  }
  const bool park = caches == VaeTileCaches::kHost && decoders.size() > 1;
  const std::size_t base = arena.mark();
  if (!park) {
    for (VaeChunkDecoder& d : decoders) d.take_caches(arena);
  }
  std::vector<float> out, chunk;
  for (std::int64_t k = 0; k < t; ++k) {
    const std::int64_t n = k == 0 ? 1 : 4, first = k == 0 ? 0 : 1 + 4 * (k - 1);
    out.assign(static_cast<std::size_t>(3 * n * plane), 0.0f);
    for (std::size_t i = 0; i < decoders.size(); ++i) {
      const Span row = rows[i / cols.size()], col = cols[i % cols.size()];
      const std::size_t mark = arena.mark();
      if (park) decoders[i].take_caches(arena);
      const Tensor frame = arena.allocate(DType::kF32, Shape{z, 1, h, w});
      backend.slice(latent, 1, k, frame);
      const Tensor band = arena.allocate(DType::kF32, Shape{z, 1, row.size, w});
      backend.slice(frame, 2, row.start, band);
      const Tensor tile = arena.allocate(DType::kF32, Shape{z, 1, row.size, col.size});
      backend.slice(band, 3, col.start, tile);
      const Tensor px = decoders[i].decode_next(tile, arena);
      chunk.resize(static_cast<std::size_t>(px.numel()));
      backend.download(px, chunk.data());
      for (std::int64_t c = 0; c < 3; ++c) {
        accumulate(chunk.data() + c * n * th * tw, n, th, tw, weights[i],
                   out.data() + c * n * plane, height, width, row.start * s, col.start * s);
      }
      if (park) decoders[i].park();
      arena.release_to(mark);
    }
    for (std::int64_t c = 0; c < 3 * n; ++c) {
      float* p = out.data() + c * plane;
      for (std::int64_t i = 0; i < plane; ++i) {
        p[i] = std::clamp(p[i] / weight_sum[static_cast<std::size_t>(i)], -1.0f, 1.0f);
      }
    }
    sink(first, Shape{3, n, height, width}, out);
  }
  arena.release_to(base);
}

std::size_t tiled_chunks_decode_arena_bytes(const VaeWeights& weights, const VaeTiling& tiling,
                                            std::int64_t h, std::int64_t w, VaeTileCaches caches,
                                            const VaeOptions& options) {
  check(tiling);
  const std::int64_t th = std::min(tiling.tile, h), tw = std::min(tiling.tile, w);
  const std::size_t tiles = vae_tile_starts(h, tiling).size() * vae_tile_starts(w, tiling).size();
  const std::size_t cache = WanVae::decode_cache_bytes(weights, th, tw, options);
  const auto bytes = [&](std::int64_t positions) {
    return memory::Arena::footprint(static_cast<std::size_t>(weights.config().z_dim * positions) *
                                    sizeof(float));
  };
  const std::size_t resident = caches == VaeTileCaches::kHost ? cache : tiles * cache;
  // decode_arena_bytes is the slots, one latent frame of the tile, then the chunk's peak: here the
  // tile's frame is cut from the whole frame and its band of rows.
  return resident + bytes(h * w) + bytes(th * w) +
         WanVae::decode_arena_bytes(weights, th, tw, options) - cache;
}

std::size_t tiled_chunks_decode_host_bytes(const VaeWeights& weights, const VaeTiling& tiling,
                                           std::int64_t h, std::int64_t w, VaeTileCaches caches,
                                           const VaeOptions& options) {
  check(tiling);
  const std::int64_t s = weights.config().spatial;
  const std::int64_t th = std::min(tiling.tile, h), tw = std::min(tiling.tile, w);
  const std::size_t tiles = vae_tile_starts(h, tiling).size() * vae_tile_starts(w, tiling).size();
  const auto floats = [](std::int64_t n) { return static_cast<std::size_t>(n) * sizeof(float); };
  const std::size_t parked = caches == VaeTileCaches::kHost && tiles > 1
                                 ? tiles * WanVae::decode_cache_bytes(weights, th, tw, options)
                                 : 0;
  return parked + floats(3 * 4 * h * s * w * s) + floats(3 * 4 * th * s * tw * s) +
         floats(static_cast<std::int64_t>(tiles) * th * s * tw * s) + floats(h * s * w * s);
}

std::size_t tiled_decode_host_bytes(const VaeWeights& weights, const VaeTiling& tiling,
                                    std::int64_t h, std::int64_t w) {
  check(tiling);
  const std::int64_t s = weights.config().spatial;
  const std::int64_t th = std::min(tiling.tile, h), tw = std::min(tiling.tile, w);
  const auto floats = [](std::int64_t n) { return static_cast<std::size_t>(n) * sizeof(float); };
  return floats(h * s * w * s) + floats(th * s * tw * s) + floats(3 * 4 * th * s * tw * s);
}

void encode_tiled(WanVae& vae, Backend& backend, const Tensor& video, memory::Arena& arena,
                  const VaeTiling& tiling, const Tensor& latent) {
  check(tiling);
  require(video.dtype == DType::kF32 && video.shape.rank() == 4 && latent.shape.rank() == 4,
          "encode_tiled", "video must be F32 [3, F, H, W] and latent [z, T, h, w]");
  const std::int64_t s = vae.config().spatial;
  const std::int64_t frames = video.shape[1], height = video.shape[2], width = video.shape[3];
  const std::int64_t z = latent.shape[0], t = latent.shape[1], h = latent.shape[2],
                     w = latent.shape[3];
  require(h * s == height && w * s == width && t == vae_latent_frames(frames) &&
              z == vae.config().z_dim,
          "encode_tiled", "latent ", latent.shape, " does not match video ", video.shape);
  std::vector<float> out(static_cast<std::size_t>(latent.numel()), 0.0f);
  std::vector<float> weight_sum(static_cast<std::size_t>(h * w), 0.0f);
  std::vector<float> tile_weight;
  std::vector<float> host;
  const std::vector<Span> rows = spans(h, tiling), cols = spans(w, tiling);
  for (std::size_t ry = 0; ry < rows.size(); ++ry) {
    for (std::size_t cx = 0; cx < cols.size(); ++cx) {
      const Span row = rows[ry], col = cols[cx];
      tile_weights(row.size, col.size, tiling.overlap, ry > 0, ry + 1 < rows.size(), cx > 0,
                   cx + 1 < cols.size(), tile_weight, weight_sum, row.start, col.start, w);
      const std::size_t mark = arena.mark();
      const Tensor band = arena.allocate(DType::kF32, Shape{3, frames, row.size * s, width});
      backend.slice(video, 2, row.start * s, band);
      const Tensor tile = arena.allocate(DType::kF32, Shape{3, frames, row.size * s, col.size * s});
      backend.slice(band, 3, col.start * s, tile);
      const Tensor tile_latent = arena.allocate(DType::kF32, Shape{z, t, row.size, col.size});
      vae.encode(tile, arena, tile_latent);
      host.resize(static_cast<std::size_t>(tile_latent.numel()));
      backend.download(tile_latent, host.data());
      accumulate(host.data(), z * t, row.size, col.size, tile_weight, out.data(), h, w, row.start,
                 col.start);
      arena.release_to(mark);
    }
  }
  for (std::int64_t p = 0; p < z * t; ++p) {
    for (std::int64_t i = 0; i < h * w; ++i)
      out[static_cast<std::size_t>(p * h * w + i)] /= weight_sum[static_cast<std::size_t>(i)];
  }
  backend.upload(latent, out.data());
  backend.synchronize();  // `out` is freed on return
}

std::size_t tiled_encode_arena_bytes(const VaeWeights& weights, const VaeTiling& tiling,
                                     std::int64_t frames, std::int64_t height, std::int64_t width,
                                     const VaeOptions& options) {
  check(tiling);
  const std::int64_t s = weights.config().spatial;
  const std::int64_t th = std::min(tiling.tile, height / s), tw = std::min(tiling.tile, width / s);
  const auto bytes = [](std::int64_t n) {
    return memory::Arena::footprint(static_cast<std::size_t>(n) * sizeof(float));
  };
  return bytes(3 * frames * th * s * width) + bytes(3 * frames * th * s * tw * s) +
         bytes(weights.config().z_dim * vae_latent_frames(frames) * th * tw) +
         WanVae::encode_arena_bytes(weights, frames, th * s, tw * s, options);
}

std::size_t tiled_decode_arena_bytes(const VaeWeights& weights, const VaeTiling& tiling,
                                     std::int64_t t, std::int64_t h, std::int64_t w,
                                     const VaeOptions& options) {
  check(tiling);
  const std::int64_t th = std::min(tiling.tile, h), tw = std::min(tiling.tile, w);
  const auto zt = static_cast<std::size_t>(weights.config().z_dim * t);
  return memory::Arena::footprint(zt * static_cast<std::size_t>(th * w) * sizeof(float)) +
         memory::Arena::footprint(zt * static_cast<std::size_t>(th * tw) * sizeof(float)) +
         WanVae::decode_arena_bytes(weights, th, tw, options);
}

}  // namespace ferry::models::wan
