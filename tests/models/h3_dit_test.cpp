// H3's DiT against tests/data/h3_dit/ (tools/reference/make_h3_dit_reference.py): diffusers
// 0.42.1's MiniMaxH3Transformer3DModel at two tiny sizes (tiny: diffusers' own test configuration,
// 2 heads of 16 with 12 of 16 dims rotated; wide: 4 heads of 32, 24 rotated, sequences of 65-89
// rows), on the packed sequences diffusers' build_packed_sequence builds for T2VA, I2VA (first
// and last frame) and FL2VA, at steps 0 and 2 of a 4-evaluation schedule. The weights as the
// release's diffusers folder (bf16 with f32 islands), as original names with interleaved and with
// stacked QKV, in f32, as the pruned AdaLN-curve variant and as DiffSynth's NF4 files (full and
// pruned). On the CPU backend in ferry_tests, on the CUDA backend in ferry_cuda_model_tests.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <span>
#include <string>
#include <vector>

#include "core/backend/cpu/cpu_backend.h"
#include "core/error.h"
#include "core/io/safetensors_writer.h"
#include "core/io/tensor_set.h"
#include "core/models/h3/dit.h"
#include "core/models/h3/dit_sequence.h"
#include "core/models/h3/dit_weights.h"
#include "core/models/h3/scheduler.h"
#include "core/tensor/convert.h"
#include "tests/models/model_test_backend.h"
#include "tests/models/model_test_plans.h"
#include "tests/test_support.h"

namespace ferry::models::h3::dit {
namespace {

namespace fs = std::filesystem;
using offload::Placement;
using offload::Plan;

const char* const kConfigs[] = {"tiny", "wide"};
const char* const kLayouts[] = {"t2va", "i2va_first", "i2va_last", "fl2va"};
const int kKeptSteps[] = {0, 2};

struct Reference {
  io::TensorSet set;
  Reference() : set(io::TensorSet::open(test::data_path("h3_dit/reference.safetensors"))) {}

  template <typename T>
  std::vector<T> values(const std::string& key) const {
    const auto& e = set.at(key);
    std::vector<T> out(e.tensor->element_count());
    EXPECT_EQ(out.size() * sizeof(T), e.tensor->bytes) << key;
    e.file->map(*e.tensor).copy_to(0, std::as_writable_bytes(std::span(out)));
    return out;
  }
};

const Reference& reference() {
  static const Reference r;
  return r;
}

// The geometry each configuration's layouts were built with (the script's GEOMETRY).
PackedGeometry geometry_of(const std::string& config) {
  if (config == "tiny") return {2, 4, 6, 5, 2};
  return {3, 8, 6, 9, 2};
}

std::int64_t rope_freq_dim_of(const std::string& config) {
  return config == "tiny" ? 2 : 4;
}

std::vector<KeyframeAnchor> anchors_of(const std::string& layout) {
  if (layout == "i2va_first") return {KeyframeAnchor::kFirst};
  if (layout == "i2va_last") return {KeyframeAnchor::kLast};
  if (layout == "fl2va") return {KeyframeAnchor::kFirst, KeyframeAnchor::kLast};
  return {};
}

PackedSequence sequence_of(const std::string& config, const std::string& layout) {
  std::vector<std::uint8_t> tags;
  for (std::int32_t t : reference().values<std::int32_t>(config + "." + layout + ".text_tags")) {
    tags.push_back(static_cast<std::uint8_t>(t));
  }
  return build_packed_sequence(tags, geometry_of(config), anchors_of(layout));
}

std::vector<std::uint16_t> to_bf16(const std::vector<float>& v) {
  std::vector<std::uint16_t> out(v.size());
  convert_from_f32(v.data(), DType::kBF16, out.data(), v.size());
  return out;
}

struct Loaded {
  io::TensorSet set;
  DitWeights weights;
  Loaded(const std::string& config, const std::string& file, QkvLayout qkv = QkvLayout::kSplit)
      : Loaded(io::TensorSet::open(test::data_path("h3_dit/" + config + "/" + file)), config, qkv) {
  }
  // A file made by the test, for `config`'s reference cases.
  Loaded(io::TensorSet opened, const std::string& config, QkvLayout qkv)
      : set(std::move(opened)), weights(DitWeights::from(set, qkv)) {
    weights.set_rope_freq_dim(rope_freq_dim_of(config));
  }
};

// One case's inputs as the reference gave them.
struct Case {
  PackedSequence sequence;
  RowTimesteps timesteps;
  std::vector<float> video, audio;
  std::vector<std::uint16_t> text;
  DitInput input() const {
    DitInput in;
    in.sequence = &sequence;
    in.timesteps = &timesteps;
    in.video = video;
    in.audio = audio;
    in.text = text;
    return in;
  }
};

Case case_of(const std::string& config, const std::string& layout, int step) {
  const std::string key = config + "." + layout;
  Case c;
  c.sequence = sequence_of(config, layout);
  const auto tv = reference().values<float>("sched.5.shift12.timesteps");
  const auto ta = reference().values<float>("sched.5.shift3.timesteps");
  c.timesteps = row_timesteps(c.sequence, tv[static_cast<std::size_t>(step)],
                              ta[static_cast<std::size_t>(step)]);
  c.video = reference().values<float>(key + ".video_in");
  c.audio = reference().values<float>(key + ".audio_in");
  c.text = to_bf16(reference().values<float>(key + ".text_in"));
  return c;
}

DitOutput run(const Loaded& m, const Case& c, Placement blocks = Placement::kDevice,
              std::int64_t chunk_tokens = 0,
              offload::ReadMethod method = offload::ReadMethod::kMapped,
              Backend* backend = nullptr) {
  const PackedSequence& s = c.sequence;
  DitForwardOptions options;
  options.chunk_tokens = chunk_tokens;
  return dit_forward(
      backend != nullptr ? *backend : test::model_backend(), m.weights,
      test::tiny_slot_plan(m.weights.model_layout(s.length(), s.text_rows, chunk_tokens), blocks,
                           method),
      c.input(), options);
}

struct Deviation {
  double max_abs = 0, rel_rms = 0;
};

Deviation compare(const std::vector<float>& got, const std::vector<float>& want) {
  EXPECT_EQ(got.size(), want.size());
  double sq = 0, ref_sq = 0, max_abs = 0;
  for (std::size_t i = 0; i < want.size() && i < got.size(); ++i) {
    const double d = static_cast<double>(got[i]) - want[i];
    max_abs = std::max(max_abs, std::abs(d));
    sq += d * d;
    ref_sq += static_cast<double>(want[i]) * want[i];
  }
  return {max_abs, std::sqrt(sq / std::max(ref_sq, 1e-30))};
}

// ---- the packed sequence ----

TEST(H3DitSequence, EqualsDiffusersBuildPackedSequenceBitForBit) {
  for (const char* config : kConfigs) {
    for (const char* layout : kLayouts) {
      const std::string key = std::string(config) + "." + layout;
      const PackedSequence s = sequence_of(config, layout);
      const auto positions = reference().values<double>(key + ".positions");
      ASSERT_EQ(positions.size(), 3 * static_cast<std::size_t>(s.length())) << key;
      for (std::size_t r = 0; r < s.positions.size(); ++r) {
        for (std::size_t a = 0; a < 3; ++a) {
          // Bit for bit: the f64 grid is what the reference reproduces exactly.
          EXPECT_EQ(std::memcmp(&s.positions[r][a], &positions[3 * r + a], sizeof(double)), 0)
              << key << " row " << r << " axis " << a << ": " << s.positions[r][a] << " vs "
              << positions[3 * r + a];
        }
      }
      std::vector<std::int32_t> tags(s.tags.begin(), s.tags.end());
      EXPECT_EQ(tags, reference().values<std::int32_t>(key + ".tags")) << key;
      const auto video = s.video_indices();
      const auto audio = s.audio_indices();
      EXPECT_EQ(std::vector<std::int32_t>(video.begin(), video.end()),
                reference().values<std::int32_t>(key + ".video_indices"))
          << key;
      EXPECT_EQ(std::vector<std::int32_t>(audio.begin(), audio.end()),
                reference().values<std::int32_t>(key + ".audio_indices"))
          << key;
      // Every step's timesteps: the distinct f32 values and each row's index.
      const auto tv = reference().values<float>("sched.5.shift12.timesteps");
      const auto ta = reference().values<float>("sched.5.shift3.timesteps");
      for (std::size_t step = 0; step < tv.size(); ++step) {
        const RowTimesteps t = row_timesteps(s, tv[step], ta[step]);
        const std::string sk = key + ".s" + std::to_string(step);
        EXPECT_EQ(t.values, reference().values<float>(sk + ".timestep")) << sk;
        EXPECT_EQ(t.index, reference().values<std::int32_t>(sk + ".timestep_indices")) << sk;
      }
    }
  }
}

// The last keyframe's time is numpy's pairwise sum of the frame spans, which differs from a
// running sum in the last ulp from 16 latent frames on (the reference keeps both).
TEST(H3DitSequence, LastKeyframeTimeIsThePairwiseSum) {
  const std::uint8_t text[] = {1, 1, 1};
  const KeyframeAnchor last[] = {KeyframeAnchor::kLast};
  // 124 frames (T' = 37) at 768x1344: the release's default request.
  const PackedSequence s = build_packed_sequence(text, {37, 48, 84, 207, 2}, last);
  double running = 0.0;
  for (int f = 0; f < 37; ++f) running += (f % 5 == 0 ? 1 : 4) * (5.0 / 3.0);
  const double t = s.positions[static_cast<std::size_t>(s.condition_start())][0];
  EXPECT_NEAR(t, 3.0 + (124 - 1) * 5.0 / 3.0, 1e-9);
  EXPECT_NEAR(t, 3.0 + running - 5.0 / 3.0, 1e-9);
  // The spatial grid of a 768x1344 canvas: w from -5.166 to 36.158, spacing 64/sqrt(h·w).
  const auto& first = s.positions[static_cast<std::size_t>(s.video_start())];
  EXPECT_NEAR(first[2], -5.166, 1e-3);
  EXPECT_NEAR(s.positions.back()[2], 36.158, 1e-3);
  EXPECT_EQ(s.length(), 3 + 24 * 42 + 2 * 207 + 37 * 24 * 42);
}

TEST(H3DitSequence, PatchifyEqualsDiffusersAndRoundTrips) {
  for (const char* config : kConfigs) {
    const std::string key = std::string(config) + ".t2va";
    const auto latent = reference().values<float>(key + ".latent");
    const auto video = reference().values<float>(key + ".video_in");
    const PackedGeometry g = geometry_of(config);
    const std::int64_t channels = static_cast<std::int64_t>(latent.size()) /
                                  (g.latent_frames * g.latent_height * g.latent_width);
    const std::vector<float> rows = patchify_video(latent, channels, g);
    EXPECT_EQ(rows, video) << key;  // T2VA: no keyframe rows before the target's
    EXPECT_EQ(unpatchify_video(rows, channels, g), latent) << key;
  }
}

TEST(H3DitSequence, RefusesBadGeometry) {
  const std::uint8_t text[] = {1};
  EXPECT_EQ(test::error_code_of([&] {
              build_packed_sequence(text, {2, 5, 6, 3, 2}, {});
            }),
            ErrorCode::kBadArgument);
  EXPECT_EQ(test::error_code_of([&] {
              build_packed_sequence({}, {2, 4, 6, 3, 2}, {});
            }),
            ErrorCode::kBadArgument);
  const KeyframeAnchor three[] = {KeyframeAnchor::kFirst, KeyframeAnchor::kLast,
                                  KeyframeAnchor::kLast};
  EXPECT_EQ(test::error_code_of([&] {
              build_packed_sequence(text, {2, 4, 6, 3, 2}, three);
            }),
            ErrorCode::kBadArgument);
}

// ---- the model ----

class H3Dit : public test::ModelTest {};

// Ferry against the reference outputs `kind` (bf16: the mixed-precision model; f32: the same
// weights in f32) for every layout and kept step; returns the worst deviations.
struct Worst {
  Deviation bf16, f32;
};

Worst expect_matches(const std::string& config, const std::string& file, const std::string& kind,
                     double rel_rms_bound, double max_abs_bound,
                     QkvLayout qkv = QkvLayout::kSplit) {
  const Loaded m(config, file, qkv);
  Worst worst;
  for (const char* layout : kLayouts) {
    for (int step : kKeptSteps) {
      const Case c = case_of(config, layout, step);
      const DitOutput out = run(m, c);
      const std::string key = config + "." + layout + ".s" + std::to_string(step) + "." + kind;
      for (const char* part : {"video", "audio"}) {
        const std::vector<float>& got = std::string(part) == "video" ? out.video : out.audio;
        const Deviation e = compare(got, reference().values<float>(key + "bf16." + part));
        EXPECT_LE(e.rel_rms, rel_rms_bound) << key << " " << part << " " << file;
        EXPECT_LE(e.max_abs, max_abs_bound) << key << " " << part << " " << file;
        worst.bf16.rel_rms = std::max(worst.bf16.rel_rms, e.rel_rms);
        worst.bf16.max_abs = std::max(worst.bf16.max_abs, e.max_abs);
        if (reference().set.find(key + "f32." + part) != nullptr) {
          const Deviation f = compare(got, reference().values<float>(key + "f32." + part));
          EXPECT_LE(f.rel_rms, rel_rms_bound) << key << " " << part << " vs f32 " << file;
          worst.f32.rel_rms = std::max(worst.f32.rel_rms, f.rel_rms);
          worst.f32.max_abs = std::max(worst.f32.max_abs, f.max_abs);
        }
      }
    }
  }
  std::printf(
      "[ measured ] %s/%s (%s): vs bf16 max|d| %.4f rel rms %.5f; vs f32 max|d| %.4f rel rms "
      "%.5f\n",
      config.c_str(), file.c_str(), kind.empty() ? "full" : kind.c_str(), worst.bf16.max_abs,
      worst.bf16.rel_rms, worst.f32.max_abs, worst.f32.rel_rms);
  return worst;
}

// Ferry's bf16 forward against PyTorch's bf16 forward of the same weights: both round every
// activation to bf16, at different points (PyTorch rounds 1 + scale, the modulation's product and
// sum, the rotation's products, SiLU and the gate separately; Ferry rounds each op's result once)
// and sum in different orders. The floor is PyTorch's own bf16 run against its f32 run of the
// same weights (the script prints it): relative RMS 0.0043-0.0061 (pruned 0.0053-0.0087), max |d|
// 0.011-0.032 (pruned 0.019-0.065) with |v| up to 6.3, over both configurations, 4 layouts, 2
// steps, video and audio. Measured on the CPU backend (the [ measured ] lines): Ferry against
// f32 at relative RMS 0.0058-0.0086, against the bf16 reference 0.0062-0.0112 (pruned), max |d|
// up to 0.068. The bounds are 1.5x the worst of those. A wrong QKV row layout is far outside
// them (WrongQkvLayoutIsCaught).
constexpr double kRelRmsBound = 0.017;
constexpr double kMaxAbsBound = 0.1;

TEST_F(H3Dit, DiffusersFolderMatchesTheReference) {
  for (const char* config : kConfigs) {
    expect_matches(config, "diffusers.safetensors", "", kRelRmsBound, kMaxAbsBound);
  }
}

TEST_F(H3Dit, InterleavedQkvMatchesTheReference) {
  for (const char* config : kConfigs) {
    expect_matches(config, "interleaved.safetensors", "", kRelRmsBound, kMaxAbsBound);
  }
}

TEST_F(H3Dit, StackedQkvMatchesTheReference) {
  for (const char* config : kConfigs) {
    expect_matches(config, "stacked.safetensors", "", kRelRmsBound, kMaxAbsBound,
                   QkvLayout::kStacked);
  }
}

TEST_F(H3Dit, F32WeightsMatchTheReference) {
  expect_matches("tiny", "f32.safetensors", "", kRelRmsBound, kMaxAbsBound);
}

TEST_F(H3Dit, PrunedCurveVariantMatchesTheReferencePrunedPath) {
  for (const char* config : kConfigs) {
    expect_matches(config, "pruned.safetensors", "pruned.", kRelRmsBound, kMaxAbsBound);
  }
}

TEST_F(H3Dit, DiffSynthNf4FilesMatchTheirDequantisedReference) {
  expect_matches("wide", "nf4.safetensors", "nf4.", kRelRmsBound, kMaxAbsBound);
  expect_matches("wide", "nf4_pruned.safetensors", "nf4_pruned.", kRelRmsBound, kMaxAbsBound);
}

// Comfy-Org's int8 ConvRot DiT (minimax_h3.md §G.3): the tiny stacked file with its 18 block
// Linears quantised by comfy-kitchen 0.2.40 (tests/data/int8_convrot/dit_tiny.safetensors,
// tools/reference/make_int8_convrot_reference.py; group sizes 4 and 16, read from each
// `.comfy_quant`), against the bf16 reference. The int8 floor the script measured, diffusers'
// model on comfy-kitchen's dequantised weights against its bf16 one: relative RMS 0.0066, max
// |d| 0.028. Ferry's deviation is at most its bf16 one (kRelRmsBound, kMaxAbsBound) plus that
// floor (the triangle inequality): the bounds add 1.5x the floor to them.
TEST_F(H3Dit, ComfyOrgInt8ConvRotFileMatchesTheBf16ReferenceWithinTheInt8Floor) {
  constexpr double kInt8RelRms = 0.0066, kInt8MaxAbs = 0.028;
  const Worst worst = expect_matches("tiny", "../../int8_convrot/dit_tiny.safetensors", "",
                                     kRelRmsBound + 1.5 * kInt8RelRms,
                                     kMaxAbsBound + 1.5 * kInt8MaxAbs, QkvLayout::kStacked);
  // The int8 weights are in use (not their bf16 originals): the output moved off Ferry's bf16 one.
  const Worst bf16 = expect_matches("tiny", "stacked.safetensors", "", kRelRmsBound, kMaxAbsBound,
                                    QkvLayout::kStacked);
  EXPECT_NE(worst.bf16.max_abs, bf16.bf16.max_abs);
}

// Comfy-Org's scaled fp8 DiT (minimax_h3.md §G.3: `weight` e4m3, a scalar fp32 `weight_scale`, a
// `.comfy_quant` naming the format; W = float(W8)·scale): the tiny stacked file with every block
// Linear so quantised here, against its twin holding exactly those dequantised values in bf16 (a
// power-of-two scale keeps float(W8)·scale exact in bf16). The two forwards are equal bit for bit,
// so an fp8 file is read as its own values, and the twin's path is the one the bf16 parity tests
// check against the reference. Quantising for real, the output moves off the bf16 file's.
TEST_F(H3Dit, ComfyOrgScaledFp8FileIsReadAsItsDequantisedValues) {
  const test::ScratchDir dir;
  const io::TensorFile source =
      io::TensorFile::open(test::data_path("h3_dit/tiny/stacked.safetensors"));
  const std::string json = R"({"format": "float8_e4m3fn"})";
  std::vector<io::TensorSpec> fp8_specs, twin_specs;
  std::vector<std::vector<std::byte>> fp8_data, twin_data;
  int quantised = 0;
  for (const io::TensorInfo& t : source.tensors()) {
    std::vector<std::byte> bytes(t.bytes);
    source.map(t).copy_to(0, bytes);
    const bool linear = t.name.starts_with("blocks.") && t.name.ends_with(".weight") &&
                        t.shape.size() == 2 && t.dtype == DType::kBF16;
    if (!linear) {
      fp8_specs.push_back({t.name, t.dtype, t.shape});
      fp8_data.push_back(bytes);
      twin_specs.push_back({t.name, t.dtype, t.shape});
      twin_data.push_back(std::move(bytes));
      continue;
    }
    ++quantised;
    std::vector<float> w(bytes.size() / 2);
    for (std::size_t i = 0; i < w.size(); ++i) {
      std::uint16_t b;
      std::memcpy(&b, bytes.data() + 2 * i, 2);
      w[i] = bf16_to_f32(b);
    }
    float amax = 0;
    for (float v : w) amax = std::max(amax, std::abs(v));
    const float scale = std::exp2(std::ceil(std::log2(amax / 448.0f)));
    std::vector<std::byte> q(w.size()), twin(bytes.size());
    for (std::size_t i = 0; i < w.size(); ++i) {
      const std::uint8_t code = f32_to_f8e4m3(w[i] / scale);
      q[i] = static_cast<std::byte>(code);
      const std::uint16_t exact = f32_to_bf16(f8e4m3_to_f32(code) * scale);
      ASSERT_EQ(bf16_to_f32(exact), f8e4m3_to_f32(code) * scale) << t.name;
      std::memcpy(twin.data() + 2 * i, &exact, 2);
    }
    const std::string stem = t.name.substr(0, t.name.size() - std::string(".weight").size());
    fp8_specs.push_back({t.name, DType::kF8E4M3, t.shape});
    fp8_data.push_back(std::move(q));
    fp8_specs.push_back({stem + ".weight_scale", DType::kF32, {}});
    fp8_data.push_back(std::vector<std::byte>(4));
    std::memcpy(fp8_data.back().data(), &scale, 4);
    fp8_specs.push_back({stem + ".comfy_quant", DType::kU8, {json.size()}});
    fp8_data.push_back(std::vector<std::byte>(json.size()));
    std::memcpy(fp8_data.back().data(), json.data(), json.size());
    twin_specs.push_back({t.name, t.dtype, t.shape});
    twin_data.push_back(std::move(twin));
  }
  ASSERT_GT(quantised, 0);
  const auto write = [](const fs::path& path, const std::vector<io::TensorSpec>& specs,
                        const std::vector<std::vector<std::byte>>& data) {
    io::write_safetensors(path, specs, {},
                          [&](std::size_t i, std::uint64_t offset, std::span<std::byte> out) {
                            std::memcpy(out.data(), data[i].data() + offset, out.size());
                          });
  };
  write(dir / "fp8.safetensors", fp8_specs, fp8_data);
  write(dir / "twin.safetensors", twin_specs, twin_data);
  const Loaded fp8(io::TensorSet::open(dir / "fp8.safetensors"), "tiny", QkvLayout::kStacked);
  const Loaded twin(io::TensorSet::open(dir / "twin.safetensors"), "tiny", QkvLayout::kStacked);
  const Loaded bf16("tiny", "stacked.safetensors", QkvLayout::kStacked);
  for (const char* layout : kLayouts) {
    const Case c = case_of("tiny", layout, 2);
    const DitOutput got = run(fp8, c);
    const DitOutput want = run(twin, c);
    EXPECT_EQ(got.video, want.video) << layout;
    EXPECT_EQ(got.audio, want.audio) << layout;
    EXPECT_NE(got.video, run(bf16, c).video) << layout << ": the fp8 weights were not used";
  }
}

// Each int8 Linear's row scales and JSON stream with its block: the block's group holds them, so
// the plan counts their bytes.
TEST_F(H3Dit, Int8ConvRotSideTensorsStreamWithTheirBlock) {
  const Loaded m("tiny", "../../int8_convrot/dit_tiny.safetensors", QkvLayout::kStacked);
  const offload::LayerGroup& group = m.weights.group(m.weights.block_group(1));
  std::uint64_t side_bytes = 0;
  int scales = 0, quants = 0;
  for (const offload::WeightRef& w : group.weights) {
    const std::string& name = w.tensor->name;
    if (name.ends_with(".weight_scale")) ++scales;
    if (name.ends_with(".comfy_quant")) ++quants;
    if (name.ends_with(".weight_scale") || name.ends_with(".comfy_quant")) {
      side_bytes += w.tensor->bytes;
      EXPECT_TRUE(name.starts_with("blocks.1.")) << name;
    }
  }
  EXPECT_EQ(scales, 5);  // qkv, out, fc1, fc2, adaln
  EXPECT_EQ(quants, 5);
  // The row scales alone: 4 bytes for each of the 96 + 24 + 64 + 24 + 432 rows.
  EXPECT_GT(side_bytes, 4u * (96 + 24 + 64 + 24 + 432));
  std::uint64_t all = 0;
  for (const offload::WeightRef& w : group.weights) all += w.tensor->bytes;
  EXPECT_EQ(group.bytes(), all);
}

// The bounds see a layout mistake: the interleaved file read as stacked.
TEST_F(H3Dit, WrongQkvLayoutIsCaught) {
  const Loaded m("wide", "interleaved.safetensors", QkvLayout::kStacked);
  const Case c = case_of("wide", "fl2va", 2);
  const Deviation e =
      compare(run(m, c).video, reference().values<float>("wide.fl2va.s2.bf16.video"));
  std::printf("[ measured ] interleaved read as stacked: rel rms %.4f\n", e.rel_rms);
  EXPECT_GT(e.rel_rms, 2 * kRelRmsBound);  // measured 0.061
}

TEST_F(H3Dit, InfersTheConfigurationAndLayoutsFromTheFile) {
  struct Want {
    const char* config;
    const char* file;
    DitKeyLayout layout;
    QkvLayout qkv;
    bool pruned;
  } cases[] = {
      {"tiny", "diffusers.safetensors", DitKeyLayout::kDiffusers, QkvLayout::kSplit, false},
      {"tiny", "interleaved.safetensors", DitKeyLayout::kOriginal, QkvLayout::kInterleaved, false},
      {"tiny", "pruned.safetensors", DitKeyLayout::kOriginal, QkvLayout::kStacked, true},
      {"wide", "nf4.safetensors", DitKeyLayout::kOriginal, QkvLayout::kInterleaved, false},
      {"wide", "nf4_pruned.safetensors", DitKeyLayout::kOriginal, QkvLayout::kStacked, true},
  };
  for (const Want& w : cases) {
    const Loaded m(w.config, w.file);
    const DitConfig& c = m.weights.config();
    const bool tiny = std::string(w.config) == "tiny";
    EXPECT_EQ(m.weights.key_layout(), w.layout) << w.file;
    EXPECT_EQ(m.weights.qkv_layout(), w.qkv) << w.file;
    EXPECT_EQ(c.pruned, w.pruned) << w.file;
    EXPECT_EQ(c.hidden, tiny ? 24 : 64);
    EXPECT_EQ(c.heads, tiny ? 2 : 4);
    EXPECT_EQ(c.head_dim, tiny ? 16 : 32);
    EXPECT_EQ(c.ffn, tiny ? 32 : 128);
    EXPECT_EQ(c.layers, 2);
    EXPECT_EQ(c.refiner_layers, 2);
    EXPECT_EQ(c.patch_dim, tiny ? 16 : 32);
    EXPECT_EQ(c.audio_channels, tiny ? 6 : 8);
    EXPECT_EQ(c.text_dim, tiny ? 8 : 32);
    EXPECT_EQ(c.time_dim, w.pruned ? 8 : (tiny ? 16 : 64));
    EXPECT_EQ(c.curve_rows, w.pruned ? 1025 : 0);
    // embeddings, 2 refiner blocks, the refiner norm, 2 blocks, head.
    const offload::ModelLayout layout = m.weights.model_layout(65, 11, 0);
    ASSERT_EQ(layout.groups.size(), 7u);
    EXPECT_EQ(layout.groups[3].name, "refiner.norm");
    EXPECT_EQ(layout.groups[4].name, "blocks.0");
    for (std::size_t g : {std::size_t{0}, std::size_t{3}, std::size_t{6}}) {
      EXPECT_TRUE(layout.groups[g].always_resident) << layout.groups[g].name;
    }
    EXPECT_FALSE(layout.groups[4].always_resident);
  }
}

// Streamed from disk or the pinned cache: the same bits as resident.
TEST_F(H3Dit, StreamedIsBitIdenticalToResident) {
  for (const char* file : {"interleaved.safetensors", "nf4.safetensors"}) {
    const Loaded m("wide", file);
    const Case c = case_of("wide", "fl2va", 2);
    const DitOutput resident = run(m, c, Placement::kDevice);
    for (auto method : {offload::ReadMethod::kMapped, offload::ReadMethod::kDirect}) {
      for (Placement p : {Placement::kDisk, Placement::kPinnedCache}) {
        const DitOutput streamed = run(m, c, p, 0, method);
        EXPECT_EQ(streamed.video, resident.video) << file;
        EXPECT_EQ(streamed.audio, resident.audio) << file;
        EXPECT_EQ(streamed.stream.groups_uploaded, 4u) << file;  // 2 refiner blocks, 2 blocks
      }
    }
  }
}

// Token chunks (1, one not dividing the 89 rows, runs of (timestep, modality) crossing chunk
// edges) compute the whole forward bit for bit: chunking only bounds the working memory. On
// Ferry's own CPU GEMM, whose sums do not depend on the row count (OpenBLAS, and so the default
// path of NF4 weights, picks other kernels for fewer rows: chunks then flip bf16 roundings).
TEST_F(H3Dit, TokenChunksGiveTheWholeForwardBitForBit) {
  cpu::CpuBackend own(cpu::default_thread_pool(), cpu::GemmPath::kOwn);
  for (const char* file : {"interleaved.safetensors", "nf4.safetensors"}) {
    const Loaded m("wide", file);
    const Case c = case_of("wide", "fl2va", 2);
    const DitOutput whole = run(m, c, Placement::kDevice, 0, offload::ReadMethod::kMapped, &own);
    for (std::int64_t chunk : {1, 16, 30}) {
      const DitOutput chunked =
          run(m, c, Placement::kDisk, chunk, offload::ReadMethod::kMapped, &own);
      EXPECT_EQ(chunked.video, whole.video) << file << " chunk " << chunk;
      EXPECT_EQ(chunked.audio, whole.audio) << file << " chunk " << chunk;
    }
  }
}

TEST_F(H3Dit, ActivationsUseExactlyTheEstimate) {
  for (const char* file : {"diffusers.safetensors", "stacked.safetensors", "pruned.safetensors"}) {
    const Loaded m("wide", file);
    for (const char* layout : kLayouts) {
      for (int step : kKeptSteps) {
        const Case c = case_of("wide", layout, step);
        for (std::int64_t chunk : {0, 16}) {
          const DitOutput out = run(m, c, Placement::kDisk, chunk);
          EXPECT_EQ(out.activation_peak, out.activation_bytes) << file << " " << layout;
          EXPECT_EQ(
              out.activation_bytes,
              m.weights.activation_bytes(c.sequence.length(), c.sequence.text_rows, chunk,
                                         static_cast<std::int64_t>(c.timesteps.values.size())));
        }
      }
    }
  }
}

TEST_F(H3Dit, RefusesInputsThatDoNotMatch) {
  const Loaded m("tiny", "diffusers.safetensors");
  Backend& backend = test::model_backend();
  const Case good = case_of("tiny", "fl2va", 0);
  const Plan plan =
      test::tiny_slot_plan(m.weights.model_layout(good.sequence.length(), 7, 0), Placement::kDisk);
  Case short_video = good;
  short_video.video.pop_back();
  EXPECT_EQ(
      test::error_code_of([&] { dit_forward(backend, m.weights, plan, short_video.input()); }),
      ErrorCode::kBadArgument);
  Case wrong_text = good;
  wrong_text.text.resize(wrong_text.text.size() + 8);
  EXPECT_EQ(test::error_code_of([&] { dit_forward(backend, m.weights, plan, wrong_text.input()); }),
            ErrorCode::kBadArgument);
  Case bad_index = good;
  bad_index.timesteps.index[3] = 7;
  EXPECT_EQ(test::error_code_of([&] { dit_forward(backend, m.weights, plan, bad_index.input()); }),
            ErrorCode::kBadArgument);
  // diffusers' weights do not say how many rotary frequencies there are: 16 (the release's)
  // do not fit the tiny heads of 16 dims.
  const auto set = io::TensorSet::open(test::data_path("h3_dit/tiny/diffusers.safetensors"));
  const DitWeights unset = DitWeights::from(set);
  EXPECT_EQ(unset.config().rope_freq_dim, 16);
  EXPECT_EQ(test::error_code_of([&] { dit_forward(backend, unset, plan, good.input()); }),
            ErrorCode::kBadArgument);
}

TEST_F(H3Dit, CancelStopsBeforeTheNextBlock) {
  const Loaded m("tiny", "diffusers.safetensors");
  const Case c = case_of("tiny", "t2va", 0);
  std::atomic<bool> cancel{true};
  DitForwardOptions options;
  options.cancel = &cancel;
  EXPECT_EQ(test::error_code_of([&] {
              dit_forward(test::model_backend(), m.weights,
                          test::tiny_slot_plan(m.weights.model_layout(c.sequence.length(), 7, 0),
                                               Placement::kDisk),
                          c.input(), options);
            }),
            ErrorCode::kCancelled);
}

// ComfyUI saves put "model.diffusion_model." before every name: the same model, the same bits.
TEST_F(H3Dit, ReadsNamesBehindComfyUisPrefix) {
  const auto src = io::TensorSet::open(test::data_path("h3_dit/tiny/stacked.safetensors"));
  std::vector<io::TensorSpec> specs;
  std::vector<const io::TensorSet::Entry*> entries;
  for (const auto& e : src.entries()) {
    specs.push_back({kComfyPrefix + e.tensor->name, e.tensor->dtype, e.tensor->shape});
    entries.push_back(&e);
  }
  test::ScratchDir dir;
  const auto path = dir / "prefixed.safetensors";
  io::write_safetensors(path, specs, {},
                        [&](std::size_t i, std::uint64_t offset, std::span<std::byte> out) {
                          entries[i]->file->map(*entries[i]->tensor).copy_to(offset, out);
                        });
  const auto set = io::TensorSet::open(path);
  DitWeights prefixed = DitWeights::from(set, QkvLayout::kStacked);
  prefixed.set_rope_freq_dim(2);
  EXPECT_EQ(prefixed.name_prefix(), kComfyPrefix);
  EXPECT_EQ(prefixed.key_layout(), DitKeyLayout::kOriginal);
  const Loaded plain("tiny", "stacked.safetensors", QkvLayout::kStacked);
  const Case c = case_of("tiny", "i2va_last", 2);
  const DitOutput want = run(plain, c);
  const DitOutput got = dit_forward(
      test::model_backend(), prefixed,
      test::tiny_slot_plan(prefixed.model_layout(c.sequence.length(), 7, 0), Placement::kDisk),
      c.input());
  EXPECT_EQ(got.video, want.video);
  EXPECT_EQ(got.audio, want.audio);
}

TEST_F(H3Dit, RefusesAFileThatIsNotAnH3Dit) {
  const auto set = io::TensorSet::open(test::data_path("h3/text_encoder/tiny/comfy.safetensors"));
  EXPECT_EQ(test::error_code_of([&] { DitWeights::from(set); }), ErrorCode::kBadModelFile);
}

// ---- the scheduler ----

TEST(H3Scheduler, SigmasAndTimestepsEqualMiniMaxH3SchedulerExactly) {
  for (int n : {2, 5, 20, 50}) {
    for (int shift : {12, 3, 6}) {
      const std::string key = "sched." + std::to_string(n) + ".shift" + std::to_string(shift);
      const H3Schedule s = h3_schedule(n, static_cast<float>(shift));
      EXPECT_EQ(s.sigmas, reference().values<float>(key + ".sigmas")) << key;
      EXPECT_EQ(s.timesteps, reference().values<float>(key + ".timesteps")) << key;
    }
  }
  // 50 grid points: 49 evaluations, ending 0.338028, 0.2, 0 (minimax_h3.md §D.1).
  const H3Schedule s = h3_schedule(50, kVideoShift);
  EXPECT_EQ(s.steps(), 49u);
  EXPECT_NEAR(s.sigmas[s.sigmas.size() - 2], 0.2, 1e-6);
  EXPECT_EQ(s.sigmas.back(), 0.0f);
  EXPECT_EQ(test::error_code_of([] { h3_schedule(1, 12.0f); }), ErrorCode::kBadArgument);
  EXPECT_EQ(test::error_code_of([] { h3_schedule(5, 0.0f); }), ErrorCode::kBadArgument);
}

TEST(H3Scheduler, EulerStepIsTheBlendOfTheReference) {
  const H3Schedule s = h3_schedule(5, kAudioShift);
  std::vector<float> x = {1.0f, -2.0f, 0.5f};
  const std::vector<float> v = {0.25f, 1.0f, -3.0f};
  const std::vector<float> before = x;
  h3_euler_step(s, 1, v, x);
  for (std::size_t i = 0; i < x.size(); ++i) {
    // x' = x + (σ_i − σ_{i+1})·v up to f32 rounding.
    const double want = before[i] + (static_cast<double>(s.sigmas[1]) - s.sigmas[2]) * v[i];
    EXPECT_NEAR(x[i], want, 1e-6);
  }
  EXPECT_EQ(test::error_code_of([&] { h3_euler_step(s, 4, v, x); }), ErrorCode::kBadArgument);
}

// Four steps of both schedules on tiny/T2VA, the DiT called at each step's (t_video, t_audio),
// from the reference's inputs as the noise: against diffusers' loop with its bf16 and f32 models.
// The floor (the reference's bf16 loop against its f32 loop): relative RMS 0.0029 (video) and
// 0.0018 (audio). Measured on the CPU backend: Ferry against the bf16 loop 0.0030 / 0.0025, against
// the f32 loop 0.0028 / 0.0025 (the f32 Euler blend and the exact schedules add nothing
// measurable). Bound: the per-forward bound.
TEST_F(H3Dit, FourStepTrajectoryMatchesTheReference) {
  const Loaded m("tiny", "diffusers.safetensors");
  const H3Schedule video = h3_schedule(5, kVideoShift);
  const H3Schedule audio = h3_schedule(5, kAudioShift);
  ASSERT_EQ(video.steps(), 4u);
  ASSERT_EQ(audio.steps(), 4u);
  Case c = case_of("tiny", "t2va", 0);
  for (std::size_t step = 0; step < video.steps(); ++step) {
    c.timesteps = row_timesteps(c.sequence, video.timesteps[step], audio.timesteps[step]);
    const DitOutput out = run(m, c);
    h3_euler_step(video, step, out.video, c.video);
    h3_euler_step(audio, step, out.audio, c.audio);
  }
  for (const char* kind : {"bf16", "f32"}) {
    const Deviation v =
        compare(c.video, reference().values<float>(std::string("traj.") + kind + ".video"));
    const Deviation a =
        compare(c.audio, reference().values<float>(std::string("traj.") + kind + ".audio"));
    std::printf(
        "[ measured ] 4-step trajectory vs %s: video rel rms %.5f max|d| %.4f; audio rel "
        "rms %.5f max|d| %.4f\n",
        kind, v.rel_rms, v.max_abs, a.rel_rms, a.max_abs);
    EXPECT_LE(v.rel_rms, kRelRmsBound) << kind;
    EXPECT_LE(a.rel_rms, kRelRmsBound) << kind;
  }
}

// ---- the release's shapes ----

// minimax_h3.md §C.1: the 33B DiT.
DitConfig release_config() {
  DitConfig c;
  c.hidden = 5376;
  c.heads = 56;
  c.head_dim = 128;
  c.ffn = 14336;
  c.layers = 50;
  c.refiner_layers = 2;
  c.patch_dim = 96;
  c.audio_channels = 32;
  c.text_dim = 5120;
  c.freq_dim = 256;
  c.time_hidden = 5376;
  c.time_dim = 2688;
  return c;
}

// The packed sequence at the release's sizes (124 frames: T' = 37, A = round(124/24·40) = 207;
// a 128-row prompt) and the forward's activations with and without token chunks: what lets 768p
// fit an 8 GB card (an FFN hidden state of every row alone is 38k x 57344 x 2 B = 4.3 GB).
TEST(H3DitShapes, ActivationsAtTheReleaseSizes) {
  const DitConfig c = release_config();
  const std::vector<std::uint8_t> text(128, kTextTag);
  const KeyframeAnchor fl2va[] = {KeyframeAnchor::kFirst, KeyframeAnchor::kLast};
  struct Size {
    const char* name;
    PackedGeometry g;
    std::int64_t expected_t2va;
  } sizes[] = {{"480x832x124", {37, 30, 52, 207, 2}, 128 + 414 + 37 * 390},
               {"768x1344x124", {37, 48, 84, 207, 2}, 128 + 414 + 37 * 1008}};
  for (const Size& size : sizes) {
    const PackedSequence t2va = build_packed_sequence(text, size.g, {});
    const PackedSequence fl = build_packed_sequence(text, size.g, fl2va);
    EXPECT_EQ(t2va.length(), size.expected_t2va);
    EXPECT_EQ(fl.length(), size.expected_t2va + 2 * size.g.rows_per_frame());
    std::uint64_t previous = 0;
    for (std::int64_t chunk : {0, 8192, 4096, 2048, 1024}) {
      const std::uint64_t bytes = dit_activation_bytes(c, true, fl.length(), 128, chunk, 4);
      std::printf("[ estimate ] %s FL2VA S=%lld chunk %lld: activations %.3f GiB\n", size.name,
                  static_cast<long long>(fl.length()), static_cast<long long>(chunk),
                  static_cast<double>(bytes) / (1u << 30));
      if (previous != 0) {
        EXPECT_LT(bytes, previous) << size.name << " chunk " << chunk;
      }
      previous = bytes;
    }
    // What chunks cannot shrink: the residual stream and q, k, v of every row (bf16).
    const auto floor = static_cast<std::uint64_t>(fl.length()) *
                       static_cast<std::uint64_t>(c.hidden + 3 * c.inner()) * 2;
    EXPECT_GT(previous, floor);
    EXPECT_LT(previous, floor + (std::uint64_t{256} << 20)) << size.name;
  }
}

}  // namespace
}  // namespace ferry::models::h3::dit
