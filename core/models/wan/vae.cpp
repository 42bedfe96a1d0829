#include "core/models/wan/vae.h"

#include <algorithm>
#include <array>
#include <charconv>
#include <cmath>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/error.h"
#include "core/models/wan/shape_backend.h"

namespace ferry::models::wan {
namespace {

// Frames a causal k_t = 3 convolution keeps from one chunk for the next (the official CACHE_T).
constexpr std::int64_t kCacheFrames = 2;

// Backend::permute's orders, made once (a braced list would build a std::vector per call).
const std::vector<int> kChannelsLast{1, 2, 0};         // [C, T, L] → [T, L, C]
const std::vector<int> kChannelsFirst{2, 0, 1};        // [T, L, C] → [C, T, L]
const std::vector<int> kInterleaveFrames{1, 2, 0, 3};  // [2, C, T, P] → [C, T, 2, P]
const std::vector<int> kPatchify{0, 5, 3, 1, 2, 4};
const std::vector<int> kUnpatchify{0, 3, 4, 2, 5, 1};
const std::vector<int> kSwap01{1, 0, 2};

// One causal convolution's memory of the previous chunk (wan.md §C.4): up to `shape[1]` frames
// stored as [C, valid, H, W] at the front of the slot.
struct CacheSlot {
  Shape shape;  // [C, capacity frames, H, W]
  void* data = nullptr;
  Device device = Device::kCpu;
  DType dtype = DType::kF32;  // the activations'
  std::int64_t valid = 0;
  bool seen = false;  // the layer has run once (Resample's first-chunk rule)

  Tensor frames() const { return frames(valid); }
  Tensor frames(std::int64_t n) const {
    Tensor t;
    t.data = data;
    t.shape = Shape{shape[0], n, shape[2], shape[3]};
    t.dtype = dtype;
    t.device = device;
    return t;
  }
};

// One encode or decode call: the backend, the weights, the arena and the cache slots, taken in
// the order the layers run (the official feat_idx).
struct Run {
  Run(Backend& backend, const VaeWeights& weights, memory::Arena& a, std::vector<CacheSlot>& s,
      bool plan, DType activations)
      : be(backend), w(weights), arena(a), slots(s), planning(plan), act(activations) {}

  Backend& be;
  const VaeWeights& w;
  memory::Arena& arena;
  std::vector<CacheSlot>& slots;
  bool planning = false;    // a shapes-only run that creates the slots as layers ask for them
  DType act = DType::kF32;  // every activation's and cache slot's dtype (VaeOptions)
  std::size_t next_slot = 0;
  bool first_chunk = true;
  std::vector<float> zeros;  // host zeros for the AvgDown3D front padding

  Tensor alloc(const Shape& shape) { return arena.allocate(act, shape); }
  Tensor alloc(DType dtype, const Shape& shape) { return arena.allocate(dtype, shape); }
  bool has(std::string_view name) const { return w.has(name); }
  const Tensor& weight(std::string_view name) const { return w.at(name); }

  CacheSlot& slot(std::int64_t c, std::int64_t frames, std::int64_t h, std::int64_t wd) {
    const Shape shape{c, frames, h, wd};
    if (next_slot == slots.size()) {
      if (!planning)
        throw Error(ErrorCode::kInternal, "VAE: a layer asked for a cache slot beyond the plan");
      slots.push_back(CacheSlot{shape});
    }
    CacheSlot& s = slots[next_slot++];
    if (s.shape != shape) {
      throw Error(ErrorCode::kInternal, "VAE: cache slot " + std::to_string(next_slot - 1) +
                                            " is " + s.shape.str() + ", the layer needs " +
                                            shape.str());
    }
    return s;
  }

  void start_chunk(bool first) {
    next_slot = 0;
    first_chunk = first;
  }
};

struct Dims {
  std::int64_t c, t, h, w;
};
Dims dims(const Tensor& x) {
  return {x.shape[0], x.shape[1], x.shape[2], x.shape[3]};
}

// A tensor name built on the stack ("decoder.upsamples.0.upsamples.1.residual.0.gamma"). A
// chunk names every weight it reads, hundreds of names, and a std::string past 15 characters
// is a heap allocation: a chunk after the first allocates nothing.
class Name {
 public:
  Name() = default;
  explicit Name(std::string_view text) { append(text); }
  Name(const char* text) : Name(std::string_view(text)) {}  // NOLINT: literals are names

  Name operator+(std::string_view text) const {
    Name out = *this;
    out.append(text);
    return out;
  }
  Name operator+(const char* text) const { return *this + std::string_view(text); }
  Name operator+(const Name& other) const { return *this + std::string_view(other); }
  friend Name operator+(const char* text, const Name& name) { return Name(text) + name; }
  operator std::string_view() const { return {chars_.data(), size_}; }

 private:
  static constexpr std::size_t kCapacity = 120;  // the longest Wan VAE name has 53 characters

  void append(std::string_view text) {
    if (size_ + text.size() > kCapacity) {
      throw Error(ErrorCode::kInternal,
                  "VAE: a tensor name is longer than " + std::to_string(kCapacity) + " characters");
    }
    std::copy(text.begin(), text.end(), chars_.begin() + static_cast<std::ptrdiff_t>(size_));
    size_ += text.size();
  }

  std::array<char, kCapacity> chars_{};
  std::size_t size_ = 0;
};

// "<i>." without allocating.
Name idx(std::int64_t i) {
  std::array<char, 24> digits{};
  const auto [end, error] = std::to_chars(digits.data(), digits.data() + digits.size(), i);
  (void)error;  // 24 characters hold any int64
  return Name(std::string_view(digits.data(), static_cast<std::size_t>(end - digits.data()))) + ".";
}

// The main chain of a chunk (x = layer(x), ...) on the arena's stack: a layer that returns a new
// tensor leaves its dead input below it. keep(y), called when y is the only live tensor the
// chain has above its floor, moves y down to the floor when the dead space below it is at least
// y's size (so the copy cannot overlap), and the space is reused instead of piling up.
class Chain {
 public:
  explicit Chain(Run& r)
      : r_(r), floor_(r.arena.mark()), base_(static_cast<std::byte*>(r.alloc(Shape{0}).data)) {}

  Tensor keep(const Tensor& y) {
    const auto* at = static_cast<std::byte*>(y.data);
    if (at <= base_) return y;
    Tensor from = y;
    if (static_cast<std::size_t>(at - base_) < memory::Arena::footprint(y.bytes())) {
      // Less dead space than y: y goes above itself first, so the move down cannot overlap.
      r_.arena.release_to(static_cast<std::size_t>(at - base_) + floor_ +
                          memory::Arena::footprint(y.bytes()));
      from = r_.alloc(y.dtype, y.shape);
      r_.be.slice(y, 0, 0, from);
    }
    r_.arena.release_to(floor_);  // the bytes stay as they are until the copy below has read them
    const Tensor moved = r_.alloc(from.dtype, from.shape);
    r_.be.slice(from, 0, 0, moved);
    return moved;
  }

 private:
  Run& r_;
  std::size_t floor_;
  std::byte* base_;
};

// A Conv2d weight [Co, Ci, kh, kw] as the per-frame conv3d weight [Co, Ci, 1, kh, kw].
Tensor as_conv3d(const Tensor& w2d) {
  return w2d.reshaped(Shape{w2d.shape[0], w2d.shape[1], 1, w2d.shape[2], w2d.shape[3]});
}

// ---- primitives (wan.md §C.1) ----

// RMS_norm over channels: y = x / max(‖x‖, 1e-12) · √C · γ. y may be x.
void rms(Run& r, const Name& name, const Tensor& x, const Tensor& y) {
  const Dims d = dims(x);
  const Tensor& gamma = r.weight(name + ".gamma");
  r.be.channel_rms_norm(x.reshaped(Shape{d.c, d.t * d.h * d.w}), gamma.reshaped(Shape{d.c}),
                        y.reshaped(Shape{d.c, d.t * d.h * d.w}));
}

// A causal convolution over time with this chunk's cache: the slot's frames go in front of x
// and the zero padding in front shrinks by as many, so the chunks together equal one causal
// convolution over the whole sequence with 2·pt zero frames in front. The slot then keeps the
// last frames of [slot; x].
void causal_conv(Run& r, CacheSlot& slot, const Name& name, const Tensor& x, const Tensor& y,
                 int pad_hw) {
  const Dims d = dims(x);
  const std::size_t mark = r.arena.mark();
  Tensor in = x;
  if (slot.valid > 0) {
    in = r.alloc(Shape{d.c, slot.valid + d.t, d.h, d.w});
    r.be.concat(slot.frames(), x, 1, in);
  }
  Conv3dParams p;
  p.pad_front = static_cast<int>(kCacheFrames - slot.valid);
  p.pad_top = p.pad_bottom = p.pad_left = p.pad_right = pad_hw;
  r.be.conv3d(in, r.weight(name + ".weight"), &r.weight(name + ".bias"), p, y);
  slot.valid = std::min(kCacheFrames, in.shape[1]);
  r.be.slice(in, 1, in.shape[1] - slot.valid, slot.frames());
  r.arena.release_to(mark);
}

// A causal 3×3×3 convolution (pad 1) that takes the next cache slot.
void causal_conv3(Run& r, const Name& name, const Tensor& x, const Tensor& y) {
  const Dims d = dims(x);
  causal_conv(r, r.slot(d.c, kCacheFrames, d.h, d.w), name, x, y, 1);
}

// RMS_norm, SiLU, then a causal 3×3×3 convolution (pad 1) that takes the next cache slot. The
// slot keeps the raw frames (before the norm), so the cached frames and x are joined first and
// the norm and SiLU run once over the joined buffer: RMS is per position and SiLU per element,
// so the numbers are those of activating x and caching the activated frames, and no activated
// copy of x is made besides the buffer the convolution reads anyway. With nothing cached yet and
// `x_dies` (the caller no longer needs x), x itself is activated in place.
void norm_silu_causal_conv3(Run& r, const Name& norm, const Name& conv, const Tensor& x,
                            const Tensor& y, bool x_dies) {
  const Dims d = dims(x);
  CacheSlot& slot = r.slot(d.c, kCacheFrames, d.h, d.w);
  const std::size_t mark = r.arena.mark();
  const std::int64_t cached = slot.valid;
  const Tensor in = cached == 0 && x_dies ? x : r.alloc(Shape{d.c, cached + d.t, d.h, d.w});
  if (cached > 0) {
    r.be.concat(slot.frames(), x, 1, in);
  } else if (!x_dies) {
    r.be.slice(x, 0, 0, in);
  }
  slot.valid = std::min(kCacheFrames, in.shape[1]);
  r.be.slice(in, 1, in.shape[1] - slot.valid, slot.frames());
  rms(r, norm, in, in);
  r.be.silu(in, in);
  Conv3dParams p;
  p.pad_front = static_cast<int>(kCacheFrames - cached);
  p.pad_top = p.pad_bottom = p.pad_left = p.pad_right = 1;
  r.be.conv3d(in, r.weight(conv + ".weight"), &r.weight(conv + ".bias"), p, y);
  r.arena.release_to(mark);
}

// A pointwise (1×1×1) convolution: no padding, no cache.
void pointwise(Run& r, const Tensor& weight, const Tensor& bias, const Tensor& x, const Tensor& y) {
  r.be.conv3d(x, weight, &bias, Conv3dParams{}, y);
}

// ResidualBlock: x + conv(SiLU(RMS(conv(SiLU(RMS(x)))))) with a 1×1×1 shortcut when the width
// changes. Without a shortcut x is updated in place (the block's input is not needed after it);
// with one, x is left as it is and the first conv's buffer, dead after the second conv, takes
// the result.
Tensor residual(Run& r, const Name& p, const Tensor& x) {
  const Dims d = dims(x);
  const std::int64_t co = r.weight(p + "residual.2.weight").shape[0];
  const bool shortcut = r.has(p + "shortcut.weight");
  const std::size_t mark = r.arena.mark();
  const Tensor h1 = r.alloc(Shape{co, d.t, d.h, d.w});
  norm_silu_causal_conv3(r, p + "residual.0", p + "residual.2", x, h1, false);
  const std::size_t inner = r.arena.mark();
  const Tensor h2 = r.alloc(h1.shape);
  norm_silu_causal_conv3(r, p + "residual.3", p + "residual.6", h1, h2, true);
  if (shortcut) {
    pointwise(r, r.weight(p + "shortcut.weight"), r.weight(p + "shortcut.bias"), x, h1);
    r.be.add(h1, h2, h1);
    r.arena.release_to(inner);
    return h1;
  }
  r.be.add(x, h2, x);
  r.arena.release_to(mark);
  return x;
}

// AttentionBlock: per frame, single-head attention over the H·W positions (head dim C), then a
// projection and the residual add. x is updated in place.
void attention(Run& r, const Name& p, const Tensor& x) {
  const Dims d = dims(x);
  const std::int64_t len = d.h * d.w;
  const std::size_t mark = r.arena.mark();
  const Tensor n = r.alloc(x.shape);
  rms(r, p + "norm", x, n);
  const Tensor tokens = r.alloc(Shape{d.t, len, d.c});  // token rows, channels last
  r.be.permute(n.reshaped(Shape{d.c, d.t, len}), kChannelsLast, tokens);
  const Tensor qkv = r.alloc(Shape{d.t * len, 3 * d.c});
  r.be.linear(tokens.reshaped(Shape{d.t * len, d.c}),
              r.weight(p + "to_qkv.weight").reshaped(Shape{3 * d.c, d.c}),
              &r.weight(p + "to_qkv.bias"), qkv);
  const Tensor q = r.alloc(Shape{d.t * len, d.c});
  const Tensor k = r.alloc(q.shape);
  const Tensor v = r.alloc(q.shape);
  r.be.slice(qkv, 1, 0, q);
  r.be.slice(qkv, 1, d.c, k);
  r.be.slice(qkv, 1, 2 * d.c, v);
  const Tensor o = r.alloc(q.shape);
  const float scale = 1.0f / std::sqrt(static_cast<float>(d.c));
  const Shape head{len, 1, d.c};
  for (std::int64_t t = 0; t < d.t; ++t) {
    const auto frame = [&](const Tensor& a) {
      return a.rows(t * len, (t + 1) * len).reshaped(head);
    };
    r.be.attention(frame(q), frame(k), frame(v), scale, nullptr, /*causal=*/false, frame(o));
  }
  const Tensor proj = r.alloc(q.shape);
  r.be.linear(o, r.weight(p + "proj.weight").reshaped(Shape{d.c, d.c}), &r.weight(p + "proj.bias"),
              proj);
  const Tensor back = r.alloc(x.shape);
  r.be.permute(proj.reshaped(Shape{d.t, len, d.c}), kChannelsFirst,
               back.reshaped(Shape{d.c, d.t, len}));
  r.be.add(x, back, x);
  r.arena.release_to(mark);
}

// Resample, decoder side (upsample3d when the layer has a time_conv, else upsample2d): the
// temporal doubling (skipped on the first chunk), then per frame nearest 2× and a 3×3 conv.
Tensor upsample(Run& r, const Name& p, const Tensor& x) {
  const Dims d = dims(x);
  const bool temporal = r.has(p + "time_conv.weight");
  CacheSlot* slot = temporal ? &r.slot(d.c, kCacheFrames, d.h, d.w) : nullptr;
  const bool doubles = temporal && slot->seen;
  if (temporal) slot->seen = true;
  const Tensor& conv = r.weight(p + "resample.1.weight");
  const std::int64_t frames = doubles ? 2 * d.t : d.t;
  const Tensor out = r.alloc(Shape{conv.shape[0], frames, 2 * d.h, 2 * d.w});
  const std::size_t mark = r.arena.mark();
  Tensor in = x;
  if (doubles) {
    // time_conv gives 2C channels per frame: [0, C) become frame 2k, [C, 2C) frame 2k + 1.
    const Tensor tc = r.alloc(Shape{2 * d.c, d.t, d.h, d.w});
    causal_conv(r, *slot, p + "time_conv", x, tc, 0);
    in = r.alloc(Shape{d.c, frames, d.h, d.w});
    r.be.permute(tc.reshaped(Shape{2, d.c, d.t, d.h * d.w}), kInterleaveFrames,
                 in.reshaped(Shape{d.c, d.t, 2, d.h * d.w}));
  }
  const Tensor up = r.alloc(Shape{d.c, frames, 2 * d.h, 2 * d.w});
  r.be.upsample_nearest_2x(in, up);
  Conv3dParams pad;
  pad.pad_top = pad.pad_bottom = pad.pad_left = pad.pad_right = 1;
  r.be.conv3d(up, as_conv3d(conv), &r.weight(p + "resample.1.bias"), pad, out);
  r.arena.release_to(mark);
  return out;
}

// Resample, encoder side: per frame, pad right and bottom by one and a 3×3 stride-2 conv; then
// (downsample3d) a stride-2 temporal conv over [last frame of the previous chunk; frames], which
// the first chunk skips.
Tensor downsample(Run& r, const Name& p, const Tensor& x) {
  const Dims d = dims(x);
  const bool temporal = r.has(p + "time_conv.weight");
  const Tensor& conv = r.weight(p + "resample.1.weight");
  const std::int64_t co = conv.shape[0], ho = d.h / 2, wo = d.w / 2;
  CacheSlot* slot = temporal ? &r.slot(co, 1, ho, wo) : nullptr;
  const bool halves = temporal && slot->seen;
  const Tensor out = r.alloc(Shape{co, halves ? d.t / 2 : d.t, ho, wo});
  const std::size_t mark = r.arena.mark();
  Conv3dParams down;
  down.stride_h = down.stride_w = 2;
  down.pad_bottom = down.pad_right = 1;
  const Tensor spatial = halves ? r.alloc(Shape{co, d.t, ho, wo}) : out;
  r.be.conv3d(x, as_conv3d(conv), &r.weight(p + "resample.1.bias"), down, spatial);
  if (halves) {
    const Tensor in = r.alloc(Shape{co, 1 + d.t, ho, wo});
    r.be.concat(slot->frames(), spatial, 1, in);
    Conv3dParams time;
    time.stride_t = 2;
    r.be.conv3d(in, r.weight(p + "time_conv.weight"), &r.weight(p + "time_conv.bias"), time, out);
  }
  if (temporal) {
    slot->seen = true;
    slot->valid = 1;
    r.be.slice(spatial, 1, d.t - 1, slot->frames());
  }
  r.arena.release_to(mark);
  return out;
}

// ---- Wan 2.2's parameter-free shortcuts (wan.md §C.3) ----

// AvgDown3D: zero frames in front up to a multiple of ft, then the channel-grouped mean.
Tensor avg_down(Run& r, const Tensor& x, std::int64_t co, int ft, int fs) {
  const Dims d = dims(x);
  const std::int64_t pad = (ft - d.t % ft) % ft;
  const Tensor out = r.alloc(Shape{co, (d.t + pad) / ft, d.h / fs, d.w / fs});
  const std::size_t mark = r.arena.mark();
  Tensor in = x;
  if (pad > 0) {
    // The Backend has no fill op: the zero frames are uploaded from host zeros.
    const Tensor zero = r.alloc(Shape{d.c, pad, d.h, d.w});
    r.zeros.assign(static_cast<std::size_t>(zero.numel()), 0.0f);
    r.be.upload(zero, r.zeros.data());
    r.be.synchronize();  // the host zeros may be reallocated by the next padding (first chunk only)
    in = r.alloc(Shape{d.c, d.t + pad, d.h, d.w});
    r.be.concat(zero, x, 1, in);
  }
  r.be.avg_down_3d(in, ft, fs, out);
  r.arena.release_to(mark);
  return out;
}

// DupUp3D: channel copies scattered into time and space; the first chunk drops the first
// ft - 1 frames.
Tensor dup_up(Run& r, const Tensor& x, std::int64_t co, int ft, int fs) {
  const Dims d = dims(x);
  const std::int64_t drop = r.first_chunk ? ft - 1 : 0;
  const Tensor out = r.alloc(Shape{co, d.t * ft - drop, d.h * fs, d.w * fs});
  if (drop == 0) {
    r.be.dup_up_3d(x, ft, fs, out);
    return out;
  }
  const std::size_t mark = r.arena.mark();
  const Tensor full = r.alloc(Shape{co, d.t * ft, d.h * fs, d.w * fs});
  r.be.dup_up_3d(x, ft, fs, full);
  r.be.slice(full, 1, drop, out);
  r.arena.release_to(mark);
  return out;
}

// patchify(2): [3, F, 2h, 2w] → [12, F, h, w], channel c·4 + r·2 + q for row offset q and
// column offset r; unpatchify is its inverse.
Tensor patchify(Run& r, const Tensor& x) {
  const Dims d = dims(x);
  const Tensor out = r.alloc(x.dtype, Shape{d.c * 4, d.t, d.h / 2, d.w / 2});
  r.be.permute(x.reshaped(Shape{d.c, d.t, d.h / 2, 2, d.w / 2, 2}), kPatchify,
               out.reshaped(Shape{d.c, 2, 2, d.t, d.h / 2, d.w / 2}));
  return out;
}

Tensor unpatchify(Run& r, const Tensor& x) {
  const Dims d = dims(x);
  const std::int64_t c = d.c / 4;
  const Tensor out = r.alloc(x.dtype, Shape{c, d.t, d.h * 2, d.w * 2});
  r.be.permute(x.reshaped(Shape{c, 2, 2, d.t, d.h, d.w}), kUnpatchify,
               out.reshaped(Shape{c, d.t, d.h, 2, d.w, 2}));
  return out;
}

// ---- encoder and decoder, one chunk ----

Tensor middle_and_head(Run& r, const Name& side, Tensor x) {
  x = residual(r, side + "middle.0.", x);
  attention(r, side + "middle.1.", x);
  x = residual(r, side + "middle.2.", x);
  const Dims d = dims(x);
  const Tensor out = r.alloc(Shape{r.weight(side + "head.2.weight").shape[0], d.t, d.h, d.w});
  norm_silu_causal_conv3(r, side + "head.0", side + "head.2", x, out, true);
  return out;
}

// Pixels [3, n, H, W] of one chunk → normalised latent frames [z, n', h, w].
Tensor encode_chunk(Run& r, const Tensor& pixels) {
  const VaeConfig& cfg = r.w.config();
  Chain chain(r);
  Tensor x = cfg.patch == 2 ? patchify(r, pixels) : pixels;
  const Tensor& conv1 = r.weight("encoder.conv1.weight");
  Dims d = dims(x);
  const Tensor first = r.alloc(Shape{conv1.shape[0], d.t, d.h, d.w});
  causal_conv3(r, "encoder.conv1", x, first);
  x = chain.keep(first);
  if (cfg.kind == VaeKind::kWan21) {
    for (std::int64_t i = 0;; ++i) {
      const Name p = "encoder.downsamples." + idx(i);
      if (r.has(p + "resample.1.weight")) {
        x = chain.keep(downsample(r, p, x));
      } else if (r.has(p + "residual.0.gamma")) {
        x = chain.keep(residual(r, p, x));
      } else {
        break;
      }
    }
  } else {
    for (std::int64_t s = 0;
         r.has("encoder.downsamples." + idx(s) + "downsamples.0.residual.0.gamma"); ++s) {
      const Name stage = "encoder.downsamples." + idx(s) + "downsamples.";
      std::int64_t blocks = 0;
      while (r.has(stage + idx(blocks) + "residual.0.gamma")) ++blocks;
      const Name resample = stage + idx(blocks);
      const bool down = r.has(resample + "resample.1.weight");
      const bool temporal = r.has(resample + "time_conv.weight");
      const std::int64_t co =
          down ? r.weight(resample + "resample.1.weight").shape[0]
               : r.weight(stage + idx(blocks - 1) + "residual.6.weight").shape[0];
      // The shortcut (AvgDown3D of the stage input) first: the blocks may update x in place.
      const Tensor shortcut = avg_down(r, x, co, temporal ? 2 : 1, down ? 2 : 1);
      for (std::int64_t k = 0; k < blocks; ++k) x = residual(r, stage + idx(k), x);
      if (down) x = downsample(r, resample, x);
      r.be.add(x, shortcut, x);
      x = chain.keep(x);
    }
  }
  x = chain.keep(middle_and_head(r, "encoder.", x));
  // conv1 (2z → 2z, 1×1×1); mu is its first z channels; then (mu - mean) / std.
  d = dims(x);
  const std::int64_t z = cfg.z_dim;
  const Tensor moments = r.alloc(x.shape);
  pointwise(r, r.weight("conv1.weight"), r.weight("conv1.bias"), x, moments);
  const Tensor mu = r.alloc(Shape{z, d.t, d.h, d.w});
  r.be.slice(moments, 0, 0, mu);
  const Tensor latent = r.alloc(DType::kF32, mu.shape);  // the public latent's dtype
  pointwise(r, r.weight(kNormalizeWeight), r.weight(kNormalizeBias), mu, latent);
  return latent;
}

// One normalised latent frame [z, 1, h, w] → pixels [3, n, H, W] (n = 1 on the first chunk,
// else 4), not clamped.
Tensor decode_chunk(Run& r, const Tensor& latent) {
  const VaeConfig& cfg = r.w.config();
  Chain chain(r);
  const Tensor z = r.alloc(latent.shape);
  pointwise(r, r.weight(kDenormalizeWeight), r.weight(kDenormalizeBias), latent, z);
  pointwise(r, r.weight("conv2.weight"), r.weight("conv2.bias"), z, z);
  Dims d = dims(z);
  Tensor x = r.alloc(Shape{r.weight("decoder.conv1.weight").shape[0], d.t, d.h, d.w});
  causal_conv3(r, "decoder.conv1", z, x);
  x = residual(r, "decoder.middle.0.", x);
  attention(r, "decoder.middle.1.", x);
  x = residual(r, "decoder.middle.2.", x);
  if (cfg.kind == VaeKind::kWan21) {
    for (std::int64_t i = 0;; ++i) {
      const Name p = "decoder.upsamples." + idx(i);
      if (r.has(p + "resample.1.weight")) {
        x = chain.keep(upsample(r, p, x));
      } else if (r.has(p + "residual.0.gamma")) {
        x = chain.keep(residual(r, p, x));
      } else {
        break;
      }
    }
  } else {
    for (std::int64_t s = 0; r.has("decoder.upsamples." + idx(s) + "upsamples.0.residual.0.gamma");
         ++s) {
      const Name stage = "decoder.upsamples." + idx(s) + "upsamples.";
      // The stage's shortcut (DupUp3D of its input) exists only where the stage upsamples.
      std::int64_t blocks = 0;
      while (r.has(stage + idx(blocks) + "residual.0.gamma")) ++blocks;
      const Name resample = stage + idx(blocks);
      const bool up = r.has(resample + "resample.1.weight");
      const int ft = r.has(resample + "time_conv.weight") ? 2 : 1;
      const std::int64_t co = up ? r.weight(resample + "resample.1.weight").shape[0] : 0;
      // When the first block changes the width it leaves its input as it is, so the shortcut
      // can wait until the upsample is done instead of living through the whole stage.
      const bool later = up && r.has(stage + "0.shortcut.weight");
      const Tensor input = x;
      Tensor shortcut;
      if (up && !later) shortcut = dup_up(r, x, co, ft, 2);
      for (std::int64_t k = 0; k < blocks; ++k) {
        x = residual(r, stage + idx(k), x);
        if (!up) x = chain.keep(x);  // no shortcut alive above x
      }
      if (up) {
        x = upsample(r, resample, x);
        const std::size_t top = r.arena.mark();
        if (later) shortcut = dup_up(r, input, co, ft, 2);
        r.be.add(x, shortcut, x);
        if (later) r.arena.release_to(top);
        x = chain.keep(x);
      }
    }
  }
  d = dims(x);
  // The last layer writes the public pixels' dtype (F32) whatever the activations'.
  const Tensor out =
      r.alloc(DType::kF32, Shape{r.weight("decoder.head.2.weight").shape[0], d.t, d.h, d.w});
  norm_silu_causal_conv3(r, "decoder.head.0", "decoder.head.2", x, out, true);
  if (cfg.patch == 1) return chain.keep(out);
  return chain.keep(unpatchify(r, chain.keep(out)));
}

// ---- whole calls ----

void take_slots(memory::Arena& arena, std::vector<CacheSlot>& slots, DType dtype) {
  for (CacheSlot& s : slots) {
    const Tensor t = arena.allocate(dtype, s.shape);
    s.data = t.data;
    s.dtype = dtype;
    s.device = t.device;
    s.valid = 0;
    s.seen = false;
  }
}

Tensor shape_only(const Shape& shape) {
  Tensor t;
  t.shape = shape;
  return t;
}

std::int64_t chunk_first_frame(std::int64_t i) {
  return i == 0 ? 0 : 1 + 4 * (i - 1);
}

void check_latent(const VaeWeights& w, const Tensor& latent) {
  const VaeConfig& cfg = w.config();
  if (!cfg.has_decoder)
    throw Error(ErrorCode::kBadModelFile,
                std::string(vae_kind_name(cfg.kind)) + ": the file has no decoder");
  require(latent.dtype == DType::kF32 && latent.shape.rank() == 4 && latent.shape[0] == cfg.z_dim &&
              latent.shape[1] >= 1,
          "WanVae::decode", "latent must be F32 [z_dim, T, h, w], got ", latent);
}

// The decoder over all latent frames: slots first, then one chunk at a time.
void decode_sequence(Run& r, const Tensor& latent, const WanVae::ChunkSink& sink) {
  take_slots(r.arena, r.slots, r.act);
  const Dims d = dims(latent);
  for (std::int64_t t = 0; t < d.t; ++t) {
    const std::size_t mark = r.arena.mark();
    r.start_chunk(t == 0);
    const Tensor frame = r.alloc(latent.dtype, Shape{d.c, 1, d.h, d.w});
    r.be.slice(latent, 1, t, frame);
    const Tensor pixels = decode_chunk(r, frame);
    if (sink) sink(chunk_first_frame(t), pixels);
    r.arena.release_to(mark);
  }
}

// The encoder over all frames (chunks [0], [1..4], [5..8], ...) into latent [z, T, h, w]: each
// chunk's frames go to a [T, z, h·w] staging tensor (frames contiguous), permuted once at the end.
void encode_sequence(Run& r, const Tensor& video, const Tensor& latent) {
  const Dims v = dims(video);
  const Dims l = dims(latent);
  const Tensor staging = r.alloc(latent.dtype, Shape{l.t, l.c, l.h * l.w});
  take_slots(r.arena, r.slots, r.act);
  for (std::int64_t i = 0; i < l.t; ++i) {
    const std::size_t mark = r.arena.mark();
    r.start_chunk(i == 0);
    const std::int64_t first = chunk_first_frame(i);
    Tensor chunk = r.alloc(video.dtype, Shape{v.c, i == 0 ? 1 : 4, v.h, v.w});
    r.be.slice(video, 1, first, chunk);
    if (chunk.dtype != r.act) {
      // The pixels are rounded to the activations' dtype once: the first convolution's cache
      // slot holds them in it.
      const Tensor converted = r.alloc(chunk.shape);
      r.be.convert(chunk, converted);
      chunk = converted;
    }
    const Tensor mu = encode_chunk(r, chunk);
    r.be.permute(mu.reshaped(Shape{l.c, 1, l.h * l.w}), kSwap01, staging.rows(i, i + 1));
    r.arena.release_to(mark);
  }
  r.be.permute(staging, kSwap01, latent.reshaped(Shape{l.c, l.t, l.h * l.w}));
}

// The cache slots a call needs, learnt from a shapes-only run of its first chunk.
std::vector<CacheSlot> plan_slots(const VaeWeights& w, bool decoder, const Shape& first_input) {
  ShapeBackend shapes;
  memory::Arena arena = shapes_only_arena();
  std::vector<CacheSlot> slots;
  Run r{shapes, w, arena, slots, true, DType::kF32};
  r.start_chunk(true);
  if (decoder) {
    decode_chunk(r, shape_only(first_input));
  } else {
    encode_chunk(r, shape_only(first_input));
  }
  return slots;
}

}  // namespace

std::int64_t vae_latent_frames(std::int64_t pixel_frames) {
  if (pixel_frames < 1 || (pixel_frames - 1) % 4 != 0) {
    throw Error(
        ErrorCode::kBadArgument,
        "a Wan video has 4k + 1 frames (1, 5, ..., 81, ...), not " + std::to_string(pixel_frames));
  }
  return (pixel_frames - 1) / 4 + 1;
}

std::int64_t vae_pixel_frames(std::int64_t latent_frames) {
  return 4 * (latent_frames - 1) + 1;
}

WanVae::WanVae(Backend& backend, const VaeWeights& weights, const VaeOptions& options)
    : backend_(backend), weights_(weights), options_(options) {
  require(options.activations == DType::kF32 || options.activations == DType::kBF16, "WanVae",
          "activations must be F32 or BF16, got ", options.activations);
}

void WanVae::encode(const Tensor& video, memory::Arena& arena, const Tensor& latent) {
  const VaeConfig& cfg = weights_.config();
  if (!cfg.has_encoder)
    throw Error(ErrorCode::kBadModelFile,
                std::string(vae_kind_name(cfg.kind)) + ": the file has no encoder");
  require(video.dtype == DType::kF32 && video.shape.rank() == 4 && video.shape[0] == 3,
          "WanVae::encode", "video must be F32 [3, F, H, W], got ", video);
  const Dims v = dims(video);
  const std::int64_t s = cfg.spatial;
  if (v.h % s != 0 || v.w % s != 0) {
    throw Error(ErrorCode::kBadArgument, "the video's size (" + std::to_string(v.w) + "×" +
                                             std::to_string(v.h) + ") must be a multiple of " +
                                             std::to_string(s));
  }
  require_shape(latent, Shape{cfg.z_dim, vae_latent_frames(v.t), v.h / s, v.w / s},
                "WanVae::encode", "latent");
  std::vector<CacheSlot> slots = plan_slots(weights_, false, Shape{3, 1, v.h, v.w});
  const std::size_t mark = arena.mark();
  Run r{backend_, weights_, arena, slots, false, options_.activations};
  encode_sequence(r, video, latent);
  arena.release_to(mark);
}

void WanVae::decode_chunks(const Tensor& latent, memory::Arena& arena, const ChunkSink& sink) {
  check_latent(weights_, latent);
  const Dims d = dims(latent);
  std::vector<CacheSlot> slots = plan_slots(weights_, true, Shape{d.c, 1, d.h, d.w});
  const std::size_t mark = arena.mark();
  Run r{backend_, weights_, arena, slots, false, options_.activations};
  decode_sequence(r, latent, sink);
  arena.release_to(mark);
}

void WanVae::decode(const Tensor& latent, memory::Arena& arena, std::span<float> pixels) {
  check_latent(weights_, latent);
  const VaeConfig& cfg = weights_.config();
  const Dims d = dims(latent);
  const std::int64_t frames = vae_pixel_frames(d.t), height = d.h * cfg.spatial,
                     width = d.w * cfg.spatial;
  const std::int64_t plane = height * width;
  if (static_cast<std::int64_t>(pixels.size()) != 3 * frames * plane) {
    throw Error(ErrorCode::kInternal,
                "WanVae::decode: the pixel buffer does not hold [3, F, H, W]");
  }
  std::vector<float> chunk;
  decode_chunks(latent, arena, [&](std::int64_t first, const Tensor& px) {
    chunk.resize(static_cast<std::size_t>(px.numel()));
    backend_.download(px, chunk.data());
    const std::int64_t n = px.shape[1];
    for (std::int64_t c = 0; c < 3; ++c) {
      for (std::int64_t f = 0; f < n; ++f) {
        const float* src = chunk.data() + (c * n + f) * plane;
        float* dst = pixels.data() + (c * frames + first + f) * plane;
        for (std::int64_t i = 0; i < plane; ++i) dst[i] = std::clamp(src[i], -1.0f, 1.0f);
      }
    }
  });
}

std::size_t WanVae::decode_arena_bytes(const VaeWeights& weights, std::int64_t h, std::int64_t w,
                                       const VaeOptions& options) {
  const std::int64_t z = weights.config().z_dim;
  std::vector<CacheSlot> slots = plan_slots(weights, true, Shape{z, 1, h, w});
  ShapeBackend shapes;
  memory::Arena arena = shapes_only_arena();
  Run r{shapes, weights, arena, slots, false, options.activations};
  // From chunk 2 on every cache slot holds two frames and every chunk is the same size: three
  // latent frames reach the steady state.
  decode_sequence(r, shape_only(Shape{z, 3, h, w}), nullptr);
  return arena.peak();
}

std::size_t WanVae::decode_cache_bytes(const VaeWeights& weights, std::int64_t h, std::int64_t w,
                                       const VaeOptions& options) {
  const std::vector<CacheSlot> slots =
      plan_slots(weights, true, Shape{weights.config().z_dim, 1, h, w});
  std::size_t bytes = 0;
  for (const CacheSlot& s : slots)
    bytes += memory::Arena::footprint(static_cast<std::size_t>(s.shape.numel()) *
                                      dtype_size(options.activations));
  return bytes;
}

std::size_t WanVae::encode_arena_bytes(const VaeWeights& weights, std::int64_t frames,
                                       std::int64_t height, std::int64_t width,
                                       const VaeOptions& options) {
  const VaeConfig& cfg = weights.config();
  std::vector<CacheSlot> slots = plan_slots(weights, false, Shape{3, 1, height, width});
  ShapeBackend shapes;
  memory::Arena arena = shapes_only_arena();
  Run r{shapes, weights, arena, slots, false, options.activations};
  const std::int64_t s = cfg.spatial;
  encode_sequence(r, shape_only(Shape{3, frames, height, width}),
                  shape_only(Shape{cfg.z_dim, vae_latent_frames(frames), height / s, width / s}));
  return arena.peak();
}

// ---- VaeChunkDecoder ----

struct VaeChunkDecoder::State {
  Backend& backend;
  const VaeWeights& weights;
  DType act;  // the WanVae's activations
  std::vector<CacheSlot> slots;
  std::vector<std::byte> parked;  // every slot's [C, capacity, H, W], in slot order
  bool has_parked = false;
  std::int64_t next_frame = 0;
};

VaeChunkDecoder::VaeChunkDecoder(WanVae& vae, std::int64_t h, std::int64_t w)
    : state_(std::make_unique<State>(vae.backend(), vae.weights(), vae.options().activations,
                                     std::vector<CacheSlot>{}, std::vector<std::byte>{}, false,
                                     std::int64_t{0})) {
  check_latent(vae.weights(), shape_only(Shape{vae.config().z_dim, 1, h, w}));
  state_->slots = plan_slots(vae.weights(), true, Shape{vae.config().z_dim, 1, h, w});
  for (CacheSlot& s : state_->slots) {
    s.dtype = state_->act;
    s.valid = 0;
    s.seen = false;
  }
}

VaeChunkDecoder::~VaeChunkDecoder() = default;
VaeChunkDecoder::VaeChunkDecoder(VaeChunkDecoder&&) noexcept = default;
VaeChunkDecoder& VaeChunkDecoder::operator=(VaeChunkDecoder&&) noexcept = default;

std::size_t VaeChunkDecoder::cache_bytes() const {
  std::size_t bytes = 0;
  for (const CacheSlot& s : state_->slots)
    bytes += memory::Arena::footprint(static_cast<std::size_t>(s.shape.numel()) *
                                      dtype_size(state_->act));
  return bytes;
}

void VaeChunkDecoder::take_caches(memory::Arena& arena) {
  State& st = *state_;
  std::size_t offset = 0;
  for (CacheSlot& s : st.slots) {
    const Tensor t = arena.allocate(st.act, s.shape);
    s.data = t.data;
    s.device = t.device;
    if (st.has_parked) st.backend.upload(t, st.parked.data() + offset);
    offset += t.bytes();
  }
  // The parked copy is reused by the next park(): the uploads must have read it by then.
  if (st.has_parked) st.backend.synchronize();
}

Tensor VaeChunkDecoder::decode_next(const Tensor& frame, memory::Arena& arena) {
  State& st = *state_;
  require(frame.shape.rank() == 4 && frame.shape[1] == 1 && !st.slots.empty(),
          "VaeChunkDecoder::decode_next", "frame must be [z, 1, h, w], got ", frame);
  Run r{st.backend, st.weights, arena, st.slots, false, st.act};
  r.start_chunk(st.next_frame == 0);
  ++st.next_frame;
  return decode_chunk(r, frame);
}

void VaeChunkDecoder::park() {
  State& st = *state_;
  std::size_t total = 0;
  for (const CacheSlot& s : st.slots) total += s.frames(s.shape[1]).bytes();
  st.parked.resize(total);
  std::size_t offset = 0;
  for (const CacheSlot& s : st.slots) {
    const Tensor t = s.frames(s.shape[1]);
    st.backend.download(t, st.parked.data() + offset);
    offset += t.bytes();
  }
  st.has_parked = true;
}

}  // namespace ferry::models::wan
