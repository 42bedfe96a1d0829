// Scanning a model folder (core/io/model_folder.h) when the folder is not what it seems: links that
// lead out of it or in a circle, and pickle files in place of safetensors.
#include "core/io/model_folder.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <string>

#include "core/error.h"
#include "core/io/safetensors_writer.h"
#include "core/io/tensor_file.h"
#include "tests/test_support.h"

namespace ferry::io {
namespace {

namespace fs = std::filesystem;

void write_tiny_safetensors(const fs::path& path) {
  fs::create_directories(path.parent_path());
  write_safetensors(path, {{"w", DType::kF32, {2}}}, {},
                    [](std::size_t, std::uint64_t, std::span<std::byte> out) {
                      std::fill(out.begin(), out.end(), std::byte{0});
                    });
}

// Creating links needs a privilege on Windows: where it is missing the test is skipped.
bool make_link(const fs::path& target, const fs::path& link, bool directory) {
  std::error_code ec;
  if (directory)
    fs::create_directory_symlink(target, link, ec);
  else
    fs::create_symlink(target, link, ec);
  return !ec;
}

std::vector<std::string> names(const std::vector<fs::path>& paths, const fs::path& root) {
  std::vector<std::string> out;
  for (const fs::path& p : paths) out.push_back(p.lexically_relative(root).generic_string());
  std::sort(out.begin(), out.end());
  return out;
}

TEST(ModelFolder, FollowsLinksThatStayInsideTheFolder) {
  test::ScratchDir dir;
  const fs::path models = dir / "models";
  write_tiny_safetensors(models / "parts" / "vae.safetensors");
  if (!make_link(models / "parts" / "vae.safetensors", models / "vae_link.safetensors", false) ||
      !make_link(models / "parts", models / "linked_parts", true)) {
    GTEST_SKIP() << "this system does not let the test create links";
  }
  // One file, reached three ways: listed once.
  EXPECT_EQ(find_safetensors_sets(models, nullptr).size(), 1u);
}

TEST(ModelFolder, SkipsLinksThatLeadOutsideTheScannedFolder) {
  test::ScratchDir dir;
  const fs::path models = dir / "models";
  write_tiny_safetensors(models / "dit.safetensors");
  write_tiny_safetensors(dir / "elsewhere" / "private.safetensors");
  write_tiny_safetensors(dir / "elsewhere" / "deeper" / "other.safetensors");
  if (!make_link(dir / "elsewhere" / "private.safetensors", models / "vae.safetensors", false) ||
      !make_link(dir / "elsewhere", models / "more", true)) {
    GTEST_SKIP() << "this system does not let the test create links";
  }
  EXPECT_EQ(names(find_safetensors_sets(models, nullptr), models),
            std::vector<std::string>{"dit.safetensors"});
}

TEST(ModelFolder, RefusesAShardIndexWhoseShardLinksOutside) {
  test::ScratchDir dir;
  const fs::path models = dir / "models";
  write_tiny_safetensors(dir / "elsewhere" / "secret.safetensors");
  fs::create_directories(models);
  if (!make_link(dir / "elsewhere" / "secret.safetensors", models / "model-00001.safetensors",
                 false)) {
    GTEST_SKIP() << "this system does not let the test create links";
  }
  test::write_file(models / "model.safetensors.index.json",
                   std::string_view(R"({"weight_map": {"w": "model-00001.safetensors"}})"));
  try {
    find_safetensors_sets(models, nullptr);
    ADD_FAILURE() << "the index was opened";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kBadModelFile);
    EXPECT_NE(std::string(e.what()).find("links outside"), std::string::npos) << e.what();
  }
}

TEST(ModelFolder, ALinkCycleIsScannedOnce) {
  test::ScratchDir dir;
  const fs::path models = dir / "models";
  write_tiny_safetensors(models / "a" / "dit.safetensors");
  if (!make_link(models, models / "a" / "back_to_top", true) ||
      !make_link(models / "a", models / "a" / "self", true)) {
    GTEST_SKIP() << "this system does not let the test create links";
  }
  EXPECT_EQ(names(find_safetensors_sets(models, nullptr), models),
            std::vector<std::string>{"a/dit.safetensors"});
}

TEST(ModelFolder, AHuggingFaceSnapshotMayLinkIntoItsBlobs) {
  test::ScratchDir dir;
  const fs::path repo = dir / "hub" / "models--Wan-AI--Wan2.1-T2V-1.3B";
  const fs::path snapshot = repo / "snapshots" / "0123abcd";
  write_tiny_safetensors(repo / "blobs" / "9f86d081884c7d65");
  write_tiny_safetensors(dir / "hub" / "models--other--repo" / "blobs" / "aaaa");
  fs::create_directories(snapshot / "vae");
  if (!make_link(fs::path("../../../blobs/9f86d081884c7d65"),
                 snapshot / "vae" / "diffusion_pytorch_model.safetensors", false) ||
      !make_link(fs::path("../../../models--other--repo/blobs/aaaa"),
                 snapshot / "other.safetensors", false)) {
    GTEST_SKIP() << "this system does not let the test create links";
  }
  EXPECT_EQ(fs::canonical(scan_root(snapshot)), fs::canonical(repo));
  EXPECT_EQ(fs::canonical(scan_root(snapshot / "vae")), fs::canonical(repo));
  EXPECT_EQ(names(find_safetensors_sets(snapshot, nullptr), snapshot),
            std::vector<std::string>{"vae/diffusion_pytorch_model.safetensors"});
}

TEST(ModelFolder, EveryPyTorchPickleFormatIsListedApartNeverOpened) {
  test::ScratchDir dir;
  for (const char* name : {"a.pt", "b.pth", "c.ckpt", "d.pkl", "pytorch_model.bin", "E.BIN"}) {
    test::write_file(dir / name, std::string_view("\x80\x02}q\x00.", 6));
  }
  std::vector<fs::path> pickles;
  EXPECT_TRUE(find_safetensors_sets(dir.path(), &pickles).empty());
  EXPECT_EQ(pickles.size(), 6u);
}

// Whatever its name, a pickle reached by a path is refused with what to use instead: torch.save's
// zip format and the older bare pickle stream.
TEST(ModelFolder, OpeningAPickleIsRefusedNamingSafetensorsAndGguf) {
  test::ScratchDir dir;
  // (The name starts its own literal: "\x00a..." would read as one hex escape.)
  const std::string zip(
      "PK\x03\x04\x14\x00\x00\x00\x08\x00"
      "archive/data.pkl",
      26);
  // PROTO 2, then LONG1 of torch.save's magic number (0x1950a86a20f9469cfc6c), then STOP.
  const std::string stream(
      "\x80\x02\x8a\x0a"
      "l\xfc\x9c"
      "F\xf9 j\xa8"
      "P\x19.",
      15);
  for (const auto& [name, bytes] :
       {std::pair{"lora.pt", zip}, std::pair{"model.ckpt", stream},
        std::pair{"pytorch_model.bin", zip}, std::pair{"renamed.safetensors", stream}}) {
    test::write_file(dir / name, bytes);
    try {
      (void)TensorFile::open(dir / name);
      ADD_FAILURE() << name << " was opened";
    } catch (const Error& e) {
      const std::string what = e.what();
      EXPECT_EQ(e.code(), ErrorCode::kBadModelFile) << name;
      EXPECT_NE(what.find("pickle"), std::string::npos) << what;
      EXPECT_NE(what.find("safetensors"), std::string::npos) << what;
      EXPECT_NE(what.find("GGUF"), std::string::npos) << what;
    }
  }
}

}  // namespace
}  // namespace ferry::io
