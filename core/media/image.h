// Still images: the start image of an image-to-video run (PNG, JPEG or WebP, decoded by FFmpeg)
// and the PNGs Ferry writes (thumbnails, previews). Pixels are 8-bit RGB, rows top to bottom.
#pragma once

#include <cstdint>
#include <filesystem>
#include <vector>

namespace ferry::media {

// Images larger than this on either side are refused before decoding (a 64-megapixel photo is
// 16k wide; anything bigger is a mistake or a decompression bomb).
inline constexpr int kMaxImageSide = 16384;

struct RgbImage {
  int width = 0;
  int height = 0;
  std::vector<std::uint8_t> rgb;  // width · height · 3 bytes

  bool empty() const { return width == 0 || height == 0; }
};

// Decodes the image at `path` (the first frame of an animated one), whatever its pixel format,
// to RGB. Error(kBadArgument) naming the file when it is not an image FFmpeg can decode, is empty,
// truncated or larger than kMaxImageSide; Error(kIo) when it cannot be opened.
RgbImage load_image(const std::filesystem::path& path);

// Scales `image` to cover width × height (keeping its aspect ratio, Lanczos filter) and crops the
// middle: how Wan prepares a start image (wan.md §B.8; the official code uses PIL's Lanczos, whose
// kernel differs from FFmpeg's in the last bit of some pixels).
RgbImage resize_and_center_crop(const RgbImage& image, int width, int height);

// Writes a PNG, under a temporary name renamed when complete. Error(kIo) when it cannot be
// written (full disk included).
void save_png(const RgbImage& image, const std::filesystem::path& path);

}  // namespace ferry::media
