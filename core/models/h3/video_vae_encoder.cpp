#include "core/models/h3/video_vae_encoder.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <utility>

#include "core/error.h"
#include "core/io/shape_text.h"
#include "core/tensor/convert.h"

namespace ferry::models::h3::vae {
namespace {

constexpr float kImagenetMean[3] = {0.485f, 0.456f, 0.406f};
constexpr float kImagenetStd[3] = {0.229f, 0.224f, 0.225f};

// Tensor names of the two layouts (minimax_h3.md §G.1).
struct EncoderNames {
  bool diffusers = true;
  std::string level(std::int64_t l) const {
    return (diffusers ? "encoder.down_blocks." : "encoder.down.") + std::to_string(l) + ".";
  }
  std::string resnet(std::int64_t l, std::int64_t m) const {
    return level(l) + (diffusers ? "resnets." : "block.") + std::to_string(m) + ".";
  }
  std::string shortcut(std::int64_t l, std::int64_t m) const {
    return resnet(l, m) + (diffusers ? "conv_shortcut" : "nin_shortcut");
  }
  std::string downsample(std::int64_t l) const {
    return level(l) + (diffusers ? "downsamplers.0.conv" : "downsample.conv");
  }
};

// Bytes an activation holds while it lives, counted in the encoder's tally (the same in a real
// run and a shapes-only one: the estimate is the count of the same allocations).
class Lease {
 public:
  Lease() = default;
  Lease(std::uint64_t* live, std::uint64_t* peak, std::uint64_t bytes)
      : live_(live), bytes_(bytes) {
    *live_ += bytes_;
    *peak = std::max(*peak, *live_);
  }
  Lease(Lease&& o) noexcept : live_(std::exchange(o.live_, nullptr)), bytes_(o.bytes_) {}
  Lease& operator=(Lease&& o) noexcept {
    if (this != &o) {
      release();
      live_ = std::exchange(o.live_, nullptr);
      bytes_ = o.bytes_;
    }
    return *this;
  }
  ~Lease() { release(); }

 private:
  void release() {
    if (live_ != nullptr) *live_ -= bytes_;
    live_ = nullptr;
  }
  std::uint64_t* live_ = nullptr;
  std::uint64_t bytes_ = 0;
};

// A backend allocation holding one activation (no memory in a shapes-only run).
struct Act {
  std::unique_ptr<DeviceBuffer> memory;
  Tensor t;
  Lease lease;
};

}  // namespace

struct VideoVaeEncoder::State {
  Backend* backend = nullptr;
  bool shapes_only = false;  // no memory, no compute: an estimate's dry run
  std::uint64_t weight_bytes = 0;
  mutable std::uint64_t live = 0, peak = 0;  // activation bytes
  EncoderNames names;
  std::int64_t groups = 32, levels = 0, resnets = 0, latent_channels = 0;
  float eps = 1e-6f;
  std::vector<bool> downsample;  // per level
  std::vector<std::unique_ptr<DeviceBuffer>> memory;
  std::unordered_map<std::string, Tensor> tensors;  // convolutions (last tap), biases, GN affine

  const Tensor& at(const std::string& name) const {
    const auto it = tensors.find(name);
    if (it == tensors.end()) {
      throw Error(ErrorCode::kMissingTensor, "the H3 video encoder has no tensor '" + name + "'");
    }
    return it->second;
  }
  bool has(const std::string& name) const { return tensors.count(name) != 0; }

  // Runs `op` on the backend, unless this is a shapes-only run.
  template <typename Op>
  void run(Op&& op) const {
    if (!shapes_only) op(*backend);
  }

  Act make(DType dtype, const Shape& shape) const {
    const auto bytes = static_cast<std::uint64_t>(shape.numel()) * dtype_size(dtype);
    Act a;
    if (!shapes_only) a.memory = backend->allocate(static_cast<std::size_t>(bytes));
    const Device device = shapes_only ? Device::kCpu : backend->device();
    a.t = Tensor{a.memory ? a.memory->data() : nullptr, dtype, shape, device};
    a.lease = Lease(&live, &peak, bytes);
    return a;
  }
  Act make(const Shape& shape) const { return make(DType::kF32, shape); }

  // A weight tensor (`host` null in a shapes-only encoder).
  void upload(const std::string& name, DType dtype, const Shape& shape, const void* host) {
    const auto bytes = static_cast<std::uint64_t>(shape.numel()) * dtype_size(dtype);
    weight_bytes += bytes;
    if (shapes_only) {
      tensors.emplace(name, Tensor{nullptr, dtype, shape, Device::kCpu});
      return;
    }
    std::unique_ptr<DeviceBuffer> m = backend->allocate(static_cast<std::size_t>(bytes));
    const Tensor t{m->data(), dtype, shape, backend->device()};
    backend->upload(t, host);
    backend->synchronize();
    tensors.emplace(name, t);
    memory.push_back(std::move(m));
  }

  // One tensor of the file as f32 values.
  static std::vector<float> f32_values(const io::TensorSet::Entry& e) {
    std::vector<std::byte> raw(e.tensor->bytes);
    e.file->map(*e.tensor).copy_to(0, raw);
    std::vector<float> v(e.tensor->element_count());
    convert_to_f32(e.tensor->dtype, raw.data(), v.data(), v.size());
    return v;
  }

  // A causal convolution's weight [Co, Ci, kt, k, k] as its last temporal tap [Co, Ci, 1, k, k]
  // in the stored dtype, and its bias as f32.
  void load_conv(const io::TensorSet& set, const std::string& p) {
    const auto* w = set.find(p + ".weight");
    const auto* b = set.find(p + ".bias");
    if (w == nullptr || b == nullptr) {
      throw Error(ErrorCode::kMissingTensor,
                  set.path().string() + ": the H3 video encoder has no tensor '" + p + ".weight'");
    }
    const auto& s = w->tensor->shape;
    const DType d = w->tensor->dtype;
    if (s.size() != 5 || !(d == DType::kF32 || d == DType::kF16 || d == DType::kBF16)) {
      throw Error(ErrorCode::kBadModelFile, set.path().string() + ": '" + w->tensor->name +
                                                "' is not a 3-D convolution weight (" +
                                                io::shape_text(s) + ")");
    }
    const auto i64 = [](std::uint64_t v) { return static_cast<std::int64_t>(v); };
    const Shape last_tap{i64(s[0]), i64(s[1]), 1, i64(s[3]), i64(s[4])};
    if (shapes_only) {
      upload(p + ".weight", d, last_tap, nullptr);
      upload(p + ".bias", DType::kF32, Shape{i64(s[0])}, nullptr);
      return;
    }
    std::vector<std::byte> raw(w->tensor->bytes);
    w->file->map(*w->tensor).copy_to(0, raw);
    const std::size_t size = dtype_size(d);
    const std::size_t tap = s[3] * s[4] * size;  // one temporal tap of one (co, ci)
    const std::size_t pairs = s[0] * s[1];
    std::vector<std::byte> last(pairs * tap);
    for (std::size_t i = 0; i < pairs; ++i) {
      std::memcpy(last.data() + i * tap, raw.data() + (i * s[2] + s[2] - 1) * tap, tap);
    }
    upload(p + ".weight", d, last_tap, last.data());
    const std::vector<float> bias = f32_values(*b);
    upload(p + ".bias", DType::kF32, Shape{i64(s[0])}, bias.data());
  }

  // A GroupNorm's affine as Backend::modulate takes it: scale (weight − 1) and shift (bias).
  void load_norm(const io::TensorSet& set, const std::string& p) {
    const auto* w = set.find(p + ".weight");
    const auto* b = set.find(p + ".bias");
    if (w == nullptr || b == nullptr) {
      throw Error(ErrorCode::kMissingTensor,
                  set.path().string() + ": the H3 video encoder has no tensor '" + p + ".weight'");
    }
    const auto n = static_cast<std::int64_t>(w->tensor->element_count());
    if (shapes_only) {
      upload(p + ".scale", DType::kF32, Shape{n}, nullptr);
      upload(p + ".shift", DType::kF32, Shape{n}, nullptr);
      return;
    }
    std::vector<float> scale = f32_values(*w);
    for (float& v : scale) v -= 1.0f;
    const std::vector<float> shift = f32_values(*b);
    upload(p + ".scale", DType::kF32, Shape{n}, scale.data());
    upload(p + ".shift", DType::kF32, Shape{n}, shift.data());
  }

  // ---- the forward's pieces (x is [C, 1, H, W] f32) ----

  // SiLU(GroupNorm(x)): the statistic per group of channels and the frame, then the affine per
  // channel (on the transposed [H·W, C] view), then SiLU.
  Act norm_silu(const Tensor& x, const std::string& p) const {
    const std::int64_t C = x.shape[0], HW = x.shape[2] * x.shape[3];
    Act n = make(x.shape);
    const Shape grouped{groups, C / groups * HW};
    run([&](Backend& b) {
      b.layer_norm(x.reshaped(grouped), nullptr, nullptr, eps, n.t.reshaped(grouped));
    });
    Act t = make(Shape{HW, C});
    run([&](Backend& b) {
      b.permute(n.t.reshaped(Shape{C, HW}), {1, 0}, t.t);
      b.modulate(t.t, at(p + ".scale"), at(p + ".shift"), t.t);
      b.silu(t.t, t.t);
      b.permute(t.t, {1, 0}, n.t.reshaped(Shape{C, HW}));
    });
    return n;
  }

  // Reflect padding of rows (top, bottom) and columns (left, right), each 0 or 1 (x is at least
  // 2 x 2). Rows first, then columns: the corners come out as torch's F.pad gives them.
  Act reflect_pad(const Tensor& x, bool top, bool bottom, bool left, bool right) const {
    const auto edge = [&](const Tensor& from, int dim, std::int64_t index) {
      Shape s = from.shape;
      s[dim] = 1;
      Act e = make(s);
      run([&](Backend& b) { b.slice(from, dim, index, e.t); });
      return e;
    };
    const auto join = [&](const Tensor& a, const Tensor& b, int dim) {
      Shape s = a.shape;
      s[dim] += b.shape[dim];
      Act j = make(s);
      run([&](Backend& be) { be.concat(a, b, dim, j.t); });
      return j;
    };
    Act held;
    Tensor t = x;
    // Index 1 reflects the first row (column); the last one's reflection is the one before it.
    const auto pad = [&](int dim, bool front, bool back) {
      if (front) {
        Act e = edge(t, dim, 1);
        held = join(e.t, t, dim);
        t = held.t;
      }
      if (back) {
        Act e = edge(t, dim, t.shape[dim] - 2);
        Act j = join(t, e.t, dim);
        held = std::move(j);
        t = held.t;
      }
    };
    pad(2, top, bottom);
    pad(3, left, right);
    return held;
  }

  Act conv(const Tensor& x, const std::string& p, int stride, bool pad) const {
    Act padded;
    const Tensor* in = &x;
    if (pad) {
      padded = reflect_pad(x, true, true, true, true);
      in = &padded.t;
    }
    const Tensor& w = at(p + ".weight");
    Conv3dParams params;
    params.stride_h = params.stride_w = stride;
    const std::int64_t k = w.shape[3];
    Act y = make(
        Shape{w.shape[0], 1, (in->shape[2] - k) / stride + 1, (in->shape[3] - k) / stride + 1});
    run([&](Backend& b) { b.conv3d(*in, w, &at(p + ".bias"), params, y.t); });
    return y;
  }

  std::vector<float> encode_tile(std::span<const float> pixels, std::int64_t height,
                                 std::int64_t width, std::int64_t* h, std::int64_t* w) const;

  Act resnet(Act x, std::int64_t l, std::int64_t m) const {
    const std::string p = names.resnet(l, m);
    Act h = conv(norm_silu(x.t, p + "norm1").t, p + "conv1", 1, true);
    h = conv(norm_silu(h.t, p + "norm2").t, p + "conv2", 1, true);
    const std::string s = names.shortcut(l, m);
    if (has(s + ".weight")) x = conv(x.t, s, 1, false);
    run([&](Backend& b) { b.add(h.t, x.t, h.t); });
    return h;
  }
};

VideoVaeEncoder::VideoVaeEncoder(std::unique_ptr<State> state) : state_(std::move(state)) {}
VideoVaeEncoder::VideoVaeEncoder(VideoVaeEncoder&&) noexcept = default;
VideoVaeEncoder& VideoVaeEncoder::operator=(VideoVaeEncoder&&) noexcept = default;
VideoVaeEncoder::~VideoVaeEncoder() = default;

std::int64_t VideoVaeEncoder::levels() const {
  return state_->levels;
}
std::int64_t VideoVaeEncoder::latent_channels() const {
  return state_->latent_channels;
}

VideoVaeEncoder VideoVaeEncoder::load(Backend& backend, const VideoVaeWeights& weights,
                                      std::int64_t groups) {
  return build(&backend, weights, groups);
}

VideoVaeEncoder VideoVaeEncoder::shapes_only(const VideoVaeWeights& weights, std::int64_t groups) {
  return build(nullptr, weights, groups);
}

std::uint64_t VideoVaeEncoder::weight_bytes() const {
  return state_->weight_bytes;
}

std::uint64_t VideoVaeEncoder::activation_peak() const {
  return state_->peak;
}

VideoVaeEncoder VideoVaeEncoder::build(Backend* backend, const VideoVaeWeights& weights,
                                       std::int64_t groups) {
  const io::TensorSet& set = weights.set();
  auto s = std::make_unique<State>();
  s->backend = backend;
  s->shapes_only = backend == nullptr;
  s->groups = groups;
  if (set.find("encoder.conv_in.weight") == nullptr) {
    throw Error(ErrorCode::kBadModelFile,
                set.path().string() + ": the H3 video VAE file has no encoder (encoder.conv_in)");
  }
  s->names.diffusers = set.find("encoder.down_blocks.0.resnets.0.conv1.weight") != nullptr;
  while (set.find(s->names.resnet(s->levels, 0) + "conv1.weight") != nullptr) ++s->levels;
  while (set.find(s->names.resnet(0, s->resnets) + "conv1.weight") != nullptr) ++s->resnets;
  if (s->levels == 0 || s->resnets == 0) {
    throw Error(ErrorCode::kBadModelFile,
                set.path().string() + ": the H3 video encoder has no residual blocks");
  }
  s->load_conv(set, "encoder.conv_in");
  for (std::int64_t l = 0; l < s->levels; ++l) {
    for (std::int64_t m = 0; m < s->resnets; ++m) {
      const std::string p = s->names.resnet(l, m);
      s->load_norm(set, p + "norm1");
      s->load_conv(set, p + "conv1");
      s->load_norm(set, p + "norm2");
      s->load_conv(set, p + "conv2");
      if (set.find(s->names.shortcut(l, m) + ".weight") != nullptr) {
        s->load_conv(set, s->names.shortcut(l, m));
      }
    }
    const bool down = set.find(s->names.downsample(l) + ".weight") != nullptr;
    s->downsample.push_back(down);
    if (down) s->load_conv(set, s->names.downsample(l));
  }
  s->load_norm(set, "encoder.norm_out");
  s->load_conv(set, "encoder.conv_out");
  s->load_conv(set, "quant_conv");
  s->latent_channels = s->at("quant_conv.weight").shape[0] / 2;
  for (const auto& [name, t] : s->tensors) {
    if (name.ends_with(".scale") && t.shape[0] % groups != 0) {
      throw Error(ErrorCode::kBadModelFile, set.path().string() + ": " +
                                                std::to_string(t.shape[0]) +
                                                " channels do not split into " +
                                                std::to_string(groups) + " GroupNorm groups");
    }
  }
  return VideoVaeEncoder(std::move(s));
}

// The encoder and quant_conv on one tile of normalised pixels [3, height, width] → its moments
// [2·channels, h, w].
std::vector<float> VideoVaeEncoder::State::encode_tile(std::span<const float> pixels,
                                                       std::int64_t height, std::int64_t width,
                                                       std::int64_t* h, std::int64_t* w) const {
  Act x = make(Shape{3, 1, height, width});
  run([&](Backend& b) {
    b.upload(x.t, pixels.data());
    b.synchronize();
  });
  x = conv(x.t, "encoder.conv_in", 1, true);
  for (std::int64_t l = 0; l < levels; ++l) {
    for (std::int64_t m = 0; m < resnets; ++m) x = resnet(std::move(x), l, m);
    if (downsample[static_cast<std::size_t>(l)]) {
      if (x.t.shape[2] < 2 || x.t.shape[3] < 2) {
        throw Error(ErrorCode::kBadArgument, "a keyframe tile of " + std::to_string(height) +
                                                 " x " + std::to_string(width) +
                                                 " is too small for the video encoder's " +
                                                 std::to_string(levels) + " levels");
      }
      Act padded = reflect_pad(x.t, false, true, false, true);
      x = conv(padded.t, names.downsample(l), 2, false);
    }
  }
  x = conv(norm_silu(x.t, "encoder.norm_out").t, "encoder.conv_out", 1, true);
  x = conv(x.t, "quant_conv", 1, false);
  *h = x.t.shape[2];
  *w = x.t.shape[3];
  std::vector<float> out(static_cast<std::size_t>(x.t.numel()));
  run([&](Backend& b) { b.download(x.t, out.data()); });
  return out;
}

std::int64_t VideoVaeEncoder::spatial_ratio() const {
  std::int64_t r = 1;
  for (bool d : state_->downsample) r *= d ? 2 : 1;
  return r;
}

FrameMoments VideoVaeEncoder::encode_frame(std::span<const std::uint8_t> rgb, std::int64_t height,
                                           std::int64_t width, const TileOptions& tiles) const {
  const State& s = *state_;
  s.peak = s.live;
  const std::int64_t ratio = spatial_ratio();
  if (height < 2 || width < 2 || rgb.size() != static_cast<std::size_t>(3 * height * width)) {
    throw Error(ErrorCode::kBadArgument, "a keyframe of " + std::to_string(rgb.size()) +
                                             " bytes for 3 x " + std::to_string(height) + " x " +
                                             std::to_string(width));
  }
  std::vector<float> pixels(rgb.size());
  const auto plane = static_cast<std::size_t>(height * width);
  for (std::size_t c = 0; c < 3; ++c) {
    for (std::size_t i = 0; i < plane; ++i) {
      const float v = static_cast<float>(rgb[c * plane + i]) / 255.0f;
      pixels[c * plane + i] = (v - kImagenetMean[c]) / kImagenetStd[c];
    }
  }
  FrameMoments m;
  m.channels = s.latent_channels;
  const AxisTiles rows = split_tiles(height, tiles.tile_px, tiles.min_overlap_px, ratio);
  const AxisTiles cols = split_tiles(width, tiles.tile_px, tiles.min_overlap_px, ratio);
  std::vector<float> all;
  if (rows.starts.size() == 1 && cols.starts.size() == 1) {
    all = s.encode_tile(pixels, height, width, &m.height, &m.width);
  } else {
    // diffusers' tiled encode: pixel tiles, their moments stitched in latent space.
    if (height % ratio != 0 || width % ratio != 0 || tiles.tile_px % ratio != 0) {
      throw Error(ErrorCode::kBadArgument,
                  "a tiled keyframe encode needs sizes in multiples of " + std::to_string(ratio) +
                      " px, not " + std::to_string(width) + "x" + std::to_string(height));
    }
    const auto latent = [&](AxisTiles a) {
      for (std::int64_t& v : a.starts) v /= ratio;
      for (std::int64_t& v : a.overlaps) v /= ratio;
      a.length /= ratio;
      return a;
    };
    m.height = height / ratio;
    m.width = width / ratio;
    const std::int64_t planes = 2 * s.latent_channels;
    all.resize(static_cast<std::size_t>(planes * m.height * m.width));
    TileStitcher stitcher(latent(rows), latent(cols), planes);
    const auto out = [&](std::int64_t p, std::int64_t y) {
      return all.data() + (p * m.height + y) * m.width;
    };
    std::vector<float> crop(static_cast<std::size_t>(3 * rows.length * cols.length));
    for (std::size_t r = 0; r < rows.starts.size(); ++r) {
      for (std::size_t c = 0; c < cols.starts.size(); ++c) {
        for (std::int64_t ch = 0; ch < 3; ++ch) {
          for (std::int64_t y = 0; y < rows.length; ++y) {
            const float* src =
                pixels.data() + (ch * height + rows.starts[r] + y) * width + cols.starts[c];
            std::copy(src, src + cols.length, crop.data() + (ch * rows.length + y) * cols.length);
          }
        }
        std::int64_t th = 0, tw = 0;
        std::vector<float> moments = s.encode_tile(crop, rows.length, cols.length, &th, &tw);
        if (th != rows.length / ratio || tw != cols.length / ratio) {
          throw Error(ErrorCode::kInternal, "an encoded tile of " + std::to_string(th) + " x " +
                                                std::to_string(tw) + " latent positions");
        }
        stitcher.add(static_cast<std::int64_t>(r), static_cast<std::int64_t>(c), moments, out);
      }
    }
  }
  const auto half = all.begin() + static_cast<std::ptrdiff_t>(all.size() / 2);
  m.mean.assign(all.begin(), half);
  m.logvar.assign(half, all.end());
  return m;
}

std::vector<float> keyframe_latent(const FrameMoments& m, std::span<const float> noise,
                                   const VideoVaeConfig& c) {
  const auto plane = static_cast<std::size_t>(m.height * m.width);
  if (noise.size() != m.mean.size() || m.channels != c.latent_channels ||
      c.latents_mean.size() != static_cast<std::size_t>(m.channels)) {
    throw Error(ErrorCode::kBadArgument, "keyframe noise of " + std::to_string(noise.size()) +
                                             " values for a latent of " +
                                             std::to_string(m.mean.size()));
  }
  std::vector<float> out(m.mean.size());
  for (std::size_t i = 0; i < out.size(); ++i) {
    const std::size_t ch = i / plane;
    const float logvar = std::clamp(m.logvar[i], -30.0f, 20.0f);
    const float z = m.mean[i] + std::exp(0.5f * logvar) * noise[i];
    const float rounded = f16_to_f32(f32_to_f16(z));
    out[i] = (rounded - c.latents_mean[ch]) / c.latents_std[ch];
  }
  return out;
}

}  // namespace ferry::models::h3::vae
