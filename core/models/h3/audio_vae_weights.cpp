#include "core/models/h3/audio_vae_weights.h"

#include <cmath>
#include <functional>
#include <numbers>
#include <numeric>
#include <string>
#include <vector>

#include "core/backend/cpu/quant_blocks.h"
#include "core/error.h"
#include "core/io/shape_text.h"
#include "core/memory/arena.h"
#include "core/tensor/convert.h"

namespace ferry::models::h3 {

const std::array<float, 32> kAudioLatentMean = {
    -0.020211687488382354f, 0.3876466479950502f,   -0.04398279799186767f, -0.28591514936373f,
    0.08179686214561671f,   -0.35782641352446604f, 0.040623809960919084f, -0.01552534501956604f,
    -0.223362481667332f,    0.1821006842509091f,   0.2941778783780663f,   -0.07901167601970885f,
    -0.056815072777201f,    -0.3699028221860095f,  -0.31616315591624855f, 0.5905951377425391f,
    -0.052139568068853864f, 0.013673160263486295f, -0.03691647864630577f, 0.09732660653298163f,
    -0.3394662328788498f,   -0.30685677538541667f, -0.24504598907458763f, -0.034698524462007344f,
    0.02868032184767538f,   -0.21217779266454084f, -0.1678263169941987f,  0.3221287889040614f,
    -0.1223055851554907f,   0.4356604928128464f,   -0.0502599202236253f,  0.3979258376211797f};
const std::array<float, 32> kAudioLatentStd = {
    1.6895524230479284f, 2.76263727217653f,   1.7945344281264435f, 1.6801681847309828f,
    1.6390226546605453f, 2.7788298348882177f, 1.7659090095747236f, 1.6199757612137327f,
    2.6336525640336896f, 1.8539356672817833f, 2.5056497896915633f, 1.811019237886178f,
    1.9579657790720237f, 1.6685498243529284f, 1.4922469314453364f, 3.298670198067373f,
    1.9491804496832168f, 1.8720003270431442f, 1.8334080103291832f, 1.6488070416529093f,
    1.6176957696319716f, 1.9131449234774398f, 1.5695245398428617f, 1.6943659940415912f,
    1.8318420762504692f, 1.5540637421583379f, 1.9344930328968526f, 1.599198216109855f,
    1.718045989838149f,  1.6307219190837705f, 1.8661226051202384f, 1.5613768203168363f};

std::int64_t AudioVaeConfig::hop() const {
  return std::accumulate(rates.begin(), rates.end(), std::int64_t{1},
                         [](std::int64_t a, int r) { return a * r; });
}

namespace {

// The modified Bessel function I0 (its power series; converges fast for the β ≈ 4.7 used here).
double bessel_i0(double x) {
  double sum = 1, term = 1;
  for (int k = 1; k < 50; ++k) {
    term *= (x / (2 * k)) * (x / (2 * k));
    sum += term;
  }
  return sum;
}

std::string dims_text(const std::vector<std::int64_t>& d) {
  return io::shape_text(d);
}

std::vector<std::byte> raw_bytes(const io::TensorSet::Entry& e) {
  std::vector<std::byte> raw(static_cast<std::size_t>(e.tensor->bytes));
  e.file->map(*e.tensor).copy_to(0, raw);
  return raw;
}

// A host view of a side tensor's bytes as a Tensor (what dequantize_bnb4 reads).
Tensor host_tensor(std::vector<std::byte>& bytes, const io::TensorInfo& info) {
  return Tensor{bytes.data(), info.dtype, Shape{static_cast<std::int64_t>(info.element_count())},
                Device::kCpu};
}

std::vector<float> dequantize_bnb4_whole(const io::TensorSet& set, const io::TensorSet::Entry& e) {
  const io::Bnb4Info& info = *e.tensor->bnb4;
  std::vector<std::byte> codes = raw_bytes(e);
  std::vector<std::byte> absmax = raw_bytes(set.at(info.absmax));
  std::vector<std::byte> code = raw_bytes(set.at(info.quant_map));
  std::vector<std::byte> nested_absmax, nested_code;
  Bnb4State state;
  state.absmax = host_tensor(absmax, *set.at(info.absmax).tensor);
  state.code = host_tensor(code, *set.at(info.quant_map).tensor);
  if (info.nested) {
    nested_absmax = raw_bytes(set.at(info.nested_absmax));
    nested_code = raw_bytes(set.at(info.nested_quant_map));
    state.nested_absmax = host_tensor(nested_absmax, *set.at(info.nested_absmax).tensor);
    state.nested_code = host_tensor(nested_code, *set.at(info.nested_quant_map).tensor);
  }
  state.nested_offset = info.nested_offset;
  state.blocksize = info.blocksize;
  state.nested_blocksize = info.nested_blocksize;
  const auto n = static_cast<std::int64_t>(e.tensor->element_count());
  std::vector<float> values(static_cast<std::size_t>(n));
  cpu::dequantize_bnb4(state, reinterpret_cast<const std::uint8_t*>(codes.data()), 0, values.data(),
                       n);
  // bitsandbytes returns its state's dtype (bf16 in DiffSynth's files).
  std::vector<std::byte> rounded(static_cast<std::size_t>(n) * dtype_size(info.dtype));
  convert_from_f32(values.data(), info.dtype, rounded.data(), values.size());
  convert_to_f32(info.dtype, rounded.data(), values.data(), values.size());
  return values;
}

}  // namespace

std::vector<float> read_tensor_f32(const io::TensorSet& set, const std::string& name) {
  const io::TensorSet::Entry& e = set.at(name);
  const DType d = e.tensor->dtype;
  if (d == DType::kBnb4 && e.tensor->bnb4 != nullptr) return dequantize_bnb4_whole(set, e);
  if (d != DType::kF32 && d != DType::kBF16 && d != DType::kF16) {
    throw Error(ErrorCode::kBadModelFile, set.path().filename().string() + ": " + name +
                                              " has dtype " + std::string(dtype_name(d)) +
                                              " (expected F32, BF16, F16 or bitsandbytes 4-bit)");
  }
  const std::vector<std::byte> raw = raw_bytes(e);
  std::vector<float> values(static_cast<std::size_t>(e.tensor->element_count()));
  convert_to_f32(d, raw.data(), values.data(), values.size());
  return values;
}

std::array<float, 12> alias_free_filter() {
  constexpr int kTaps = 12;
  constexpr double kCutoff = 0.25, kHalfWidth = 0.3;
  const double attenuation =
      2.285 * (kTaps / 2 - 1) * std::numbers::pi * (4 * kHalfWidth) + 7.95;  // 51.02 > 50
  const double beta = 0.1102 * (attenuation - 8.7);
  std::array<double, kTaps> f{};
  double sum = 0;
  for (int n = 0; n < kTaps; ++n) {
    const double r = 2.0 * n / (kTaps - 1) - 1.0;
    const double window = bessel_i0(beta * std::sqrt(1 - r * r)) / bessel_i0(beta);
    const double x = 2 * kCutoff * (n - kTaps / 2 + 0.5);
    const double sinc = std::sin(std::numbers::pi * x) / (std::numbers::pi * x);
    f[static_cast<std::size_t>(n)] = 2 * kCutoff * window * sinc;
    sum += f[static_cast<std::size_t>(n)];
  }
  std::array<float, kTaps> out{};
  for (std::size_t n = 0; n < out.size(); ++n) out[n] = static_cast<float>(f[n] / sum);
  return out;
}

// Plans every tensor (shape, offset in the one allocation) and, when loading, makes its f32
// values from the file and uploads them.
class AudioVaeWeights::Builder {
 public:
  explicit Builder(const io::TensorSet& set) : set_(set) {}

  [[noreturn]] void bad(const std::string& what) const {
    throw Error(
        ErrorCode::kBadModelFile,
        set_.path().filename().string() + " is not a MiniMax-H3 audio VAE Ferry can run: " + what);
  }

  const io::TensorSet::Entry* find(const std::string& name) const { return set_.find(name); }

  const io::TensorInfo& info(const std::string& name) const {
    const io::TensorSet::Entry* e = set_.find(name);
    if (e == nullptr) {
      throw Error(ErrorCode::kMissingTensor,
                  "the audio VAE " + set_.path().filename().string() + " has no " + name);
    }
    const DType d = e->tensor->dtype;
    if (d != DType::kF32 && d != DType::kBF16 && d != DType::kF16) {
      bad(name + " has dtype " + std::string(dtype_name(d)) + " (expected F32, BF16 or F16)");
    }
    return *e->tensor;
  }

  std::vector<std::int64_t> dims(const std::string& name) const {
    const auto& shape = info(name).shape;
    return {shape.begin(), shape.end()};
  }

  // `name`'s shape must be `want`.
  void expect(const std::string& name, const std::vector<std::int64_t>& want) const {
    const auto d = dims(name);
    if (d != want) bad(name + " is " + dims_text(d) + ", expected " + dims_text(want));
  }

  std::vector<float> read(const std::string& name) const { return read_tensor_f32(set_, name); }

  // A weight-normed convolution `prefix` (weight_g / weight_v, or a plain folded weight): its
  // [out, in, k] shape, checked against `out` and `in` where they are known (> 0).
  std::vector<std::int64_t> conv_dims(const std::string& prefix) const {
    const std::string v = prefix + ".weight_v";
    const auto d = dims(find(v) != nullptr ? v : prefix + ".weight");
    if (d.size() != 3) bad(prefix + " is " + dims_text(d) + ", not a 1-D convolution");
    return d;
  }

  // W = g·v/‖v‖ with the norm over every dimension but `axis0` (0: per output channel of a
  // convolution [out, in, k]; the same index 0 of a transposed one [in, out, k] is its input).
  std::vector<double> folded(const std::string& prefix) const {
    const std::string v_name = prefix + ".weight_v";
    if (find(v_name) == nullptr) {
      const std::vector<float> w = read(prefix + ".weight");
      return {w.begin(), w.end()};
    }
    const auto d = dims(v_name);
    expect(prefix + ".weight_g", {d[0], 1, 1});
    const std::vector<float> v = read(v_name);
    const std::vector<float> g = read(prefix + ".weight_g");
    const std::size_t row = static_cast<std::size_t>(d[1] * d[2]);
    std::vector<double> w(v.size());
    for (std::size_t r = 0; r < static_cast<std::size_t>(d[0]); ++r) {
      double norm = 0;
      for (std::size_t i = 0; i < row; ++i) norm += double(v[r * row + i]) * v[r * row + i];
      norm = std::sqrt(norm);
      for (std::size_t i = 0; i < row; ++i) w[r * row + i] = g[r] * (v[r * row + i] / norm);
    }
    return w;
  }

  // Plans `target` as F32 `shape`; `make` (called only when loading) gives its values.
  void place(Tensor& target, const Shape& shape, std::function<std::vector<float>()> make) {
    plan_.push_back({&target, shape, offset_, std::move(make)});
    offset_ += memory::Arena::footprint(static_cast<std::size_t>(shape.numel()) * sizeof(float));
  }

  void vector(Tensor& target, const std::string& name, std::int64_t n) {
    expect(name, {n});
    place(target, Shape{n}, [this, name] { return read(name); });
  }

  // A convolution [co, ci, k] (folded) as [co, ci, 1, 1, k], and its bias when it has one.
  void conv(Tensor& weight, Tensor* bias, const std::string& prefix, std::int64_t co,
            std::int64_t ci, std::int64_t k) {
    const auto d = conv_dims(prefix);
    if (d != std::vector<std::int64_t>{co, ci, k}) {
      bad(prefix + " is " + dims_text(d) + ", expected " + dims_text({co, ci, k}));
    }
    place(weight, Shape{co, ci, 1, 1, k}, [this, prefix] {
      const std::vector<double> w = folded(prefix);
      return std::vector<float>(w.begin(), w.end());
    });
    if (bias != nullptr) vector(*bias, prefix + ".bias", co);
  }

  // An anti-aliased SnakeBeta `prefix` on `channels`: α, β and its two filters as [2, 12].
  void activation(Tensor& alpha, Tensor& beta, Tensor& filters, const std::string& prefix,
                  std::int64_t channels) {
    vector(alpha, prefix + ".act.alpha", channels);
    vector(beta, prefix + ".act.beta", channels);
    const std::string up = prefix + ".upsample.filter";
    const std::string down = prefix + ".downsample.lowpass.filter";
    for (const std::string& f : {up, down}) {
      if (find(f) != nullptr) expect(f, {1, 1, 12});
    }
    place(filters, Shape{2, 12}, [this, up, down] {
      std::vector<float> both;
      for (const std::string& f : {up, down}) {
        if (find(f) != nullptr) {
          const std::vector<float> v = read(f);
          both.insert(both.end(), v.begin(), v.end());
        } else {
          const std::array<float, 12> computed = alias_free_filter();
          both.insert(both.end(), computed.begin(), computed.end());
        }
      }
      return both;
    });
  }

  struct Planned {
    Tensor* target;
    Shape shape;
    std::size_t offset;
    std::function<std::vector<float>()> make;
  };
  const std::vector<Planned>& plan() const { return plan_; }
  std::size_t bytes() const { return offset_; }

 private:
  const io::TensorSet& set_;
  std::vector<Planned> plan_;
  std::size_t offset_ = 0;
};

namespace {

// The transposed convolution's folded weight [ci, co, k] (stride `rate`, padding p = (k - r)/2)
// as the polyphase convolution of AudioVaeStage: output u·r + q sums x[u + c]·W[:, o, q + p - c·r]
// over the c whose tap lies in [0, k).
std::vector<float> polyphase(const std::vector<double>& w, std::int64_t ci, std::int64_t co, int k,
                             int rate, int taps, int pad_left) {
  const int p = (k - rate) / 2;
  std::vector<float> out(static_cast<std::size_t>(rate * co * ci * taps), 0.0f);
  for (int q = 0; q < rate; ++q) {
    for (int s = 0; s < taps; ++s) {
      const int c = s - pad_left;
      const int j = q + p - c * rate;
      if (j < 0 || j >= k) continue;
      for (std::int64_t o = 0; o < co; ++o) {
        for (std::int64_t i = 0; i < ci; ++i) {
          out[static_cast<std::size_t>((((q * co + o) * ci + i) * taps) + s)] =
              static_cast<float>(w[static_cast<std::size_t>((i * co + o) * k + j)]);
        }
      }
    }
  }
  return out;
}

int floor_div(int a, int b) {
  return a >= 0 ? a / b : -((-a + b - 1) / b);
}

}  // namespace

AudioVaeWeights AudioVaeWeights::load(Backend& backend, const io::TensorSet& set,
                                      const AudioVaeConfig& config) {
  return build(&backend, set, config);
}

AudioVaeWeights AudioVaeWeights::shapes_only(const io::TensorSet& set,
                                             const AudioVaeConfig& config) {
  return build(nullptr, set, config);
}

AudioVaeWeights AudioVaeWeights::build(Backend* backend, const io::TensorSet& set,
                                       const AudioVaeConfig& config) {
  AudioVaeWeights out;
  out.config_ = config;
  AudioVaeConfig& c = out.config_;
  if (c.latents_mean.empty())
    c.latents_mean.assign(kAudioLatentMean.begin(), kAudioLatentMean.end());
  if (c.latents_std.empty()) c.latents_std.assign(kAudioLatentStd.begin(), kAudioLatentStd.end());
  Builder b(set);

  // dec_in_proj, a 1×1 convolution [latent_dim, C, 1], with z·σ + μ folded in.
  const auto in = b.dims("dec_in_proj.weight");
  if (in.size() != 3 || in[2] != 1) b.bad("dec_in_proj.weight is " + dims_text(in));
  out.latent_dim_ = in[0];
  out.latent_channels_ = in[1];
  const std::int64_t latents = in[1], latent_dim = in[0];
  if (static_cast<std::int64_t>(c.latents_mean.size()) != latents ||
      static_cast<std::int64_t>(c.latents_std.size()) != latents) {
    b.bad("its latents have " + std::to_string(latents) + " channels, its normalisation " +
          std::to_string(c.latents_mean.size()));
  }
  b.expect("dec_in_proj.bias", {latent_dim});
  b.place(out.in_weight_, Shape{latent_dim, latents, 1, 1, 1}, [&b, &c] {
    std::vector<float> w = b.read("dec_in_proj.weight");
    const std::size_t n = c.latents_std.size();
    for (std::size_t i = 0; i < w.size(); ++i) {
      w[i] = static_cast<float>(double(w[i]) * c.latents_std[i % n]);
    }
    return w;
  });
  b.place(out.in_bias_, Shape{latent_dim}, [&b, &c] {
    const std::vector<float> w = b.read("dec_in_proj.weight");
    std::vector<float> bias = b.read("dec_in_proj.bias");
    const std::size_t n = c.latents_mean.size();
    for (std::size_t o = 0; o < bias.size(); ++o) {
      double sum = bias[o];
      for (std::size_t i = 0; i < n; ++i) sum += double(w[o * n + i]) * c.latents_mean[i];
      bias[o] = static_cast<float>(sum);
    }
    return bias;
  });

  const std::int64_t initial = b.conv_dims("decoder.conv_pre")[0];
  out.initial_channels_ = initial;
  b.conv(out.pre_weight_, &out.pre_bias_, "decoder.conv_pre", initial, latent_dim, 7);

  const auto has_conv = [&b](const std::string& prefix) {
    return b.find(prefix + ".weight_v") != nullptr || b.find(prefix + ".weight") != nullptr;
  };
  const auto ups = [](std::size_t s) { return "decoder.ups." + std::to_string(s) + ".0"; };
  std::size_t stage_count = 0;
  while (has_conv(ups(stage_count))) ++stage_count;
  if (stage_count != c.rates.size()) {
    b.bad("it has " + std::to_string(stage_count) + " upsamplers, the configuration " +
          std::to_string(c.rates.size()) + " rates");
  }
  const auto resblock = [](std::size_t m) { return "decoder.resblocks." + std::to_string(m); };
  std::size_t resblocks = 0;
  while (has_conv(resblock(resblocks) + ".convs1.0")) ++resblocks;
  if (stage_count == 0 || resblocks == 0 || resblocks % stage_count != 0) {
    b.bad(std::to_string(resblocks) + " AMP blocks for " + std::to_string(stage_count) + " stages");
  }
  const std::size_t per_stage = resblocks / stage_count;
  const std::size_t units = c.dilations.size();
  if (units == 0 || !has_conv(resblock(0) + ".convs1." + std::to_string(units - 1)) ||
      has_conv(resblock(0) + ".convs1." + std::to_string(units))) {
    b.bad("its AMP blocks do not have " + std::to_string(units) + " dilations");
  }

  out.stages_.resize(stage_count);  // sized before any tensor in it is planned
  std::int64_t channels = initial;
  for (std::size_t s = 0; s < stage_count; ++s) {
    AudioVaeStage& st = out.stages_[s];
    const std::string up = ups(s);
    const auto d = b.conv_dims(up);
    const int rate = c.rates[s];
    const int k = static_cast<int>(d[2]);
    if (d[0] != channels || rate < 1 || k < rate || (k - rate) % 2 != 0) {
      b.bad(up + " is " + dims_text(d) + " for " + std::to_string(channels) + " channels at rate " +
            std::to_string(rate));
    }
    const int p = (k - rate) / 2;
    const int c_min = -floor_div(k - 1 - p, rate);
    const int c_max = floor_div(rate - 1 + p, rate);
    st.rate = rate;
    st.in_channels = channels;
    st.channels = d[1];
    st.taps = c_max - c_min + 1;
    st.pad_left = -c_min;
    const std::int64_t co = st.channels;
    b.place(st.up_weight, Shape{rate * co, channels, 1, 1, st.taps},
            [&b, up, channels, co, k, rate, taps = st.taps, pad = st.pad_left] {
              return polyphase(b.folded(up), channels, co, k, rate, taps, pad);
            });
    b.expect(up + ".bias", {co});
    b.place(st.up_bias, Shape{rate * co}, [&b, up, rate] {
      const std::vector<float> bias = b.read(up + ".bias");
      std::vector<float> tiled;
      for (int q = 0; q < rate; ++q) tiled.insert(tiled.end(), bias.begin(), bias.end());
      return tiled;
    });

    st.blocks.assign(per_stage, std::vector<AudioVaeStage::Unit>(units));
    for (std::size_t j = 0; j < per_stage; ++j) {
      const std::string block = resblock(s * per_stage + j);
      const std::int64_t kernel = b.conv_dims(block + ".convs1.0")[2];
      if (kernel % 2 == 0) b.bad(block + " has an even kernel (" + std::to_string(kernel) + ")");
      for (std::size_t i = 0; i < units; ++i) {
        AudioVaeStage::Unit& u = st.blocks[j][i];
        const std::string n = std::to_string(i);
        u.kernel = static_cast<int>(kernel);
        u.dilation = c.dilations[i];
        b.conv(u.conv1_weight, &u.conv1_bias, block + ".convs1." + n, co, co, kernel);
        b.conv(u.conv2_weight, &u.conv2_bias, block + ".convs2." + n, co, co, kernel);
        b.activation(u.act1_alpha, u.act1_beta, u.act1_filters,
                     block + ".activations." + std::to_string(2 * i), co);
        b.activation(u.act2_alpha, u.act2_beta, u.act2_filters,
                     block + ".activations." + std::to_string(2 * i + 1), co);
      }
    }
    channels = co;
  }
  b.activation(out.post_alpha_, out.post_beta_, out.post_filters_, "decoder.activation_post",
               channels);
  b.conv(out.post_weight_, nullptr, "decoder.conv_post", 1, channels, 7);
  out.bytes_ = b.bytes();

  std::byte* base = nullptr;
  if (backend != nullptr) {
    out.buffer_ = backend->allocate(out.bytes_);
    base = static_cast<std::byte*>(out.buffer_->data());
  }
  for (const Builder::Planned& p : b.plan()) {
    *p.target = Tensor{base == nullptr ? nullptr : base + p.offset, DType::kF32, p.shape,
                       backend == nullptr ? Device::kCpu : backend->device()};
  }
  if (backend == nullptr) return out;
  for (const Builder::Planned& p : b.plan()) {
    const std::vector<float> values = p.make();
    if (static_cast<std::int64_t>(values.size()) != p.shape.numel()) {
      throw Error(ErrorCode::kInternal, "audio VAE weight planned with another size");
    }
    backend->upload(*p.target, values.data());
    backend->synchronize();  // `values` dies here
  }
  return out;
}

}  // namespace ferry::models::h3
