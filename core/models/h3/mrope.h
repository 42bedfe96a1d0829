// Qwen3-VL's positions and rotary tables (minimax_h3.md §B.2–B.3): the 3-axis (t, h, w) position
// of every prompt token as transformers' Qwen3VLModel.get_rope_index gives it, and the cos/sin
// tables of the interleaved MRoPE the text model rotates q and k by (Backend::rope_halves).
// Text-only prompts have all three axes equal (arange), which reduces MRoPE to 1-D RoPE.
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <vector>

namespace ferry::models::h3 {

// Token types of get_rope_index's mm_token_type_ids: <|vision_start|>/<|vision_end|> are text.
inline constexpr std::uint8_t kTextToken = 0;
inline constexpr std::uint8_t kImageToken = 1;  // <|image_pad|>
inline constexpr std::uint8_t kVideoToken = 2;  // <|video_pad|>

// One image's (or video frame pair's) grid in LLM tokens: after the 2x2 merge, (1, H/32, W/32)
// for a still.
struct VisionGrid {
  std::int64_t t = 1, h = 0, w = 0;
  std::int64_t tokens() const { return t * h * w; }
};

struct RopePositions {
  std::vector<std::int64_t> t, h, w;  // one per token
  std::size_t size() const { return t.size(); }
};

// 0, 1, …, length-1 on all three axes.
RopePositions text_positions(std::int64_t length);

// get_rope_index for one prompt: tokens grouped into runs of one type; a text run of n tokens
// at cursor p gets (p+i, p+i, p+i) and moves p by n; an image (video) run takes the next grid of
// `image_grids` (`video_grids`, each frame pair its own t = 1 grid), gets t = p + frame,
// h = p + row, w = p + column in (frame, row, column) order, and moves p by max(h, w).
// Error(kBadArgument) when a run's length is not its grid's token count, or the grids and runs
// do not pair up.
RopePositions rope_positions(std::span<const std::uint8_t> types,
                             std::span<const VisionGrid> image_grids,
                             std::span<const VisionGrid> video_grids = {});

// The type of each id: kImageToken for `image_pad`, kVideoToken for `video_pad`, else text.
std::vector<std::uint8_t> token_types(std::span<const std::int32_t> ids, std::int32_t image_pad,
                                      std::int32_t video_pad);

// The rotary tables of `positions` for heads of `head_dim`, as Qwen3VLTextRotaryEmbedding builds
// them: inv_freq_i = 1 / θ^(2i/head_dim) in f32, angle = position · inv_freq_i in f32, frequency i
// driven by the h position when i mod 3 = 1 and i < 3·section[1], by w when i mod 3 = 2 and
// i < 3·section[2], by t otherwise; cos and sin in f32, rounded to bf16 (the model's dtype).
// Each is [tokens, head_dim / 2] bf16 bits (the second half of the duplicated 128 is the same).
struct RopeTables {
  std::vector<std::uint16_t> cos, sin;
};
RopeTables rope_tables(const RopePositions& positions, std::int64_t head_dim, float theta,
                       const std::array<std::int64_t, 3>& section);

}  // namespace ferry::models::h3
