// Finding a model's parts in a folder or in files (core/models/wan/model_set.h), with the tiny
// umT5 and VAE fixtures of tests/data and a small DiT written here (its values do not matter: only
// names and shapes are read).
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/io/safetensors_writer.h"
#include "core/models/wan/model_set.h"
#include "core/models/wan/parts.h"
#include "tests/test_support.h"

namespace ferry::models::wan {
namespace {

namespace fs = std::filesystem;

// A one-block DiT reading 64-wide text (the tiny umT5's width) with `channels` latent channels in
// (`out_channels` out: A14B I2V reads 36 and gives 16), and any `extra` tensors.
void write_dit(const fs::path& path, std::uint64_t channels, std::uint64_t out_channels = 0,
               std::vector<io::TensorSpec> extra = {}) {
  models::wan::DitConfig c{"tiny", 256, 512, 1, channels, out_channels ? out_channels : channels};
  c.text_dim = 64;
  fs::create_directories(path.parent_path());
  std::vector<io::TensorSpec> tensors = models::wan::dit_tensors(c, DType::kBF16);
  tensors.insert(tensors.end(), extra.begin(), extra.end());
  io::write_safetensors(path, tensors, {},
                        [](std::size_t, std::uint64_t, std::span<std::byte> out) {
                          std::fill(out.begin(), out.end(), std::byte{0});
                        });
}

void copy_fixture(const std::string& fixture, const fs::path& to) {
  fs::create_directories(to.parent_path());
  fs::copy_file(test::data_path(fixture), to);
}

std::string message_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kBadModelFile) << e.what();
    return e.what();
  }
  ADD_FAILURE() << "no error";
  return {};
}

TEST(ModelSet, FindsTheFourPartsOfADiffusersFolder) {
  test::ScratchDir dir;
  write_dit(dir / "transformer" / "diffusion_pytorch_model.safetensors", 48);
  copy_fixture("umt5/encoder/diffusers/text_encoder/model.safetensors",
               dir / "text_encoder" / "model.safetensors");
  copy_fixture("umt5/tokenizer/spiece.model", dir / "tokenizer" / "spiece.model");
  copy_fixture("wan/vae/wan22_tiny_diffusers.safetensors",
               dir / "vae" / "diffusion_pytorch_model.safetensors");
  const ModelSet m = find_model_set({dir.path()});
  EXPECT_EQ(m.dit, dir / "transformer" / "diffusion_pytorch_model.safetensors");
  EXPECT_EQ(m.text_encoder, dir / "text_encoder" / "model.safetensors");
  EXPECT_EQ(m.tokenizer_model, dir / "tokenizer" / "spiece.model");
  EXPECT_EQ(m.vae, dir / "vae" / "diffusion_pytorch_model.safetensors");
  EXPECT_EQ(m.vae_kind, models::wan::VaeKind::kWan22);
  EXPECT_EQ(m.dit_config.in_dim, 48u);
  EXPECT_EQ(m.text_dim, 64);
  EXPECT_EQ(describe(m).size(), 5u);  // the four parts and the preview decoder (none here)
}

TEST(ModelSet, FindsComfySingleFilesWithTheirEmbeddedTokenizer) {
  test::ScratchDir dir;
  write_dit(dir / "wan2.2_ti2v_5B_fp16.safetensors", 48);
  copy_fixture("umt5/encoder/comfy_fp8_scaled.safetensors",
               dir / "umt5_xxl_fp8_e4m3fn_scaled.safetensors");
  copy_fixture("wan/vae/wan22_tiny.safetensors", dir / "wan2.2_vae.safetensors");
  test::write_file(dir / "old.ckpt", std::string_view("pickle"));
  const ModelSet m = find_model_set({dir.path()});
  EXPECT_TRUE(m.tokenizer_embedded());
  EXPECT_EQ(m.vae_kind, models::wan::VaeKind::kWan22);
  ASSERT_EQ(m.pickles.size(), 1u);
  EXPECT_EQ(m.pickles[0].filename(), "old.ckpt");
}

TEST(ModelSet, TakesFilesGivenOneByOne) {
  test::ScratchDir dir;
  write_dit(dir / "a" / "dit.safetensors", 16);
  copy_fixture("umt5/encoder/comfy_fp16.safetensors", dir / "b" / "umt5.safetensors");
  copy_fixture("wan/vae/wan21_tiny.safetensors", dir / "c" / "vae.safetensors");
  const ModelSet m = find_model_set({dir / "a" / "dit.safetensors", dir / "b" / "umt5.safetensors",
                                     dir / "c" / "vae.safetensors"});
  EXPECT_EQ(m.vae_kind, models::wan::VaeKind::kWan21);
  EXPECT_EQ(m.dit_config.in_dim, 16u);
}

// The TAEHV preview decoder is optional: the one for the model's latent space is taken from the
// folder (by its names, whatever the file is called), the other one is listed as ignored, and
// without one the set says where to get it.
TEST(ModelSet, TakesTheTaehvPreviewDecoderOfItsLatentSpace) {
  test::ScratchDir dir;
  write_dit(dir / "wan2.2_ti2v_5B_fp16.safetensors", 48);
  copy_fixture("umt5/encoder/comfy_fp8_scaled.safetensors",
               dir / "umt5_xxl_fp8_e4m3fn_scaled.safetensors");
  copy_fixture("wan/vae/wan22_tiny.safetensors", dir / "wan2.2_vae.safetensors");
  copy_fixture("taehv/taew2_1_tiny.safetensors", dir / "previews" / "taew2_1.safetensors");
  copy_fixture("taehv/taew2_2_tiny.safetensors", dir / "previews" / "tiny_preview.safetensors");
  const WanParts parts({dir.path()});
  EXPECT_EQ(parts.set().preview_decoder, dir / "previews" / "tiny_preview.safetensors");
  ASSERT_NE(parts.preview_decoder(), nullptr);
  EXPECT_NE(parts.preview_decoder()->find("decoder.22.weight"), nullptr);
  ASSERT_EQ(parts.set().ignored.size(), 1u);
  EXPECT_EQ(parts.set().ignored[0].filename(), "taew2_1.safetensors");
  const std::vector<PartFile> files = parts.files();
  EXPECT_TRUE(std::any_of(files.begin(), files.end(),
                          [](const PartFile& f) { return f.role == "preview decoder"; }));
}

TEST(ModelSet, FindsTheTaehvFileNextToAModelGivenFileByFile) {
  test::ScratchDir dir;
  write_dit(dir / "a" / "dit.safetensors", 16);
  copy_fixture("umt5/encoder/comfy_fp16.safetensors", dir / "b" / "umt5.safetensors");
  copy_fixture("wan/vae/wan21_tiny.safetensors", dir / "c" / "vae.safetensors");
  const std::vector<fs::path> files = {
      dir / "a" / "dit.safetensors", dir / "b" / "umt5.safetensors", dir / "c" / "vae.safetensors"};
  const ModelSet without = find_model_set(files);
  EXPECT_TRUE(without.preview_decoder.empty());
  const std::vector<std::string> lines = describe(without);
  EXPECT_TRUE(std::any_of(lines.begin(), lines.end(), [](const std::string& line) {
    return line.find("taew2_1.safetensors") != std::string::npos &&
           line.find("madebyollin/taehv") != std::string::npos;
  }));
  copy_fixture("taehv/taew2_1_tiny.safetensors", dir / "a" / "taew2_1.safetensors");
  EXPECT_EQ(find_model_set(files).preview_decoder, dir / "a" / "taew2_1.safetensors");
}

TEST(ModelSet, RefusesAWan21VaeNextToTheTi2vModel) {
  test::ScratchDir dir;
  write_dit(dir / "dit.safetensors", 48);
  copy_fixture("umt5/encoder/comfy_fp16.safetensors", dir / "umt5.safetensors");
  copy_fixture("wan/vae/wan21_tiny.safetensors", dir / "wan_2.1_vae.safetensors");
  const std::string m = message_of([&] { find_model_set({dir.path()}); });
  EXPECT_NE(m.find("is a Wan 2.1 VAE"), std::string::npos) << m;
  EXPECT_NE(m.find("needs a Wan 2.2 VAE"), std::string::npos) << m;
}

TEST(ModelSet, RefusesATextEncoderWithoutATokenizer) {
  test::ScratchDir dir;
  write_dit(dir / "transformer" / "dit.safetensors", 48);
  copy_fixture("umt5/encoder/diffusers/text_encoder/model.safetensors",
               dir / "text_encoder" / "model.safetensors");
  copy_fixture("wan/vae/wan22_tiny.safetensors", dir / "vae" / "vae.safetensors");
  const std::string m = message_of([&] { find_model_set({dir.path()}); });
  EXPECT_NE(m.find("has no tokenizer"), std::string::npos) << m;
}

TEST(ModelSet, NamesTheMissingPartAndRefusesTwoOfAKind) {
  test::ScratchDir dir;
  write_dit(dir / "dit.safetensors", 48);
  copy_fixture("umt5/encoder/comfy_fp16.safetensors", dir / "umt5.safetensors");
  std::string m = message_of([&] { find_model_set({dir.path()}); });
  EXPECT_NE(m.find("no Wan VAE"), std::string::npos) << m;

  copy_fixture("wan/vae/wan22_tiny.safetensors", dir / "vae.safetensors");
  write_dit(dir / "other_dit.safetensors", 48);
  m = message_of([&] { find_model_set({dir.path()}); });
  EXPECT_NE(m.find("two diffusion models"), std::string::npos) << m;
}

TEST(ModelSet, RefusesPartsOfDifferentWidths) {
  test::ScratchDir dir;
  models::wan::DitConfig c{"tiny", 256, 512, 1, 48, 48};  // reads 4096-wide text
  io::write_safetensors(dir / "dit.safetensors", models::wan::dit_tensors(c, DType::kBF16), {},
                        [](std::size_t, std::uint64_t, std::span<std::byte> out) {
                          std::fill(out.begin(), out.end(), std::byte{0});
                        });
  copy_fixture("umt5/encoder/comfy_fp16.safetensors", dir / "umt5.safetensors");
  copy_fixture("wan/vae/wan22_tiny.safetensors", dir / "vae.safetensors");
  const std::string m = message_of([&] { find_model_set({dir.path()}); });
  EXPECT_NE(m.find("64-wide"), std::string::npos) << m;
}

// The Wan 2.1 parts an A14B set takes, in `dir`.
void write_wan21_parts(const fs::path& dir) {
  copy_fixture("umt5/encoder/comfy_fp16.safetensors", dir / "umt5_xxl_fp16.safetensors");
  copy_fixture("wan/vae/wan21_tiny.safetensors", dir / "wan_2.1_vae.safetensors");
}

// Every layout users have A14B in (formats_lora_moe.md §6.5): the experts told apart by their
// paths, T2V and I2V by their input channels.
TEST(ModelSet, FindsA14bsTwoExpertsInEachDistributedLayout) {
  struct Layout {
    const char* high;
    const char* low;
  } layouts[] = {
      {"high_noise_model/diffusion_pytorch_model.safetensors",
       "low_noise_model/diffusion_pytorch_model.safetensors"},
      {"transformer/diffusion_pytorch_model.safetensors",
       "transformer_2/diffusion_pytorch_model.safetensors"},
      {"wan2.2_i2v_high_noise_14B_fp8_scaled.safetensors",
       "wan2.2_i2v_low_noise_14B_fp8_scaled.safetensors"},
      {"HighNoise/Wan2.2-I2V-A14B-HighNoise-Q8_0.safetensors",
       "LowNoise/Wan2.2-I2V-A14B-LowNoise-Q8_0.safetensors"},
  };
  for (const Layout& l : layouts) {
    for (const std::uint64_t in : {16ull, 36ull}) {
      test::ScratchDir dir;
      write_dit(dir / l.low, in, 16);  // the low-noise one first: the order found must not matter
      write_dit(dir / l.high, in, 16);
      write_wan21_parts(dir.path());
      const ModelSet m = find_model_set({dir.path()});
      EXPECT_TRUE(m.two_experts()) << l.high;
      EXPECT_EQ(fs::relative(m.dit, dir.path()), fs::path(l.high));
      EXPECT_EQ(fs::relative(m.low_noise_dit, dir.path()), fs::path(l.low));
      EXPECT_EQ(m.dit_config.name, in == 36 ? "i2v-a14b" : "t2v-a14b") << l.high;
      EXPECT_EQ(describe(m).size(), 6u);  // two experts, text encoder, tokenizer, VAE, preview
    }
  }
}

TEST(ModelSet, RefusesAnA14bSetWithOneExpertOrMismatchedOnes) {
  {
    test::ScratchDir dir;
    write_dit(dir / "high_noise_model" / "diffusion_pytorch_model.safetensors", 36, 16);
    write_wan21_parts(dir.path());
    const std::string m = message_of([&] { find_model_set({dir.path()}); });
    EXPECT_NE(m.find("low-noise expert is missing"), std::string::npos) << m;
  }
  {
    test::ScratchDir dir;
    write_dit(dir / "wan2.2_i2v_low_noise_14B_fp16.safetensors", 36, 16);
    write_wan21_parts(dir.path());
    const std::string m = message_of([&] { find_model_set({dir.path()}); });
    EXPECT_NE(m.find("high-noise expert is missing"), std::string::npos) << m;
  }
  {  // a T2V expert and an I2V expert
    test::ScratchDir dir;
    write_dit(dir / "wan2.2_t2v_high_noise_14B_fp16.safetensors", 16, 16);
    write_dit(dir / "wan2.2_i2v_low_noise_14B_fp16.safetensors", 36, 16);
    write_wan21_parts(dir.path());
    const std::string m = message_of([&] { find_model_set({dir.path()}); });
    EXPECT_NE(m.find("the experts disagree"), std::string::npos) << m;
  }
  {  // two experts named alike
    test::ScratchDir dir;
    write_dit(dir / "a" / "wan2.2_i2v_high_noise_14B_fp16.safetensors", 36, 16);
    write_dit(dir / "b" / "wan2.2_i2v_high_noise_14B_fp16.safetensors", 36, 16);
    write_wan21_parts(dir.path());
    const std::string m = message_of([&] { find_model_set({dir.path()}); });
    EXPECT_NE(m.find("two diffusion models"), std::string::npos) << m;
  }
}

TEST(ModelSet, RefusesA14bNextToTheWan22Vae) {
  test::ScratchDir dir;
  write_dit(dir / "wan2.2_i2v_high_noise_14B_fp16.safetensors", 36, 16);
  write_dit(dir / "wan2.2_i2v_low_noise_14B_fp16.safetensors", 36, 16);
  copy_fixture("umt5/encoder/comfy_fp16.safetensors", dir / "umt5_xxl_fp16.safetensors");
  copy_fixture("wan/vae/wan22_tiny.safetensors", dir / "wan2.2_vae.safetensors");
  const std::string m = message_of([&] { find_model_set({dir.path()}); });
  EXPECT_NE(m.find("i2v-a14b (16-channel latent) needs a Wan 2.1"), std::string::npos) << m;
}

TEST(ModelSet, RefusesWan21ImageToVideoWithItsClipConditioning) {
  test::ScratchDir dir;
  write_dit(dir / "wan2.1_i2v_480p_14B_fp16.safetensors", 36, 16,
            {{"img_emb.proj.1.weight", DType::kBF16, {256, 1280}}});
  write_wan21_parts(dir.path());
  const std::string m = message_of([&] { find_model_set({dir.path()}); });
  EXPECT_NE(m.find("CLIP"), std::string::npos) << m;
}

TEST(ModelSet, TellsAnExpertOrALoraForOneByItsPath) {
  EXPECT_EQ(expert_role("x/high_noise_model/diffusion_pytorch_model.safetensors.index.json"),
            ExpertRole::kHighNoise);
  EXPECT_EQ(expert_role("HighNoise/Wan2.2-T2V-A14B-HighNoise-Q4_K_M.gguf"), ExpertRole::kHighNoise);
  EXPECT_EQ(
      expert_role("loras/wan2.2_i2v_A14b_low_noise_lora_rank64_lightx2v_4step_1022.safetensors"),
      ExpertRole::kLowNoise);
  EXPECT_EQ(expert_role("loras/wan2.2_t2v_lightx2v_4steps_lora_v1.1_high_noise.safetensors"),
            ExpertRole::kHighNoise);
  EXPECT_EQ(expert_role("loras/style.safetensors"), ExpertRole::kUnknown);
  EXPECT_EQ(expert_role("models/transformer/diffusion_pytorch_model.safetensors"),
            ExpertRole::kUnknown);  // a lone diffusers transformer/ is any model's
  EXPECT_EQ(expert_role("models/transformer_2/diffusion_pytorch_model.safetensors"),
            ExpertRole::kLowNoise);
}

// city96's umT5 GGUF (llama.cpp's T5 names: token_embd, enc.blk.N) is a text encoder with its
// tokenizer inside: a folder of GGUF parts is a model set (it was ignored: "no umT5 text encoder").
TEST(ModelSet, FindsCity96sUmt5Gguf) {
  test::ScratchDir dir;
  write_dit(dir / "wan2.2_i2v_high_noise_14B_Q4_K_M.safetensors", 36, 16);
  write_dit(dir / "wan2.2_i2v_low_noise_14B_Q4_K_M.safetensors", 36, 16);
  copy_fixture("umt5/encoder/umt5-Q8_0.gguf", dir / "umt5-xxl-encoder-Q8_0.gguf");
  copy_fixture("wan/vae/wan21_tiny.safetensors", dir / "wan_2.1_vae.safetensors");
  const ModelSet m = find_model_set({dir.path()});
  EXPECT_EQ(m.text_encoder.filename(), "umt5-xxl-encoder-Q8_0.gguf");
  EXPECT_TRUE(m.tokenizer_embedded());
}

// LightX2V's A14B LoRAs come in pairs, one per expert; each expert takes its own and those that
// name neither. A one-expert model takes every LoRA (a wrong one is refused by its shapes).
TEST(ModelSet, EachExpertTakesItsOwnLorasAndTheSharedOnes) {
  const std::vector<LoraChoice> loras = {
      {"loras/wan2.2_i2v_A14b_high_noise_lora_rank64_lightx2v_4step_1022.safetensors", 1.0f},
      {"loras/wan2.2_i2v_A14b_low_noise_lora_rank64_lightx2v_4step_1022.safetensors", 1.0f},
      {"loras/style.safetensors", 0.7f}};
  ModelSet two;
  two.dit = "high_noise_model/diffusion_pytorch_model.safetensors";
  two.low_noise_dit = "low_noise_model/diffusion_pytorch_model.safetensors";
  const std::vector<LoraChoice> high = expert_loras(loras, two, 0);
  const std::vector<LoraChoice> low = expert_loras(loras, two, 1);
  ASSERT_EQ(high.size(), 2u);
  EXPECT_EQ(high[0], loras[0]);
  EXPECT_EQ(high[1], loras[2]);
  ASSERT_EQ(low.size(), 2u);
  EXPECT_EQ(low[0], loras[1]);
  EXPECT_EQ(low[1], loras[2]);
  ModelSet one;
  one.dit = "wan2.2_ti2v_5B_fp16.safetensors";
  EXPECT_EQ(expert_loras(loras, one, 0), loras);
}

}  // namespace
}  // namespace ferry::models::wan
