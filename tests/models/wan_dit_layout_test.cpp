// The Wan DiT layout reproduces the parameter counts of wan.md §E for every configuration.
#include "core/models/wan/dit_layout.h"

#include "core/io/tensor_set.h"
#include "core/io/safetensors_writer.h"
#include "core/models/wan/dit_keys.h"
#include "tests/test_support.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <set>

namespace ferry::models::wan {
namespace {

std::uint64_t elements(const std::vector<io::TensorSpec>& specs) {
  std::uint64_t n = 0;
  for (const auto& s : specs) n += s.bytes() / dtype_size(s.dtype);
  return n;
}

TEST(WanDitLayout, block_parameters_follow_the_reference_formula) {
  for (const DitConfig* c : {&kT2V_1_3B, &kTI2V_5B, &kT2V_14B}) {
    const std::uint64_t d = c->dim;
    const std::uint64_t f = c->ffn_dim;
    EXPECT_EQ(elements(dit_block_tensors(*c, 0, DType::kBF16)), 8 * d * d + 2 * d * f + 21 * d + f)
        << c->name;
  }
}

TEST(WanDitLayout, totals_match_the_published_model_sizes) {
  // wan.md §E: 1.419 B, 5.000 B, 14.29 B parameters.
  EXPECT_NEAR(static_cast<double>(elements(dit_tensors(kT2V_1_3B, DType::kBF16))), 1.419e9, 1e6);
  EXPECT_NEAR(static_cast<double>(elements(dit_tensors(kTI2V_5B, DType::kBF16))), 5.000e9, 1e6);
  EXPECT_NEAR(static_cast<double>(elements(dit_tensors(kT2V_14B, DType::kBF16))), 14.29e9, 1e7);
}

TEST(WanDitLayout, names_are_unique_and_official) {
  const auto specs = dit_tensors(kTI2V_5B, DType::kBF16);
  std::set<std::string> names;
  for (const auto& s : specs) EXPECT_TRUE(names.insert(s.name).second) << s.name;
  for (const char* name : {"patch_embedding.weight", "blocks.0.self_attn.norm_q.weight",
                           "blocks.29.cross_attn.o.bias", "blocks.7.norm3.weight",
                           "blocks.3.ffn.2.weight", "time_projection.1.weight", "head.modulation"}) {
    EXPECT_EQ(names.count(name), 1u) << name;
  }
  EXPECT_EQ(find_dit_config("ti2v-5b"), &kTI2V_5B);
  EXPECT_EQ(find_dit_config("nope"), nullptr);
}

}  // namespace
}  // namespace ferry::models::wan

namespace ferry::models::wan {
namespace {

TEST(WanDitKeys, diffusers_and_comfy_names_map_to_the_official_ones_and_back) {
  const std::pair<const char*, const char*> pairs[] = {
      {"blocks.3.modulation", "blocks.3.scale_shift_table"},
      {"blocks.0.self_attn.q.weight", "blocks.0.attn1.to_q.weight"},
      {"blocks.29.self_attn.o.bias", "blocks.29.attn1.to_out.0.bias"},
      {"blocks.1.self_attn.norm_k.weight", "blocks.1.attn1.norm_k.weight"},
      {"blocks.7.norm3.weight", "blocks.7.norm2.weight"},
      {"blocks.2.cross_attn.v.weight", "blocks.2.attn2.to_v.weight"},
      {"blocks.2.cross_attn.norm_q.weight", "blocks.2.attn2.norm_q.weight"},
      {"blocks.4.ffn.0.bias", "blocks.4.ffn.net.0.proj.bias"},
      {"blocks.4.ffn.2.weight", "blocks.4.ffn.net.2.weight"},
      {"text_embedding.2.weight", "condition_embedder.text_embedder.linear_2.weight"},
      {"time_embedding.0.bias", "condition_embedder.time_embedder.linear_1.bias"},
      {"time_projection.1.weight", "condition_embedder.time_proj.weight"},
      {"head.head.weight", "proj_out.weight"},
      {"head.modulation", "scale_shift_table"},
      {"patch_embedding.weight", "patch_embedding.weight"},
  };
  for (const auto& [official, diffusers] : pairs) {
    EXPECT_EQ(official_dit_name(diffusers), official) << diffusers;
    EXPECT_EQ(official_dit_name(official), official) << official;
    EXPECT_EQ(official_dit_name(std::string("model.diffusion_model.") + official), official);
    EXPECT_EQ(diffusers_dit_name(official), diffusers) << official;
  }
}

TEST(WanDitLayout, official_comfy_and_diffusers_checkpoints_give_the_same_plan_input) {
  test::ScratchDir dir;
  // The TI2V-5B structure at a small width, so the three files stay small.
  const DitConfig small{"small", 256, 512, 2, 48, 48, 64, 32};
  const auto specs = dit_tensors(small, DType::kBF16);
  const auto write = [&](const char* file, auto rename) {
    std::vector<io::TensorSpec> renamed = specs;
    for (auto& t : renamed) t.name = rename(t.name);
    io::write_safetensors(dir / file, renamed, {},
                          [](std::size_t, std::uint64_t, std::span<std::byte> out) {
                            std::fill(out.begin(), out.end(), std::byte{0});
                          });
    return io::TensorSet::open(dir / file);
  };
  const auto official = write("official.safetensors", [](const std::string& n) { return n; });
  const auto comfy = write("comfy.safetensors",
                           [](const std::string& n) { return "model.diffusion_model." + n; });
  const auto diffusers = write("diffusers.safetensors",
                               [](const std::string& n) { return diffusers_dit_name(n); });
  for (const io::TensorSet* set : {&official, &comfy, &diffusers}) {
    const DitConfig c = infer_dit_config(*set);
    EXPECT_EQ(c.dim, 256u);
    EXPECT_EQ(c.ffn_dim, 512u);
    EXPECT_EQ(c.layers, 2u);
    EXPECT_EQ(c.out_dim, 48u);
    const offload::ModelLayout layout = dit_model_layout(*set, 1280, 704, 121, 0);
    ASSERT_EQ(layout.groups.size(), 4u);  // embeddings, blocks.0, blocks.1, head
    EXPECT_EQ(layout.groups[1].weights.size(), 27u);
    EXPECT_EQ(layout.groups[3].weights.size(), 3u);
    EXPECT_EQ(layout.weight_bytes(), dit_model_layout(official, 1280, 704, 121, 0).weight_bytes());
  }
}

}  // namespace
}  // namespace ferry::models::wan
