#include "core/models/taehv/taehv_decoder.h"

#include <algorithm>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "core/error.h"

namespace ferry::models::taehv {
namespace {

constexpr float kLatentLimit = 3.0f;  // Clamp: 3 · tanh(x / 3)
constexpr float kInfinity = std::numeric_limits<float>::infinity();

// The stages of the decoder: stage k (0, 1, 2) is three MemBlocks of widths[k] channels, then an
// Upsample and a TGrow; stage 3 is the last convolutions. Each stage's size and frame count.
struct Geometry {
  std::array<std::int64_t, 4> height{}, width{}, frames{};
  std::array<int, 3> stride{};  // each TGrow's frames per input frame
  int patch = 1;
  int trim = 0;  // decoded frames dropped at the start

  Geometry(const TaehvConfig& c, const TaehvOptions& o, std::int64_t t, std::int64_t h,
           std::int64_t w)
      : patch(c.patch) {
    height[0] = h;
    width[0] = w;
    frames[0] = t;
    int grow = 1;
    for (std::size_t k = 0; k < 3; ++k) {
      const int up = o.space_upscale[k] ? 2 : 1;
      stride[k] = o.time_upscale[k] ? 2 : 1;
      grow *= stride[k];
      height[k + 1] = height[k] * up;
      width[k + 1] = width[k] * up;
      frames[k + 1] = frames[k] * stride[k];
    }
    trim = grow - 1;
  }
  Shape at(std::int64_t channels, std::size_t k, std::int64_t t) const {
    return Shape{channels, t, height[k], width[k]};
  }
};

// A stage's working tensors. `frames` is the stage's frame count for the whole-video decode, 1
// for the stream.
struct StageBuffers {
  Tensor x;                      // the stage's activation, updated in place through its MemBlocks
  Tensor cat, t1, t2;            // a MemBlock's [x, past] and its two intermediate convolutions
  Tensor past;                   // whole video: x shifted by one frame (the stream keeps `memory`)
  std::array<Tensor, 3> memory;  // stream: each MemBlock's last input frame
  // The TGrow's 1×1 convolution runs before the Upsample: a per-pixel product commutes with
  // nearest-neighbour upsampling exactly, and at the small size it costs a quarter.
  Tensor grow;    // the TGrow's output [C·s, T, H, W]
  Tensor spread;  // whole video: grow with its frames spread in time [C, T·s, H, W]
  Tensor up;  // a TGrow frame (stream) or spread (whole video) upsampled, when the Upsample is on
};

}  // namespace

// Everything one decode (whole or streamed) works with: the buffers of every stage, allocated
// from the arena in a fixed order (so the *_arena_bytes functions measure the same code).
struct TaehvDecoder::Run {
  Backend* backend;  // null: measuring only
  const TaehvWeights& weights;
  const TaehvOptions& options;
  Geometry g;
  bool streaming;
  bool remembering;
  Tensor input;  // the clamped latent
  std::array<StageBuffers, 3> stages;
  Tensor last;                 // stage 3's activation
  Tensor out;                  // the last convolution's output [3p², T, H, W]
  Tensor pixels;               // after the pixel shuffle [3, T, pH, pW] (= out when patch is 1)
  Tensor zeros;                // the zero frame MemBlocks read before their first frame
  std::array<bool, 9> seen{};  // stream: which MemBlocks have a memory frame
  std::int64_t decoded = 0;    // stream: frames decoded, dropped ones included

  // `remember` (stream only): MemBlocks keep their last input frame; without it, every frame is
  // decoded alone, as a video's first frame is (the live preview).
  Run(Backend* b, const TaehvWeights& w, const TaehvOptions& o, std::int64_t t, std::int64_t h,
      std::int64_t wd, bool stream, bool remember, memory::Arena& arena)
      : backend(b),
        weights(w),
        options(o),
        g(w.config(), o, t, h, wd),
        streaming(stream),
        remembering(stream && remember) {
    const TaehvConfig& c = w.config();
    const auto& n = c.widths;
    const std::int64_t t0 = stream ? 1 : t;
    input = arena.allocate(DType::kF32, g.at(c.latent_channels, 0, t0));
    std::int64_t zero_elements = 0;
    std::int64_t frames = t0;
    for (std::size_t k = 0; k < 3; ++k) {
      StageBuffers& s = stages[k];
      const std::int64_t ch = n[k];
      s.x = arena.allocate(DType::kF32, g.at(ch, k, frames));
      s.cat = arena.allocate(DType::kF32, g.at(2 * ch, k, frames));
      s.t1 = arena.allocate(DType::kF32, g.at(ch, k, frames));
      s.t2 = arena.allocate(DType::kF32, g.at(ch, k, frames));
      if (remembering) {
        for (Tensor& m : s.memory) m = arena.allocate(DType::kF32, g.at(ch, k, 1));
      } else if (!stream && frames > 1) {
        s.past = arena.allocate(DType::kF32, g.at(ch, k, frames));
      }
      zero_elements = std::max(zero_elements, ch * g.height[k] * g.width[k]);
      s.grow = arena.allocate(DType::kF32, g.at(ch * g.stride[k], k, frames));
      const std::int64_t next_frames = stream ? 1 : frames * g.stride[k];
      if (!stream && g.stride[k] > 1)
        s.spread = arena.allocate(DType::kF32, g.at(ch, k, next_frames));
      if (o.space_upscale[k]) s.up = arena.allocate(DType::kF32, g.at(ch, k + 1, next_frames));
      frames = next_frames;
    }
    last = arena.allocate(DType::kF32, g.at(n[3], 3, frames));
    out = arena.allocate(DType::kF32, g.at(3 * c.patch * c.patch, 3, frames));
    pixels = c.patch == 1 ? out
                          : arena.allocate(DType::kF32, Shape{3, frames, g.height[3] * c.patch,
                                                              g.width[3] * c.patch});
    zeros = arena.allocate(DType::kF32, Shape{zero_elements});
    if (backend != nullptr) {
      const std::vector<float> host(static_cast<std::size_t>(zero_elements), 0.0f);
      backend->upload(zeros, host.data());
      backend->synchronize();  // `host` goes out of scope
    }
  }

  void conv(const Tensor& x, const Tensor& w, const Tensor* bias, const Tensor& y) {
    const int pad = static_cast<int>(w.shape[3] / 2);
    Conv3dParams p;
    p.pad_top = p.pad_bottom = p.pad_left = p.pad_right = pad;
    backend->conv3d(x, w, bias, p, y);
  }
  void relu(const Tensor& x, const Tensor& y) { backend->clamp(x, 0.0f, kInfinity, y); }

  // A zero frame shaped like one frame of `like`.
  Tensor zero_frame(const Tensor& like) const {
    Tensor z = zeros;
    z.shape = Shape{like.shape[0], 1, like.shape[2], like.shape[3]};
    return z;
  }

  // Clamp, the first convolution, ReLU: latent → stage 0's x.
  void enter(const Tensor& latent) {
    backend->tanh_clamp(latent, kLatentLimit, input);
    conv(input, weights.conv_weight(1), weights.conv_bias(1), stages[0].x);
    relu(stages[0].x, stages[0].x);
  }

  // MemBlock `index` (the b-th of stage k) on stage k's x, in place:
  // x = ReLU(conv.4(ReLU(conv.2(ReLU(conv.0([x, past]))))) + x).
  void memblock(std::size_t k, std::size_t b, int index) {
    StageBuffers& s = stages[k];
    if (remembering) {
      const std::size_t slot = k * 3 + b;
      backend->concat(s.x, seen[slot] ? s.memory[b] : zero_frame(s.x), 0, s.cat);
      backend->convert(s.x, s.memory[b]);  // this frame is the next one's past
      seen[slot] = true;
    } else {
      const std::int64_t t = s.x.shape[1];
      if (t == 1) {  // a stream that does not remember, or a one-frame video
        backend->concat(s.x, zero_frame(s.x), 0, s.cat);
      } else {
        Tensor head = s.t1;  // frames 0 … T−2, then a zero frame in front of them
        head.shape[1] = t - 1;
        backend->slice(s.x, 1, 0, head);
        backend->concat(zero_frame(s.x), head, 1, s.past);
        backend->concat(s.x, s.past, 0, s.cat);
      }
    }
    conv(s.cat, weights.memblock_weight(index, 0), &weights.memblock_bias(index, 0), s.t1);
    relu(s.t1, s.t1);
    conv(s.t1, weights.memblock_weight(index, 2), &weights.memblock_bias(index, 2), s.t2);
    relu(s.t2, s.t2);
    conv(s.t2, weights.memblock_weight(index, 4), &weights.memblock_bias(index, 4), s.t1);
    backend->add(s.t1, s.x, s.t1);
    relu(s.t1, s.x);
  }

  // Stage k's MemBlocks and its TGrow's convolution (into stage k's grow).
  void stage(std::size_t k) {
    for (std::size_t b = 0; b < 3; ++b) memblock(k, b, kMemBlocks[k * 3 + b]);
    StageBuffers& s = stages[k];
    const Tensor& w = weights.conv_weight(kTGrows[k]);
    const std::int64_t rows = s.x.shape[0] * g.stride[k];
    conv(s.x, w.rows(w.shape[0] - rows, w.shape[0]), nullptr, s.grow);
  }

  // Stage k's Upsample of `frames` (TGrow frames), then the convolution that starts stage k + 1.
  void upsample_and_next_conv(std::size_t k, const Tensor& frames) {
    StageBuffers& s = stages[k];
    const Tensor* from = &frames;
    if (options.space_upscale[k]) {
      backend->upsample_nearest_2x(frames, s.up);
      from = &s.up;
    }
    next_conv(k, *from);
  }

  // The convolution that starts stage k + 1, from a frame (or frames) of stage k's TGrow.
  void next_conv(std::size_t k, const Tensor& from) {
    const int index = k == 0 ? 8 : k == 1 ? 14 : 20;
    conv(from, weights.conv_weight(index), nullptr, k == 2 ? last : stages[k + 1].x);
  }

  // ReLU, the last convolution, the pixel shuffle, the clamp: stage 3's last → pixels.
  void finish() {
    relu(last, last);
    conv(last, weights.conv_weight(22), weights.conv_bias(22), out);
    const std::int64_t t = out.shape[1], h = out.shape[2], w = out.shape[3];
    const std::int64_t p = g.patch;
    if (p > 1) {
      // Channel c·p² + i·p + j → pixel (p·y + i, p·x + j) of channel c (PixelShuffle).
      backend->permute(out.reshaped(Shape{3, p, p, t, h, w}), {0, 3, 4, 1, 5, 2},
                       pixels.reshaped(Shape{3, t, h, p, w, p}));
    }
    if (options.clamp) backend->clamp(pixels, 0.0f, 1.0f, pixels);
  }

  // Stream: the frame in stage k's x through the rest of the decoder, each TGrow's frames one
  // after the other (taehv.py's depth-first work queue).
  void stream_from(std::size_t k, const TaehvStream::FrameSink& sink) {
    if (k == 3) {
      finish();
      if (decoded >= g.trim) sink(decoded - g.trim, pixels);
      ++decoded;
      return;
    }
    stage(k);
    const StageBuffers& s = stages[k];
    const std::int64_t ch = s.x.shape[0];
    for (std::int64_t j = 0; j < g.stride[k]; ++j) {
      upsample_and_next_conv(k, s.grow.rows(j * ch, (j + 1) * ch));
      stream_from(k + 1, sink);
    }
  }

  // Whole video: every stage over all frames.
  void whole(const Tensor& latent, const Tensor& result) {
    enter(latent);
    for (std::size_t k = 0; k < 3; ++k) {
      stage(k);
      StageBuffers& s = stages[k];
      if (g.stride[k] == 1) {
        upsample_and_next_conv(k, s.grow);
        continue;
      }
      // Frame t·s + j takes channels [j·C, (j+1)·C) of the TGrow's frame t.
      const std::int64_t ch = s.x.shape[0], t = s.x.shape[1], s_k = g.stride[k];
      const std::int64_t plane = s.grow.shape[2] * s.grow.shape[3];
      backend->permute(s.grow.reshaped(Shape{s_k, ch, t, plane}), {1, 2, 0, 3},
                       s.spread.reshaped(Shape{ch, t, s_k, plane}));
      upsample_and_next_conv(k, s.spread);
    }
    finish();
    backend->slice(pixels, 1, g.trim, result);
  }
};

TaehvDecoder::TaehvDecoder(Backend& backend, const TaehvWeights& weights,
                           const TaehvOptions& options)
    : backend_(backend), weights_(weights), options_(options) {
  const TaehvConfig& c = weights.config();
  for (std::size_t k = 0; k < 3; ++k) {
    const std::int64_t need =
        static_cast<std::int64_t>(c.widths[k]) * (options.time_upscale[k] ? 2 : 1);
    if (c.tgrow_rows[k] < need) {
      throw Error(ErrorCode::kBadModelFile, "TAEHV decoder." + std::to_string(kTGrows[k]) +
                                                " has " + std::to_string(c.tgrow_rows[k]) +
                                                " rows; growing time needs " +
                                                std::to_string(need));
    }
  }
}

int TaehvDecoder::t_upscale() const {
  int up = 1;
  for (bool on : options_.time_upscale) up *= on ? 2 : 1;
  return up;
}

TaehvOutput TaehvDecoder::output(std::int64_t latent_frames, std::int64_t h, std::int64_t w) const {
  const Geometry g(weights_.config(), options_, latent_frames, h, w);
  return {g.frames[3] - g.trim, g.height[3] * g.patch, g.width[3] * g.patch};
}

void TaehvDecoder::decode(const Tensor& latent, memory::Arena& arena, const Tensor& pixels) const {
  const char* op = "TaehvDecoder::decode";
  require(latent.shape.rank() == 4 && latent.shape[0] == weights_.config().latent_channels &&
              latent.dtype == DType::kF32,
          op, "latent ", latent,
          " must be F32 [z, T, h, w] with z = ", weights_.config().latent_channels);
  const TaehvOutput o = output(latent.shape[1], latent.shape[2], latent.shape[3]);
  require_shape(pixels, Shape{3, o.frames, o.height, o.width}, op, "pixels");
  const std::size_t mark = arena.mark();
  Run run(&backend_, weights_, options_, latent.shape[1], latent.shape[2], latent.shape[3], false,
          false, arena);
  run.whole(latent, pixels);
  arena.release_to(mark);
}

namespace {
// The peak of an arena with no memory behind it after `allocate` ran on it.
template <typename F>
std::size_t measure(F allocate) {
  // A real (never dereferenced) address, so the arena's pointer arithmetic starts from an object
  // rather than from null (as wan's shapes_only_arena).
  alignas(memory::Arena::kAlignment) static std::byte anchor[memory::Arena::kAlignment];
  memory::Arena arena(anchor, std::size_t{1} << 46, Device::kCpu);
  allocate(arena);
  return arena.peak();
}
}  // namespace

std::size_t TaehvDecoder::decode_arena_bytes(const TaehvWeights& weights,
                                             const TaehvOptions& options,
                                             std::int64_t latent_frames, std::int64_t h,
                                             std::int64_t w) {
  return measure([&](memory::Arena& arena) {
    Run run(nullptr, weights, options, latent_frames, h, w, false, false, arena);
  });
}

struct TaehvStream::State {
  TaehvDecoder::Run run;
};

TaehvStream::TaehvStream(const TaehvDecoder& decoder, std::int64_t h, std::int64_t w,
                         memory::Arena& arena, Memory memory)
    : state_(std::make_unique<State>(
          State{TaehvDecoder::Run(&decoder.backend_, decoder.weights_, decoder.options_, 1, h, w,
                                  true, memory == Memory::kKept, arena)})) {}

TaehvStream::~TaehvStream() = default;
TaehvStream::TaehvStream(TaehvStream&&) noexcept = default;
TaehvStream& TaehvStream::operator=(TaehvStream&&) noexcept = default;

void TaehvStream::push(const Tensor& latent_frame, const FrameSink& sink) {
  TaehvDecoder::Run& run = state_->run;
  require(latent_frame.dtype == DType::kF32 && latent_frame.shape == run.input.shape,
          "TaehvStream::push", "latent frame ", latent_frame, " must be F32 ", run.input.shape);
  run.enter(latent_frame);
  run.stream_from(0, sink);
}

void TaehvStream::reset() {
  state_->run.seen.fill(false);
  state_->run.decoded = 0;
}

std::size_t TaehvStream::arena_bytes(const TaehvWeights& weights, const TaehvOptions& options,
                                     std::int64_t h, std::int64_t w, Memory memory) {
  return measure([&](memory::Arena& arena) {
    TaehvDecoder::Run run(nullptr, weights, options, 1, h, w, true, memory == Memory::kKept, arena);
  });
}

}  // namespace ferry::models::taehv
