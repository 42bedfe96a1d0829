#include "core/models/h3/mrope.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "core/error.h"
#include "core/tensor/convert.h"

namespace ferry::models::h3 {
namespace {

void push(RopePositions& p, std::int64_t t, std::int64_t h, std::int64_t w) {
  p.t.push_back(t);
  p.h.push_back(h);
  p.w.push_back(w);
}

[[noreturn]] void mismatch(const std::string& what) {
  throw Error(ErrorCode::kBadArgument, "vision tokens and grids do not match: " + what);
}

}  // namespace

RopePositions text_positions(std::int64_t length) {
  RopePositions p;
  for (std::int64_t i = 0; i < length; ++i) push(p, i, i, i);
  return p;
}

RopePositions rope_positions(std::span<const std::uint8_t> types,
                             std::span<const VisionGrid> image_grids,
                             std::span<const VisionGrid> video_grids) {
  RopePositions p;
  std::int64_t cursor = 0;
  std::size_t next[3] = {0, 0, 0};
  for (std::size_t begin = 0; begin < types.size();) {
    const std::uint8_t type = types[begin];
    std::size_t end = begin;
    while (end < types.size() && types[end] == type) ++end;
    const auto run = static_cast<std::int64_t>(end - begin);
    if (type == kTextToken) {
      for (std::int64_t i = 0; i < run; ++i) push(p, cursor + i, cursor + i, cursor + i);
      cursor += run;
    } else if (type == kImageToken || type == kVideoToken) {
      const auto grids = type == kImageToken ? image_grids : video_grids;
      const char* kind = type == kImageToken ? "image" : "video";
      if (next[type] >= grids.size()) {
        mismatch(std::string("more ") + kind + " runs than the " + std::to_string(grids.size()) +
                 " grids given");
      }
      const VisionGrid& g = grids[next[type]++];
      if (g.t <= 0 || g.h <= 0 || g.w <= 0 || g.tokens() != run) {
        mismatch(std::string("a run of ") + std::to_string(run) + " " + kind + " tokens for a " +
                 std::to_string(g.t) + "x" + std::to_string(g.h) + "x" + std::to_string(g.w) +
                 " grid");
      }
      for (std::int64_t f = 0; f < g.t; ++f) {
        for (std::int64_t r = 0; r < g.h; ++r) {
          for (std::int64_t c = 0; c < g.w; ++c) push(p, cursor + f, cursor + r, cursor + c);
        }
      }
      cursor += std::max(g.h, g.w);
    } else {
      throw Error(ErrorCode::kBadArgument,
                  "token type " + std::to_string(type) + " (0 text, 1 image, 2 video)");
    }
    begin = end;
  }
  if (next[kImageToken] != image_grids.size() || next[kVideoToken] != video_grids.size()) {
    mismatch(std::to_string(image_grids.size()) + " image and " +
             std::to_string(video_grids.size()) + " video grids for " +
             std::to_string(next[kImageToken]) + " image and " + std::to_string(next[kVideoToken]) +
             " video runs");
  }
  return p;
}

std::vector<std::uint8_t> token_types(std::span<const std::int32_t> ids, std::int32_t image_pad,
                                      std::int32_t video_pad) {
  std::vector<std::uint8_t> types(ids.size(), kTextToken);
  for (std::size_t i = 0; i < ids.size(); ++i) {
    if (ids[i] == image_pad) types[i] = kImageToken;
    if (ids[i] == video_pad) types[i] = kVideoToken;
  }
  return types;
}

RopeTables rope_tables(const RopePositions& positions, std::int64_t head_dim, float theta,
                       const std::array<std::int64_t, 3>& section) {
  const std::int64_t half = head_dim / 2;
  std::vector<float> inv_freq(static_cast<std::size_t>(half));
  std::vector<int> axis(static_cast<std::size_t>(half));
  for (std::int64_t i = 0; i < half; ++i) {
    // torch: base ** (arange(0, dim, 2).float() / dim), then 1.0 / that, all f32.
    const float exponent = static_cast<float>(2 * i) / static_cast<float>(head_dim);
    inv_freq[static_cast<std::size_t>(i)] = 1.0f / std::pow(theta, exponent);
    int a = 0;
    if (i % 3 == 1 && i < 3 * section[1]) a = 1;
    if (i % 3 == 2 && i < 3 * section[2]) a = 2;
    axis[static_cast<std::size_t>(i)] = a;
  }
  const std::size_t n = positions.size();
  RopeTables out;
  out.cos.resize(n * static_cast<std::size_t>(half));
  out.sin.resize(out.cos.size());
  std::vector<float> c(static_cast<std::size_t>(half)), s(c.size());
  for (std::size_t l = 0; l < n; ++l) {
    const std::int64_t pos[3] = {positions.t[l], positions.h[l], positions.w[l]};
    for (std::int64_t i = 0; i < half; ++i) {
      const auto j = static_cast<std::size_t>(i);
      const float angle = static_cast<float>(pos[axis[j]]) * inv_freq[j];
      c[j] = std::cos(angle);
      s[j] = std::sin(angle);
    }
    convert_from_f32(c.data(), DType::kBF16, out.cos.data() + l * c.size(), c.size());
    convert_from_f32(s.data(), DType::kBF16, out.sin.data() + l * s.size(), s.size());
  }
  return out;
}

}  // namespace ferry::models::h3
