#include "core/models/wan/ti2v.h"

#include <algorithm>
#include <string>

#include "core/error.h"
#include "core/models/wan/no_fp_contraction.h"  // last: it applies to what follows

namespace ferry::models::wan {
namespace {

void check_grid(const LatentGrid& g) {
  if (g.channels < 1 || g.frames < 1 || g.height < 2 || g.width < 2 || g.height % 2 != 0 ||
      g.width % 2 != 0) {
    throw Error(ErrorCode::kBadArgument,
                "a Wan latent needs at least one channel and frame and an even height and width "
                "(got " +
                    std::to_string(g.channels) + "x" + std::to_string(g.frames) + "x" +
                    std::to_string(g.height) + "x" + std::to_string(g.width) + ")");
  }
}

std::size_t frame_size(const LatentGrid& g) {
  return static_cast<std::size_t>(g.height) * static_cast<std::size_t>(g.width);
}

}  // namespace

std::size_t LatentGrid::size() const {
  return static_cast<std::size_t>(channels) * static_cast<std::size_t>(frames) *
         static_cast<std::size_t>(height) * static_cast<std::size_t>(width);
}

std::size_t LatentGrid::tokens() const {
  return static_cast<std::size_t>(frames) * static_cast<std::size_t>(height / 2) *
         static_cast<std::size_t>(width / 2);
}

std::vector<float> ti2v_mask(const LatentGrid& grid, Ti2vMode mode) {
  check_grid(grid);
  std::vector<float> mask(grid.size(), 1.0f);
  if (mode == Ti2vMode::kImageToVideo) {
    const std::size_t plane = frame_size(grid);
    const std::size_t channel = plane * static_cast<std::size_t>(grid.frames);
    for (std::size_t c = 0; c < static_cast<std::size_t>(grid.channels); ++c) {
      std::fill_n(mask.begin() + static_cast<std::ptrdiff_t>(c * channel), plane, 0.0f);
    }
  }
  return mask;
}

void ti2v_token_timesteps(const LatentGrid& grid, Ti2vMode mode, float t, std::span<float> out) {
  check_grid(grid);
  const std::size_t tokens = grid.tokens();
  if (out.size() < tokens) {
    throw Error(ErrorCode::kBadArgument, "the sequence length " + std::to_string(out.size()) +
                                             " is shorter than the latent's " +
                                             std::to_string(tokens) + " tokens");
  }
  std::fill(out.begin(), out.end(), t);
  if (mode == Ti2vMode::kImageToVideo) {
    const std::size_t frame0_tokens = tokens / static_cast<std::size_t>(grid.frames);
    std::fill_n(out.begin(), frame0_tokens, 0.0f);
  }
}

std::vector<float> ti2v_token_timesteps(const LatentGrid& grid, Ti2vMode mode, float t) {
  check_grid(grid);
  std::vector<float> out(grid.tokens());
  ti2v_token_timesteps(grid, mode, t, out);
  return out;
}

void ti2v_insert_frame0(const LatentGrid& grid, std::span<const float> z0,
                        std::span<float> sample) {
  check_grid(grid);
  const std::size_t plane = frame_size(grid);
  const std::size_t frames = static_cast<std::size_t>(grid.frames);
  const std::size_t channels = static_cast<std::size_t>(grid.channels);
  if (sample.size() != grid.size() || z0.size() != channels * plane) {
    throw Error(ErrorCode::kBadArgument,
                "frame-0 insertion: the sample has " + std::to_string(sample.size()) +
                    " elements and z0 " + std::to_string(z0.size()) + ", the latent needs " +
                    std::to_string(grid.size()) + " and " + std::to_string(channels * plane));
  }
  for (std::size_t c = 0; c < channels; ++c) {
    const float* z = z0.data() + c * plane;
    for (std::size_t f = 0; f < frames; ++f) {
      const float keep = f == 0 ? 0.0f : 1.0f;  // the mask
      const float take = 1.0f - keep;
      float* x = sample.data() + (c * frames + f) * plane;
      for (std::size_t k = 0; k < plane; ++k) {
        const float a = take * z[k];
        const float b = keep * x[k];
        x[k] = a + b;
      }
    }
  }
}

}  // namespace ferry::models::wan
