// H3's keyframe path against tests/data/h3/vision/ (tools/reference/make_h3_vision_reference.py):
// the image preprocessing against transformers' Qwen2-VL processor (PIL backend), the vision tower
// against transformers' Qwen3VLVisionModel at two tiny sizes, and the whole conditioner (tower,
// vision rows, DeepStack, positions, 50 decoder layers) against Qwen3VLModel. On the CPU backend
// in ferry_tests, on the CUDA backend in ferry_cuda_model_tests (tests/gpu/run.sh).
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/io/safetensors_writer.h"
#include "core/io/tensor_set.h"
#include "core/models/h3/bpe_tokenizer.h"
#include "core/models/h3/conditioner.h"
#include "core/models/h3/image_preprocess.h"
#include "core/models/h3/presentation.h"
#include "core/models/h3/vision_tower.h"
#include "core/tensor/convert.h"
#include "tests/models/model_test_backend.h"
#include "tests/test_support.h"

namespace ferry::models::h3 {
namespace {

using offload::Placement;
using offload::Plan;

struct Reference {
  io::TensorSet set;
  Reference() : set(io::TensorSet::open(test::data_path("h3/vision/reference.safetensors"))) {}

  template <typename T>
  std::vector<T> values(const std::string& key) const {
    const auto& e = set.at(key);
    std::vector<T> out(e.tensor->element_count());
    e.file->map(*e.tensor).copy_to(0, std::as_writable_bytes(std::span(out)));
    return out;
  }
  std::vector<std::uint64_t> shape(const std::string& key) const {
    return set.at(key).tensor->shape;
  }
  bool has(const std::string& key) const { return set.find(key) != nullptr; }

  media::RgbImage image(const std::string& key) const {
    media::RgbImage im;
    const auto s = shape(key);
    im.height = static_cast<int>(s.at(0));
    im.width = static_cast<int>(s.at(1));
    im.rgb = values<std::uint8_t>(key);
    return im;
  }
};

const Reference& reference() {
  static const Reference r;
  return r;
}

// The processor's value of a byte: (v/255 - 0.5)/0.5 (the script asserts every value it wrote is
// one of these).
float processor_value(std::uint8_t v) {
  return (static_cast<float>(static_cast<double>(v) * (1.0 / 255.0)) - 0.5f) / 0.5f;
}

class H3Vision : public test::ModelTest {};

// ---- 1. preprocessing ----

TEST_F(H3Vision, PreprocessingEqualsTheProcessorBitForBit) {
  for (const char* name : {"h3_up", "h3_round", "h3_kept", "h3_down", "small_down", "small_up",
                           "small_wide", "small_odd"}) {
    const std::string key = std::string("pre.") + name;
    const auto cfg = reference().values<std::int32_t>(key + ".config");
    ImageProcessorConfig config;
    config.patch = cfg[0];
    config.merge = cfg[1];
    config.temporal_patch = cfg[2];
    config.min_pixels = cfg[3];
    config.max_pixels = cfg[4];
    const media::RgbImage image = reference().image(key + ".image");
    const VisionPatches got = preprocess_image(image, config);
    const auto grid = reference().values<std::int32_t>(key + ".grid");
    EXPECT_EQ(got.grid.t, grid[0]) << name;
    EXPECT_EQ(got.grid.h, grid[1]) << name;
    EXPECT_EQ(got.grid.w, grid[2]) << name;
    const auto bytes = reference().values<std::uint8_t>(key + ".patches");
    ASSERT_EQ(got.values.size(), bytes.size()) << name;
    std::size_t differ = 0;
    for (std::size_t i = 0; i < bytes.size(); ++i) {
      differ += got.values[i] != processor_value(bytes[i]) ? 1 : 0;
    }
    EXPECT_EQ(differ, 0u) << name << ": " << differ << " of " << bytes.size() << " values differ";
    std::printf("[ measured ] %s %dx%d -> %lldx%lld patches: %zu of %zu values differ\n", name,
                image.height, image.width, static_cast<long long>(got.grid.h),
                static_cast<long long>(got.grid.w), differ, bytes.size());
  }
}

TEST_F(H3Vision, SmartResizeFollowsTheProcessorsRule) {
  const ImageProcessorConfig h3;
  // On the canvas: kept. Rounding: halves to even (336 = 10.5 x 32 -> 320, 400 = 12.5 x 32 ->
  // 384, 368 = 11.5 x 32 -> 384).
  EXPECT_EQ(smart_resize(768, 1344, h3).height, 768u);
  EXPECT_EQ(smart_resize(768, 1344, h3).width, 1344u);
  EXPECT_EQ(smart_resize(336, 400, h3).height, 320u);
  EXPECT_EQ(smart_resize(336, 400, h3).width, 384u);
  EXPECT_EQ(smart_resize(368, 400, h3).height, 384u);
  // Under 65,536 pixels: scaled up, rounded up to 32.
  const ImageSize up = smart_resize(170, 230, h3);
  EXPECT_EQ(up.height, 224u);
  EXPECT_EQ(up.width, 320u);
  // Over the maximum: scaled down, rounded down.
  ImageProcessorConfig small = h3;
  small.max_pixels = 100000;
  const ImageSize down = smart_resize(1000, 700, small);
  EXPECT_EQ(down.height, 352u);
  EXPECT_EQ(down.width, 256u);
  // presentation.h's smart_resize is H3's configuration of this one.
  EXPECT_EQ(smart_resize(333, 431).height, smart_resize(333, 431, h3).height);
  EXPECT_EQ(test::error_code_of([&] { smart_resize(10, 2100, h3); }), ErrorCode::kBadArgument);
  EXPECT_EQ(test::error_code_of([&] { smart_resize(0, 10, h3); }), ErrorCode::kBadArgument);
}

TEST_F(H3Vision, ResizeKeepsAnImageOfTheSameSizeAndRefusesAnEmptyOne) {
  const media::RgbImage image = reference().image("pre.h3_kept.image");
  const media::RgbImage same = resize_bicubic(image, image.width, image.height);
  EXPECT_EQ(same.rgb, image.rgb);
  EXPECT_EQ(test::error_code_of([&] { resize_bicubic(media::RgbImage{}, 4, 4); }),
            ErrorCode::kBadArgument);
}

// ---- 2. the vision tower ----

struct Diff {
  double max_abs = 0, rel_rms = 0;
};

Diff compare(const std::vector<float>& got, const std::vector<float>& want) {
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

// The keyframe images of set `k`, preprocessed by Ferry for H3's processor.
std::vector<VisionPatches> keyframes(const std::string& k) {
  std::vector<VisionPatches> out;
  for (int i = 0; reference().has("keyframes." + k + "." + std::to_string(i)); ++i) {
    out.push_back(preprocess_image(reference().image("keyframes." + k + "." + std::to_string(i))));
  }
  return out;
}

void expect_grids(const std::vector<VisionPatches>& images, const std::string& key) {
  const auto g = reference().values<std::int32_t>(key + ".grids");
  ASSERT_EQ(g.size(), images.size() * 3) << key;
  for (std::size_t i = 0; i < images.size(); ++i) {
    EXPECT_EQ(images[i].grid.h, g[i * 3 + 1]) << key;
    EXPECT_EQ(images[i].grid.w, g[i * 3 + 2]) << key;
  }
}

Plan plan_for(const offload::ModelLayout& layout, Placement blocks) {
  Plan plan;
  plan.look_ahead = 1;
  std::uint64_t largest = 0;
  for (const auto& g : layout.groups) {
    plan.placement.push_back(blocks);
    if (blocks != Placement::kDevice) largest = std::max(largest, g.slot_bytes());
  }
  plan.device_slots = blocks == Placement::kDevice ? 0 : 2;
  plan.device_slot_bytes = largest;
  plan.staging_slots = 3;
  plan.staging_slot_bytes = 4 << 10;  // smaller than a block: several chunks per tensor
  return plan;
}

struct Tower {
  io::TensorSet set;
  VisionTowerWeights weights;
  Tower(const std::string& file, std::int64_t heads, std::vector<std::int64_t> deepstack)
      : set(io::TensorSet::open(test::data_path("h3/vision/" + file))),
        weights(VisionTowerWeights::from(set, heads, std::move(deepstack))) {}
};

Tower tower(const std::string& config) {
  if (config == "tiny") return Tower("tower.tiny.safetensors", 2, {0, 2, 3});
  return Tower("tower.wide.safetensors", 1, {0, 1, 2});
}

VisionEncodeResult run_tower(const Tower& t, const std::vector<VisionPatches>& images,
                             DType activations, Placement blocks = Placement::kDevice) {
  VisionEncodeOptions options;
  options.activations = activations;
  std::int64_t patches = 0;
  for (const auto& p : images) patches += p.patches();
  return encode_images(test::model_backend(), t.weights,
                       plan_for(t.weights.model_layout(patches), blocks), images, options);
}

// Ferry's bf16 tower against PyTorch's bf16 run of the same weights and against the f32 run.
// The floor is PyTorch's own bf16 run against its f32 run (the script prints it): relative RMS
// 0.0062-0.0082 (merged) and 0.0060-0.0065 (DeepStack), max |d| up to 0.020. Measured on the CPU
// backend ([ measured ] lines, 2 configurations x 2 keyframe sets): Ferry's bf16 run is at that
// floor, against the bf16 reference at relative RMS 0.0065-0.0090 and max |d| up to 0.0195,
// against the f32 one at 0.0062-0.0081. The bounds are 1.5x the worst of those. With f32
// activations Ferry follows the f32 run to f32 rounding (relative RMS 7.4e-7 to 8.6e-7); the
// bound leaves room for another backend's summation order (10x) and is far under what a wrong
// rotary axis gives (the row and column angles swapped: 0.07-0.17).
constexpr double kTowerRelRms = 0.0135;
constexpr double kTowerMaxAbs = 0.03;
constexpr double kTowerF32RelRms = 1e-5;

TEST_F(H3Vision, InfersTheTowerConfigurationFromTheFile) {
  const Tower t = tower("wide");
  const VisionConfig& c = t.weights.config();
  EXPECT_EQ(t.weights.prefix(), "model.visual.");
  EXPECT_EQ(c.dim, 72);
  EXPECT_EQ(c.heads, 1);  // 72 / 72, Qwen3-VL's head size, when not given
  EXPECT_EQ(VisionTowerWeights::from(t.set, 0, {0, 1, 2}).config().heads, 1);
  EXPECT_EQ(c.ffn_dim, 64);
  EXPECT_EQ(c.depth, 3);
  EXPECT_EQ(c.patch, 16);
  EXPECT_EQ(c.temporal_patch, 2);
  EXPECT_EQ(c.merge, 2);
  EXPECT_EQ(c.out_dim, 64);
  EXPECT_EQ(c.position_side, 48);
  const offload::ModelLayout layout = t.weights.model_layout();
  ASSERT_EQ(layout.groups.size(), 5u);  // embed, 3 blocks, merger
  EXPECT_EQ(layout.groups[1].weights.size(), std::size_t{kBlockTensorCount} + kMergerTensorCount);
  EXPECT_EQ(layout.groups[4].name, "visual.merger");
  // The file has 3 DeepStack mergers: H3's default blocks 8, 16, 24 do not exist in 3 blocks.
  EXPECT_EQ(test::error_code_of([&] { VisionTowerWeights::from(t.set, 1); }),
            ErrorCode::kBadModelFile);
  EXPECT_EQ(test::error_code_of([&] {
              VisionTowerWeights::from(t.set, 1, {0, 1});
            }),
            ErrorCode::kBadModelFile);
  EXPECT_EQ(test::error_code_of([&] {
              VisionTowerWeights::from(t.set, 5, {0, 1, 2});
            }),
            ErrorCode::kBadModelFile);
}

TEST_F(H3Vision, TowerMatchesTransformers) {
  for (const char* config : {"tiny", "wide"}) {
    const Tower t = tower(config);
    for (const char* k : {"one", "two"}) {
      const std::string key = std::string("tower.") + config + "." + k;
      const std::vector<VisionPatches> images = keyframes(k);
      expect_grids(images, key);
      const VisionEncodeResult bf16 = run_tower(t, images, DType::kBF16);
      const VisionEncodeResult f32 = run_tower(t, images, DType::kF32);
      ASSERT_EQ(bf16.features.deepstack.size(), 3u);
      const Diff m16 = compare(bf16.features.merged, reference().values<float>(key + ".bf16"));
      const Diff m32 = compare(bf16.features.merged, reference().values<float>(key + ".f32"));
      const Diff e32 = compare(f32.features.merged, reference().values<float>(key + ".f32"));
      EXPECT_LE(m16.rel_rms, kTowerRelRms) << key;
      EXPECT_LE(m16.max_abs, kTowerMaxAbs) << key;
      EXPECT_LE(m32.rel_rms, kTowerRelRms) << key;
      EXPECT_LE(e32.rel_rms, kTowerF32RelRms) << key;
      const auto deep16 = reference().values<float>(key + ".deepstack.bf16");
      const auto deep32 = reference().values<float>(key + ".deepstack.f32");
      const std::size_t block = bf16.features.merged.size();
      double worst16 = 0, worst32 = 0, worst_f32 = 0;
      for (std::size_t d = 0; d < 3; ++d) {
        const auto slice = [&](const std::vector<float>& v) {
          return std::vector<float>(v.begin() + static_cast<std::ptrdiff_t>(d * block),
                                    v.begin() + static_cast<std::ptrdiff_t>((d + 1) * block));
        };
        const Diff a = compare(bf16.features.deepstack[d], slice(deep16));
        const Diff b = compare(bf16.features.deepstack[d], slice(deep32));
        const Diff e = compare(f32.features.deepstack[d], slice(deep32));
        EXPECT_LE(a.rel_rms, kTowerRelRms) << key << " deepstack " << d;
        EXPECT_LE(a.max_abs, kTowerMaxAbs) << key << " deepstack " << d;
        EXPECT_LE(e.rel_rms, kTowerF32RelRms) << key << " deepstack " << d;
        worst16 = std::max(worst16, a.rel_rms);
        worst32 = std::max(worst32, b.rel_rms);
        worst_f32 = std::max(worst_f32, e.rel_rms);
      }
      std::printf(
          "[ measured ] %s: merged vs bf16 rel rms %.5f max|d| %.4f, vs f32 %.5f; f32 run vs f32 "
          "%.2e; deepstack worst vs bf16 %.5f, vs f32 %.5f, f32 run %.2e\n",
          key.c_str(), m16.rel_rms, m16.max_abs, m32.rel_rms, e32.rel_rms, worst16, worst32,
          worst_f32);
      EXPECT_EQ(bf16.activation_peak, bf16.activation_bytes) << key;
      EXPECT_EQ(f32.activation_peak, f32.activation_bytes) << key;
    }
  }
}

TEST_F(H3Vision, TowerStreamedIsBitIdenticalToResident) {
  const Tower t = tower("tiny");
  const std::vector<VisionPatches> images = keyframes("two");
  const VisionEncodeResult resident = run_tower(t, images, DType::kBF16);
  for (Placement p : {Placement::kDisk, Placement::kPinnedCache}) {
    const VisionEncodeResult streamed = run_tower(t, images, DType::kBF16, p);
    EXPECT_EQ(streamed.features.merged, resident.features.merged);
    EXPECT_EQ(streamed.features.deepstack, resident.features.deepstack);
    EXPECT_EQ(streamed.stream.groups_uploaded, t.weights.model_layout().groups.size());
  }
}

// Each image attends to itself only: the first keyframe's rows are the same alone and followed
// by a second one, to f32 rounding (the GEMMs block rows differently for 256 and 480 patches:
// relative RMS 4.5e-7 measured; one attention over both images changes them by 8.6e-2).
TEST_F(H3Vision, ImagesDoNotSeeEachOther) {
  const Tower t = tower("tiny");
  std::vector<VisionPatches> two = keyframes("two");
  const std::vector<VisionPatches> first(two.begin(), two.begin() + 1);
  const VisionEncodeResult a = run_tower(t, first, DType::kF32);
  const VisionEncodeResult b = run_tower(t, two, DType::kF32);
  ASSERT_LT(a.features.merged.size(), b.features.merged.size());
  const std::vector<float> b_first(
      b.features.merged.begin(),
      b.features.merged.begin() + static_cast<std::ptrdiff_t>(a.features.merged.size()));
  const Diff d = compare(a.features.merged, b_first);
  std::printf("[ measured ] first keyframe alone vs with a second: rel rms %.2e\n", d.rel_rms);
  EXPECT_LE(d.rel_rms, kTowerF32RelRms);
}

TEST_F(H3Vision, TowerRefusesImagesThatDoNotFit) {
  const Tower t = tower("tiny");
  Backend& backend = test::model_backend();
  const Plan plan = plan_for(t.weights.model_layout(), Placement::kDevice);
  EXPECT_EQ(test::error_code_of([&] { encode_images(backend, t.weights, plan, {}); }),
            ErrorCode::kBadArgument);
  ImageProcessorConfig small;
  small.patch = 4;
  std::vector<VisionPatches> wrong = {
      preprocess_image(reference().image("keyframes.one.0"), small)};
  EXPECT_EQ(test::error_code_of([&] { encode_images(backend, t.weights, plan, wrong); }),
            ErrorCode::kBadArgument);
}

TEST_F(H3Vision, TowerCancelStopsBeforeTheNextBlock) {
  const Tower t = tower("tiny");
  std::atomic<bool> cancel{true};
  VisionEncodeOptions options;
  options.cancel = &cancel;
  const std::vector<VisionPatches> images = keyframes("one");
  EXPECT_EQ(test::error_code_of([&] {
              encode_images(test::model_backend(), t.weights,
                            plan_for(t.weights.model_layout(), Placement::kDisk), images, options);
            }),
            ErrorCode::kCancelled);
}

TEST_F(H3Vision, TowerNamesAMissingTensorAndRefusesOtherFiles) {
  test::ScratchDir dir;
  const auto src = io::TensorSet::open(test::data_path("h3/vision/tower.tiny.safetensors"));
  const std::string dropped = "model.visual.blocks.1.norm2.bias";
  std::vector<io::TensorSpec> specs;
  std::vector<const io::TensorSet::Entry*> entries;
  for (const auto& e : src.entries()) {
    if (e.tensor->name == dropped) continue;
    specs.push_back({e.tensor->name, e.tensor->dtype, e.tensor->shape});
    entries.push_back(&e);
  }
  const auto path = dir / "visual.safetensors";
  io::write_safetensors(path, specs, {},
                        [&](std::size_t i, std::uint64_t offset, std::span<std::byte> out) {
                          entries[i]->file->map(*entries[i]->tensor).copy_to(offset, out);
                        });
  const auto set = io::TensorSet::open(path);
  try {
    VisionTowerWeights::from(set, 2, {0, 2, 3});
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kMissingTensor);
    EXPECT_NE(std::string(e.what()).find(dropped), std::string::npos) << e.what();
  }
  const auto text =
      io::TensorSet::open(test::data_path("h3/text_encoder/tiny/release.safetensors"));
  EXPECT_FALSE(VisionTowerWeights::present(text));
  EXPECT_EQ(test::error_code_of([&] { VisionTowerWeights::from(text); }), ErrorCode::kBadModelFile);
}

// ---- 3. the whole conditioner ----

// Ferry's conditioner against Qwen3VLModel's hidden_states[50] (the tower's output in the image
// rows, DeepStack, get_rope_index's positions, 50 layers). The floor is PyTorch's own bf16 run
// against its f32 run: relative RMS 0.017-0.031, max |d| up to 0.58 (the script prints it); the
// text-only encoder's bounds (h3_text_encoder_test.cpp) were set the same way and hold here.
constexpr double kCondRelRms = 0.06;
constexpr double kCondMaxAbs = 1.25;

const BpeTokenizer& tokenizer() {
  static const BpeTokenizer t = BpeTokenizer::from_folder(test::data_path("h3/tokenizer"));
  return t;
}

constexpr const char* kPrompt =
    "A red fox trots across a snowy field at dawn, <d>its breath</d> steaming; the camera pans "
    "left. 狐狸在雪地上奔跑。";

struct Conditioner {
  io::TensorSet text_set, vision_set;
  TextEncoderWeights text;
  VisionTowerWeights vision;
  Conditioner(const std::string& config, const std::string& text_file)
      : text_set(
            io::TensorSet::open(test::data_path("h3/text_encoder/" + config + "/" + text_file))),
        vision_set(
            io::TensorSet::open(test::data_path("h3/vision/" + config + ".visual.safetensors"))),
        text(TextEncoderWeights::from(text_set)),
        vision(VisionTowerWeights::from(vision_set, 2, {0, 2, 3})) {
    text.set_mrope_section(config == "tiny" ? std::array<std::int64_t, 3>{1, 1, 2}
                                            : std::array<std::int64_t, 3>{2, 3, 3});
  }
};

struct Prompt {
  std::vector<VisionPatches> images;
  std::vector<std::int32_t> ids;
};

Prompt prompt(const std::string& k) {
  Prompt p;
  std::vector<std::size_t> tokens;
  for (int i = 0; reference().has("keyframes." + k + "." + std::to_string(i)); ++i) {
    const media::RgbImage image = reference().image("keyframes." + k + "." + std::to_string(i));
    tokens.push_back(vision_token_count(static_cast<std::size_t>(image.height),
                                        static_cast<std::size_t>(image.width)));
    p.images.push_back(preprocess_image(image));
  }
  p.ids = present_with_keyframes(tokenizer(), kPrompt, tokens).ids;
  return p;
}

ConditionerResult run_conditioner(const Conditioner& m, const Prompt& p, Placement blocks) {
  std::int64_t patches = 0;
  for (const auto& i : p.images) patches += i.patches();
  const Plan vision_plan = plan_for(m.vision.model_layout(patches), blocks);
  const Plan text_plan = plan_for(m.text.model_layout(), blocks);
  return encode_conditioner(test::model_backend(), m.text, m.vision, {&vision_plan, &text_plan},
                            p.ids, *tokenizer().token_id("<|image_pad|>"),
                            *tokenizer().token_id("<|video_pad|>"), p.images);
}

std::vector<float> as_f32(const TextStates& s) {
  std::vector<float> out(s.bf16.size());
  convert_to_f32(DType::kBF16, s.bf16.data(), out.data(), out.size());
  return out;
}

void expect_conditioner_matches(const std::string& config, const std::string& file,
                                const std::string& kind) {
  const Conditioner m(config, file);
  for (const char* k : {"one", "two"}) {
    const std::string key = "cond." + config + "." + k;
    const Prompt p = prompt(k);
    expect_grids(p.images, key);
    ASSERT_EQ(p.ids, reference().values<std::int32_t>(key + ".ids")) << key;
    // The positions the conditioner used are get_rope_index's.
    ConditionerInput laid;
    VisionFeatures none;
    for (const auto& i : p.images) none.tokens += i.patches() / 4;
    none.merged.assign(static_cast<std::size_t>(none.tokens * m.text.config().dim), 0.0f);
    lay_out_keyframes(p.ids, *tokenizer().token_id("<|image_pad|>"),
                      *tokenizer().token_id("<|video_pad|>"), p.images, 2, none, laid);
    const auto pos = reference().values<std::int32_t>(key + ".positions");
    const std::size_t n = p.ids.size();
    for (std::size_t i = 0; i < n; ++i) {
      ASSERT_EQ(laid.text.positions.t[i], pos[i]) << key << " row " << i;
      ASSERT_EQ(laid.text.positions.h[i], pos[n + i]) << key << " row " << i;
      ASSERT_EQ(laid.text.positions.w[i], pos[2 * n + i]) << key << " row " << i;
    }
    const ConditionerResult r = run_conditioner(m, p, Placement::kDevice);
    const std::string prefix = kind == "nf4" ? ".nf4" : "";
    const Diff e =
        compare(as_f32(r.text.states), reference().values<float>(key + prefix + ".bf16"));
    const Diff f = compare(as_f32(r.text.states), reference().values<float>(key + prefix + ".f32"));
    EXPECT_LE(e.rel_rms, kCondRelRms) << key << " " << file;
    EXPECT_LE(e.max_abs, kCondMaxAbs) << key << " " << file;
    EXPECT_LE(f.rel_rms, kCondRelRms) << key << " " << file;
    std::printf(
        "[ measured ] %s/%s %s L=%zu: vs bf16 max|d| %.4f rel rms %.5f; vs f32 max|d| %.4f rel "
        "rms %.5f\n",
        config.c_str(), file.c_str(), k, n, e.max_abs, e.rel_rms, f.max_abs, f.rel_rms);
  }
}

TEST_F(H3Vision, ConditionerWithKeyframesMatchesTransformers) {
  expect_conditioner_matches("tiny", "release.safetensors", "bf16");
  expect_conditioner_matches("gqa", "release.safetensors", "bf16");
}

TEST_F(H3Vision, ConditionerWithAnNf4LanguageModelMatchesItsDequantisedReference) {
  expect_conditioner_matches("gqa", "nf4.safetensors", "nf4");
}

TEST_F(H3Vision, ConditionerStreamedIsBitIdenticalToResident) {
  for (const char* file : {"release.safetensors", "nf4.safetensors"}) {
    const Conditioner m("gqa", file);
    const Prompt p = prompt("two");
    const ConditionerResult resident = run_conditioner(m, p, Placement::kDevice);
    for (Placement blocks : {Placement::kDisk, Placement::kPinnedCache}) {
      const ConditionerResult streamed = run_conditioner(m, p, blocks);
      EXPECT_EQ(streamed.text.states.bf16, resident.text.states.bf16) << file;
      EXPECT_EQ(streamed.vision_stream.groups_uploaded, m.vision.model_layout().groups.size());
      EXPECT_EQ(streamed.text.stream.groups_uploaded, 50u) << file;
    }
  }
}

TEST_F(H3Vision, ConditionerRefusesMismatchedParts) {
  // The tiny tower (out 16) with the gqa language model (hidden 64).
  const Conditioner tiny("tiny", "release.safetensors");
  const Conditioner gqa("gqa", "release.safetensors");
  const Prompt p = prompt("one");
  const Plan plan = plan_for(gqa.text.model_layout(), Placement::kDevice);
  EXPECT_EQ(test::error_code_of([&] {
              encode_conditioner(test::model_backend(), gqa.text, tiny.vision, {&plan, &plan},
                                 p.ids, *tokenizer().token_id("<|image_pad|>"),
                                 *tokenizer().token_id("<|video_pad|>"), p.images);
            }),
            ErrorCode::kBadModelFile);
  // Two keyframes' ids with one image.
  const Prompt two = prompt("two");
  ConditionerInput laid;
  VisionFeatures features;
  EXPECT_EQ(test::error_code_of([&] {
              lay_out_keyframes(two.ids, *tokenizer().token_id("<|image_pad|>"),
                                *tokenizer().token_id("<|video_pad|>"), p.images, 2, features,
                                laid);
            }),
            ErrorCode::kBadArgument);
}

}  // namespace
}  // namespace ferry::models::h3
