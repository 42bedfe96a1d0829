// A keyframe as the vision tower reads it (minimax_h3.md §B.5): transformers' Qwen2-VL image
// processor as H3's processor/preprocessor_config.json sets it up. smart_resize picks the size
// (multiples of patch x merge, the pixel count within bounds), PIL's bicubic filter resizes the
// 8-bit image (bit for bit: the processor's PIL backend, whose fixed-point arithmetic this
// restates; its torchvision backend's uint8 antialiased bicubic is written to equal it), each byte
// becomes (v/255 - 0.5)/0.5, and the image is cut into patches in 2x2 merge-block order, each
// patch [C 3][T 2][P][P] with the still repeated on the temporal axis.
#pragma once

#include <cstdint>
#include <vector>

#include "core/media/image.h"
#include "core/models/h3/mrope.h"
#include "core/models/h3/presentation.h"

namespace ferry::models::h3 {

struct ImageProcessorConfig {
  std::int64_t patch = 16;
  std::int64_t merge = 2;
  std::int64_t temporal_patch = 2;
  double min_pixels = 65536;     // shortest_edge
  double max_pixels = 16777216;  // longest_edge

  std::int64_t factor() const { return patch * merge; }
  std::int64_t patch_values() const { return 3 * temporal_patch * patch * patch; }
};

// Qwen2-VL's smart_resize of height x width for `config` (presentation.h's smart_resize is this
// with H3's configuration). Error(kBadArgument) for an empty size or an aspect ratio over 200.
ImageSize smart_resize(std::size_t height, std::size_t width, const ImageProcessorConfig& config);

// PIL's Image.resize(size, BICUBIC) of an 8-bit RGB image: the horizontal pass, then the vertical
// one, each with PIL's support-scaled a = -0.5 kernel in 22-bit fixed point and rounded to 8 bits;
// a side that keeps its size is not filtered.
media::RgbImage resize_bicubic(const media::RgbImage& image, int width, int height);

struct VisionPatches {
  VisionGrid grid;  // in patches: (1, h'/patch, w'/patch)
  std::int64_t patch_values = 0;
  std::vector<float> values;  // [grid.h * grid.w, patch_values], merge-block order

  std::int64_t patches() const { return grid.tokens(); }
};

// The processor's pixel_values and image_grid_thw for one still image.
VisionPatches preprocess_image(const media::RgbImage& image,
                               const ImageProcessorConfig& config = {});

}  // namespace ferry::models::h3
