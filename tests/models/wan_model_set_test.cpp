// Finding a model's parts in a folder or in files (core/models/wan/model_set.h), with the tiny
// umT5 and VAE fixtures of tests/data and a small DiT written here (its values do not matter: only
// names and shapes are read).
#include <gtest/gtest.h>

#include <string>

#include "core/error.h"
#include "core/io/safetensors_writer.h"
#include "core/models/wan/model_set.h"
#include "tests/test_support.h"

namespace ferry::models::wan {
namespace {

namespace fs = std::filesystem;

// A one-block DiT reading 64-wide text (the tiny umT5's width) with `channels` latent channels.
void write_dit(const fs::path& path, std::uint64_t channels) {
  models::wan::DitConfig c{"tiny", 256, 512, 1, channels, channels};
  c.text_dim = 64;
  fs::create_directories(path.parent_path());
  io::write_safetensors(path, models::wan::dit_tensors(c, DType::kBF16), {},
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
  EXPECT_EQ(describe(m).size(), 4u);
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

}  // namespace
}  // namespace ferry::models::wan
