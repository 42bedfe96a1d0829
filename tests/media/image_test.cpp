// Start images through FFmpeg. tests/data/media/start.{png,jpg,webp} are one 96×64 frame of
// FFmpeg's testsrc2 pattern, written by
//   ffmpeg -f lavfi -i testsrc2=size=96x64:rate=1 -frames:v 1 start.png
//   ffmpeg -i start.png -q:v 3 start.jpg
//   ffmpeg -i start.png -c:v libwebp -lossless 0 -q:v 80 start.webp
// Compiles to nothing where FFmpeg is absent (the mingw lane).
#ifdef FERRY_HAVE_FFMPEG

#include "core/media/image.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <string>

#include "core/error.h"
#include "tests/test_support.h"

namespace ferry::media {
namespace {

RgbImage gradient(int width, int height) {
  RgbImage image{width, height, {}};
  image.rgb.resize(static_cast<std::size_t>(width) * height * 3);
  for (int y = 0; y < height; ++y) {
    for (int x = 0; x < width; ++x) {
      std::uint8_t* p = &image.rgb[(static_cast<std::size_t>(y) * width + x) * 3];
      p[0] = static_cast<std::uint8_t>(x * 255 / std::max(1, width - 1));
      p[1] = static_cast<std::uint8_t>(y * 255 / std::max(1, height - 1));
      p[2] = static_cast<std::uint8_t>((x + y) % 256);
    }
  }
  return image;
}

double mean_abs_difference(const RgbImage& a, const RgbImage& b) {
  EXPECT_EQ(a.rgb.size(), b.rgb.size());
  double sum = 0;
  for (std::size_t i = 0; i < a.rgb.size() && i < b.rgb.size(); ++i) {
    sum += std::abs(static_cast<int>(a.rgb[i]) - static_cast<int>(b.rgb[i]));
  }
  return sum / static_cast<double>(std::max<std::size_t>(1, a.rgb.size()));
}

TEST(MediaImage, PngRoundTripsExactly) {
  test::ScratchDir dir;
  const RgbImage image = gradient(37, 21);
  save_png(image, dir / "out.png");
  EXPECT_FALSE(std::filesystem::exists(dir / "out.png.partial"));
  const RgbImage back = load_image(dir / "out.png");
  EXPECT_EQ(back.width, 37);
  EXPECT_EQ(back.height, 21);
  EXPECT_EQ(back.rgb, image.rgb);
}

TEST(MediaImage, JpegAndWebpDecodeToTheSamePictureAsThePng) {
  const RgbImage png = load_image(test::data_path("media/start.png"));
  ASSERT_EQ(png.width, 96);
  ASSERT_EQ(png.height, 64);
  for (const char* name : {"media/start.jpg", "media/start.webp"}) {
    const RgbImage lossy = load_image(test::data_path(name));
    ASSERT_EQ(lossy.width, 96) << name;
    ASSERT_EQ(lossy.height, 64) << name;
    // Lossy at quality ~90 on a busy test pattern: a few levels off on average.
    EXPECT_LT(mean_abs_difference(png, lossy), 8.0) << name;
  }
}

TEST(MediaImage, RefusesFilesThatAreNotImages) {
  test::ScratchDir dir;
  test::write_file(dir / "notes.png", std::string_view("these are not pixels\n"));
  EXPECT_EQ(test::error_code_of([&] { load_image(dir / "notes.png"); }), ErrorCode::kBadArgument);
  test::write_file(dir / "empty.jpg", std::string_view(""));
  EXPECT_EQ(test::error_code_of([&] { load_image(dir / "empty.jpg"); }), ErrorCode::kBadArgument);
  EXPECT_EQ(test::error_code_of([&] { load_image(dir / "absent.png"); }), ErrorCode::kIo);
}

TEST(MediaImage, RefusesATruncatedPng) {
  test::ScratchDir dir;
  const std::vector<std::byte> whole = test::read_file(test::data_path("media/start.png"));
  test::write_file(dir / "cut.png", std::span(whole).first(whole.size() / 3));
  try {
    load_image(dir / "cut.png");
    FAIL() << "a third of a PNG decoded";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kBadArgument);
    EXPECT_NE(std::string(e.what()).find("cut.png"), std::string::npos) << e.what();
  }
}

TEST(MediaImage, RefusesAnImageLargerThanTheLimitBeforeDecoding) {
  // A PNG header claiming 20000×20000 pixels, with no pixel data.
  test::ScratchDir dir;
  const unsigned char header[] = {0x89, 'P', 'N', 'G', 0x0d, 0x0a, 0x1a, 0x0a, 0,    0, 0,    13,
                                  'I',  'H', 'D', 'R', 0,    0,    0x4e, 0x20, 0,    0, 0x4e, 0x20,
                                  8,    2,   0,   0,   0,    0x5c, 0x6d, 0x3b, 0x1c, 0, 0,    0,
                                  0,    'I', 'E', 'N', 'D',  0xae, 0x42, 0x60, 0x82};
  test::write_file(dir / "huge.png", std::as_bytes(std::span(header)));
  EXPECT_EQ(test::error_code_of([&] { load_image(dir / "huge.png"); }), ErrorCode::kBadArgument);
}

TEST(MediaImage, ResizeCoversTheTargetAndCropsTheMiddle) {
  // 100×50: a red band in the left quarter, green elsewhere. Cropped to a 50×50 square after
  // scaling by 1 (the height already fits), the middle 50 columns (25..74) hold no red.
  RgbImage image{100, 50, std::vector<std::uint8_t>(100 * 50 * 3)};
  for (int y = 0; y < 50; ++y) {
    for (int x = 0; x < 100; ++x) {
      std::uint8_t* p = &image.rgb[(static_cast<std::size_t>(y) * 100 + x) * 3];
      p[x < 20 ? 0 : 1] = 255;
    }
  }
  const RgbImage square = resize_and_center_crop(image, 50, 50);
  ASSERT_EQ(square.width, 50);
  ASSERT_EQ(square.height, 50);
  for (std::size_t i = 0; i < square.rgb.size(); i += 3) {
    EXPECT_LE(square.rgb[i], 2) << "red at pixel " << i / 3;
    EXPECT_GE(square.rgb[i + 1], 253) << "green missing at pixel " << i / 3;
  }
  // Upscaling a uniform picture keeps it uniform.
  RgbImage grey{7, 5, std::vector<std::uint8_t>(7 * 5 * 3, 128)};
  const RgbImage big = resize_and_center_crop(grey, 64, 32);
  ASSERT_EQ(big.rgb.size(), 64u * 32u * 3u);
  for (std::uint8_t v : big.rgb) EXPECT_NEAR(v, 128, 1);
}

}  // namespace
}  // namespace ferry::media

#endif  // FERRY_HAVE_FFMPEG
