#include "core/models/wan/vae_keys.h"

#include <array>
#include <charconv>
#include <utility>

#include "core/error.h"

namespace ferry::models::wan {
namespace {

// Both VAEs have two residual blocks per encoder stage and three per decoder stage, followed
// by the stage's resample (wan.md §C.2, §C.3).
constexpr int kEncoderBlocksPerStage = 2;
constexpr int kDecoderBlocksPerStage = 3;

bool starts_with(std::string_view s, std::string_view prefix) {
  return s.substr(0, prefix.size()) == prefix;
}

bool contains(std::string_view s, std::string_view part) {
  return s.find(part) != std::string_view::npos;
}

// Removes a leading `prefix` from `s`; false (s unchanged) when absent.
bool eat(std::string_view& s, std::string_view prefix) {
  if (!starts_with(s, prefix)) return false;
  s.remove_prefix(prefix.size());
  return true;
}

// Reads "<number>." from the front of `s`.
bool eat_index(std::string_view& s, int& index) {
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), index);
  if (ec != std::errc() || end == s.data() + s.size() || *end != '.') return false;
  s.remove_prefix(static_cast<std::size_t>(end - s.data()) + 1);
  return true;
}

// diffusers' names inside a residual block → the official Sequential indices.
constexpr std::array<std::pair<std::string_view, std::string_view>, 5> kResidualParts = {{
    {"norm1.", "residual.0."},
    {"conv1.", "residual.2."},
    {"norm2.", "residual.3."},
    {"conv2.", "residual.6."},
    {"conv_shortcut.", "shortcut."},
}};

// A block's tail: residual parts renamed, resample parts (resample.1, time_conv) unchanged.
std::string block_tail(std::string_view tail) {
  for (const auto& [diffusers, official] : kResidualParts) {
    if (starts_with(tail, diffusers))
      return std::string(official) + std::string(tail.substr(diffusers.size()));
  }
  return std::string(tail);
}

std::string from_diffusers(std::string_view name, VaeKind kind) {
  if (eat(name, "quant_conv.")) return "conv1." + std::string(name);
  if (eat(name, "post_quant_conv.")) return "conv2." + std::string(name);
  std::string side;
  if (eat(name, "encoder.")) {
    side = "encoder.";
  } else if (eat(name, "decoder.")) {
    side = "decoder.";
  } else {
    return std::string(name);
  }
  if (eat(name, "conv_in.")) return side + "conv1." + std::string(name);
  if (eat(name, "norm_out.")) return side + "head.0." + std::string(name);
  if (eat(name, "conv_out.")) return side + "head.2." + std::string(name);
  int i = 0, k = 0;
  if (eat(name, "mid_block.attentions.0.")) return side + "middle.1." + std::string(name);
  if (eat(name, "mid_block.resnets.") && eat_index(name, k)) {
    return side + "middle." + std::to_string(2 * k) + "." + block_tail(name);
  }
  const bool encoder = side == "encoder.";
  const std::string_view blocks = encoder ? "down_blocks." : "up_blocks.";
  const std::string stage_list = encoder ? "downsamples." : "upsamples.";
  const int per_stage = encoder ? kEncoderBlocksPerStage : kDecoderBlocksPerStage;
  if (!eat(name, blocks) || !eat_index(name, i)) return side + std::string(name);
  // Wan 2.1's encoder is flat in both layouts: down_blocks.<i> = downsamples.<i>.
  if (encoder && kind == VaeKind::kWan21)
    return side + stage_list + std::to_string(i) + "." + block_tail(name);
  int block = -1;
  if (eat(name, "resnets.") && eat_index(name, k)) {
    block = k;
  } else if (eat(name, "upsamplers.0.") || eat(name, "upsampler.") || eat(name, "downsampler.")) {
    block = per_stage;
  } else {
    return side + std::string(blocks) + std::to_string(i) + "." + std::string(name);
  }
  if (kind ==
      VaeKind::kWan21) {  // the decoder's flat list: per_stage blocks + 1 resample per stage
    return side + stage_list + std::to_string(i * (per_stage + 1) + block) + "." + block_tail(name);
  }
  return side + stage_list + std::to_string(i) + "." + stage_list + std::to_string(block) + "." +
         block_tail(name);
}

}  // namespace

std::string_view vae_kind_name(VaeKind kind) {
  return kind == VaeKind::kWan21 ? "Wan 2.1 VAE" : "Wan 2.2 VAE";
}

VaeKind detect_vae_kind(const std::vector<std::string_view>& names) {
  bool vae = false;
  for (std::string_view name : names) {
    if (contains(name, "downsamples.0.downsamples.") || contains(name, "upsamples.0.upsamples.") ||
        contains(name, "down_blocks.0.resnets.") || contains(name, ".upsampler.")) {
      return VaeKind::kWan22;
    }
    if (contains(name, "encoder.") || contains(name, "decoder.")) vae = true;
  }
  if (!vae)
    throw Error(ErrorCode::kBadModelFile, "the file holds no Wan VAE encoder or decoder tensors");
  return VaeKind::kWan21;
}

std::string official_vae_name(std::string_view name, VaeKind kind) {
  // Prefixes some single-file checkpoints put in front of the official names.
  for (std::string_view prefix : {"first_stage_model.", "vae."}) eat(name, prefix);
  if (contains(name, "_blocks.") || contains(name, "mid_block.") || contains(name, "conv_in.") ||
      contains(name, "conv_out.") || contains(name, "norm_out.") || contains(name, "quant_conv.")) {
    return from_diffusers(name, kind);
  }
  return std::string(name);
}

}  // namespace ferry::models::wan
