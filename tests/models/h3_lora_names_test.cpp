// H3's LoRA name resolution (core/models/h3/lora_names.h): every spelling diffusers 0.42.1's
// _convert_non_diffusers_minimax_h3_lora_to_diffusers accepts (original names under any prefix,
// musubi's flattened lora_unet_, DiffSynth's peft ".default." infix, diffusers' own names)
// reaches the tensor the model file holds, in each of its QKV layouts (separate q/k/v, fused
// interleaved, fused stacked), with the up rows the term must have and its row layout; names the
// model lacks, norms and diffs give nullopt; a file's metadata alpha is read as diffusers reads it.
// The models are tests/data/h3_dit/tiny (2 heads of 16: inner 32; FFN 32; 2 blocks, 2 refiner
// blocks).
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include "core/io/safetensors_writer.h"
#include "core/io/tensor_set.h"
#include "core/models/h3/dit_weights.h"
#include "core/models/h3/lora_names.h"
#include "tests/test_support.h"

namespace ferry::models::h3 {
namespace {

using lora::KeyStyle;
using lora::Term;
using lora::TermKind;

constexpr std::int64_t kInner = 32;

struct Model {
  io::TensorSet set;
  dit::DitWeights weights;
  H3LoraNames names;
  Model(const std::string& file, dit::QkvLayout qkv)
      : set(io::TensorSet::open(test::data_path("h3_dit/tiny/" + file))),
        weights(dit::DitWeights::from(set, qkv)),
        names(weights) {}
};

// A low-rank term as open_lora makes it from a key `<prefix><module><suffix>`.
Term term(const std::string& module, const std::string& down_key = "",
          KeyStyle style = KeyStyle::kDotted, TermKind kind = TermKind::kLowRank) {
  Term t;
  t.module = module;
  t.style = style;
  t.kind = kind;
  t.down = down_key.empty() ? "diffusion_model." + module + ".lora_down.weight" : down_key;
  t.up = t.down;
  return t;
}

void expect_target(const Model& m, const Term& t, const std::string& name, LoraRows rows,
                   std::int64_t up_rows = 0) {
  const auto got = m.names.target(t);
  ASSERT_TRUE(got.has_value()) << t.module;
  EXPECT_EQ(got->name, name) << t.module;
  EXPECT_EQ(got->rows, static_cast<int>(rows)) << t.module;
  EXPECT_EQ(got->up_rows, up_rows) << t.module;
}

TEST(H3LoraNames, OriginalNamesOnAnOriginalFile) {
  const Model m("interleaved.safetensors", dit::QkvLayout::kInterleaved);
  expect_target(m, term("blocks.0.attn.qkv_proj"), "blocks.0.attn.qkv_proj.weight",
                LoraRows::kQkvStacked);
  expect_target(m, term("blocks.1.attn.out_proj"), "blocks.1.attn.out_proj.weight",
                LoraRows::kSame);
  expect_target(m, term("blocks.1.mlp.fc1"), "blocks.1.mlp.fc1.weight", LoraRows::kFc1GateFirst);
  expect_target(m, term("blocks.0.mlp.fc2"), "blocks.0.mlp.fc2.weight", LoraRows::kSame);
  expect_target(m, term("blocks.0.adaln_proj.linear"), "blocks.0.adaln_proj.linear.weight",
                LoraRows::kSame);
  expect_target(m, term("token_refiner.blocks.1.attn.qkv_proj"),
                "token_refiner.blocks.1.attn.qkv_proj.weight", LoraRows::kQkvStacked);
  expect_target(m, term("video_patch_proj"), "video_patch_proj.weight", LoraRows::kSame);
  expect_target(m, term("condition_proj"), "condition_proj.weight", LoraRows::kSame);
  expect_target(m, term("time_embedder.proj_out"), "time_embedder.proj_out.weight",
                LoraRows::kSame);
  expect_target(m, term("final_layer.adaln_proj.linear"), "final_layer.adaln_proj.linear.weight",
                LoraRows::kSame);
  expect_target(m, term("final_layer.audio_out"), "final_layer.audio_out.weight", LoraRows::kSame);
}

TEST(H3LoraNames, DiffSynthPeftInfixMeansInterleavedQkv) {
  const Model m("stacked.safetensors", dit::QkvLayout::kStacked);
  expect_target(m, term("blocks.0.attn.qkv_proj", "blocks.0.attn.qkv_proj.lora_A.default.weight"),
                "blocks.0.attn.qkv_proj.weight", LoraRows::kQkvInterleaved);
  // The infix changes nothing but the fused QKV.
  expect_target(m, term("blocks.0.mlp.fc1", "blocks.0.mlp.fc1.lora_A.default.weight"),
                "blocks.0.mlp.fc1.weight", LoraRows::kFc1GateFirst);
  // Without it the same module is stacked.
  expect_target(m, term("blocks.0.attn.qkv_proj", "blocks.0.attn.qkv_proj.lora_A.weight"),
                "blocks.0.attn.qkv_proj.weight", LoraRows::kQkvStacked);
}

TEST(H3LoraNames, FusedTermsOnSeparateQkvAndPartsOnAFusedOne) {
  const Model split("diffusers.safetensors", dit::QkvLayout::kSplit);
  // A fused term on a diffusers folder: bound to to_q, its up three times q's rows.
  expect_target(split, term("blocks.1.attn.qkv_proj"), "transformer_blocks.1.attn.to_q.weight",
                LoraRows::kQkvStacked, 3 * kInner);
  expect_target(split,
                term("blocks.1.attn.qkv_proj", "blocks.1.attn.qkv_proj.lora_B.default.weight"),
                "transformer_blocks.1.attn.to_q.weight", LoraRows::kQkvInterleaved, 3 * kInner);
  expect_target(split, term("transformer_blocks.0.attn.to_k"),
                "transformer_blocks.0.attn.to_k.weight", LoraRows::kK);
  expect_target(split, term("transformer_blocks.0.attn.to_v"),
                "transformer_blocks.0.attn.to_v.weight", LoraRows::kV);
  expect_target(split, term("blocks.0.mlp.fc1"), "transformer_blocks.0.ff.net.0.proj.weight",
                LoraRows::kFc1GateFirst);
  expect_target(split, term("transformer_blocks.0.ff.net.0.proj"),
                "transformer_blocks.0.ff.net.0.proj.weight", LoraRows::kFc1ValueFirst);
  expect_target(split, term("video_patch_proj"), "proj_in.weight", LoraRows::kSame);
  expect_target(split, term("final_layer.adaln_proj.linear"), "norm_out.linear.weight",
                LoraRows::kSame);

  const Model fused("stacked.safetensors", dit::QkvLayout::kStacked);
  expect_target(fused, term("transformer_blocks.0.attn.to_q"), "blocks.0.attn.qkv_proj.weight",
                LoraRows::kQ, kInner);
  expect_target(fused, term("token_refiner.refiner_blocks.1.attn.to_v"),
                "token_refiner.blocks.1.attn.qkv_proj.weight", LoraRows::kV, kInner);
  expect_target(fused, term("transformer_blocks.1.attn.to_out.0"), "blocks.1.attn.out_proj.weight",
                LoraRows::kSame);
  expect_target(fused, term("transformer_blocks.1.ff.net.2"), "blocks.1.mlp.fc2.weight",
                LoraRows::kSame);
  expect_target(fused, term("proj_out"), "final_layer.video_out.weight", LoraRows::kSame);
  expect_target(fused, term("time_embedder.linear_1"), "time_embedder.proj_in.weight",
                LoraRows::kSame);
}

TEST(H3LoraNames, MusubiFlattenedNames) {
  const Model m("diffusers.safetensors", dit::QkvLayout::kSplit);
  const auto flat = [](const std::string& module) {
    return term(module, "lora_unet_" + module + ".lora_down.weight", KeyStyle::kUnderscored);
  };
  expect_target(m, flat("blocks_0_attn_qkv_proj"), "transformer_blocks.0.attn.to_q.weight",
                LoraRows::kQkvStacked, 3 * kInner);
  expect_target(m, flat("token_refiner_blocks_1_mlp_fc1"),
                "token_refiner.refiner_blocks.1.ff.net.0.proj.weight", LoraRows::kFc1GateFirst);
  expect_target(m, flat("final_layer_video_out"), "proj_out.weight", LoraRows::kSame);
  expect_target(m, flat("time_embedder_proj_in"), "time_embedder.linear_1.weight", LoraRows::kSame);
  EXPECT_FALSE(m.names.target(flat("blocks_7_attn_qkv_proj")).has_value());
}

TEST(H3LoraNames, WhatAdaptsNothingIsNullopt) {
  const Model m("interleaved.safetensors", dit::QkvLayout::kInterleaved);
  for (const char* module :
       {"blocks.2.attn.qkv_proj",                    // the model has 2 blocks
        "token_refiner.blocks.0.adaln_proj.linear",  // refiner blocks have no AdaLN
        "blocks.0.attn.q_norm", "blocks.0.norm1",    // norms hold no Linear
        "text_encoder.layers.0.q_proj", "blocks.0.attn.qkv"}) {
    EXPECT_FALSE(m.names.target(term(module)).has_value()) << module;
  }
  EXPECT_FALSE(m.names
                   .target(term("blocks.0.attn.out_proj", "blocks.0.attn.out_proj.diff",
                                KeyStyle::kDotted, TermKind::kWeightDiff))
                   .has_value());
  const Model pruned("pruned.safetensors", dit::QkvLayout::kStacked);
  EXPECT_FALSE(pruned.names.target(term("time_embedder.proj_in")).has_value());
  expect_target(pruned, term("blocks.0.adaln_proj.linear"), "blocks.0.adaln_proj.linear.weight",
                LoraRows::kSame);
}

// diffusers' H3 loader reads a `__metadata__` alpha as the network alpha only when the file has
// no per-module alphas and no PEFT config; an entry that is not a number is ignored.
TEST(H3LoraNames, NetworkAlphaFromTheMetadata) {
  test::ScratchDir dir;
  const auto file = [&](const std::string& name, std::map<std::string, std::string> metadata,
                        bool alpha_key) {
    std::vector<io::TensorSpec> specs = {
        {"blocks.0.mlp.fc2.lora_A.default.weight", DType::kF32, {2, 32}},
        {"blocks.0.mlp.fc2.lora_B.default.weight", DType::kF32, {24, 2}}};
    if (alpha_key) specs.push_back({"blocks.0.mlp.fc2.alpha", DType::kF32, {}});
    io::write_safetensors(dir / name, specs, metadata,
                          [](std::size_t, std::uint64_t, std::span<std::byte> out) {
                            std::fill(out.begin(), out.end(), std::byte{0});
                          });
    return lora::open_lora(dir / name);
  };
  EXPECT_EQ(network_alpha(file("a.safetensors", {{"alpha", "8"}}, false)), 8.0f);
  EXPECT_EQ(network_alpha(file("b.safetensors", {{"alpha", "0.5"}}, false)), 0.5f);
  EXPECT_FALSE(network_alpha(file("c.safetensors", {}, false)).has_value());
  EXPECT_FALSE(network_alpha(file("d.safetensors", {{"alpha", "8"}}, true)).has_value());
  EXPECT_FALSE(network_alpha(file("e.safetensors", {{"alpha", "eight"}}, false)).has_value());
  EXPECT_FALSE(
      network_alpha(
          file("f.safetensors", {{"alpha", "8"}, {"lora_adapter_metadata", R"({"r": 2})"}}, false))
          .has_value());
}

}  // namespace
}  // namespace ferry::models::h3
