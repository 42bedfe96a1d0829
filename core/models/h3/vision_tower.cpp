#include "core/models/h3/vision_tower.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <string>

#include "core/error.h"
#include "core/tensor/convert.h"

namespace ferry::models::h3 {
namespace {

// What the forward needs to know about the images: where each starts among the patches.
struct Layout {
  std::int64_t patches = 0;
  std::vector<std::int64_t> starts;  // one per image, then the total
};

Layout check_images(const VisionConfig& c, std::span<const VisionPatches> images) {
  if (images.empty()) throw Error(ErrorCode::kBadArgument, "no image for the vision tower");
  Layout l;
  for (const VisionPatches& p : images) {
    if (p.patch_values != c.patch_values() || p.grid.t != 1 || p.grid.h <= 0 || p.grid.w <= 0 ||
        p.grid.h % c.merge != 0 || p.grid.w % c.merge != 0 ||
        static_cast<std::int64_t>(p.values.size()) != p.patches() * p.patch_values) {
      throw Error(ErrorCode::kBadArgument,
                  "an image of " + std::to_string(p.grid.h) + "x" + std::to_string(p.grid.w) +
                      " patches of " + std::to_string(p.patch_values) +
                      " values does not fit the vision tower (patches of " +
                      std::to_string(c.patch_values()) + " values, whole " +
                      std::to_string(c.merge) + "x" + std::to_string(c.merge) + " blocks)");
    }
    l.starts.push_back(l.patches);
    l.patches += p.patches();
  }
  l.starts.push_back(l.patches);
  return l;
}

// (row, column) of each patch of a gh x gw grid in merge-block order.
template <typename F>
void for_each_patch(std::int64_t gh, std::int64_t gw, std::int64_t merge, F&& f) {
  for (std::int64_t br = 0; br < gh / merge; ++br) {
    for (std::int64_t bc = 0; bc < gw / merge; ++bc) {
      for (std::int64_t ir = 0; ir < merge; ++ir) {
        for (std::int64_t ic = 0; ic < merge; ++ic) f(br * merge + ir, bc * merge + ic);
      }
    }
  }
}

// Qwen3VLVisionRotaryEmbedding: inv_freq_i = 1 / θ^(2i / (head_dim/2)) for i < head_dim/4 (f32);
// per patch the angles row · inv_freq then column · inv_freq; cos and sin in f32 ([N, head_dim/2],
// the duplicated second half left to rope_halves).
void rotary_tables(const VisionConfig& c, std::span<const VisionPatches> images,
                   std::vector<float>& cos, std::vector<float>& sin) {
  const std::int64_t quarter = c.head_dim() / 4;
  std::vector<float> inv_freq(static_cast<std::size_t>(quarter));
  for (std::int64_t i = 0; i < quarter; ++i) {
    const float exponent = static_cast<float>(2 * i) / static_cast<float>(c.head_dim() / 2);
    inv_freq[static_cast<std::size_t>(i)] = 1.0f / std::pow(c.rope_theta, exponent);
  }
  for (const VisionPatches& p : images) {
    for_each_patch(p.grid.h, p.grid.w, c.merge, [&](std::int64_t row, std::int64_t col) {
      for (const std::int64_t pos : {row, col}) {
        for (const float f : inv_freq) {
          const float angle = static_cast<float>(pos) * f;
          cos.push_back(std::cos(angle));
          sin.push_back(std::sin(angle));
        }
      }
    });
  }
}

std::vector<float> download_f32(Backend& backend, const Tensor& t) {
  std::vector<std::byte> stored(t.bytes());
  backend.download(t, stored.data());
  std::vector<float> out(static_cast<std::size_t>(t.numel()));
  convert_to_f32(t.dtype, stored.data(), out.data(), out.size());
  return out;
}

void upload_f32(Backend& backend, const std::vector<float>& values, const Tensor& t) {
  if (t.dtype == DType::kF32) {
    backend.upload(t, values.data());
  } else {
    std::vector<std::byte> stored(t.bytes());
    convert_from_f32(values.data(), t.dtype, stored.data(), values.size());
    backend.upload(t, stored.data());
  }
  backend.synchronize();  // the host bytes go when this returns
}

// h = patch_embed(pixels) + positions: the pixels rounded to the activation dtype (as the
// reference casts them to the weights' dtype), the Conv3d as a Linear over each patch's values.
void embed(Backend& backend, memory::Arena& arena, const VisionConfig& c,
           const offload::LoadedGroup& w, std::span<const VisionPatches> images, const Tensor& h) {
  const std::size_t mark = arena.mark();
  const std::int64_t n = h.shape[0];
  const Tensor pixels = arena.allocate(DType::kF32, Shape{n, c.patch_values()});
  std::vector<float> host;
  host.reserve(static_cast<std::size_t>(pixels.numel()));
  for (const VisionPatches& p : images) host.insert(host.end(), p.values.begin(), p.values.end());
  upload_f32(backend, host, pixels);
  const Tensor& weight = w.tensor(kPatchWeight);
  backend.linear(pixels, weight.reshaped(Shape{c.dim, c.patch_values()}), &w.tensor(kPatchBias), h);

  const std::vector<float> table = download_f32(backend, w.tensor(kPositionTable));
  host.clear();
  for (const VisionPatches& p : images) {
    const std::vector<float> pos =
        interpolated_positions(table, c.position_side, c.dim, p.grid.h, p.grid.w, c.merge);
    host.insert(host.end(), pos.begin(), pos.end());
  }
  const Tensor positions = arena.allocate(h.dtype, Shape{n, c.dim});
  upload_f32(backend, host, positions);  // rounded to the activation dtype, then added
  backend.add(h, positions, h);
  arena.release_to(mark);
}

// h += proj(attention(rope(q), rope(k), v)) with q, k, v = split(qkv(LN1(h))), each image
// attending to itself only.
void attention(Backend& backend, memory::Arena& arena, const VisionConfig& c,
               const offload::LoadedGroup& w, const Tensor& cos, const Tensor& sin,
               const Layout& layout, const Tensor& h) {
  const std::size_t mark = arena.mark();
  const std::int64_t n = h.shape[0];
  const DType act = h.dtype;
  const Tensor a = arena.allocate(act, Shape{n, c.dim});
  backend.layer_norm(h, &w.tensor(kNorm1Weight), &w.tensor(kNorm1Bias), c.norm_eps, a);
  const Shape heads{n, c.heads, c.head_dim()};
  const Tensor q = arena.allocate(act, heads);
  const Tensor k = arena.allocate(act, heads);
  const Tensor v = arena.allocate(act, heads);
  {
    // The fused projection is [N][q, k, v][heads][head_dim]: sliced into three, then released.
    const std::size_t fused = arena.mark();
    const Tensor qkv = arena.allocate(act, Shape{n, 3, c.dim});
    backend.linear(a, w.tensor(kQkvWeight), &w.tensor(kQkvBias), qkv.reshaped(Shape{n, 3 * c.dim}));
    const Tensor* parts[] = {&q, &k, &v};
    for (std::int64_t i = 0; i < 3; ++i) {
      backend.slice(qkv, 1, i, parts[i]->reshaped(Shape{n, 1, c.dim}));
    }
    arena.release_to(fused);
  }
  backend.rope_halves(q, cos, sin);
  backend.rope_halves(k, cos, sin);
  const Tensor o = arena.allocate(act, heads);
  const float scale = 1.0f / std::sqrt(static_cast<float>(c.head_dim()));
  for (std::size_t i = 0; i + 1 < layout.starts.size(); ++i) {
    const std::int64_t b = layout.starts[i], e = layout.starts[i + 1];
    backend.attention(q.rows(b, e), k.rows(b, e), v.rows(b, e), scale, nullptr, false,
                      o.rows(b, e));
  }
  backend.linear(o.reshaped(Shape{n, c.dim}), w.tensor(kProjWeight), &w.tensor(kProjBias), a);
  backend.gated_add(h, a, nullptr);
  arena.release_to(mark);
}

// h += fc2(gelu_tanh(fc1(LN2(h)))).
void mlp(Backend& backend, memory::Arena& arena, const VisionConfig& c,
         const offload::LoadedGroup& w, const Tensor& h) {
  const std::size_t mark = arena.mark();
  const std::int64_t n = h.shape[0];
  const Tensor a = arena.allocate(h.dtype, Shape{n, c.dim});
  backend.layer_norm(h, &w.tensor(kNorm2Weight), &w.tensor(kNorm2Bias), c.norm_eps, a);
  const Tensor f = arena.allocate(h.dtype, Shape{n, c.ffn_dim});
  backend.linear(a, w.tensor(kFc1Weight), &w.tensor(kFc1Bias), f);
  backend.gelu_tanh(f, f);
  backend.linear(f, w.tensor(kFc2Weight), &w.tensor(kFc2Bias), a);
  backend.gated_add(h, a, nullptr);
  arena.release_to(mark);
}

// A patch merger on the group's tensors from `first` on: each merge block's patches as one row
// of merge² · dim, LayerNorm (over that row for a DeepStack merger, `postshuffle`; per patch for
// the final one), fc1, exact GELU, fc2. Returns [tokens, out_dim] on the host.
std::vector<float> merger(Backend& backend, memory::Arena& arena, const VisionConfig& c,
                          const offload::LoadedGroup& w, std::size_t first, bool postshuffle,
                          const Tensor& h) {
  const std::size_t mark = arena.mark();
  const std::int64_t n = h.shape[0], tokens = n / c.merge_unit();
  const auto t = [&](MergerTensor m) -> const Tensor& { return w.tensor(first + m); };
  const Tensor x = arena.allocate(h.dtype, Shape{tokens, c.merged_dim()});
  if (postshuffle) {
    backend.layer_norm(h.reshaped(x.shape), &t(kMergerNormWeight), &t(kMergerNormBias), c.norm_eps,
                       x);
  } else {
    backend.layer_norm(h, &t(kMergerNormWeight), &t(kMergerNormBias), c.norm_eps,
                       x.reshaped(h.shape));
  }
  const Tensor f = arena.allocate(h.dtype, Shape{tokens, c.merged_dim()});
  backend.linear(x, t(kMergerFc1Weight), &t(kMergerFc1Bias), f);
  backend.gelu_erf(f, f);
  const Tensor out = arena.allocate(h.dtype, Shape{tokens, c.out_dim});
  backend.linear(f, t(kMergerFc2Weight), &t(kMergerFc2Bias), out);
  std::vector<float> host = download_f32(backend, out);
  arena.release_to(mark);
  return host;
}

}  // namespace

std::vector<float> interpolated_positions(std::span<const float> table, std::int64_t side,
                                          std::int64_t dim, std::int64_t gh, std::int64_t gw,
                                          std::int64_t merge) {
  // Per axis: src = index · (side - 1) / max(size - 1, 1) in f32, taps ⌊src⌋ and ⌊src⌋ + 1
  // (clamped), weights 1 - |src - ⌊src⌋ - offset| (torch's expression, f32).
  struct Axis {
    std::int64_t tap[2];
    float weight[2];
  };
  const auto axis = [side](std::int64_t index, std::int64_t size) {
    const float src = static_cast<float>(index) * static_cast<float>(side - 1) /
                      static_cast<float>(std::max<std::int64_t>(size - 1, 1));
    const float floor = std::floor(src);
    Axis a{};
    for (int o = 0; o < 2; ++o) {
      a.tap[o] = std::clamp<std::int64_t>(static_cast<std::int64_t>(floor) + o, 0, side - 1);
      const float distance = std::abs(src - floor - static_cast<float>(o));
      a.weight[o] = std::max(1.0f - distance, 0.0f);
    }
    return a;
  };
  std::vector<float> out;
  out.reserve(static_cast<std::size_t>(gh * gw * dim));
  std::vector<float> row(static_cast<std::size_t>(dim));
  for_each_patch(gh, gw, merge, [&](std::int64_t r, std::int64_t col) {
    const Axis ah = axis(r, gh), aw = axis(col, gw);
    std::fill(row.begin(), row.end(), 0.0f);
    for (int i = 0; i < 2; ++i) {
      for (int j = 0; j < 2; ++j) {
        const float weight = ah.weight[i] * aw.weight[j];
        const float* e = table.data() + (ah.tap[i] * side + aw.tap[j]) * dim;
        for (std::int64_t d = 0; d < dim; ++d) row[static_cast<std::size_t>(d)] += e[d] * weight;
      }
    }
    out.insert(out.end(), row.begin(), row.end());
  });
  return out;
}

VisionEncodeResult encode_images(Backend& backend, const VisionTowerWeights& weights,
                                 offload::WeightSource& weights_source, memory::Arena& arena,
                                 std::span<const VisionPatches> images, DType activations,
                                 const std::atomic<bool>* cancel) {
  const VisionConfig& c = weights.config();
  const Layout layout = check_images(c, images);
  const std::int64_t n = layout.patches;

  const Tensor h = arena.allocate(activations, Shape{n, c.dim});
  std::vector<float> cos_host, sin_host;
  rotary_tables(c, images, cos_host, sin_host);
  const Tensor cos = arena.allocate(DType::kF32, Shape{n, c.head_dim() / 2});
  const Tensor sin = arena.allocate(DType::kF32, Shape{n, c.head_dim() / 2});
  upload_f32(backend, cos_host, cos);
  upload_f32(backend, sin_host, sin);

  const auto check_cancel = [cancel] {
    if (cancel != nullptr && cancel->load()) {
      throw Error(ErrorCode::kCancelled, "keyframe encoding cancelled");
    }
  };
  VisionEncodeResult result;
  result.features.tokens = n / c.merge_unit();
  result.features.dim = c.out_dim;
  weights_source.begin_pass();
  embed(backend, arena, c, weights_source.acquire(0), images, h);
  weights_source.release(0);
  for (std::int64_t b = 0; b < c.depth; ++b) {
    check_cancel();
    const std::size_t group = weights.block_group(b);
    const offload::LoadedGroup& w = weights_source.acquire(group);
    attention(backend, arena, c, w, cos, sin, layout, h);
    mlp(backend, arena, c, w, h);
    if (weights.deepstack_after(b) >= 0) {
      result.features.deepstack.push_back(
          merger(backend, arena, c, w, kBlockTensorCount, /*postshuffle=*/true, h));
    }
    weights_source.release(group);
  }
  check_cancel();
  const std::size_t last = weights.merger_group();
  result.features.merged =
      merger(backend, arena, c, weights_source.acquire(last), 0, /*postshuffle=*/false, h);
  weights_source.release(last);
  result.activation_bytes = arena.capacity();
  result.activation_peak = arena.peak();
  return result;
}

VisionEncodeResult encode_images(Backend& backend, const VisionTowerWeights& weights,
                                 const offload::Plan& plan, std::span<const VisionPatches> images,
                                 const VisionEncodeOptions& options) {
  const Layout layout = check_images(weights.config(), images);
  const std::uint64_t arena_bytes = weights.activation_bytes(layout.patches, options.activations);
  const std::unique_ptr<DeviceBuffer> activations =
      backend.allocate(static_cast<std::size_t>(arena_bytes));
  memory::Arena arena(activations->data(), static_cast<std::size_t>(arena_bytes), backend.device());
  offload::StreamerOptions streamer_options = options.streamer;
  streamer_options.passes = 1;
  offload::WeightStreamer streamer(backend, weights.model_layout(layout.patches), plan,
                                   streamer_options);
  VisionEncodeResult result =
      encode_images(backend, weights, streamer, arena, images, options.activations, options.cancel);
  result.stream = streamer.stats();
  return result;
}

}  // namespace ferry::models::h3
