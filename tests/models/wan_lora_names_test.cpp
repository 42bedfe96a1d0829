// Wan's LoRA name resolution (core/models/wan/lora_names.h, formats_lora_moe.md §4.3 step 3 and
// the §4.4 table): official, diffusers and kohya spellings of every module reach the official
// parameter; diffs reach the weight, bias or modulation; names the model lacks give nullopt.
// The LoRA files of tests/data/wan/dit_lora/ (tools/reference/make_lora_reference.py) resolve
// against the tiny T2V DiT exactly as their manifest says: every term but the image-branch ones.
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "core/models/lora/lora_file.h"
#include "core/models/wan/lora_names.h"
#include "tests/test_support.h"

namespace ferry::models::wan {
namespace {

using lora::KeyStyle;
using lora::Term;
using lora::TermKind;

// The tiny T2V DiT's parameters (official names), from its shard index.
std::vector<std::string> t2v_params() {
  std::ifstream in(test::data_path("wan/dit/t2v.safetensors.index.json"));
  const nlohmann::json index = nlohmann::json::parse(in);
  std::vector<std::string> names;
  for (const auto& [name, file] : index["weight_map"].items()) names.push_back(name);
  return names;
}

// An I2V-like model: the T2V parameters plus Wan 2.1's image branch.
std::vector<std::string> i2v_params() {
  std::vector<std::string> names = t2v_params();
  for (const char* extra :
       {"blocks.0.cross_attn.k_img.weight", "blocks.0.cross_attn.k_img.bias",
        "blocks.0.cross_attn.v_img.weight", "blocks.0.cross_attn.norm_k_img.weight",
        "img_emb.proj.1.weight", "img_emb.proj.1.bias", "img_emb.proj.0.weight"}) {
    names.push_back(extra);
  }
  return names;
}

Term term(std::string module, TermKind kind = TermKind::kLowRank,
          KeyStyle style = KeyStyle::kDotted) {
  Term t;
  t.module = std::move(module);
  t.kind = kind;
  t.style = style;
  return t;
}

TEST(WanLoraNames, official_modules_are_their_weights) {
  const std::vector<std::string> params = t2v_params();
  const WanLoraNames names(params);
  for (const char* m :
       {"blocks.0.self_attn.q", "blocks.1.cross_attn.o", "blocks.1.ffn.0", "blocks.0.ffn.2",
        "text_embedding.0", "time_embedding.2", "time_projection.1", "head.head"}) {
    EXPECT_EQ(names.target(term(m)), std::string(m) + ".weight");
  }
}

TEST(WanLoraNames, diffusers_modules_follow_the_table) {
  const std::vector<std::string> params = t2v_params();
  const WanLoraNames names(params);
  const std::vector<std::pair<std::string, std::string>> table = {
      {"blocks.0.attn1.to_q", "blocks.0.self_attn.q.weight"},
      {"blocks.0.attn1.to_k", "blocks.0.self_attn.k.weight"},
      {"blocks.1.attn1.to_v", "blocks.1.self_attn.v.weight"},
      {"blocks.1.attn1.to_out.0", "blocks.1.self_attn.o.weight"},
      {"blocks.0.attn2.to_q", "blocks.0.cross_attn.q.weight"},
      {"blocks.0.attn2.to_k", "blocks.0.cross_attn.k.weight"},
      {"blocks.0.attn2.to_v", "blocks.0.cross_attn.v.weight"},
      {"blocks.1.attn2.to_out.0", "blocks.1.cross_attn.o.weight"},
      {"blocks.0.ffn.net.0.proj", "blocks.0.ffn.0.weight"},
      {"blocks.1.ffn.net.2", "blocks.1.ffn.2.weight"},
      {"condition_embedder.text_embedder.linear_1", "text_embedding.0.weight"},
      {"condition_embedder.text_embedder.linear_2", "text_embedding.2.weight"},
      {"condition_embedder.time_embedder.linear_1", "time_embedding.0.weight"},
      {"condition_embedder.time_embedder.linear_2", "time_embedding.2.weight"},
      {"condition_embedder.time_proj", "time_projection.1.weight"},
      {"proj_out", "head.head.weight"}};
  for (const auto& [diffusers, official] : table) {
    EXPECT_EQ(names.target(term(diffusers)), official) << diffusers;
  }
  // Bias deltas (`.lora_B.bias`) of diffusers modules.
  EXPECT_EQ(names.target(term("blocks.0.attn1.to_q", TermKind::kBiasDiff)),
            "blocks.0.self_attn.q.bias");
  EXPECT_EQ(names.target(term("proj_out", TermKind::kBiasDiff)), "head.head.bias");
}

TEST(WanLoraNames, underscored_modules_come_from_the_models_own_names) {
  const std::vector<std::string> params = i2v_params();
  const WanLoraNames names(params);
  const auto underscored = [](const char* m, TermKind kind = TermKind::kLowRank) {
    return term(m, kind, KeyStyle::kUnderscored);
  };
  EXPECT_EQ(names.target(underscored("blocks_0_self_attn_q")), "blocks.0.self_attn.q.weight");
  EXPECT_EQ(names.target(underscored("blocks_1_cross_attn_o")), "blocks.1.cross_attn.o.weight");
  EXPECT_EQ(names.target(underscored("blocks_0_cross_attn_k_img")),
            "blocks.0.cross_attn.k_img.weight");
  EXPECT_EQ(names.target(underscored("blocks_0_cross_attn_v_img")),
            "blocks.0.cross_attn.v_img.weight");
  EXPECT_EQ(names.target(underscored("blocks_1_ffn_0")), "blocks.1.ffn.0.weight");
  EXPECT_EQ(names.target(underscored("text_embedding_0")), "text_embedding.0.weight");
  EXPECT_EQ(names.target(underscored("time_projection_1")), "time_projection.1.weight");
  EXPECT_EQ(names.target(underscored("head_head")), "head.head.weight");
  EXPECT_EQ(names.target(underscored("img_emb_proj_1")), "img_emb.proj.1.weight");
  // kohya spellings of diffusers names (`lora_transformer_`).
  EXPECT_EQ(names.target(underscored("blocks_0_attn1_to_out_0")), "blocks.0.self_attn.o.weight");
  EXPECT_EQ(names.target(underscored("blocks_1_ffn_net_0_proj")), "blocks.1.ffn.0.weight");
  EXPECT_EQ(names.target(underscored("proj_out")), "head.head.weight");
  // Diffs in underscored spelling.
  EXPECT_EQ(names.target(underscored("blocks_0_norm3", TermKind::kWeightDiff)),
            "blocks.0.norm3.weight");
  EXPECT_EQ(names.target(underscored("blocks_0_norm3", TermKind::kBiasDiff)),
            "blocks.0.norm3.bias");
  EXPECT_EQ(names.target(underscored("blocks_1", TermKind::kModulationDiff)),
            "blocks.1.modulation");
  // `_` is never read back as `.`: names the model does not have stay unmatched.
  EXPECT_EQ(names.target(underscored("blocks_0_self_attn_x")), std::nullopt);
  EXPECT_EQ(names.target(underscored("blocks_7_self_attn_q")), std::nullopt);
  EXPECT_EQ(names.target(underscored("blocks_0_self")), std::nullopt);
}

TEST(WanLoraNames, diffs_reach_weights_biases_and_modulations) {
  const std::vector<std::string> params = t2v_params();
  const WanLoraNames names(params);
  EXPECT_EQ(names.target(term("head.head", TermKind::kWeightDiff)), "head.head.weight");
  EXPECT_EQ(names.target(term("blocks.0.norm3", TermKind::kWeightDiff)), "blocks.0.norm3.weight");
  EXPECT_EQ(names.target(term("blocks.1.self_attn.norm_q", TermKind::kWeightDiff)),
            "blocks.1.self_attn.norm_q.weight");
  EXPECT_EQ(names.target(term("blocks.0.cross_attn.norm_k", TermKind::kWeightDiff)),
            "blocks.0.cross_attn.norm_k.weight");
  // diffusers' norm2 is the official norm3 (official norm1/norm2 have no parameters).
  EXPECT_EQ(names.target(term("blocks.0.norm2", TermKind::kWeightDiff)), "blocks.0.norm3.weight");
  EXPECT_EQ(names.target(term("blocks.0.attn2.norm_k", TermKind::kWeightDiff)),
            "blocks.0.cross_attn.norm_k.weight");
  EXPECT_EQ(names.target(term("blocks.0.self_attn.q", TermKind::kBiasDiff)),
            "blocks.0.self_attn.q.bias");
  EXPECT_EQ(names.target(term("head.head", TermKind::kBiasDiff)), "head.head.bias");
  EXPECT_EQ(names.target(term("blocks.1", TermKind::kModulationDiff)), "blocks.1.modulation");
  // A `.diff` keyed on the modulation itself, as ComfyUI's key map names it, and its diffusers
  // name.
  EXPECT_EQ(names.target(term("blocks.0.modulation", TermKind::kWeightDiff)),
            "blocks.0.modulation");
  EXPECT_EQ(names.target(term("blocks.0.scale_shift_table", TermKind::kWeightDiff)),
            "blocks.0.modulation");
  EXPECT_EQ(names.target(term("head.modulation", TermKind::kWeightDiff)), "head.modulation");
}

TEST(WanLoraNames, names_the_model_lacks_are_unmatched) {
  const std::vector<std::string> params = t2v_params();
  const WanLoraNames names(params);
  EXPECT_EQ(names.target(term("blocks.0.cross_attn.k_img")), std::nullopt);  // 2.1 I2V on T2V
  EXPECT_EQ(names.target(term("blocks.0.attn2.add_k_proj")), std::nullopt);
  EXPECT_EQ(names.target(term("blocks.0.cross_attn.norm_k_img", TermKind::kWeightDiff)),
            std::nullopt);
  EXPECT_EQ(names.target(term("img_emb.proj.1")), std::nullopt);
  EXPECT_EQ(names.target(term("blocks.35.self_attn.q")), std::nullopt);  // a 14B LoRA's block
  EXPECT_EQ(names.target(term("blocks.35", TermKind::kModulationDiff)), std::nullopt);
  EXPECT_EQ(names.target(term("text_encoder.layers.0.mlp")), std::nullopt);
  EXPECT_EQ(names.target(term("blocks.0.norm1", TermKind::kWeightDiff)), std::nullopt);
  EXPECT_EQ(names.target(term("blocks.0.self_attn", TermKind::kBiasDiff)), std::nullopt);
}

TEST(WanLoraNames, the_reference_loras_resolve_as_their_manifest_says) {
  const std::vector<std::string> params = t2v_params();
  const WanLoraNames names(params);
  std::ifstream in(test::data_path("wan/dit_lora/manifest.json"));
  const nlohmann::json manifest = nlohmann::json::parse(in);
  std::set<std::string> seen;
  for (const nlohmann::json& c : manifest["cases"]) {
    if (c["loras"].size() != 1) continue;
    const std::string file = c["loras"][0]["file"];
    if (!seen.insert(file).second) continue;
    SCOPED_TRACE(file);
    const lora::LoraFile lora = lora::open_lora(test::data_path(file));
    std::set<std::string> targets;
    std::vector<std::string> unmatched;
    for (const Term& t : lora.terms) {
      if (const std::optional<std::string> target = names.target(t)) {
        EXPECT_TRUE(targets.insert(*target).second) << "two terms on " << *target;
      } else {
        unmatched.push_back(t.kind == TermKind::kLowRank ? t.down : t.up);
      }
    }
    EXPECT_EQ(targets.size(), c["applied_terms"].get<std::size_t>());
    const std::vector<std::string> want =
        manifest["unmatched"].contains(file)
            ? manifest["unmatched"][file].get<std::vector<std::string>>()
            : std::vector<std::string>{};
    std::sort(unmatched.begin(), unmatched.end());
    EXPECT_EQ(unmatched, want);
    EXPECT_TRUE(lora.ignored.empty()) << lora.ignored.front();
  }
  EXPECT_EQ(seen.size(), 8u);
}

}  // namespace
}  // namespace ferry::models::wan
