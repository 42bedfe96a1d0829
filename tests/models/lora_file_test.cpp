// The LoRA file reader (core/models/lora/lora_file.h, formats_lora_moe.md §4.1–4.3): every key
// format of §4.2 becomes Terms with the module, the kind, the rank and the scale rule; the
// refusals name the file and the key. The malformed files of tests/data/lora/bad/ (written by
// tools/reference/make_lora_bad_corpus.py, listed in its manifest.json with the expected code and
// message) are each refused as listed.
#include "core/models/lora/lora_file.h"

#include <gtest/gtest.h>

#include <cctype>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/io/safetensors_writer.h"
#include "core/tensor/convert.h"
#include "tests/test_support.h"

namespace ferry::models::lora {
namespace {

struct T {
  std::string name;
  std::vector<std::uint64_t> shape;
  DType dtype = DType::kBF16;
  float value = 0.5f;  // every element
};

// One element of `t` in its dtype (integers by value).
std::vector<std::byte> encode(const T& t) {
  std::vector<std::byte> one(dtype_size(t.dtype));
  const auto copy = [&](auto v) { std::memcpy(one.data(), &v, sizeof v); };
  if (t.dtype == DType::kI64) {
    copy(static_cast<std::int64_t>(t.value));
  } else if (t.dtype == DType::kI32) {
    copy(static_cast<std::int32_t>(t.value));
  } else if (t.dtype == DType::kU8) {
    copy(static_cast<std::uint8_t>(t.value));
  } else {
    convert_from_f32(&t.value, t.dtype, one.data(), 1);
  }
  return one;
}

std::filesystem::path write_lora(const std::filesystem::path& path, const std::vector<T>& tensors,
                                 const std::map<std::string, std::string>& metadata = {}) {
  std::vector<io::TensorSpec> specs;
  for (const T& t : tensors) specs.push_back({t.name, t.dtype, t.shape});
  io::write_safetensors(path, specs, metadata,
                        [&](std::size_t i, std::uint64_t offset, std::span<std::byte> out) {
                          const std::vector<std::byte> one = encode(tensors[i]);
                          const std::size_t size = one.size();
                          for (std::size_t b = 0; b < out.size(); ++b) {
                            out[b] = one[(offset + b) % size];
                          }
                        });
  return path;
}

// A rank-r pair (down [r, in], up [out, r]) under the given key spellings.
std::vector<T> pair(const std::string& down, const std::string& up, std::uint64_t r,
                    std::uint64_t in = 8, std::uint64_t out = 6) {
  return {{down, {r, in}}, {up, {out, r}}};
}

std::vector<T> join(std::vector<std::vector<T>> parts) {
  std::vector<T> all;
  for (auto& p : parts) all.insert(all.end(), p.begin(), p.end());
  return all;
}

Term only_term(const LoraFile& lora) {
  EXPECT_EQ(lora.terms.size(), 1u);
  return lora.terms.at(0);
}

class LoraFileTest : public ::testing::Test {
 protected:
  LoraFile open(const std::vector<T>& tensors,
                const std::map<std::string, std::string>& metadata = {}) {
    return open_lora(write_lora(dir_ / "l.safetensors", tensors, metadata));
  }
  // The message of the Error(kBadModelFile) open() throws; checks it names the file.
  std::string refusal(const std::vector<T>& tensors,
                      const std::map<std::string, std::string>& metadata = {}) {
    try {
      const LoraFile lora = open(tensors, metadata);
      ADD_FAILURE() << "opened with " << lora.terms.size() << " terms";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::kBadModelFile) << e.what();
      const std::string message = e.what();
      EXPECT_NE(message.find("l.safetensors"), std::string::npos) << message;
      return message;
    }
    return "";
  }
  test::ScratchDir dir_;
};

TEST_F(LoraFileTest, format_a_official_names_with_alpha_scale_by_alpha_over_rank) {
  const LoraFile lora =
      open(join({pair("diffusion_model.blocks.0.self_attn.q.lora_down.weight",
                      "diffusion_model.blocks.0.self_attn.q.lora_up.weight", 4),
                 {{"diffusion_model.blocks.0.self_attn.q.alpha", {}, DType::kBF16, 2.0f}}}));
  const Term t = only_term(lora);
  EXPECT_EQ(t.module, "blocks.0.self_attn.q");
  EXPECT_EQ(t.style, KeyStyle::kDotted);
  EXPECT_EQ(t.kind, TermKind::kLowRank);
  EXPECT_EQ(t.rank, 4);
  EXPECT_EQ(t.alpha_scale, 0.5f);
  EXPECT_EQ(t.down, "diffusion_model.blocks.0.self_attn.q.lora_down.weight");
  EXPECT_EQ(t.up, "diffusion_model.blocks.0.self_attn.q.lora_up.weight");
  EXPECT_EQ(down_shape(lora, t), (std::vector<std::int64_t>{4, 8}));
  EXPECT_EQ(up_shape(lora, t), (std::vector<std::int64_t>{6, 4}));
  EXPECT_TRUE(lora.ignored.empty());
}

TEST_F(LoraFileTest, format_b_lora_a_b_without_alpha_scale_1) {
  const Term t = only_term(open(pair("diffusion_model.blocks.1.ffn.0.lora_A.weight",
                                     "diffusion_model.blocks.1.ffn.0.lora_B.weight", 16)));
  EXPECT_EQ(t.module, "blocks.1.ffn.0");
  EXPECT_EQ(t.rank, 16);
  EXPECT_EQ(t.alpha_scale, 1.0f);
}

TEST_F(LoraFileTest, format_c_kohya_prefixes_are_underscored) {
  for (const std::string prefix : {"lora_unet_", "lora_unet__", "lycoris_", "lora_transformer_"}) {
    SCOPED_TRACE(prefix);
    const LoraFile lora =
        open(join({pair(prefix + "blocks_0_cross_attn_k_img.lora_down.weight",
                        prefix + "blocks_0_cross_attn_k_img.lora_up.weight", 8),
                   {{prefix + "blocks_0_cross_attn_k_img.alpha", {}, DType::kF32, 4.0f}}}));
    const Term t = only_term(lora);
    EXPECT_EQ(t.module, "blocks_0_cross_attn_k_img");
    EXPECT_EQ(t.style, KeyStyle::kUnderscored);
    EXPECT_EQ(t.alpha_scale, 0.5f);
  }
}

TEST_F(LoraFileTest, format_d_diffusers_names_and_a_bias_delta) {
  const LoraFile lora = open(join({pair("transformer.blocks.0.attn1.to_out.0.lora_A.weight",
                                        "transformer.blocks.0.attn1.to_out.0.lora_B.weight", 2),
                                   {{"transformer.blocks.0.attn1.to_out.0.lora_B.bias", {6}}}}));
  ASSERT_EQ(lora.terms.size(), 2u);
  EXPECT_EQ(lora.terms[0].module, "blocks.0.attn1.to_out.0");
  EXPECT_EQ(lora.terms[0].kind, TermKind::kLowRank);
  EXPECT_EQ(lora.terms[1].module, "blocks.0.attn1.to_out.0");
  EXPECT_EQ(lora.terms[1].kind, TermKind::kBiasDiff);
  EXPECT_EQ(lora.terms[1].up, "transformer.blocks.0.attn1.to_out.0.lora_B.bias");
  EXPECT_TRUE(lora.terms[1].down.empty());
  EXPECT_EQ(up_shape(lora, lora.terms[1]), (std::vector<std::int64_t>{6}));
}

TEST_F(LoraFileTest, format_e_no_prefix_and_format_f_peft) {
  EXPECT_EQ(
      only_term(open(pair("head.head.lora_down.weight", "head.head.lora_up.weight", 1))).module,
      "head.head");
  for (const std::string suffix : {".default.weight", ".default", ".weight", ""}) {
    SCOPED_TRACE(suffix);
    const Term& t =
        only_term(open(pair("base_model.model.blocks.0.self_attn.v.lora_A" + suffix,
                            "base_model.model.blocks.0.self_attn.v.lora_B" + suffix, 3)));
    EXPECT_EQ(t.module, "blocks.0.self_attn.v");
    EXPECT_EQ(t.rank, 3);
  }
}

TEST_F(LoraFileTest, every_other_spelling_of_a_pair_is_read) {
  const std::vector<std::pair<std::string, std::string>> spellings = {
      {"_lora.down.weight", "_lora.up.weight"},
      {".lora.down.weight", ".lora.up.weight"},
      {".lora_linear_layer.down.weight", ".lora_linear_layer.up.weight"},
      {".lora_down.weight", ".lora_up.weight"}};
  for (const auto& [down, up] : spellings) {
    SCOPED_TRACE(down);
    for (const std::string prefix : {"", "unet.", "transformer.", "model.diffusion_model."}) {
      const Term t = only_term(open(pair(prefix + "m.x" + down, prefix + "m.x" + up, 2)));
      EXPECT_EQ(t.module, "m.x");
      EXPECT_EQ(t.style, KeyStyle::kDotted);
    }
  }
}

TEST_F(LoraFileTest, the_longest_prefix_is_stripped_and_only_one) {
  // "model.diffusion_model." before "diffusion_model."; a second prefix stays in the module.
  EXPECT_EQ(only_term(open(pair("model.diffusion_model.a.lora_A.weight",
                                "model.diffusion_model.a.lora_B.weight", 1)))
                .module,
            "a");
  EXPECT_EQ(only_term(open(pair("transformer.diffusion_model.a.lora_A.weight",
                                "transformer.diffusion_model.a.lora_B.weight", 1)))
                .module,
            "diffusion_model.a");
}

TEST_F(LoraFileTest, a_scale_key_overrides_alpha_over_rank) {
  const Term t = only_term(
      open(join({pair("m.lora_down.weight", "m.lora_up.weight", 4),
                 {{"m.alpha", {}, DType::kF32, 8.0f}, {"m.scale", {1}, DType::kF16, 0.25f}}})));
  EXPECT_EQ(t.alpha_scale, 0.25f);
}

TEST_F(LoraFileTest, alpha_is_read_from_any_float_or_integer_scalar) {
  for (const DType dtype :
       {DType::kF32, DType::kF16, DType::kBF16, DType::kF64, DType::kI64, DType::kI32}) {
    SCOPED_TRACE(dtype_name(dtype));
    const Term t = only_term(open(join(
        {pair("m.lora_down.weight", "m.lora_up.weight", 8), {{"m.alpha", {1}, dtype, 2.0f}}})));
    EXPECT_EQ(t.alpha_scale, 0.25f);
  }
}

TEST_F(LoraFileTest, diffs_of_weights_biases_and_modulation_are_terms_of_their_own) {
  const LoraFile lora = open({{"diffusion_model.blocks.0.norm3.diff", {16}, DType::kF32},
                              {"diffusion_model.blocks.0.norm3.diff_b", {16}, DType::kF32},
                              {"diffusion_model.head.head.diff", {6, 8}},
                              {"diffusion_model.blocks.3.diff_m", {1, 6, 16}}});
  ASSERT_EQ(lora.terms.size(), 4u);
  const std::vector<std::pair<std::string, TermKind>> want = {
      {"blocks.0.norm3", TermKind::kWeightDiff},
      {"blocks.0.norm3", TermKind::kBiasDiff},
      {"head.head", TermKind::kWeightDiff},
      {"blocks.3", TermKind::kModulationDiff}};
  for (std::size_t i = 0; i < want.size(); ++i) {
    const Term& t = lora.terms[i];
    EXPECT_EQ(t.module, want[i].first);
    EXPECT_EQ(t.kind, want[i].second);
    EXPECT_EQ(t.rank, 0);
    EXPECT_EQ(t.alpha_scale, 1.0f);
    EXPECT_TRUE(t.down.empty());
    EXPECT_TRUE(down_shape(lora, t).empty());
  }
  EXPECT_EQ(up_shape(lora, lora.terms[3]), (std::vector<std::int64_t>{1, 6, 16}));
}

TEST_F(LoraFileTest, a_conv_down_is_flattened_and_its_up_is_a_matrix) {
  const LoraFile lora = open({{"patch_embedding.lora_down.weight", {4, 16, 1, 2, 2}},
                              {"patch_embedding.lora_up.weight", {32, 4, 1, 1, 1}}});
  const Term t = only_term(lora);
  EXPECT_EQ(t.rank, 4);
  EXPECT_EQ(down_shape(lora, t), (std::vector<std::int64_t>{4, 64}));
  EXPECT_EQ(up_shape(lora, t), (std::vector<std::int64_t>{32, 4}));
}

TEST_F(LoraFileTest, terms_follow_the_file_order_and_other_keys_are_ignored_verbatim) {
  const LoraFile lora = open(join({pair("b.lora_down.weight", "b.lora_up.weight", 1),
                                   {{"text_encoder.layer.weight", {2}}, {"lonely.alpha", {}}},
                                   pair("a.lora_down.weight", "a.lora_up.weight", 1)}));
  ASSERT_EQ(lora.terms.size(), 2u);
  EXPECT_EQ(lora.terms[0].module, "b");
  EXPECT_EQ(lora.terms[1].module, "a");
  EXPECT_EQ(lora.ignored, (std::vector<std::string>{"text_encoder.layer.weight", "lonely.alpha"}));
}

TEST_F(LoraFileTest, peft_header_metadata_gives_alpha_per_pattern_and_rslora) {
  const std::vector<T> tensors = join({pair("transformer.blocks.0.ffn.0.lora_A.weight",
                                            "transformer.blocks.0.ffn.0.lora_B.weight", 4),
                                       pair("transformer.blocks.0.attn1.to_q.lora_A.weight",
                                            "transformer.blocks.0.attn1.to_q.lora_B.weight", 4)});
  LoraFile lora = open(tensors, {{"lora_adapter_metadata",
                                  R"({"r": 4, "lora_alpha": 8, "alpha_pattern": {"ffn.0": 2}})"}});
  ASSERT_EQ(lora.terms.size(), 2u);
  EXPECT_EQ(lora.terms[0].alpha_scale, 0.5f);  // 2 / 4: the pattern matches the module's tail
  EXPECT_EQ(lora.terms[1].alpha_scale, 2.0f);  // 8 / 4
  lora = LoraFile{};  // closed before its file is written again (Windows keeps an open file)
  lora = open(tensors, {{"lora_adapter_metadata", R"({"lora_alpha": 8, "use_rslora": true})"}});
  EXPECT_EQ(lora.terms[1].alpha_scale, 4.0f);  // 8 / √4
  // An `.alpha` key wins over the metadata.
  lora = LoraFile{};
  lora = open(join({tensors, {{"transformer.blocks.0.ffn.0.alpha", {}, DType::kF32, 1.0f}}}),
              {{"lora_adapter_metadata", R"({"lora_alpha": 8})"}});
  EXPECT_EQ(lora.terms[0].alpha_scale, 0.25f);
  lora = LoraFile{};
  EXPECT_NE(refusal(tensors, {{"lora_adapter_metadata", "{r: 4"}}).find("not a JSON object"),
            std::string::npos);
  EXPECT_NE(refusal(tensors, {{"lora_adapter_metadata", R"({"lora_alpha": "8"})"}})
                .find("lora_alpha that is not a finite number"),
            std::string::npos);
}

// The PEFT metadata is JSON inside the header (bounded by kMaxSafetensorsHeaderBytes): 100,000
// levels of nesting, as the whole config, an ignored field or an alpha, are refused or ignored by
// nlohmann's iterative parser and destructor, never a deep recursion.
TEST_F(LoraFileTest, deep_nesting_in_the_peft_metadata_is_refused_or_ignored_without_recursion) {
  const std::vector<T> tensors = pair("transformer.blocks.0.ffn.0.lora_A.weight",
                                      "transformer.blocks.0.ffn.0.lora_B.weight", 4);
  const std::string deep = std::string(100000, '[') + std::string(100000, ']');
  EXPECT_NE(refusal(tensors, {{"lora_adapter_metadata", deep}}).find("not a JSON object"),
            std::string::npos);
  EXPECT_NE(refusal(tensors, {{"lora_adapter_metadata", std::string(100000, '{')}})
                .find("not a JSON object"),
            std::string::npos);
  EXPECT_NE(
      refusal(tensors, {{"lora_adapter_metadata", R"({"alpha_pattern": {"ffn.0": )" + deep + "}}"}})
          .find("alpha_pattern entry that is not a finite number"),
      std::string::npos);
  const LoraFile lora =
      open(tensors, {{"lora_adapter_metadata", R"({"lora_alpha": 8, "notes": )" + deep + "}"}});
  ASSERT_EQ(lora.terms.size(), 1u);
  EXPECT_EQ(lora.terms[0].alpha_scale, 2.0f);  // 8 / 4
}

TEST_F(LoraFileTest, refusals_name_the_file_the_key_and_the_problem) {
  const auto expect = [&](const std::vector<T>& tensors, const std::string& key,
                          const std::string& words) {
    const std::string message = refusal(tensors);
    EXPECT_NE(message.find("'" + key + "'"), std::string::npos) << message;
    EXPECT_NE(message.find(words), std::string::npos) << message;
  };
  expect({{"m.lora_down.weight", {2, 8}}}, "m.lora_down.weight", "without its up");
  expect({{"m.lora_B.weight", {6, 2}}}, "m.lora_B.weight", "without its down");
  expect({{"m.lora_A.weight", {2, 8}}, {"m.lora_B.weight", {6, 3}}}, "m.lora_B.weight",
         "has rank 3");
  expect(join({pair("m.lora_down.weight", "m.lora_up.weight", 2), {{"m.alpha", {2}}}}), "m.alpha",
         "not one finite value");
  expect(join({pair("m.lora_down.weight", "m.lora_up.weight", 2),
               {{"m.alpha", {}, DType::kF32, NAN}}}),
         "m.alpha", "not one finite value");
  expect(join({pair("m.lora_down.weight", "m.lora_up.weight", 2), {{"m.alpha", {}, DType::kU8}}}),
         "m.alpha", "not one finite value");
  expect(join({pair("m.lora_down.weight", "m.lora_up.weight", 2),
               {{"m.scale", {}, DType::kF32, INFINITY}}}),
         "m.scale", "not one finite value");
  expect({{"m.lora_down.weight", {2, 8}, DType::kI32}, {"m.lora_up.weight", {6, 2}}},
         "m.lora_down.weight", "is I32");
  expect({{"m.diff", {6}, DType::kF8E4M3}}, "m.diff", "is F8_E4M3");
  expect({{"m.lora_down.weight", {8}}, {"m.lora_up.weight", {6, 8}}}, "m.lora_down.weight",
         "not a matrix");
  expect({{"m.lora_down.weight", {2, 8}}, {"m.lora_up.weight", {6, 2, 3}}}, "m.lora_up.weight",
         "not a matrix");
  expect({{"m.lora_down.weight", {0, 8}}, {"m.lora_up.weight", {6, 0}}}, "m.lora_down.weight",
         "is empty");
  expect({{"diffusion_model.m.lora_A.weight", {2, 8}},
          {"m.lora_down.weight", {2, 8}},
          {"m.lora_up.weight", {6, 2}}},
         "m.lora_down.weight", "are both the down (A) of module 'm'");
  expect({{"lycoris_m.hada_w1_a", {2, 8}}}, "lycoris_m.hada_w1_a", "LoHa");
  expect({{"lycoris_m.lokr_w1", {2, 8}}}, "lycoris_m.lokr_w1", "LoKr");
  expect(join({pair("m.lora_down.weight", "m.lora_up.weight", 2), {{"m.dora_scale", {1, 8}}}}),
         "m.dora_scale", "DoRA");
  expect(join({pair("m.lora_down.weight", "m.lora_up.weight", 2), {{"m.lora_mid.weight", {2, 2}}}}),
         "m.lora_mid.weight", "lora_mid");
  const std::string none = refusal({{"text_encoder.a.weight", {2}}, {"b.alpha", {}}});
  EXPECT_NE(none.find("holds no LoRA tensor (none of its 2 keys, e.g. 'text_encoder.a.weight'"),
            std::string::npos)
      << none;
}

TEST_F(LoraFileTest, a_pickle_is_refused_by_its_content_whatever_its_name) {
  // torch.save's zip, and a bare pickle stream (PROTO 2), under a .safetensors name.
  for (const std::string& bytes : {std::string("PK\x03\x04", 4) + std::string(60, '\0'),
                                   std::string("\x80\x02}q\x00.", 6) + std::string(60, '\0')}) {
    const auto path = dir_ / "lora.safetensors";
    test::write_file(path, bytes);
    try {
      open_lora(path);
      ADD_FAILURE() << "a pickle was opened";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::kBadModelFile);
      EXPECT_NE(std::string(e.what()).find("pickle"), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("lora.safetensors"), std::string::npos) << e.what();
    }
  }
}

TEST_F(LoraFileTest, a_gguf_file_is_refused) {
  const auto path = dir_ / "lora.gguf";
  // A valid empty GGUF v3: magic, version, 0 tensors, 0 key/values.
  std::string bytes = "GGUF";
  const std::uint32_t version = 3;
  const std::uint64_t zero = 0;
  bytes.append(reinterpret_cast<const char*>(&version), 4);
  bytes.append(reinterpret_cast<const char*>(&zero), 8);
  bytes.append(reinterpret_cast<const char*>(&zero), 8);
  test::write_file(path, bytes);
  try {
    open_lora(path);
    ADD_FAILURE() << "a GGUF LoRA was opened";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kBadModelFile);
    EXPECT_NE(std::string(e.what()).find("is a GGUF file"), std::string::npos) << e.what();
  }
}

TEST_F(LoraFileTest, a_truncated_file_is_refused_by_the_header_check) {
  const auto path =
      write_lora(dir_ / "l.safetensors", pair("m.lora_down.weight", "m.lora_up.weight", 4, 64, 64));
  std::string error;
  ASSERT_TRUE(test::resize_file(path, std::filesystem::file_size(path) - 100, &error)) << error;
  try {
    open_lora(path);
    ADD_FAILURE() << "a truncated LoRA was opened";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kBadModelFile);
    EXPECT_NE(std::string(e.what()).find("truncated"), std::string::npos) << e.what();
  }
}

// One pass with a hash map: 100 000 keys open in seconds; a quadratic grouping (10¹⁰ string
// compares) would run past the test's timeout. The file is written here by hand (the test writer's
// ordered JSON is itself quadratic in the key count).
TEST_F(LoraFileTest, a_header_of_100000_keys_is_grouped_in_one_pass) {
  constexpr int kModules = 50'000;
  std::string header = "{";
  for (int i = 0; i < 2 * kModules; ++i) {
    const std::string m = "blocks." + std::to_string(i / 2) + ".ffn.0";
    header += "\"" + m + (i % 2 == 0 ? ".lora_down.weight" : ".lora_up.weight") +
              R"(":{"dtype":"BF16","shape":[1,1],"data_offsets":[)" + std::to_string(2 * i) + "," +
              std::to_string(2 * i + 2) + "]},";
  }
  header.back() = '}';
  header.append((8 - header.size() % 8) % 8, ' ');
  std::string bytes(8, '\0');
  const std::uint64_t n = header.size();
  std::memcpy(bytes.data(), &n, 8);
  bytes += header;
  bytes.append(4 * kModules, '\0');
  const auto path = dir_ / "big.safetensors";
  test::write_file(path, bytes);
  const auto start = std::chrono::steady_clock::now();
  const io::TensorFile header_only = io::TensorFile::open(path);
  const auto parsed = std::chrono::steady_clock::now();
  const LoraFile lora = open_lora(path);
  const auto grouped = std::chrono::steady_clock::now();
  const auto ms = [](auto d) { return std::chrono::duration<double, std::milli>(d).count(); };
  std::printf("  [%d keys] TensorFile::open %.0f ms, open_lora %.0f ms\n", 2 * kModules,
              ms(parsed - start), ms(grouped - parsed));
  ASSERT_EQ(lora.terms.size(), static_cast<std::size_t>(kModules));
  EXPECT_EQ(lora.terms.back().module, "blocks.49999.ffn.0");
}

// ---- the committed corpus of refused files ----

struct CorpusCase {
  std::string file;
  std::string message;
  std::string key;
  std::string why;
};

void PrintTo(const CorpusCase& c, std::ostream* out) {
  *out << c.file;
}

std::vector<CorpusCase> read_manifest() {
  std::ifstream in(test::data_path("lora/bad/manifest.json"));
  const nlohmann::json manifest = nlohmann::json::parse(in);
  std::vector<CorpusCase> cases;
  for (const nlohmann::json& c : manifest["cases"]) {
    cases.push_back({c["file"], c["message"], c["key"], c["why"]});
  }
  return cases;
}

class LoraCorpus : public ::testing::TestWithParam<CorpusCase> {};

TEST_P(LoraCorpus, open_lora_refuses_the_file_with_the_listed_message) {
  const CorpusCase& c = GetParam();
  SCOPED_TRACE(c.file + " (" + c.why + ")");
  try {
    const LoraFile lora = open_lora(test::data_path("lora/bad/" + c.file));
    FAIL() << "opened with " << lora.terms.size() << " terms";
  } catch (const Error& e) {
    const std::string message = e.what();
    EXPECT_EQ(e.code(), ErrorCode::kBadModelFile) << message;
    EXPECT_NE(message.find(c.message), std::string::npos)
        << "message: " << message << "\nexpected it to contain: " << c.message;
    EXPECT_NE(message.find(c.file), std::string::npos) << message;
    if (!c.key.empty()) {
      EXPECT_NE(message.find("'" + c.key + "'"), std::string::npos) << message;
    }
    EXPECT_EQ(message.find('\n'), std::string::npos) << message;
  }
}

std::string case_name(const ::testing::TestParamInfo<CorpusCase>& info) {
  std::string name = info.param.file.substr(0, info.param.file.find('.'));
  for (char& ch : name) {
    if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
  }
  return name;
}

INSTANTIATE_TEST_SUITE_P(LoraBadFiles, LoraCorpus, ::testing::ValuesIn(read_manifest()), case_name);

TEST(LoraCorpusManifest, lists_at_least_12_cases_and_every_file_in_the_folder) {
  const std::vector<CorpusCase> cases = read_manifest();
  EXPECT_GE(cases.size(), 12u);
  std::set<std::string> listed;
  for (const CorpusCase& c : cases) listed.insert(c.file);
  std::set<std::string> present;
  for (const auto& entry : std::filesystem::directory_iterator(test::data_path("lora/bad"))) {
    if (entry.path().filename() != "manifest.json") {
      present.insert(entry.path().filename().string());
    }
  }
  EXPECT_EQ(listed, present);
}

}  // namespace
}  // namespace ferry::models::lora
