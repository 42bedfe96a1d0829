// The umT5 encoder against tests/data/umt5/encoder/
// (tools/reference/make_umt5_encoder_reference.py): a tiny UMT5EncoderModel from transformers
// (d_model 64, 4 heads of 16, d_ff 96, 3 blocks, 1280 embedding rows) in Wan's own key layout, a
// diffusers text_encoder/ folder, ComfyUI's fp16 single file and ComfyUI's scaled-fp8 file, with
// its outputs for prompts of 1 to 512 tokens. On the CPU backend in ferry_tests, on the CUDA
// backend in ferry_cuda_model_tests (tests/gpu/run.sh).
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/io/tensor_set.h"
#include "core/io/safetensors_writer.h"
#include "core/models/umt5/encoder.h"
#include "core/models/umt5/tokenizer.h"
#include "core/tensor/convert.h"
#include "tests/models/model_test_backend.h"
#include "tests/test_support.h"

namespace ferry::models::umt5 {
namespace {

using offload::Placement;
using offload::Plan;

const char* const kPrompts[] = {"negative_prompt", "english", "chinese",
                                "mixed",           "empty",   "long_english"};

// Ferry's bf16 encoder against the bf16 reference (the same recipe run by PyTorch). Both round
// every activation to bf16 but at different points (PyTorch rounds the attention scores and
// probabilities and every step of GELU; Ferry computes those in f32) and sum in different orders,
// so the two bf16 runs drift apart by a few bf16 ulps of the output (|y| up to 4). Measured on the
// CPU backend over the six prompts and three bf16 layouts: max |Δ| 0.0547, relative RMS 0.0087
// against the bf16 reference; against the f32 run of the same weights, Ferry is at max |Δ| 0.038,
// relative RMS 0.0077 — as close as PyTorch's own bf16 run is (0.037, 0.0079). The fp8 file
// against its dequantised f32 reference: 0.039, 0.0082. The bounds leave about 1.5× room.
constexpr double kMaxAbsBound = 0.08;
constexpr double kRelRmsBound = 0.012;

struct Reference {
  io::TensorSet set;
  explicit Reference(std::string_view file = "reference.safetensors")
      : set(io::TensorSet::open(test::data_path("umt5/encoder/" + std::string(file)))) {}

  std::vector<std::int32_t> ids(std::string_view prompt) const {
    const auto& e = set.at(std::string(prompt) + ".ids");
    std::vector<std::int32_t> out(e.tensor->element_count());
    e.file->map(*e.tensor).copy_to(0, std::as_writable_bytes(std::span(out)));
    return out;
  }
  std::vector<float> output(std::string_view prompt, std::string_view kind) const {
    const auto& e = set.at(std::string(prompt) + "." + std::string(kind));
    std::vector<float> out(e.tensor->element_count());
    e.file->map(*e.tensor).copy_to(0, std::as_writable_bytes(std::span(out)));
    return out;
  }
};

class Umt5Encoder : public test::ModelTest {};

const Reference& reference() {
  static const Reference r;
  return r;
}

// tools/reference/make_umt5_gguf_reference.py: the same prompts through transformers in f32 on
// the weights umt5-Q8_0.gguf means.
const Reference& gguf_reference() {
  static const Reference r("gguf_reference.safetensors");
  return r;
}

struct Error2 {
  double max_abs = 0;
  double rel_rms = 0;
};

Error2 compare(const TextEmbedding& got, const std::vector<float>& want) {
  EXPECT_EQ(static_cast<std::size_t>(got.rows * got.dim), want.size());
  double sq = 0, ref_sq = 0, max_abs = 0;
  for (std::size_t i = 0; i < want.size() && i < got.bf16.size(); ++i) {
    const double d = static_cast<double>(bf16_to_f32(got.bf16[i])) - want[i];
    max_abs = std::max(max_abs, std::abs(d));
    sq += d * d;
    ref_sq += static_cast<double>(want[i]) * want[i];
  }
  return {max_abs, std::sqrt(sq / std::max(ref_sq, 1e-30))};
}

Plan plan_for(const offload::ModelLayout& layout, Placement blocks, std::size_t look_ahead = 1,
              offload::ReadMethod method = offload::ReadMethod::kMapped) {
  Plan plan;
  plan.look_ahead = look_ahead;
  plan.read_method = method;
  std::uint64_t largest = 0;
  for (const auto& g : layout.groups) {
    const Placement p = g.always_resident ? Placement::kDevice : blocks;
    plan.placement.push_back(p);
    if (p != Placement::kDevice) largest = std::max(largest, g.slot_bytes());
  }
  plan.device_slots = blocks == Placement::kDevice ? 0 : look_ahead + 1;
  plan.device_slot_bytes = largest;
  plan.staging_slots = 3;
  plan.staging_slot_bytes = 8 << 10;  // smaller than a block: several chunks per tensor
  return plan;
}

std::vector<std::vector<std::int32_t>> all_prompt_ids() {
  std::vector<std::vector<std::int32_t>> out;
  for (const char* p : kPrompts) out.push_back(reference().ids(p));
  return out;
}

EncodeResult run(const std::string& file, Placement blocks,
                 const std::vector<std::vector<std::int32_t>>& prompts,
                 offload::ReadMethod method = offload::ReadMethod::kMapped) {
  const auto set = io::TensorSet::open(test::data_path("umt5/encoder/" + file));
  const auto weights = EncoderWeights::from(set);
  Backend& backend = test::model_backend();
  return encode(backend, weights, plan_for(weights.model_layout(), blocks, 1, method), prompts);
}

void expect_matches(const std::string& file, std::string_view kind,
                    const Reference& want = reference()) {
  const auto prompts = all_prompt_ids();
  const EncodeResult r = run(file, Placement::kDevice, prompts);
  ASSERT_EQ(r.embeddings.size(), prompts.size());
  for (std::size_t p = 0; p < prompts.size(); ++p) {
    const Error2 e = compare(r.embeddings[p], want.output(kPrompts[p], kind));
    EXPECT_LE(e.max_abs, kMaxAbsBound) << file << " " << kPrompts[p];
    EXPECT_LE(e.rel_rms, kRelRmsBound) << file << " " << kPrompts[p];
    // Against the f32 run of the same weights: how far Ferry's bf16 path is from exact.
    const Error2 f = compare(r.embeddings[p], reference().output(kPrompts[p], "f32"));
    std::printf(
        "[ measured ] %s %s L=%lld: vs %s max|d| %.4f rel rms %.5f; vs f32 max|d| %.4f "
        "rel rms %.5f\n",
        file.c_str(), kPrompts[p], static_cast<long long>(r.embeddings[p].rows),
        std::string(kind).c_str(), e.max_abs, e.rel_rms, f.max_abs, f.rel_rms);
  }
}

TEST_F(Umt5Encoder, InfersTheConfigurationAndKeyLayoutFromTheFile) {
  struct Case {
    const char* file;
    KeyLayout layout;
  } cases[] = {{"official.safetensors", KeyLayout::kOfficial},
               {"diffusers/text_encoder/model.safetensors", KeyLayout::kHuggingFace},
               {"comfy_fp16.safetensors", KeyLayout::kHuggingFace},
               {"comfy_fp8_scaled.safetensors", KeyLayout::kHuggingFace},
               {"umt5-Q8_0.gguf", KeyLayout::kGguf}};
  for (const Case& c : cases) {
    const auto set =
        io::TensorSet::open(test::data_path(std::string("umt5/encoder/") + c.file));
    const auto w = EncoderWeights::from(set);
    EXPECT_EQ(w.key_layout(), c.layout) << c.file;
    EXPECT_EQ(w.config().vocab_rows, 1280);
    EXPECT_EQ(w.config().dim, 64);
    EXPECT_EQ(w.config().heads, 4);
    EXPECT_EQ(w.config().head_dim, 16);
    EXPECT_EQ(w.config().ffn_dim, 96);
    EXPECT_EQ(w.config().layers, 3);
    const offload::ModelLayout layout = w.model_layout();
    ASSERT_EQ(layout.groups.size(), 4u);
    EXPECT_EQ(layout.groups[1].name, "blocks.1");
    EXPECT_EQ(layout.groups[1].weights.size(), static_cast<std::size_t>(kBlockTensorCount));
    EXPECT_TRUE(layout.groups[3].always_resident);
    // The embedding table is read by rows, never planned as a group.
    for (const auto& g : layout.groups) {
      for (const auto& wr : g.weights) EXPECT_NE(wr.tensor, w.embedding().tensor);
    }
  }
}

TEST_F(Umt5Encoder, ReadsPerTensorScalesOfScaledFp8Files) {
  const auto set =
      io::TensorSet::open(test::data_path("umt5/encoder/comfy_fp8_scaled.safetensors"));
  const auto w = EncoderWeights::from(set);
  EXPECT_EQ(w.block_tensor(2, kFfnFc2).tensor->dtype, DType::kF8E4M3);
  EXPECT_NE(w.block_scale(2, kFfnFc2), 1.0f);
  EXPECT_GT(w.block_scale(2, kFfnFc2), 0.0f);
  EXPECT_EQ(w.block_scale(2, kNorm2), 1.0f);
  EXPECT_EQ(w.embedding_scale(), 1.0f);
}

TEST_F(Umt5Encoder, OfficialLayoutMatchesTheBf16Reference) {
  expect_matches("official.safetensors", "bf16");
}

TEST_F(Umt5Encoder, DiffusersTextEncoderMatchesTheBf16Reference) {
  expect_matches("diffusers/text_encoder/model.safetensors", "bf16");
}

// The f16 file holds the bf16 weights exactly (they fit f16's range at this scale).
TEST_F(Umt5Encoder, ComfyFp16FileMatchesTheBf16Reference) {
  expect_matches("comfy_fp16.safetensors", "bf16");
}

// The reference ran the dequantised fp8 weights in f32; Ferry runs them with bf16 activations,
// so the bound is the bf16 one.
TEST_F(Umt5Encoder, ComfyScaledFp8FileMatchesItsDequantisedReference) {
  expect_matches("comfy_fp8_scaled.safetensors", "fp8.f32");
}

TEST_F(Umt5Encoder, StreamedFromDiskIsBitIdenticalToResident) {
  const auto prompts = all_prompt_ids();
  const EncodeResult resident = run("official.safetensors", Placement::kDevice, prompts);
  for (auto method : {offload::ReadMethod::kMapped, offload::ReadMethod::kDirect}) {
    for (Placement p : {Placement::kDisk, Placement::kPinnedCache}) {
      const EncodeResult streamed = run("official.safetensors", p, prompts, method);
      ASSERT_EQ(streamed.embeddings.size(), resident.embeddings.size());
      for (std::size_t i = 0; i < prompts.size(); ++i) {
        EXPECT_EQ(streamed.embeddings[i].bf16, resident.embeddings[i].bf16) << kPrompts[i];
      }
      EXPECT_EQ(streamed.stream.groups_uploaded, 3u);
    }
  }
}

TEST_F(Umt5Encoder, PromptsEncodedTogetherEqualPromptsEncodedAlone) {
  const auto prompts = all_prompt_ids();
  const EncodeResult together = run("official.safetensors", Placement::kDisk, prompts);
  for (std::size_t i = 0; i < prompts.size(); ++i) {
    const EncodeResult alone = run("official.safetensors", Placement::kDisk, {prompts[i]});
    EXPECT_EQ(alone.embeddings.at(0).bf16, together.embeddings[i].bf16) << kPrompts[i];
  }
}

TEST_F(Umt5Encoder, ActivationsUseExactlyTheEstimate) {
  const auto prompts = all_prompt_ids();
  const EncodeResult r = run("official.safetensors", Placement::kDisk, prompts);
  EXPECT_EQ(r.activation_peak, r.activation_bytes);
  const auto set = io::TensorSet::open(test::data_path("umt5/encoder/official.safetensors"));
  const auto w = EncoderWeights::from(set);
  const std::int64_t full[] = {512, 512};
  EXPECT_EQ(w.model_layout().activation_bytes, w.activation_bytes(full));
  EXPECT_GE(w.activation_bytes(full), r.activation_bytes);
}

TEST_F(Umt5Encoder, RefusesIdsOutsideTheTableAndBadLengths) {
  const auto set = io::TensorSet::open(test::data_path("umt5/encoder/official.safetensors"));
  const auto w = EncoderWeights::from(set);
  Backend& backend = test::model_backend();
  const Plan plan = plan_for(w.model_layout(), Placement::kDisk);
  const std::vector<std::vector<std::int32_t>> outside{{5, 1280, 1}};
  EXPECT_EQ(test::error_code_of([&] { encode(backend, w, plan, outside); }),
            ErrorCode::kBadModelFile);
  const std::vector<std::vector<std::int32_t>> empty{{}};
  EXPECT_EQ(test::error_code_of([&] { encode(backend, w, plan, empty); }), ErrorCode::kBadArgument);
  const std::vector<std::vector<std::int32_t>> too_long{std::vector<std::int32_t>(513, 5)};
  EXPECT_EQ(test::error_code_of([&] { encode(backend, w, plan, too_long); }),
            ErrorCode::kBadArgument);
}

TEST_F(Umt5Encoder, CancelStopsBeforeTheNextBlock) {
  const auto set = io::TensorSet::open(test::data_path("umt5/encoder/official.safetensors"));
  const auto w = EncoderWeights::from(set);
  Backend& backend = test::model_backend();
  std::atomic<bool> cancel{true};
  EncodeOptions options;
  options.cancel = &cancel;
  EXPECT_EQ(test::error_code_of([&] {
              encode(backend, w, plan_for(w.model_layout(), Placement::kDisk), all_prompt_ids(),
                     options);
            }),
            ErrorCode::kCancelled);
}

// A copy of the official file with one tensor left out or reshaped.
std::filesystem::path rewrite(const test::ScratchDir& dir, std::string_view drop,
                              std::string_view reshape) {
  const auto src = io::TensorSet::open(test::data_path("umt5/encoder/official.safetensors"));
  std::vector<io::TensorSpec> specs;
  std::vector<const io::TensorSet::Entry*> entries;
  for (const auto& e : src.entries()) {
    if (e.tensor->name == drop) continue;
    io::TensorSpec s{e.tensor->name, e.tensor->dtype, e.tensor->shape};
    if (e.tensor->name == reshape) s.shape = {s.shape[0] / 2, s.shape[1] * 2};
    specs.push_back(s);
    entries.push_back(&e);
  }
  const auto path = dir / "encoder.safetensors";
  io::write_safetensors(path, specs, {},
                        [&](std::size_t i, std::uint64_t offset, std::span<std::byte> out) {
                          entries[i]->file->map(*entries[i]->tensor).copy_to(offset, out);
                        });
  return path;
}

TEST_F(Umt5Encoder, NamesAMissingTensor) {
  test::ScratchDir dir;
  const auto set = io::TensorSet::open(rewrite(dir, "blocks.2.ffn.fc1.weight", ""));
  try {
    EncoderWeights::from(set);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kMissingTensor);
    EXPECT_NE(std::string(e.what()).find("blocks.2.ffn.fc1.weight"), std::string::npos);
  }
}

TEST_F(Umt5Encoder, RefusesATensorOfTheWrongShape) {
  test::ScratchDir dir;
  const auto set = io::TensorSet::open(rewrite(dir, "", "blocks.1.attn.o.weight"));
  EXPECT_EQ(test::error_code_of([&] { EncoderWeights::from(set); }), ErrorCode::kBadModelFile);
}

TEST_F(Umt5Encoder, RefusesAFileThatIsNotATextEncoder) {
  const auto set = io::TensorSet::open(test::data_path("umt5/single_file.safetensors"));
  EXPECT_EQ(test::error_code_of([&] { EncoderWeights::from(set); }), ErrorCode::kBadModelFile);
}

// city96's GGUF layout: Q8_0 embedding and Linears, F32 norms and bias tables. The reference ran
// the dequantised weights in f32, so the bound is the bf16 one, as for fp8.
TEST_F(Umt5Encoder, GgufQ8_0FileMatchesItsDequantisedReference) {
  expect_matches("umt5-Q8_0.gguf", "q8_0.f32", gguf_reference());
}

TEST_F(Umt5Encoder, GgufBlocksStreamedFromDiskEqualThemResident) {
  const auto prompts = all_prompt_ids();
  const EncodeResult resident = run("umt5-Q8_0.gguf", Placement::kDevice, prompts);
  const EncodeResult streamed = run("umt5-Q8_0.gguf", Placement::kDisk, prompts);
  for (std::size_t p = 0; p < prompts.size(); ++p) {
    EXPECT_EQ(streamed.embeddings[p].bf16, resident.embeddings[p].bf16) << kPrompts[p];
  }
}

// The tokenizer a GGUF carries in tokenizer.ggml.* (tokens, scores, types, charsmap) gives the
// ids of the SentencePiece model it was made from, for every reference prompt.
TEST_F(Umt5Encoder, TokenizerInTheGgufGivesTheSentencePieceIds) {
  std::ifstream in(test::data_path("umt5/reference.json"), std::ios::binary);
  const nlohmann::json json = nlohmann::json::parse(in);
  const auto set = io::TensorSet::open(test::data_path("umt5/encoder/umt5-Q8_0.gguf"));
  ASSERT_TRUE(Tokenizer::in_checkpoint(set));
  const Tokenizer tokenizer = Tokenizer::from_checkpoint(set);
  std::size_t checked = 0;
  for (const auto& p : json["prompts"]) {
    const TokenIds ids = tokenizer.tokenize(p["raw"].get<std::string>());
    EXPECT_EQ(ids.ids, p["ids"].get<std::vector<std::int32_t>>()) << p["name"];
    ++checked;
  }
  EXPECT_GE(checked, 6u);
}

// Prompt text → the tokenizer embedded in the fp8 single file → ids → encoder.
TEST_F(Umt5Encoder, TokenizerEmbeddedInTheSingleFileFeedsTheEncoder) {
  std::ifstream in(test::data_path("umt5/reference.json"), std::ios::binary);
  const nlohmann::json json = nlohmann::json::parse(in);
  const auto set =
      io::TensorSet::open(test::data_path("umt5/encoder/comfy_fp8_scaled.safetensors"));
  const Tokenizer tokenizer = Tokenizer::from_checkpoint(set);
  const auto w = EncoderWeights::from(set);
  Backend& backend = test::model_backend();
  for (const char* name : {"negative_prompt", "mixed"}) {
    std::string text;
    for (const auto& p : json["prompts"]) {
      if (p["name"] == name) text = p["raw"].get<std::string>();
    }
    const TokenIds ids = tokenizer.tokenize(text);
    ASSERT_EQ(ids.ids, reference().ids(name)) << name;
    const std::vector<std::vector<std::int32_t>> prompts{ids.ids};
    const EncodeResult r =
        encode(backend, w, plan_for(w.model_layout(), Placement::kDisk), prompts);
    const Error2 e = compare(r.embeddings.at(0), reference().output(name, "fp8.f32"));
    EXPECT_LE(e.max_abs, kMaxAbsBound) << name;
    EXPECT_LE(e.rel_rms, kRelRmsBound) << name;
  }
}

}  // namespace
}  // namespace ferry::models::umt5
