// The Wan DiT layout reproduces the parameter counts of wan.md §E for every configuration.
#include "core/models/wan/dit_layout.h"

#include <gtest/gtest.h>

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
