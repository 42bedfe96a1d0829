// H3's video VAE decoder against tests/data/h3_video_vae/ (tools/reference/
// make_h3_video_vae_reference.py): diffusers 0.42.1's AutoencoderKLMiniMaxH3 at two tiny sizes
// (tiny: diffusers' own test configuration, f32, 2 heads of 8 with 6 dims rotated; wide: 2 heads
// of 32, 24 rotated, as the release's diffusers names in bf16, the official names in f16 and
// DiffSynth's NF4 file), decoding 1, 2 and 3 temporal chunks (the overlap cross-fade) and a chunk
// in 2 x 3 spatial tiles (the blended seams), the pipeline's latent and ImageNet
// de-normalisations around it. On the CPU backend in ferry_tests, on the CUDA backend in
// ferry_cuda_model_tests.
#include <gtest/gtest.h>

#include <algorithm>
#include <any>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/io/safetensors_writer.h"
#include "core/io/tensor_set.h"
#include "core/models/h3/synthetic_set.h"
#include "core/models/h3/video_vae_chunks.h"
#include "core/models/h3/video_vae_decoder.h"
#include "core/models/h3/video_vae_encoder.h"
#include "core/models/h3/video_vae_plan.h"
#include "core/models/h3/video_vae_weights.h"
#include "core/offload/preset.h"
#include "core/offload/streamer.h"
#include "core/tensor/convert.h"
#include "tests/models/model_test_backend.h"
#include "tests/models/model_test_plans.h"
#include "tests/models/model_test_tensors.h"
#include "tests/test_support.h"

namespace ferry::models::h3::vae {
namespace {

using offload::Placement;
using offload::Plan;

struct Fixture {
  io::TensorSet set;
  explicit Fixture(const std::string& file)
      : set(io::TensorSet::open(test::data_path("h3_video_vae/" + file))) {}

  template <typename T>
  std::vector<T> values(const std::string& key) const {
    const auto& e = set.at(key);
    std::vector<T> out(e.tensor->element_count());
    EXPECT_EQ(out.size() * sizeof(T), e.tensor->bytes) << key;
    e.file->map(*e.tensor).copy_to(0, std::as_writable_bytes(std::span(out)));
    return out;
  }
  std::vector<std::int64_t> shape(const std::string& key) const {
    const auto& s = set.at(key).tensor->shape;
    return {s.begin(), s.end()};
  }
};

const Fixture& reference() {
  static const Fixture r("reference.safetensors");
  return r;
}

// A model file with the configuration the script built it with.
struct Model {
  io::TensorSet set;
  VideoVaeWeights weights;
  Model(const std::string& file, const std::string& config)
      : set(io::TensorSet::open(test::data_path("h3_video_vae/" + file))),
        weights(VideoVaeWeights::from(set)) {
    weights.set_head_dim(config == "tiny" ? 8 : 32);
    weights.set_latent_stats(reference().values<float>(config + ".latents_mean"),
                             reference().values<float>(config + ".latents_std"));
  }
};

// What the sink received, in order, and the frames joined into [3, F, H, W].
struct Collected {
  std::vector<std::int64_t> firsts, counts;
  std::vector<std::vector<float>> chunks;
  std::int64_t height = 0, width = 0;

  std::vector<float> video() const {
    std::int64_t frames = 0;
    for (std::int64_t n : counts) frames += n;
    std::vector<float> out(static_cast<std::size_t>(3 * frames * height * width));
    const std::int64_t plane = height * width;
    for (std::size_t k = 0; k < chunks.size(); ++k) {
      for (std::int64_t c = 0; c < 3; ++c) {
        for (std::int64_t f = 0; f < counts[k]; ++f) {
          const float* src = chunks[k].data() + (c * counts[k] + f) * plane;
          std::copy(src, src + plane, out.data() + (c * frames + firsts[k] + f) * plane);
        }
      }
    }
    return out;
  }
};

struct Decoded {
  Collected frames;
  std::uint64_t arena_bytes = 0, arena_peak = 0;
};

Decoded decode(const Model& m, const std::vector<float>& latent,
               const std::vector<std::int64_t>& shape, Placement blocks,
               const DecodeOptions& options) {
  const std::int64_t t = shape[1], h = shape[2], w = shape[3];
  Backend& backend = test::model_backend();
  const offload::ModelLayout layout = decoder_layout(m.weights, h, w, options.tiles);
  Decoded out;
  out.arena_bytes = layout.activation_bytes;
  offload::StreamerOptions so;
  so.passes = static_cast<std::size_t>(decode_passes(m.weights.config(), t, h, w, options.tiles));
  offload::WeightStreamer streamer(backend, layout, test::tiny_slot_plan(layout, blocks), so);
  out.arena_peak = test::arena_peak(
      backend, static_cast<std::size_t>(out.arena_bytes), [&](memory::Arena& arena) {
        decode_video(backend, m.weights, streamer, arena, latent, t, h, w, options,
                     [&](std::int64_t first, const Shape& s, std::span<const float> pixels) {
                       EXPECT_EQ(s[0], 3);
                       out.frames.firsts.push_back(first);
                       out.frames.counts.push_back(s[1]);
                       out.frames.height = s[2];
                       out.frames.width = s[3];
                       out.frames.chunks.emplace_back(pixels.begin(), pixels.end());
                     });
      });
  return out;
}

DecodeOptions raw() {
  DecodeOptions o;
  o.clamp = false;  // the reference stores the values before the pipeline's clamp
  return o;
}

class H3VideoVae : public test::ModelTest {};

// f32 weights and activations on both sides: the differences are summation orders (matrix
// products, attention, norms) and libm's cos/sin/exp against PyTorch's, amplified through 2 blocks
// and a projection to pixels of magnitude ~1.5. Measured on the CPU backend (the [ measured ]
// lines): max |d| <= 6e-7, relative RMS <= 4.4e-7 over every case below (decodes, the tiled
// chunk, the NF4 file against its unrounded dequantisation, the encodes, tiled or not); the
// bounds are ~8-10x that, far below what any wrong index or weight gives (bitsandbytes' bf16
// rounding of the NF4 weights alone moves pixels by 2e-3; a swapped gate/value or one latent
// frame off by ~0.1-1).
constexpr double kF32MaxAbs = 5e-6;
constexpr double kF32RelRms = 4e-6;

void expect_close(const std::vector<float>& got, const std::vector<float>& want,
                  const std::string& what, double max_abs, double rel_rms) {
  ASSERT_EQ(got.size(), want.size()) << what;
  double worst = 0, sq = 0, ref = 0;
  for (std::size_t i = 0; i < got.size(); ++i) {
    const double d = std::abs(static_cast<double>(got[i]) - want[i]);
    worst = std::max(worst, d);
    sq += d * d;
    ref += static_cast<double>(want[i]) * want[i];
  }
  const double rel = std::sqrt(sq / std::max(ref, 1e-30));
  std::printf("[ measured ] %s: max|d| %.3g rel rms %.3g\n", what.c_str(), worst, rel);
  EXPECT_LE(worst, max_abs) << what;
  EXPECT_LE(rel, rel_rms) << what;
}

TEST_F(H3VideoVae, DecodesOneTwoAndThreeChunksAsDiffusers) {
  const Model m("tiny.safetensors", "tiny");
  const Fixture three("three_chunks.safetensors");
  for (int n : {1, 2, 3}) {
    const Fixture& f = n == 3 ? three : reference();
    const std::string key = "tiny.decode." + std::to_string(n);
    const Decoded d = decode(m, f.values<float>(key + ".latent"), f.shape(key + ".latent"),
                             Placement::kDevice, raw());
    // 17 frames a chunk, then the last chunk's 5 overlap frames.
    std::vector<std::int64_t> firsts, counts;
    for (int i = 0; i < n; ++i) {
      firsts.push_back(17 * i);
      counts.push_back(17);
    }
    firsts.push_back(17 * n);
    counts.push_back(5);
    EXPECT_EQ(d.frames.firsts, firsts) << key;
    EXPECT_EQ(d.frames.counts, counts) << key;
    expect_close(d.frames.video(), f.values<float>(key + ".pixels"), key, kF32MaxAbs, kF32RelRms);
    EXPECT_EQ(d.arena_peak, d.arena_bytes) << key << ": the estimate is the measured peak";
  }
}

TEST_F(H3VideoVae, DecodesSpatialTilesAsDiffusers) {
  const Model m("tiny.safetensors", "tiny");
  const Fixture tiled("tiled.safetensors");
  DecodeOptions options = raw();
  options.tiles = {16, 4};  // 4 latent positions: 2 x 3 tiles on the 5 x 8 latent
  const auto shape = tiled.shape("tiny.tiled.latent");
  EXPECT_EQ(decode_shape(m.weights.config(), shape[2], shape[3], options.tiles).tiles(), 6);
  const Decoded d =
      decode(m, tiled.values<float>("tiny.tiled.latent"), shape, Placement::kDevice, options);
  expect_close(d.frames.video(), tiled.values<float>("tiny.tiled.pixels"), "tiny.tiled", kF32MaxAbs,
               kF32RelRms);
  EXPECT_EQ(d.arena_peak, d.arena_bytes) << "the estimate is the measured peak";
}

TEST_F(H3VideoVae, StreamedBlocksGiveTheResidentBits) {
  const Model m("tiny.safetensors", "tiny");
  const std::string key = "tiny.decode.2";
  const auto latent = reference().values<float>(key + ".latent");
  const auto shape = reference().shape(key + ".latent");
  const Decoded resident = decode(m, latent, shape, Placement::kDevice, raw());
  const Decoded disk = decode(m, latent, shape, Placement::kDisk, raw());
  EXPECT_TRUE(test::same_bits(disk.frames.video(), resident.frames.video()));
}

TEST_F(H3VideoVae, ClampsToTheUnitRangeByDefault) {
  const Model m("tiny.safetensors", "tiny");
  const std::string key = "tiny.decode.1";
  const auto latent = reference().values<float>(key + ".latent");
  const Decoded d = decode(m, latent, reference().shape(key + ".latent"), Placement::kDevice, {});
  const std::vector<float> want = reference().values<float>(key + ".pixels");
  const std::vector<float> got = d.frames.video();
  ASSERT_EQ(got.size(), want.size());
  std::size_t clamped = 0;
  for (std::size_t i = 0; i < got.size(); ++i) {
    EXPECT_NEAR(got[i], std::clamp(want[i], 0.0f, 1.0f), kF32MaxAbs) << i;
    clamped += want[i] < 0.0f || want[i] > 1.0f;
  }
  EXPECT_GT(clamped, 0u) << "the case must reach beyond [0, 1]";
}

const Fixture& wide_reference() {
  static const Fixture r("wide_reference.safetensors");
  return r;
}

// The wide model's weights are bf16 values (exact in f16 too): the bf16 diffusers file and the
// official f16 file hold the same numbers as the reference's f32 model, so the f32 bounds hold.
// The NF4 file is compared with the reference's run of its dequantised weights as Ferry's
// Backend::linear makes them (code · scale in f32) at the f32 bounds, and with bitsandbytes'
// (rounded to bf16) within 1.5x the reference's own difference between those two runs.
TEST_F(H3VideoVae, ReadsBf16F16AndNf4Layouts) {
  const std::string key = "wide.decode.2";
  const auto latent = wide_reference().values<float>(key + ".latent");
  const auto shape = wide_reference().shape(key + ".latent");
  const struct {
    const char* file;
    VaeKeyLayout layout;
    const char* want;
  } cases[] = {{"wide_bf16.safetensors", VaeKeyLayout::kDiffusers, "wide.decode.2.pixels"},
               {"wide_official_f16.safetensors", VaeKeyLayout::kOriginal, "wide.decode.2.pixels"},
               {"wide_nf4.safetensors", VaeKeyLayout::kDiffSynth, "wide.decode.nf4f32.2.pixels"}};
  for (const auto& c : cases) {
    const Model m(c.file, "wide");
    EXPECT_EQ(m.weights.key_layout(), c.layout) << c.file;
    EXPECT_EQ(m.weights.config().rope_freqs(), 4) << c.file;
    EXPECT_FALSE(m.weights.config().has_encoder) << c.file;
    const Decoded d = decode(m, latent, shape, Placement::kDisk, raw());
    expect_close(d.frames.video(), wide_reference().values<float>(c.want),
                 std::string(c.file) + " " + key, kF32MaxAbs, kF32RelRms);
    if (c.layout == VaeKeyLayout::kDiffSynth) {
      const auto bnb = wide_reference().values<float>("wide.decode.nf4.2.pixels");
      const auto exact = wide_reference().values<float>(c.want);
      double floor = 0;
      for (std::size_t i = 0; i < bnb.size(); ++i) {
        floor = std::max(floor, std::abs(static_cast<double>(bnb[i]) - exact[i]));
      }
      ASSERT_GT(floor, 0.0);
      expect_close(d.frames.video(), bnb, "wide_nf4 vs bitsandbytes' bf16 dequantisation",
                   1.5 * floor, 1.0);
    }
  }
}

// The 1-frame encode (a keyframe): ImageNet normalisation, the causal convolutions' last taps,
// reflect padding, per-frame GroupNorm, the residual blocks with their 1x1x1 shortcut, the
// stride-2 downsampling and quant_conv, f32 on both sides (same bounds as the decoder's).
TEST_F(H3VideoVae, EncodesOneFrameAsDiffusers) {
  const Model m("tiny.safetensors", "tiny");
  ASSERT_TRUE(m.weights.config().has_encoder);
  const VideoVaeEncoder encoder = VideoVaeEncoder::load(test::model_backend(), m.weights, 8);
  EXPECT_EQ(encoder.levels(), 2);
  const auto shape = reference().shape("tiny.encode.image");  // [3, 1, 16, 20]
  std::vector<std::uint8_t> rgb;
  for (float v : reference().values<float>("tiny.encode.image")) {
    rgb.push_back(static_cast<std::uint8_t>(v));
  }
  const FrameMoments got = encoder.encode_frame(rgb, shape[2], shape[3]);
  EXPECT_EQ(got.channels, 4);
  EXPECT_EQ(got.height, 4);
  EXPECT_EQ(got.width, 5);
  std::vector<float> moments = got.mean;
  moments.insert(moments.end(), got.logvar.begin(), got.logvar.end());
  expect_close(moments, reference().values<float>("tiny.encode.moments"), "tiny.encode", kF32MaxAbs,
               kF32RelRms);
  // The keyframe recipe on the reference's own moments: sampled with the stored noise, rounded to
  // f16, normalised. Bit for bit but where an f16 rounding tie may fall either way.
  FrameMoments want = got;
  const std::vector<float> all = reference().values<float>("tiny.encode.moments");
  want.mean.assign(all.begin(), all.begin() + 80);
  want.logvar.assign(all.begin() + 80, all.end());
  const std::vector<float> latent =
      keyframe_latent(want, reference().values<float>("tiny.encode.noise"), m.weights.config());
  expect_close(latent, reference().values<float>("tiny.encode.latent"), "tiny.keyframe_latent",
               1e-6, 1e-6);
}

// A frame larger than the tile: 2 x 3 pixel tiles of 16 (4 latent positions), their moments
// blended in latent space with the raw neighbours, as diffusers' tiled encode.
TEST_F(H3VideoVae, EncodesATiledFrameAsDiffusers) {
  const Model m("tiny.safetensors", "tiny");
  const VideoVaeEncoder encoder = VideoVaeEncoder::load(test::model_backend(), m.weights, 8);
  EXPECT_EQ(encoder.spatial_ratio(), 4);
  const auto shape = reference().shape("tiny.encode_tiled.image");  // [3, 1, 24, 36]
  std::vector<std::uint8_t> rgb;
  for (float v : reference().values<float>("tiny.encode_tiled.image")) {
    rgb.push_back(static_cast<std::uint8_t>(v));
  }
  const FrameMoments got = encoder.encode_frame(rgb, shape[2], shape[3], {16, 4});
  EXPECT_EQ(got.height, 6);
  EXPECT_EQ(got.width, 9);
  std::vector<float> moments = got.mean;
  moments.insert(moments.end(), got.logvar.begin(), got.logvar.end());
  const auto want = reference().values<float>("tiny.encode_tiled.moments");
  expect_close(moments, want, "tiny.encode_tiled", kF32MaxAbs, kF32RelRms);
  const VideoVaeEncoder dry = VideoVaeEncoder::shapes_only(m.weights, 8);
  dry.encode_frame(rgb, shape[2], shape[3], {16, 4});
  EXPECT_EQ(dry.activation_peak(), encoder.activation_peak()) << "one tile's, as estimated";
  // Untiled, the same frame is another encode (the tiles are part of the reference's output).
  const FrameMoments whole = encoder.encode_frame(rgb, shape[2], shape[3], {64, 16});
  std::vector<float> untiled = whole.mean;
  untiled.insert(untiled.end(), whole.logvar.begin(), whole.logvar.end());
  double most = 0;
  for (std::size_t i = 0; i < want.size(); ++i) {
    most = std::max(most, std::abs(static_cast<double>(untiled[i]) - want[i]));
  }
  EXPECT_GT(most, 100 * kF32MaxAbs);
}

// Writes every tensor of `from` as `dtype` (values rounded through bf16 first, so the bf16 and
// f32 copies hold the same numbers).
void write_rounded_copy(const io::TensorSet& from, const std::filesystem::path& to, DType dtype) {
  std::vector<io::TensorSpec> specs;
  std::vector<std::vector<std::byte>> data;
  for (const auto& e : from.entries()) {
    std::vector<float> v(e.tensor->element_count());
    std::vector<std::byte> raw(e.tensor->bytes);
    e.file->map(*e.tensor).copy_to(0, raw);
    convert_to_f32(e.tensor->dtype, raw.data(), v.data(), v.size());
    for (float& x : v) x = bf16_to_f32(f32_to_bf16(x));
    std::vector<std::byte> out(v.size() * dtype_size(dtype));
    convert_from_f32(v.data(), dtype, out.data(), v.size());
    specs.push_back({e.tensor->name, dtype, e.tensor->shape});
    data.push_back(std::move(out));
  }
  io::write_safetensors(to, specs, {{"format", "pt"}},
                        [&](std::size_t i, std::uint64_t offset, std::span<std::byte> out) {
                          std::copy_n(data[i].begin() + static_cast<std::ptrdiff_t>(offset),
                                      out.size(), out.begin());
                        });
}

// DiffSynth stores the encoder's convolutions and norms in bf16: they are widened exactly, so the
// encode equals the f32 encode of the same (bf16-rounded) values bit for bit.
TEST_F(H3VideoVae, Bf16EncoderWeightsEncodeAsTheirF32Values) {
  const test::ScratchDir dir;
  const Model source("tiny.safetensors", "tiny");
  write_rounded_copy(source.set, dir / "bf16.safetensors", DType::kBF16);
  write_rounded_copy(source.set, dir / "f32.safetensors", DType::kF32);
  std::vector<std::uint8_t> rgb;
  for (float v : reference().values<float>("tiny.encode.image")) {
    rgb.push_back(static_cast<std::uint8_t>(v));
  }
  std::vector<std::vector<float>> moments;
  for (const char* file : {"bf16.safetensors", "f32.safetensors"}) {
    const io::TensorSet set = io::TensorSet::open(dir / file);
    const VideoVaeWeights w = VideoVaeWeights::from(set);
    const VideoVaeEncoder encoder = VideoVaeEncoder::load(test::model_backend(), w, 8);
    const FrameMoments m = encoder.encode_frame(rgb, 16, 20);
    moments.push_back(m.mean);
    moments.back().insert(moments.back().end(), m.logvar.begin(), m.logvar.end());
  }
  EXPECT_TRUE(test::same_bits(moments[0], moments[1]));
  // And close to the unrounded model's encode (bf16 weights: a relative change of ~4e-3).
  const test::Deviation d =
      test::compare(moments[0], reference().values<float>("tiny.encode.moments"));
  EXPECT_GT(d.rms_rel, 0.0);
  EXPECT_LT(d.rms_rel, 0.05);
}

TEST(H3VideoVaeTiles, SplitLikeDiffusersAtTheReleaseGeometry) {
  for (std::int64_t length : {256, 272, 320, 480, 512, 768, 832, 1344}) {
    const std::string key = "tiles." + std::to_string(length);
    const auto want = reference().values<std::int32_t>(key);
    const std::size_t n = want.size() / 2;
    const AxisTiles a = split_tiles(length, 256, 64, 16);
    ASSERT_EQ(a.starts.size(), n) << key;
    for (std::size_t i = 0; i < n; ++i) {
      EXPECT_EQ(a.starts[i], want[i]) << key << " start " << i;
      if (i + 1 < n) {
        EXPECT_EQ(a.overlaps[i], want[n + i]) << key << " overlap " << i;
      }
    }
    EXPECT_EQ(a.length, std::min<std::int64_t>(length, 256)) << key;
  }
  // minimax_h3.md §E.4's figures.
  EXPECT_EQ(split_tiles(480, 256, 64, 16).overlaps, (std::vector<std::int64_t>{144, 144}));
  EXPECT_EQ(split_tiles(1344, 256, 64, 16).overlaps,
            (std::vector<std::int64_t>{80, 80, 80, 80, 64, 64}));
}

TEST(H3VideoVaeTiles, FrameRule) {
  EXPECT_EQ(latent_frames_for(124), 37);
  EXPECT_EQ(decode_chunks_for(37), 7);
  EXPECT_EQ(latent_frames_for(22), 7);
  EXPECT_EQ(decode_chunks_for(7), 1);
}

TEST_F(H3VideoVae, StopsWhenCancelled) {
  const Model m("tiny.safetensors", "tiny");
  const std::string key = "tiny.decode.2";
  std::atomic<bool> cancel{true};
  DecodeOptions options = raw();
  options.cancel = &cancel;
  EXPECT_EQ(test::error_code_of([&] {
              decode(m, reference().values<float>(key + ".latent"),
                     reference().shape(key + ".latent"), Placement::kDisk, options);
            }),
            ErrorCode::kCancelled);
}

TEST_F(H3VideoVae, RefusesLatentsThatAreNot5nPlus2) {
  const Model m("tiny.safetensors", "tiny");
  const std::vector<float> latent(4 * 8 * 2 * 3, 0.0f);
  EXPECT_EQ(test::error_code_of([&] {
              decode(m, latent, {4, 8, 2, 3}, Placement::kDevice, raw());
            }),
            ErrorCode::kBadArgument);
}

TEST(H3VideoVaeWeights, HeadWidthMustSplitTheAttention) {
  io::TensorSet set = io::TensorSet::open(test::data_path("h3_video_vae/tiny.safetensors"));
  VideoVaeWeights w = VideoVaeWeights::from(set);
  EXPECT_EQ(w.config().head_dim, 0) << "16 wide: not the release's 64";
  EXPECT_EQ(test::error_code_of([&] { w.set_head_dim(12); }), ErrorCode::kBadArgument);
  w.set_head_dim(8);
  EXPECT_EQ(w.config().heads, 2);
  EXPECT_EQ(w.config().layers, 2);
  EXPECT_EQ(w.config().registers, 2);
  EXPECT_EQ(w.config().patch, 4);
  EXPECT_EQ(w.config().ffn, 32);
}

// DiffSynth's video_vae_nf4 at the release's shapes (`ferry-cli synth --set h3-nf4` writes it
// header-only): the names, the NF4 decoder Linears with their side tensors, the configuration.
TEST(H3VideoVaeWeights, ReadsTheDiffSynthNf4FileAtTheReleaseShapes) {
  const test::ScratchDir dir;
  const auto path = dir / SyntheticFiles::kVideoVae;
  write_header_only(path, video_vae_part(SyntheticShapes{}, /*nf4=*/true));
  const io::TensorSet set = io::TensorSet::open(path);
  const VideoVaeWeights w = VideoVaeWeights::from(set);
  const VideoVaeConfig& c = w.config();
  EXPECT_EQ(w.key_layout(), VaeKeyLayout::kDiffSynth);
  EXPECT_TRUE(c.has_encoder);
  EXPECT_EQ(c.latent_channels, 24);
  EXPECT_EQ(c.dim, 2048);
  EXPECT_EQ(c.heads, 32);
  EXPECT_EQ(c.head_dim, 64);
  EXPECT_EQ(c.rope_freqs(), 8);
  EXPECT_EQ(c.layers, 36);
  EXPECT_EQ(c.ffn, 8192);
  EXPECT_EQ(c.registers, 4);
  EXPECT_EQ(c.patch, 16);
  EXPECT_EQ(c.latents_mean, release_latents_mean());
  EXPECT_EQ(w.group_count(), 38u);
  // A block: 12 tensors of its own (fused QKV), its 4 NF4 Linears with 4 side tensors each.
  EXPECT_EQ(w.group(w.block_group(0)).weights.size(), 12u + 4u * 4u);
  // 36 blocks of 67.1 M weights at ~0.52 bytes (minimax_h3.md §I.1: ~0.035 GB a block).
  const double block_gb = static_cast<double>(w.group(w.block_group(0)).bytes()) / 1e9;
  EXPECT_GT(block_gb, 0.033);
  EXPECT_LT(block_gb, 0.037);
  // The release's tiles (§E.4): 480 x 832 in 3 x 4, 768 x 1344 in 4 x 7; 1797 tokens a
  // tile-chunk.
  EXPECT_EQ(decode_shape(c, 480 / 16, 832 / 16).tiles(), 12);
  EXPECT_EQ(decode_shape(c, 768 / 16, 1344 / 16).tiles(), 28);
  EXPECT_EQ(decode_passes(c, 37, 768 / 16, 1344 / 16), 7 * 28);
}

// One tile-chunk at the release's widths (2048 wide, 32 heads of 64, FFN 8192, 7 x 16 x 16 + 5 =
// 1797 tokens), one block of random NF4 weights (the arena does not depend on the block count):
// the arena a real decode takes is its estimate. Prints the time of the block. A measurement, not
// run by default (about a minute on 2 CPU cores): --gtest_also_run_disabled_tests.
TEST_F(H3VideoVae, DISABLED_OneTileChunkAtTheReleaseWidthsTakesItsEstimatedArena) {
  const test::ScratchDir dir;
  const auto path = dir / SyntheticFiles::kVideoVae;
  SyntheticShapes shapes;
  shapes.vae_blocks = 1;
  write_with_data(path, video_vae_part(shapes, /*nf4=*/true), [](const io::TensorSpec& t) {
    return t.name.starts_with("encoder.") || t.name.starts_with("quant_conv.");
  });
  const io::TensorSet set = io::TensorSet::open(path);
  const VideoVaeWeights w = VideoVaeWeights::from(set);
  const std::int64_t tile = 16;
  const offload::ModelLayout layout = decoder_layout(w, tile, tile);
  EXPECT_EQ(layout.activation_bytes,
            decoder_arena_bytes(w.config(), w.fused_qkv(), 7 * tile * tile));
  Backend& backend = test::model_backend();
  offload::StreamerOptions so;
  so.passes = 1;
  offload::WeightStreamer streamer(backend, layout,
                                   test::tiny_slot_plan(layout, Placement::kDevice), so);
  std::vector<float> latent(static_cast<std::size_t>(24 * 7 * tile * tile));
  for (std::size_t i = 0; i < latent.size(); ++i) latent[i] = std::sin(0.37f * i);
  std::vector<float> rows;
  double seconds = 0;
  const std::size_t peak = test::arena_peak(
      backend, static_cast<std::size_t>(layout.activation_bytes), [&](memory::Arena& arena) {
        const auto start = std::chrono::steady_clock::now();
        rows = decode_tile_chunk(backend, w, streamer, arena, {latent, 7, tile, tile});
        seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      });
  EXPECT_EQ(rows.size(), static_cast<std::size_t>(7 * tile * tile * 3072));
  EXPECT_EQ(peak, layout.activation_bytes) << "the estimate is the measured peak";
  std::printf(
      "[ measured ] one 1797-token tile-chunk, 1 block at 2048 wide (%s): arena %.1f MiB "
      "measured = %.1f MiB estimated, %.2f s\n",
      backend.name().c_str(), static_cast<double>(peak) / (1 << 20),
      static_cast<double>(layout.activation_bytes) / (1 << 20), seconds);
}

// The stage at the release's shapes under laptop-8gb: the planner's placement of the decoder's
// blocks, the arena of one tile-chunk, the host's chunk of frames; refused when it cannot fit.
TEST(H3VideoVaePlan, PlansTheReleaseDecodeAndRefusesWhatCannotFit) {
  const test::ScratchDir dir;
  const auto path = dir / SyntheticFiles::kVideoVae;
  write_header_only(path, video_vae_part(SyntheticShapes{}, /*nf4=*/true));
  const io::TensorSet set = io::TensorSet::open(path);
  const VideoVaeWeights w = VideoVaeWeights::from(set);
  const auto plan_on = [&](std::uint64_t vram_mib, std::uint64_t ram_mib, std::int64_t width,
                           std::int64_t height, std::int64_t frames) {
    const offload::MachineInfo m{true, vram_mib << 20, vram_mib << 20, ram_mib << 20,
                                 ram_mib << 20};
    offload::Preset preset = offload::find_preset(offload::builtin_presets(), "laptop-8gb", m);
    preset.ram_budget_bytes = ram_mib << 20;
    return video_decode_stage_plan(w, width, height, frames, preset, m, false);
  };
  const StagePlan s = plan_on(8192, 24576, 832, 480, 124);
  const auto& d = std::any_cast<const VideoDecodePlan&>(s.family_plan);
  EXPECT_EQ(d.chunks, 7);
  EXPECT_EQ(d.tiles, 12);
  EXPECT_EQ(d.tile_px, 256);
  EXPECT_EQ(d.tile_tokens, 1797);
  EXPECT_EQ(d.arena_bytes, decode_arena_bytes(w, 480 / 16, 832 / 16));
  EXPECT_EQ(s.activation_bytes, d.arena_bytes);
  EXPECT_EQ(s.groups, 38u);
  EXPECT_GT(s.predicted_ram_peak, d.host_bytes);
  EXPECT_GT(s.predicted_vram_peak, d.arena_bytes);
  // The 1344 x 768 chunk holds more frames on the host; the tile-chunk's arena is the same.
  const StagePlan big = plan_on(8192, 24576, 1344, 768, 124);
  const auto& b = std::any_cast<const VideoDecodePlan&>(big.family_plan);
  EXPECT_EQ(b.tiles, 28);
  EXPECT_EQ(b.arena_bytes, d.arena_bytes);
  EXPECT_GT(b.host_bytes, d.host_bytes);
  // A small GPU keeps some blocks and streams the others (pinned in RAM or from disk), each pass.
  const StagePlan small = plan_on(1100, 24576, 832, 480, 124);
  EXPECT_LT(small.resident_groups, 38u);
  EXPECT_GT(small.pinned_groups + small.disk_groups, 0u);
  EXPECT_LE(small.predicted_vram_peak, small.plan.predicted_vram_peak);
  // The keyframes' encode: the encoder's last taps on the device and one 256 px tile's activations.
  const offload::MachineInfo laptop{true, 8192ull << 20, 8192ull << 20, 24576ull << 20,
                                    24576ull << 20};
  const offload::Preset laptop_preset =
      offload::find_preset(offload::builtin_presets(), "laptop-8gb", laptop);
  const StagePlan k = keyframe_encode_stage_plan(w, 832, 480, 2, laptop_preset, laptop);
  EXPECT_LT(k.weight_bytes, w.encoder_bytes());                 // one temporal tap of three
  EXPECT_GT(k.activation_bytes, 4 * (128ull * 256 * 256 * 4));  // level 0 at a 256 px tile
  EXPECT_EQ(k.predicted_vram_peak, k.weight_bytes + k.activation_bytes);
  std::printf("[ measured ] keyframe encode plan: weights %.1f MiB, activations %.1f MiB\n",
              static_cast<double>(k.weight_bytes) / (1 << 20),
              static_cast<double>(k.activation_bytes) / (1 << 20));
  // Refusals: no room for one tile-chunk's arena; no RAM for the frames; sizes the VAE cannot take.
  EXPECT_EQ(test::error_code_of([&] { plan_on(200, 24576, 832, 480, 124); }),
            ErrorCode::kDoesNotFit);
  EXPECT_EQ(test::error_code_of([&] { plan_on(8192, 700, 1344, 768, 124); }),
            ErrorCode::kDoesNotFit);
  EXPECT_EQ(test::error_code_of([&] { plan_on(8192, 24576, 840, 480, 124); }),
            ErrorCode::kBadArgument);
  EXPECT_EQ(test::error_code_of([&] { plan_on(8192, 24576, 832, 480, 125); }),
            ErrorCode::kBadArgument);
}

}  // namespace
}  // namespace ferry::models::h3::vae
