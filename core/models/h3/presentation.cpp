#include "core/models/h3/presentation.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "core/error.h"
#include "core/models/h3/image_preprocess.h"

namespace ferry::models::h3 {

namespace {

constexpr std::size_t kMaxSide = 65536;

std::int32_t required_token(const BpeTokenizer& tokenizer, std::string_view token) {
  const auto id = tokenizer.token_id(token);
  if (!id) {
    throw Error(ErrorCode::kBadModelFile,
                tokenizer.source() + ": the tokenizer has no " + std::string(token) +
                    " token, which H3's keyframes need: not Qwen2-VL's tokenizer");
  }
  return *id;
}

void append(Presentation& p, const std::vector<std::int32_t>& ids, std::uint8_t tag) {
  p.ids.insert(p.ids.end(), ids.begin(), ids.end());
  p.tags.insert(p.tags.end(), ids.size(), tag);
}

}  // namespace

ImageSize smart_resize(std::size_t height, std::size_t width) {
  return smart_resize(height, width, ImageProcessorConfig{});
}

std::size_t vision_token_count(std::size_t height, std::size_t width) {
  // Qwen2-VL refuses an aspect ratio over 200 (a ValueError); so does Ferry.
  if (height == 0 || width == 0 || height > kMaxSide || width > kMaxSide ||
      std::max(height, width) > 200 * std::min(height, width)) {
    throw Error(ErrorCode::kBadArgument, "a keyframe of " + std::to_string(width) + "x" +
                                             std::to_string(height) +
                                             " pixels cannot be presented");
  }
  const ImageSize s = smart_resize(height, width);
  return (s.height / 16) * (s.width / 16) / 4;
}

Presentation present_text(const BpeTokenizer& tokenizer, std::string_view prompt) {
  Presentation p;
  append(p, tokenizer.encode(prompt), kTextTag);
  return p;
}

Presentation present_with_keyframes(const BpeTokenizer& tokenizer, std::string_view prompt,
                                    std::span<const std::size_t> vision_tokens) {
  const std::int32_t start = required_token(tokenizer, "<|vision_start|>");
  const std::int32_t pad = required_token(tokenizer, "<|image_pad|>");
  const std::int32_t end = required_token(tokenizer, "<|vision_end|>");
  Presentation p;
  for (std::size_t k = 0; k < vision_tokens.size(); ++k) {
    append(p, tokenizer.encode("<Picture " + std::to_string(k + 1) + ">: "), kTextTag);
    std::vector<std::int32_t> block;
    block.reserve(vision_tokens[k] + 2);
    block.push_back(start);
    block.insert(block.end(), vision_tokens[k], pad);
    block.push_back(end);
    append(p, block, kVisionTag);
  }
  append(p, tokenizer.encode(prompt), kTextTag);
  return p;
}

}  // namespace ferry::models::h3
