// H3's text presentation (minimax_h3.md §A.2): the token ids the conditioner reads for a request
// and the modality tag of each (1 text, 0 vision) that the DiT needs. No chat template: each
// segment is tokenized on its own and the id lists are joined, so a label never merges with the
// prompt. T2VA is the prompt alone; I2VA and FL2VA put, per keyframe in packed order (first, then
// last), "<Picture k>: " and a vision block <|vision_start|> + N x <|image_pad|> + <|vision_end|>
// before the prompt.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "core/models/h3/bpe_tokenizer.h"

namespace ferry::models::h3 {

inline constexpr std::uint8_t kVisionTag = 0;
inline constexpr std::uint8_t kTextTag = 1;

struct Presentation {
  std::vector<std::int32_t> ids;
  std::vector<std::uint8_t> tags;  // one per id: kTextTag or kVisionTag

  std::size_t length() const { return ids.size(); }
};

// Qwen2-VL's smart_resize (§B.5: factor 32, 65,536 to 16,777,216 pixels) of an image of
// height x width pixels, as {height, width}. Python's round (half to even) included.
struct ImageSize {
  std::size_t height = 0, width = 0;
};
ImageSize smart_resize(std::size_t height, std::size_t width);
// The vision tokens of one keyframe: (h'/16)(w'/16)/4 with (h', w') = smart_resize; a keyframe
// already on a canvas of multiples of 32 gives (H/32)(W/32): 480x832 -> 390, 768x1344 -> 1008.
// Throws Error(kBadArgument) for an empty size, one over 65,536 px a side, or an aspect ratio
// over 200 (which Qwen2-VL refuses).
std::size_t vision_token_count(std::size_t height, std::size_t width);

// T2VA: the prompt's ids, all text.
Presentation present_text(const BpeTokenizer& tokenizer, std::string_view prompt);
// I2VA / FL2VA: one entry of `vision_tokens` per keyframe in packed order (a lone last frame is
// still <Picture 1>). Throws Error(kBadModelFile) when the tokenizer lacks the vision tokens.
Presentation present_with_keyframes(const BpeTokenizer& tokenizer, std::string_view prompt,
                                    std::span<const std::size_t> vision_tokens);

}  // namespace ferry::models::h3
