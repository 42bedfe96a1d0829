// H3's LoRA name resolution (lora_names.h): one table of every module the model's configuration
// has, in the original and the diffusers spelling, looked up whole (module names contain
// underscores — qkv_proj, token_refiner, final_layer — so a flattened kohya name is looked up in
// the table's own flattening, never split on `_`).
#include "core/models/h3/lora_names.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <span>
#include <string_view>
#include <system_error>
#include <utility>

namespace ferry::models::h3 {
namespace {

using dit::BlockTensor;
using dit::OuterTensor;

std::string underscored(std::string_view module) {
  std::string key(module);
  std::replace(key.begin(), key.end(), '.', '_');
  return key;
}

struct Spelling {
  std::string_view original, diffusers;
};

// A block's Linears: the original module, the diffusers one, what each adapts.
struct BlockModule {
  std::string_view name;
  BlockTensor role;
  LoraRows rows;
};
constexpr BlockModule kOriginalBlock[] = {
    {"attn.qkv_proj", dit::kQ, LoraRows::kQkvStacked},
    {"attn.out_proj", dit::kOut, LoraRows::kSame},
    {"mlp.fc1", dit::kFc1, LoraRows::kFc1GateFirst},
    {"mlp.fc2", dit::kFc2, LoraRows::kSame},
    {"adaln_proj.linear", dit::kAdaWeight, LoraRows::kSame},
};
constexpr BlockModule kDiffusersBlock[] = {
    {"attn.to_q", dit::kQ, LoraRows::kQ},
    {"attn.to_k", dit::kQ, LoraRows::kK},
    {"attn.to_v", dit::kQ, LoraRows::kV},
    {"attn.to_out.0", dit::kOut, LoraRows::kSame},
    {"ff.net.0.proj", dit::kFc1, LoraRows::kFc1ValueFirst},
    {"ff.net.2", dit::kFc2, LoraRows::kSame},
    {"adaln_proj.linear", dit::kAdaWeight, LoraRows::kSame},
};

struct OuterModule {
  Spelling name;
  OuterTensor role;
};
constexpr OuterModule kOuter[] = {
    {{"video_patch_proj", "proj_in"}, dit::kVideoInWeight},
    {{"audio_patch_proj", "audio_proj_in"}, dit::kAudioInWeight},
    {{"condition_proj", "context_embedder"}, dit::kTextInWeight},
    {{"time_embedder.proj_in", "time_embedder.linear_1"}, dit::kTime1Weight},
    {{"time_embedder.proj_out", "time_embedder.linear_2"}, dit::kTime2Weight},
    {{"final_layer.adaln_proj.linear", "norm_out.linear"}, dit::kFinalAdaWeight},
    {{"final_layer.video_out", "proj_out"}, dit::kVideoOutWeight},
    {{"final_layer.audio_out", "audio_proj_out"}, dit::kAudioOutWeight},
};

// peft's adapter infix, which only DiffSynth's files carry over original names (diffusers
// reads it the same way: the fused QKV is then the raw checkpoint's interleaved one).
bool peft_default(const lora::Term& term) {
  return term.down.find(".default") != std::string::npos ||
         term.up.find(".default") != std::string::npos;
}

}  // namespace

std::optional<float> network_alpha(const lora::LoraFile& file) {
  const auto& metadata = file.file->metadata();
  const auto alpha = metadata.find("alpha");
  if (alpha == metadata.end() || metadata.contains("lora_adapter_metadata")) return std::nullopt;
  for (const io::TensorInfo& t : file.file->tensors()) {
    if (t.name.ends_with(".alpha")) return std::nullopt;  // per-module alphas win
  }
  // from_chars: the C locale whatever the process's (Qt may set LC_NUMERIC).
  const std::string& text = alpha->second;
  float value = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (error != std::errc() || end != text.data() + text.size() || !std::isfinite(value)) {
    return std::nullopt;
  }
  return value;
}

H3LoraNames::H3LoraNames(const dit::DitWeights& weights) : weights_(weights) {
  const dit::DitConfig& c = weights.config();
  const auto add = [&](const std::string& module, const LoraModule& m) {
    dotted_.emplace(module, m);
    underscored_.emplace(underscored(module), module);
  };
  const auto blocks = [&](bool refiner, std::int64_t count) {
    for (std::int64_t i = 0; i < count; ++i) {
      const std::string index = std::to_string(i) + ".";
      const std::string original = (refiner ? "token_refiner.blocks." : "blocks.") + index;
      const std::string diffusers =
          (refiner ? "token_refiner.refiner_blocks." : "transformer_blocks.") + index;
      using Table = std::span<const BlockModule>;
      for (const auto& [table, prefix] :
           {std::pair<Table, const std::string&>{kOriginalBlock, original},
            std::pair<Table, const std::string&>{kDiffusersBlock, diffusers}}) {
        for (const BlockModule& b : table) {
          if (refiner && b.role == dit::kAdaWeight) continue;  // refiner blocks have no AdaLN
          add(prefix + std::string(b.name), {i, refiner, b.role, b.rows});
        }
      }
    }
  };
  blocks(false, c.layers);
  blocks(true, c.refiner_layers);
  for (const OuterModule& o : kOuter) {
    const bool time_mlp = o.role == dit::kTime1Weight || o.role == dit::kTime2Weight;
    if (c.pruned && time_mlp) continue;  // the pruned files have no time MLP
    for (std::string_view name : {o.name.original, o.name.diffusers}) {
      add(std::string(name), {-1, false, o.role, LoraRows::kSame});
    }
  }
}

std::optional<lora::TermTarget> H3LoraNames::target(const lora::Term& term) const {
  // diffusers' H3 conversion takes low-rank pairs only; a diff adapts nothing here.
  if (term.kind != lora::TermKind::kLowRank) return std::nullopt;
  std::string module = term.module;
  if (term.style == lora::KeyStyle::kUnderscored) {
    const auto it = underscored_.find(module);
    if (it == underscored_.end()) return std::nullopt;
    module = it->second;
  }
  const auto it = dotted_.find(module);
  if (it == dotted_.end()) return std::nullopt;
  const LoraModule& m = it->second;
  const dit::DitConfig& c = weights_.config();
  const dit::DitKeyLayout layout = weights_.key_layout();
  lora::TermTarget t;
  t.rows = static_cast<int>(m.rows);
  if (m.block < 0) {
    t.name =
        weights_.name_prefix() + dit::outer_tensor_name(layout, static_cast<OuterTensor>(m.role));
    return t;
  }
  auto role = static_cast<BlockTensor>(m.role);
  if (m.rows == LoraRows::kQkvStacked && peft_default(term)) {
    t.rows = static_cast<int>(LoraRows::kQkvInterleaved);
  }
  if (role == dit::kQ) {
    const bool fused_term = m.rows == LoraRows::kQkvStacked;
    if (weights_.qkv_layout() == dit::QkvLayout::kSplit) {
      // Separate q, k, v Linears: a part goes to its own; a fused term is bound to q's, its up
      // three times q's rows (the forward gives each its third).
      if (m.rows == LoraRows::kK) role = dit::kK;
      if (m.rows == LoraRows::kV) role = dit::kV;
      if (fused_term) t.up_rows = 3 * c.inner();
    } else if (!fused_term) {
      t.up_rows = c.inner();  // one part of the fused Linear
    }
  }
  t.name = weights_.name_prefix() + dit::block_tensor_name(layout, m.refiner, m.block, role);
  return t;
}

}  // namespace ferry::models::h3
