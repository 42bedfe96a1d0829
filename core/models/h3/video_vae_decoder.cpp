#include "core/models/h3/video_vae_decoder.h"

#include <cmath>
#include <numbers>
#include <string>

#include "core/error.h"

namespace ferry::models::h3::vae {
namespace {

// What a group reads: its acquired tensors by kind and each Linear's scaling.
struct Group {
  std::span<const Tensor> tensors;
  const GroupIndex& index;
  std::vector<Bnb4State> bnb4;  // what a resolved scaling points at

  Group(const offload::LoadedGroup& g, const GroupIndex& ix)
      : tensors(g.tensors()), index(ix), bnb4(ix.at.size()) {}
  const Tensor& operator[](std::size_t t) const {
    return tensors[static_cast<std::size_t>(index.at[t])];
  }
  // `as` views the weight with another shape (a 1x1x1 convolution's as [out, in]).
  void linear(Backend& backend, const Tensor& x, std::size_t weight, std::size_t bias,
              const Tensor& y, const Shape* as = nullptr) {
    const WeightScaling s = index.scaling[weight].resolve(tensors, bnb4[weight]);
    const Tensor& w = (*this)[weight];
    backend.linear(x, as != nullptr ? w.reshaped(*as) : w, &(*this)[bias], y, s);
  }
};

std::uint64_t f32_bytes(std::int64_t rows, std::int64_t cols) {
  return memory::Arena::footprint(static_cast<std::size_t>(rows * cols) * sizeof(float));
}

class Forward {
 public:
  Forward(Backend& backend, const VideoVaeWeights& weights, memory::Arena& arena,
          const LatentTile& tile)
      : backend_(backend),
        w_(weights),
        c_(weights.config()),
        arena_(arena),
        tile_(tile),
        n_(tile.tokens()),
        length_(tile.tokens() + weights.config().registers + 1) {}

  std::vector<float> run(offload::WeightSource& source);

 private:
  void embed(Group& g);
  void attention(Group& g);
  void feed_forward(Group& g);
  std::vector<float> head(Group& g);

  Backend& backend_;
  const VideoVaeWeights& w_;
  const VideoVaeConfig& c_;
  memory::Arena& arena_;
  const LatentTile& tile_;
  std::int64_t n_, length_;
  Tensor x_, cos_, sin_, ones_;
};

// x = [proj_in(post_quant_conv(z)) | registers | 0]: the 1×1×1 convolution is a Linear over the
// channels of each token.
void Forward::embed(Group& g) {
  const std::size_t mark = arena_.mark();
  const std::int64_t C = c_.latent_channels;
  std::vector<float> tokens(static_cast<std::size_t>(n_ * C));
  for (std::int64_t ch = 0; ch < C; ++ch) {
    for (std::int64_t t = 0; t < n_; ++t) {
      tokens[static_cast<std::size_t>(t * C + ch)] =
          tile_.values[static_cast<std::size_t>(ch * n_ + t)];
    }
  }
  const Tensor z = arena_.allocate(DType::kF32, Shape{n_, C});
  const Tensor zq = arena_.allocate(DType::kF32, Shape{n_, C});
  backend_.upload(z, tokens.data());
  const Shape square{C, C};
  g.linear(backend_, z, kPostQuantWeight, kPostQuantBias, zq, &square);
  g.linear(backend_, zq, kProjInWeight, kProjInBias, x_.rows(0, n_));
  backend_.convert(g[kRegisters].reshaped(Shape{c_.registers, c_.dim}),
                   x_.rows(n_, n_ + c_.registers));
  const std::vector<float> zero(static_cast<std::size_t>(c_.dim), 0.0f);
  backend_.upload(x_.rows(length_ - 1, length_), zero.data());
  backend_.synchronize();  // `tokens` and `zero` go out of scope
  arena_.release_to(mark);
}

// x += scale1 · to_out(attention(rope(norm(q)), rope(norm(k)), v)) of a = RMSNorm1(x).
void Forward::attention(Group& g) {
  const std::size_t mark = arena_.mark();
  const std::int64_t L = length_, H = c_.heads, D = c_.head_dim;
  const Tensor a = arena_.allocate(DType::kF32, Shape{L, c_.dim});
  backend_.rms_norm(x_, g[kNorm1], c_.eps, a);
  const Tensor q = arena_.allocate(DType::kF32, Shape{L, H, D});
  const Tensor k = arena_.allocate(DType::kF32, Shape{L, H, D});
  const Tensor v = arena_.allocate(DType::kF32, Shape{L, H, D});
  const auto flat = [&](const Tensor& t) { return t.reshaped(Shape{L, c_.inner()}); };
  if (w_.fused_qkv()) {
    // Rows per head [q, k, v] (the official layout).
    const Tensor fused = arena_.allocate(DType::kF32, Shape{L, H, 3, D});
    g.linear(backend_, a, kQ, kQBias, fused.reshaped(Shape{L, 3 * c_.inner()}));
    const Tensor* out[3] = {&q, &k, &v};
    for (std::int64_t i = 0; i < 3; ++i) {
      backend_.slice(fused, 2, i, out[i]->reshaped(Shape{L, H, 1, D}));
    }
  } else {
    g.linear(backend_, a, kQ, kQBias, flat(q));
    g.linear(backend_, a, kK, kKBias, flat(k));
    g.linear(backend_, a, kV, kVBias, flat(v));
  }
  const Tensor qh = q.reshaped(Shape{L * H, D}), kh = k.reshaped(Shape{L * H, D});
  backend_.rms_norm(qh, ones_, c_.eps, qh);
  backend_.rms_norm(kh, ones_, c_.eps, kh);
  backend_.rope_halves(q, cos_, sin_);
  backend_.rope_halves(k, cos_, sin_);
  const Tensor o = arena_.allocate(DType::kF32, Shape{L, H, D});
  backend_.attention(q, k, v, 1.0f / std::sqrt(static_cast<float>(D)), nullptr, false, o);
  g.linear(backend_, flat(o), kOut, kOutBias, a);
  backend_.gated_add(x_, a, &g[kScale1]);
  arena_.release_to(mark);
}

// x += scale2 · w2(silu(gate) · value) with [gate | value] = w1(RMSNorm2(x)) (halves in the
// file's order).
void Forward::feed_forward(Group& g) {
  const std::size_t mark = arena_.mark();
  const std::int64_t L = length_, F = c_.ffn;
  const Tensor a = arena_.allocate(DType::kF32, Shape{L, c_.dim});
  backend_.rms_norm(x_, g[kNorm2], c_.eps, a);
  const Tensor h = arena_.allocate(DType::kF32, Shape{L, 2 * F});
  g.linear(backend_, a, kW1, kW1Bias, h);
  const Tensor gate = arena_.allocate(DType::kF32, Shape{L, F});
  const Tensor value = arena_.allocate(DType::kF32, Shape{L, F});
  backend_.slice(h, 1, w_.gate_first() ? 0 : F, gate);
  backend_.slice(h, 1, w_.gate_first() ? F : 0, value);
  backend_.silu(gate, gate);
  backend_.mul(value, gate, value);
  g.linear(backend_, value, kW2, kW2Bias, a);
  backend_.gated_add(x_, a, &g[kScale2]);
  arena_.release_to(mark);
}

// proj_out(LayerNorm(x)) of the latent tokens (the registers and the zero token are dropped).
std::vector<float> Forward::head(Group& g) {
  const std::size_t mark = arena_.mark();
  const Tensor a = arena_.allocate(DType::kF32, Shape{n_, c_.dim});
  backend_.layer_norm(x_.rows(0, n_), &g[kNormOutWeight], &g[kNormOutBias], c_.eps, a);
  const Tensor out = arena_.allocate(DType::kF32, Shape{n_, c_.patch_values()});
  g.linear(backend_, a, kProjOutWeight, kProjOutBias, out);
  std::vector<float> host(static_cast<std::size_t>(out.numel()));
  backend_.download(out, host.data());
  arena_.release_to(mark);
  return host;
}

std::vector<float> Forward::run(offload::WeightSource& source) {
  const std::size_t mark = arena_.mark();
  x_ = arena_.allocate(DType::kF32, Shape{length_, c_.dim});
  const std::int64_t half = c_.rotary_dims() / 2;
  cos_ = arena_.allocate(DType::kF32, Shape{length_, half});
  sin_ = arena_.allocate(DType::kF32, Shape{length_, half});
  ones_ = arena_.allocate(DType::kF32, Shape{c_.head_dim});
  {
    const RopeTables rope = decoder_rope_tables(c_, tile_.frames, tile_.height, tile_.width);
    const std::vector<float> ones(static_cast<std::size_t>(c_.head_dim), 1.0f);
    backend_.upload(cos_, rope.cos.data());
    backend_.upload(sin_, rope.sin.data());
    backend_.upload(ones_, ones.data());
    backend_.synchronize();
  }
  source.begin_pass();
  {
    Group g(source.acquire(VideoVaeWeights::kEmbedGroup), w_.index(VideoVaeWeights::kEmbedGroup));
    embed(g);
    source.release(VideoVaeWeights::kEmbedGroup);
  }
  for (std::int64_t i = 0; i < c_.layers; ++i) {
    const std::size_t gi = w_.block_group(i);
    Group g(source.acquire(gi), w_.index(gi));
    attention(g);
    feed_forward(g);
    source.release(gi);
  }
  Group g(source.acquire(w_.head_group()), w_.index(w_.head_group()));
  std::vector<float> out = head(g);
  source.release(w_.head_group());
  arena_.release_to(mark);
  return out;
}

}  // namespace

RopeTables decoder_rope_tables(const VideoVaeConfig& c, std::int64_t frames, std::int64_t height,
                               std::int64_t width) {
  const std::int64_t nf = c.rope_freqs(), half = 3 * nf;
  // torch: 1 / θ ** arange(0, 1, 6/R) in f32.
  std::vector<float> inv(static_cast<std::size_t>(nf));
  const float step = 6.0f / static_cast<float>(c.rotary_dims());
  for (std::int64_t k = 0; k < nf; ++k) {
    inv[static_cast<std::size_t>(k)] = 1.0f / std::pow(c.rope_theta, static_cast<float>(k) * step);
  }
  const auto coordinate = [](std::int64_t i, std::int64_t n) {
    return 2.0f * ((static_cast<float>(i) + 0.5f) / static_cast<float>(n)) - 1.0f;
  };
  const std::int64_t tokens = frames * height * width;
  const std::int64_t rows = tokens + c.registers + 1;
  RopeTables t;
  t.cos.assign(static_cast<std::size_t>(rows * half), 1.0f);  // suffix tokens: angle 0
  t.sin.assign(t.cos.size(), 0.0f);
  const float two_pi = static_cast<float>(2.0 * std::numbers::pi);
  for (std::int64_t token = 0; token < tokens; ++token) {
    const std::int64_t axis_index[3] = {token / (height * width), token / width % height,
                                        token % width};
    const std::int64_t axis_size[3] = {frames, height, width};
    for (std::int64_t a = 0; a < 3; ++a) {
      const float pos = coordinate(axis_index[a], axis_size[a]);
      for (std::int64_t k = 0; k < nf; ++k) {
        const float angle = two_pi * pos * inv[static_cast<std::size_t>(k)];
        const auto at = static_cast<std::size_t>(token * half + a * nf + k);
        t.cos[at] = std::cos(angle);
        t.sin[at] = std::sin(angle);
      }
    }
  }
  return t;
}

std::uint64_t decoder_arena_bytes(const VideoVaeConfig& c, bool fused_qkv, std::int64_t tokens) {
  const std::int64_t L = tokens + c.registers + 1, half = c.rotary_dims() / 2;
  const std::uint64_t kept =
      f32_bytes(L, c.dim) + 2 * f32_bytes(L, half) + f32_bytes(1, c.head_dim);
  const std::uint64_t embed = 2 * f32_bytes(tokens, c.latent_channels);
  const std::uint64_t attention = f32_bytes(L, c.dim) + 4 * f32_bytes(L, c.inner()) +
                                  (fused_qkv ? f32_bytes(L, 3 * c.inner()) : 0);
  const std::uint64_t ffn = f32_bytes(L, c.dim) + f32_bytes(L, 2 * c.ffn) + 2 * f32_bytes(L, c.ffn);
  const std::uint64_t head = f32_bytes(tokens, c.dim) + f32_bytes(tokens, c.patch_values());
  return kept + std::max({embed, attention, ffn, head});
}

std::vector<float> decode_tile_chunk(Backend& backend, const VideoVaeWeights& weights,
                                     offload::WeightSource& source, memory::Arena& arena,
                                     const LatentTile& tile) {
  const VideoVaeConfig& c = weights.config();
  if (c.head_dim <= 0) {
    throw Error(ErrorCode::kBadArgument, "the video decoder's head width is not set");
  }
  if (tile.tokens() <= 0 ||
      tile.values.size() != static_cast<std::size_t>(tile.tokens() * c.latent_channels)) {
    throw Error(ErrorCode::kBadArgument, "a latent tile of " + std::to_string(tile.values.size()) +
                                             " values for " + std::to_string(tile.tokens()) +
                                             " positions of " + std::to_string(c.latent_channels) +
                                             " channels");
  }
  Forward f(backend, weights, arena, tile);
  return f.run(source);
}

}  // namespace ferry::models::h3::vae
