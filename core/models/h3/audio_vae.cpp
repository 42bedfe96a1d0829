#include "core/models/h3/audio_vae.h"

#include <algorithm>
#include <array>
#include <string>
#include <vector>

#include "core/error.h"

namespace ferry::models::h3 {
namespace {

// The largest [C, T] any step of a decode of `latents` latents holds (dilated convolutions'
// zero-padded rows included).
std::int64_t largest_activation(const AudioVaeWeights& w, std::int64_t latents) {
  std::int64_t most = std::max(w.latent_dim(), w.initial_channels()) * latents;
  std::int64_t t = latents;
  for (const AudioVaeStage& s : w.stages()) {
    t *= s.rate;
    for (int d : w.config().dilations) {
      most = std::max(most, s.channels * ((t + d - 1) / d * d));
    }
  }
  return most;
}

std::int64_t ceil_div(std::int64_t a, std::int64_t b) {
  return (a + b - 1) / b;
}

// The peak of an arena with no memory behind it after `allocate` ran on it.
template <typename F>
std::size_t measure(F allocate) {
  // A real (never dereferenced) address, so the arena's pointer arithmetic starts from an object.
  alignas(memory::Arena::kAlignment) static std::byte anchor[memory::Arena::kAlignment];
  memory::Arena arena(anchor, std::size_t{1} << 46, Device::kCpu);
  allocate(arena);
  return arena.peak();
}

}  // namespace

// One decode's buffers, each as large as the largest activation, viewed with each step's shape.
struct AudioVaeDecoder::Run {
  Backend* backend;  // null: measuring only
  const AudioVaeWeights& w;
  std::int64_t capacity = 0;
  // stage input / AMP mean, upsampled input, AMP state, two temporaries, the zero-padded
  // input and output of a dilated convolution, zeros.
  Tensor acc, up, x, t1, t2, padded_in, padded_out, zeros;

  Run(Backend* b, const AudioVaeWeights& weights, std::int64_t latents, memory::Arena& arena)
      : backend(b), w(weights), capacity(largest_activation(weights, latents)) {
    for (Tensor* t : {&acc, &up, &x, &t1, &t2, &padded_in, &padded_out, &zeros}) {
      *t = arena.allocate(DType::kF32, Shape{capacity});
    }
    if (backend != nullptr) {
      const std::vector<float> host(static_cast<std::size_t>(capacity), 0.0f);
      backend->upload(zeros, host.data());
      backend->synchronize();  // `host` goes out of scope
    }
  }

  // `buffer` seen as `shape` (at most its capacity).
  Tensor view(const Tensor& buffer, const Shape& shape) const {
    if (shape.numel() > capacity) {
      throw Error(ErrorCode::kInternal, "audio VAE: an activation larger than its buffer");
    }
    return Tensor{buffer.data, DType::kF32, shape, buffer.device};
  }

  // y[Co, T] = the 'same'-padded 1-D convolution of x[Ci, T] by w [Co, Ci, 1, 1, k] at
  // `dilation` (see audio_vae.h).
  void conv1d(const Tensor& in, const Tensor& weight, const Tensor* bias, int dilation,
              const Tensor& out) {
    const std::int64_t ci = in.shape[0], t = in.shape[1], co = out.shape[0];
    const std::int64_t k = weight.shape[4];
    const int pad = static_cast<int>((k - 1) / 2);
    Conv3dParams p;
    if (dilation == 1) {
      p.pad_left = p.pad_right = pad;
      backend->conv3d(in.reshaped(Shape{ci, 1, 1, t}), weight, bias, p,
                      out.reshaped(Shape{co, 1, 1, t}));
      return;
    }
    const std::int64_t rows = ceil_div(t, dilation), folded = rows * dilation;
    p.pad_top = p.pad_bottom = pad;
    const Tensor taps = weight.reshaped(Shape{co, ci, 1, k, 1});
    if (folded == t) {
      backend->conv3d(in.reshaped(Shape{ci, 1, rows, dilation}), taps, bias, p,
                      out.reshaped(Shape{co, 1, rows, dilation}));
      return;
    }
    const Tensor xin = view(padded_in, Shape{ci, folded});
    backend->concat(in, view(zeros, Shape{ci, folded - t}), 1, xin);
    const Tensor yout = view(padded_out, Shape{co, folded});
    backend->conv3d(xin.reshaped(Shape{ci, 1, rows, dilation}), taps, bias, p,
                    yout.reshaped(Shape{co, 1, rows, dilation}));
    backend->slice(yout, 1, 0, out);
  }

  // The transposed upsampler of stage `s` on h [Ci, T] → up [Co, T·r].
  Tensor upsample(const AudioVaeStage& s, const Tensor& h) {
    const std::int64_t t = h.shape[1];
    Conv3dParams p;
    p.pad_left = s.pad_left;
    p.pad_right = s.taps - 1 - s.pad_left;
    const Tensor phases = view(t2, Shape{s.rate * s.channels, 1, 1, t});
    backend->conv3d(h.reshaped(Shape{s.in_channels, 1, 1, t}), s.up_weight, &s.up_bias, p, phases);
    const Tensor interleaved = view(up, Shape{s.channels, t, s.rate});
    backend->permute(phases.reshaped(Shape{s.rate, s.channels, t}), {1, 2, 0}, interleaved);
    return interleaved.reshaped(Shape{s.channels, t * s.rate});
  }

  // One AMP block on `state` [C, T] in place (BigVGAN AMPBlock1).
  void amp_block(const std::vector<AudioVaeStage::Unit>& units, const Tensor& state) {
    const Tensor a = view(t1, state.shape), b = view(t2, state.shape);
    for (const AudioVaeStage::Unit& u : units) {
      backend->snake_beta_alias_free(state, u.act1_alpha, u.act1_beta, u.act1_filters, a);
      conv1d(a, u.conv1_weight, &u.conv1_bias, u.dilation, b);
      backend->snake_beta_alias_free(b, u.act2_alpha, u.act2_beta, u.act2_filters, b);
      conv1d(b, u.conv2_weight, &u.conv2_bias, 1, a);
      backend->add(state, a, state);
    }
  }

  // Stage `s`: upsample h (in acc), then the mean of its AMP blocks back into acc.
  Tensor stage(const AudioVaeStage& s, const Tensor& h) {
    const Tensor u = upsample(s, h);
    const Tensor mean = view(acc, u.shape), state = view(x, u.shape);
    backend->convert(view(zeros, u.shape), mean);
    const float share = 1.0f / static_cast<float>(s.blocks.size());
    for (const auto& block : s.blocks) {
      backend->convert(u, state);
      amp_block(block, state);
      backend->add_scaled(mean, state, share);
    }
    return mean;
  }

  // One channel: latent [C, A] → samples [1, hop·A] (a row of the caller's pcm).
  void channel(const Tensor& latent, const Tensor& samples) {
    const std::int64_t a = latent.shape[1];
    const Tensor projected = view(t1, Shape{w.latent_dim(), a});
    conv1d(latent, w.in_weight(), &w.in_bias(), 1, projected);
    Tensor h = view(acc, Shape{w.initial_channels(), a});
    conv1d(projected, w.pre_weight(), &w.pre_bias(), 1, h);
    for (const AudioVaeStage& s : w.stages()) h = stage(s, h);
    const Tensor activated = view(t1, h.shape);
    backend->snake_beta_alias_free(h, w.post_alpha(), w.post_beta(), w.post_filters(), activated);
    conv1d(activated, w.post_weight(), nullptr, 1, samples);
    backend->clamp(samples, -1.0f, 1.0f, samples);
  }
};

AudioVaeDecoder::AudioVaeDecoder(Backend& backend, const AudioVaeWeights& weights)
    : backend_(backend), weights_(weights) {}

std::int64_t AudioVaeDecoder::samples(std::int64_t latents) const {
  return weights_.config().hop() * latents;
}

void AudioVaeDecoder::decode(const Tensor& latents, memory::Arena& arena, const Tensor& pcm) const {
  const std::int64_t c = weights_.latent_channels();
  if (latents.shape.rank() != 3 || latents.shape[1] != c || latents.shape[2] < 1 ||
      latents.dtype != DType::kF32 || pcm.dtype != DType::kF32 ||
      pcm.shape != Shape{latents.shape[0], samples(latents.shape[2])}) {
    throw Error(ErrorCode::kInternal, "audio VAE decode: latents " + describe(latents) +
                                          " and pcm " + describe(pcm) + " do not match");
  }
  const std::int64_t a = latents.shape[2];
  const std::size_t mark = arena.mark();
  Run run(&backend_, weights_, a, arena);
  for (std::int64_t n = 0; n < latents.shape[0]; ++n) {
    run.channel(latents.rows(n, n + 1).reshaped(Shape{c, a}),
                pcm.rows(n, n + 1).reshaped(Shape{1, samples(a)}));
  }
  backend_.synchronize();
  arena.release_to(mark);
}

std::size_t AudioVaeDecoder::decode_arena_bytes(const AudioVaeWeights& weights,
                                                std::int64_t latents) {
  return measure([&](memory::Arena& arena) { Run run(nullptr, weights, latents, arena); });
}

media::AudioTrack AudioVaeDecoder::decode_soundtrack(const Tensor& latents,
                                                     memory::Arena& arena) const {
  if (latents.shape.rank() != 3) {
    throw Error(ErrorCode::kInternal, "audio VAE decode: latents " + describe(latents));
  }
  const std::int64_t channels = latents.shape[0], n = samples(latents.shape[2]);
  const std::size_t mark = arena.mark();
  const Tensor pcm = arena.allocate(DType::kF32, Shape{channels, n});
  decode(latents, arena, pcm);
  std::vector<std::vector<float>> planar(static_cast<std::size_t>(channels),
                                         std::vector<float>(static_cast<std::size_t>(n)));
  for (std::int64_t c = 0; c < channels; ++c) {
    backend_.download(pcm.rows(c, c + 1), planar[static_cast<std::size_t>(c)].data());
  }
  arena.release_to(mark);
  return media::interleave(planar, weights_.config().sample_rate);
}

std::size_t AudioVaeDecoder::soundtrack_arena_bytes(const AudioVaeWeights& weights,
                                                    std::int64_t channels, std::int64_t latents) {
  const std::int64_t n = weights.config().hop() * latents;
  return memory::Arena::footprint(static_cast<std::size_t>(channels * n) * sizeof(float)) +
         decode_arena_bytes(weights, latents);
}

}  // namespace ferry::models::h3
