#include "core/models/h3/presentation.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "core/error.h"

namespace ferry::models::h3 {

namespace {

constexpr std::size_t kFactor = 32;  // patch 16 x merge 2
constexpr double kMinPixels = 65536;
constexpr double kMaxPixels = 16777216;
constexpr std::size_t kMaxSide = 65536;

// Python's round(n / 32) * 32 for a whole n: halves go to the even multiple.
std::size_t round_to_factor(std::size_t n) {
  std::size_t q = n / kFactor;
  const std::size_t r = n % kFactor;
  if (r * 2 > kFactor || (r * 2 == kFactor && q % 2 == 1)) ++q;
  return q * kFactor;
}

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
  const double h = static_cast<double>(height), w = static_cast<double>(width);
  const double f = static_cast<double>(kFactor);
  ImageSize out{round_to_factor(height), round_to_factor(width)};
  const double area = static_cast<double>(out.height) * static_cast<double>(out.width);
  if (area > kMaxPixels) {
    const double beta = std::sqrt(h * w / kMaxPixels);
    out.height = std::max(kFactor, static_cast<std::size_t>(std::floor(h / beta / f)) * kFactor);
    out.width = std::max(kFactor, static_cast<std::size_t>(std::floor(w / beta / f)) * kFactor);
  } else if (area < kMinPixels) {
    const double beta = std::sqrt(kMinPixels / (h * w));
    out.height = static_cast<std::size_t>(std::ceil(h * beta / f)) * kFactor;
    out.width = static_cast<std::size_t>(std::ceil(w * beta / f)) * kFactor;
  }
  return out;
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
