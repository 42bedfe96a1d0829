// H3's keyframe path against tests/data/h3/vision/ (tools/reference/make_h3_vision_reference.py):
// the image preprocessing against transformers' Qwen2-VL processor (PIL backend), the vision tower
// against transformers' Qwen3VLVisionModel at two tiny sizes, and the whole conditioner (tower,
// vision rows, DeepStack, positions, 50 decoder layers) against Qwen3VLModel. On the CPU backend
// in ferry_tests, on the CUDA backend in ferry_cuda_model_tests (tests/gpu/run.sh).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/io/tensor_set.h"
#include "core/models/h3/image_preprocess.h"
#include "core/models/h3/presentation.h"
#include "core/tensor/convert.h"
#include "tests/models/model_test_backend.h"
#include "tests/test_support.h"

namespace ferry::models::h3 {
namespace {

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

}  // namespace
}  // namespace ferry::models::h3
