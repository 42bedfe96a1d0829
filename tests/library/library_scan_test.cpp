// The model library's scan (core/library/scan.h): a fake ComfyUI install and a fake Hugging Face
// cache, made here from header-only safetensors (sparse files: only names and shapes are read)
// and the tiny umT5 and VAE fixtures, sorted into the right sets with the right "missing" lines.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>

#include "core/io/safetensors_writer.h"
#include "core/library/roots.h"
#include "core/library/scan.h"
#include "core/models/h3/synthetic_set.h"
#include "core/models/wan/dit_layout.h"
#include "tests/test_support.h"

namespace ferry::library {
namespace {

namespace fs = std::filesystem;

// A one-block Wan DiT `dim` wide reading the tiny umT5's 64-wide text, `in` latent channels in and
// `out` out, written as a header with holes (nothing but the header is read).
models::wan::DitConfig tiny_dit(std::uint64_t dim, std::uint64_t in, std::uint64_t out) {
  models::wan::DitConfig c{"tiny", dim, 2 * dim, 1, in, out};
  c.text_dim = 64;
  return c;
}

void write_header_only(const fs::path& path, const std::vector<io::TensorSpec>& tensors) {
  fs::create_directories(path.parent_path());
  io::write_safetensors(path, tensors, {}, {}, [](std::size_t) { return true; });
}

void write_dit(const fs::path& path, const models::wan::DitConfig& c) {
  write_header_only(path, models::wan::dit_tensors(c, DType::kBF16));
}

void write_lora(const fs::path& path, const models::wan::DitConfig& c) {
  write_header_only(path, models::wan::dit_lora_tensors(c, 4, DType::kBF16));
}

void copy_fixture(const std::string& fixture, const fs::path& to) {
  fs::create_directories(to.parent_path());
  fs::copy_file(test::data_path(fixture), to, fs::copy_options::overwrite_existing);
}

// Sets an environment variable for the rest of the test process ("" clears it).
void set_env(const char* name, const std::string& value) {
#ifdef _WIN32
  _putenv_s(name, value.c_str());
#else
  if (value.empty()) {
    unsetenv(name);
  } else {
    setenv(name, value.c_str(), 1);
  }
#endif
}

const FoundSet* set_named(const LibraryScan& scan, const std::string& name) {
  for (const FoundSet& s : scan.sets) {
    if (s.name == name) return &s;
  }
  return nullptr;
}

std::string all_statuses(const LibraryScan& scan) {
  std::string text;
  for (const FoundSet& s : scan.sets) text += s.status() + "\n";
  for (const auto& [path, why] : scan.unreadable)
    text += "unreadable " + path.string() + ": " + why + "\n";
  return text;
}

// ComfyUI/models/{diffusion_models,text_encoders,vae,loras}: a TI2V-shaped model with its text
// encoder and VAE in their three folders, an A14B I2V high-noise expert without its low-noise one,
// a LoRA for the first, and a pickle.
void make_comfy_tree(const fs::path& root) {
  const fs::path models = root / "models";
  write_dit(models / "diffusion_models" / "wan2.2_ti2v_5B_fp16.safetensors", tiny_dit(256, 48, 48));
  write_dit(models / "diffusion_models" / "wan2.2_i2v_high_noise_14B_fp8_scaled.safetensors",
            tiny_dit(384, 36, 16));
  copy_fixture("umt5/encoder/comfy_fp8_scaled.safetensors",
               models / "text_encoders" / "umt5_xxl_fp8_e4m3fn_scaled.safetensors");
  copy_fixture("wan/vae/wan22_tiny.safetensors", models / "vae" / "wan2.2_vae.safetensors");
  copy_fixture("wan/vae/wan21_tiny.safetensors", models / "vae" / "wan_2.1_vae.safetensors");
  write_lora(models / "loras" / "ti2v_style.safetensors", tiny_dit(256, 48, 48));
  test::write_file(models / "loras" / "old_style.ckpt", std::string_view("pickle"));
  fs::create_directories(models / "unet");
}

TEST(LibraryScan, SortsAComfyUiInstallIntoSetsAcrossItsFolders) {
  test::ScratchDir dir;
  make_comfy_tree(dir / "ComfyUI");
  const LibraryScan scan = scan_library({dir / "ComfyUI"});

  const FoundSet* ti2v = set_named(scan, "Wan DiT 256 wide, 1 blocks (bf16)");
  ASSERT_NE(ti2v, nullptr) << all_statuses(scan);
  EXPECT_TRUE(ti2v->ready()) << ti2v->status();
  EXPECT_EQ(ti2v->status(), "Wan DiT 256 wide, 1 blocks (bf16) — ready");
  ASSERT_EQ(ti2v->parts.size(), 3u);
  EXPECT_EQ(ti2v->parts[1].path.filename(), "umt5_xxl_fp8_e4m3fn_scaled.safetensors");
  EXPECT_EQ(ti2v->parts[2].path.filename(), "wan2.2_vae.safetensors");
  ASSERT_EQ(ti2v->loras.size(), 1u);
  EXPECT_EQ(ti2v->loras[0].path.filename(), "ti2v_style.safetensors");

  const FoundSet* a14b = set_named(scan, "Wan 2.2 A14B I2V (bf16)");
  ASSERT_NE(a14b, nullptr) << all_statuses(scan);
  EXPECT_FALSE(a14b->ready());
  EXPECT_EQ(a14b->status(), "Wan 2.2 A14B I2V (bf16) — missing the low-noise expert");
  EXPECT_EQ(a14b->parts[2].path.filename(), "wan_2.1_vae.safetensors");  // its latent space's VAE

  ASSERT_EQ(scan.sets.size(), 2u) << all_statuses(scan);
  EXPECT_TRUE(scan.sets[0].ready());  // ready sets first

  ASSERT_EQ(scan.loras.size(), 1u);
  EXPECT_EQ(scan.loras[0].fits, std::vector<std::string>{"Wan DiT 256 wide, 1 blocks (bf16)"});
  ASSERT_EQ(scan.pickles.size(), 1u);
  EXPECT_EQ(scan.pickles[0].filename(), "old_style.ckpt");
  EXPECT_TRUE(scan.unreadable.empty()) << all_statuses(scan);
}

TEST(LibraryScan, RecognisesComfyUiFromItsModelsFolderToo) {
  test::ScratchDir dir;
  make_comfy_tree(dir / "ComfyUI");
  EXPECT_EQ(comfyui_model_folders(dir / "ComfyUI").size(), 5u);
  EXPECT_EQ(comfyui_model_folders(dir / "ComfyUI" / "models"),
            comfyui_model_folders(dir / "ComfyUI"));
  EXPECT_TRUE(comfyui_model_folders(dir / "ComfyUI" / "models" / "vae").empty());
}

TEST(LibraryScan, TheSecondExpertMakesTheA14bSetReady) {
  test::ScratchDir dir;
  make_comfy_tree(dir / "ComfyUI");
  write_dit(dir / "ComfyUI" / "models" / "diffusion_models" /
                "wan2.2_i2v_low_noise_14B_fp8_scaled.safetensors",
            tiny_dit(384, 36, 16));
  const LibraryScan scan = scan_library({dir / "ComfyUI"});
  const FoundSet* a14b = set_named(scan, "Wan 2.2 A14B I2V (bf16)");
  ASSERT_NE(a14b, nullptr) << all_statuses(scan);
  EXPECT_TRUE(a14b->ready()) << a14b->status();
  EXPECT_EQ(a14b->parts.size(), 4u);
  // Each expert heads the same set: it is listed once.
  EXPECT_EQ(std::count_if(scan.sets.begin(), scan.sets.end(),
                          [](const FoundSet& s) { return s.name == "Wan 2.2 A14B I2V (bf16)"; }),
            1);
}

// A missing text encoder and VAE are both said, in the order the family needs them.
TEST(LibraryScan, SaysEveryMissingPart) {
  test::ScratchDir dir;
  write_dit(dir / "models" / "dit.safetensors", tiny_dit(256, 48, 48));
  const LibraryScan scan = scan_library({dir / "models"});
  ASSERT_EQ(scan.sets.size(), 1u);
  EXPECT_EQ(
      scan.sets[0].status(),
      "Wan DiT 256 wide, 1 blocks (bf16) — missing a umT5 text encoder (64 wide) and a Wan 2.2 "
      "VAE");
}

// A complete set the family refuses to open (a diffusers text encoder with no tokenizer beside
// it) is not ready, and says the family's reason.
TEST(LibraryScan, ASetTheFamilyRefusesSaysWhy) {
  test::ScratchDir dir;
  write_dit(dir / "m" / "transformer" / "diffusion_pytorch_model.safetensors",
            tiny_dit(128, 16, 16));
  copy_fixture("umt5/encoder/diffusers/text_encoder/model.safetensors",
               dir / "m" / "text_encoder" / "model.safetensors");
  copy_fixture("wan/vae/wan21_tiny.safetensors",
               dir / "m" / "vae" / "diffusion_pytorch_model.safetensors");
  const LibraryScan scan = scan_library({dir / "m"});
  ASSERT_EQ(scan.sets.size(), 1u);
  EXPECT_FALSE(scan.sets[0].ready());
  EXPECT_NE(scan.sets[0].status().find("cannot run: "), std::string::npos) << scan.sets[0].status();
  EXPECT_NE(scan.sets[0].refusal.find("has no tokenizer"), std::string::npos)
      << scan.sets[0].refusal;
}

// hub/models--org--name/{blobs/<hash>, snapshots/<rev>/<path> → ../../blobs/<hash>, refs/main}.
class FakeHubCache {
 public:
  explicit FakeHubCache(fs::path hub) : hub_(std::move(hub)) {}
  // Puts `source` (a file made by the test) in the repository as `path` of revision `rev`; false
  // when this file system has no symbolic links (the file is then copied into the snapshot).
  bool add(const std::string& repo, const std::string& rev, const std::string& path,
           const fs::path& source) {
    const fs::path folder = hub_ / ("models--" + repo);
    const std::string blob = "blob" + std::to_string(++blobs_);
    fs::create_directories(folder / "blobs");
    fs::create_directories(folder / "refs");
    test::write_file(folder / "refs" / "main", rev);
    fs::rename(source, folder / "blobs" / blob);
    const fs::path link = folder / "snapshots" / rev / path;
    fs::create_directories(link.parent_path());
    std::error_code ec;
    // From the link's folder up to models--*/: one ".." per folder of `path`, and one for the
    // revision's folder.
    fs::path target = "..";
    const fs::path relative(path);
    for (auto it = relative.begin(); std::next(it) != relative.end(); ++it) target /= "..";
    fs::create_symlink(target / ".." / "blobs" / blob, link, ec);
    if (ec) fs::copy_file(folder / "blobs" / blob, link);
    return !ec;
  }
  fs::path snapshot(const std::string& repo, const std::string& rev) const {
    return hub_ / ("models--" + repo) / "snapshots" / rev;
  }

 private:
  fs::path hub_;
  int blobs_ = 0;
};

TEST(LibraryScan, ResolvesHubCacheSnapshotsThroughTheirLinksAndNeverOutOfTheCache) {
  test::ScratchDir dir;
  const fs::path hub = dir / "hf" / "hub";
  FakeHubCache cache(hub);
  const fs::path staging = dir / "staging";
  const std::string repo = "Wan-AI--Wan2.1-T2V-tiny-Diffusers";
  write_dit(staging / "dit.safetensors", tiny_dit(128, 16, 16));
  const bool links = cache.add(repo, "abc123", "transformer/diffusion_pytorch_model.safetensors",
                               staging / "dit.safetensors");
  copy_fixture("umt5/encoder/diffusers/text_encoder/model.safetensors", staging / "te.safetensors");
  cache.add(repo, "abc123", "text_encoder/model.safetensors", staging / "te.safetensors");
  copy_fixture("umt5/tokenizer/spiece.model", staging / "spiece.model");
  cache.add(repo, "abc123", "tokenizer/spiece.model", staging / "spiece.model");
  copy_fixture("wan/vae/wan21_tiny_diffusers.safetensors", staging / "vae.safetensors");
  cache.add(repo, "abc123", "vae/diffusion_pytorch_model.safetensors", staging / "vae.safetensors");
  // An older snapshot refs/main no longer names: not scanned.
  write_dit(cache.snapshot(repo, "old000") / "transformer" / "x.safetensors",
            tiny_dit(512, 16, 16));
  // A repository holding only a text encoder: a spare part.
  copy_fixture("umt5/encoder/comfy_fp16.safetensors", staging / "umt5.safetensors");
  cache.add("Comfy--umt5", "def456", "umt5_xxl_fp16.safetensors", staging / "umt5.safetensors");
  // A link that leads out of the cache: never followed.
  write_dit(dir / "outside" / "evil.safetensors", tiny_dit(384, 16, 16));
  if (links) {
    fs::create_symlink(dir / "outside" / "evil.safetensors",
                       cache.snapshot(repo, "abc123") / "evil.safetensors");
  }

  set_env("HF_HUB_CACHE", hub.string());
  EXPECT_EQ(hf_hub_cache_dir(), hub);
  const LibraryScan scan = scan_library({hf_hub_cache_dir()});
  set_env("HF_HUB_CACHE", "");

  ASSERT_EQ(scan.sets.size(), 1u) << all_statuses(scan);
  const FoundSet& set = scan.sets[0];
  EXPECT_EQ(set.status(), "Wan DiT 128 wide, 1 blocks (bf16) — ready");
  // The snapshot's own text encoder, the nearest, not the other repository's.
  EXPECT_EQ(set.parts[1].path,
            cache.snapshot(repo, "abc123") / "text_encoder" / "model.safetensors");
  ASSERT_EQ(scan.spare_parts.size(), 1u);
  EXPECT_EQ(scan.spare_parts[0].sketch.role, "text encoder");
  EXPECT_EQ(scan.spare_parts[0].precision, "fp16");
  for (const FoundPart& p : set.parts) EXPECT_EQ(p.path.string().find("evil"), std::string::npos);
  EXPECT_TRUE(scan.unrecognised.empty());
}

// The hub cache's snapshots are real folders (their files link into blobs/): a snapshot folder
// that is itself a link, the one refs/main names or another, would make its target the root of
// the scan, so it is never followed.
TEST(LibraryScan, AHubSnapshotFolderThatIsALinkIsNeverFollowed) {
  test::ScratchDir dir;
  const fs::path repo = dir / "hub" / "models--org--name";
  write_dit(dir / "outside" / "transformer" / "dit.safetensors", tiny_dit(128, 16, 16));
  write_dit(dir / "elsewhere" / "dit.safetensors", tiny_dit(256, 16, 16));
  fs::create_directories(repo / "snapshots");
  fs::create_directories(repo / "refs");
  test::write_file(repo / "refs" / "main", std::string_view("abc123"));
  std::error_code ec;
  fs::create_directory_symlink(dir / "outside", repo / "snapshots" / "abc123", ec);
  if (ec) GTEST_SKIP() << "this system does not let the test create links";
  for (const fs::path& root : {dir / "hub", repo}) {
    SCOPED_TRACE(root.string());
    const LibraryScan through_main = scan_library({root});
    EXPECT_EQ(through_main.files_read, 0u);
    EXPECT_TRUE(through_main.sets.empty()) << all_statuses(through_main);
  }
  // Without refs/main every snapshot is scanned: a linked one still is not.
  fs::remove(repo / "refs" / "main");
  fs::create_directory_symlink(dir / "elsewhere", repo / "snapshots" / "def456");
  const LibraryScan without_main = scan_library({dir / "hub"});
  EXPECT_EQ(without_main.files_read, 0u);
  EXPECT_TRUE(without_main.sets.empty()) << all_statuses(without_main);
  // Nor is a snapshots/ folder that is a link, whatever real folders it holds.
  const fs::path other = dir / "hub" / "models--org--other";
  write_dit(dir / "far" / "abc123" / "dit.safetensors", tiny_dit(384, 16, 16));
  fs::create_directories(other / "refs");
  test::write_file(other / "refs" / "main", std::string_view("abc123"));
  fs::create_directory_symlink(dir / "far", other / "snapshots");
  for (const fs::path& root : {dir / "hub", other}) {
    SCOPED_TRACE(root.string());
    const LibraryScan linked_snapshots = scan_library({root});
    EXPECT_EQ(linked_snapshots.files_read, 0u);
    EXPECT_TRUE(linked_snapshots.sets.empty()) << all_statuses(linked_snapshots);
  }
}

// 500 model files — 20 complete sets in ComfyUI's three folders, 100 LoRAs, 340 other models'
// files — scanned and sorted. The figure is printed; the bound only catches a scan gone quadratic
// in the files (a header read is well under a millisecond here).
TEST(LibraryScan, FiveHundredFilesInAFewSeconds) {
  test::ScratchDir dir;
  const fs::path models = dir / "ComfyUI" / "models";
  for (int i = 0; i < 20; ++i) {
    const std::string n = std::to_string(i);
    write_dit(models / "diffusion_models" / ("dit" + n + ".safetensors"),
              tiny_dit(128 * static_cast<std::uint64_t>(i + 1), 48, 48));
    copy_fixture("umt5/encoder/comfy_fp8_scaled.safetensors",
                 models / "text_encoders" / ("umt5_" + n + ".safetensors"));
    copy_fixture("wan/vae/wan22_tiny.safetensors", models / "vae" / ("vae" + n + ".safetensors"));
  }
  for (int i = 0; i < 100; ++i) {
    write_lora(models / "loras" / ("lora" + std::to_string(i) + ".safetensors"),
               tiny_dit(128 * static_cast<std::uint64_t>(i % 25 + 1), 48, 48));
  }
  for (int i = 0; i < 340; ++i) {
    write_header_only(models / "unet" / ("other" + std::to_string(i) + ".safetensors"),
                      {{"model.layers." + std::to_string(i) + ".weight", DType::kF16, {64, 64}},
                       {"model.norm.weight", DType::kF16, {64}}});
  }
  const auto start = std::chrono::steady_clock::now();
  const LibraryScan scan = scan_library({dir / "ComfyUI"});
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("[ figure ] scan of %zu files (%zu sets, %zu LoRAs): %.3f s\n", scan.files_read,
              scan.sets.size(), scan.loras.size(), seconds);
  EXPECT_EQ(scan.files_read, 500u);
  EXPECT_EQ(scan.sets.size(), 20u);
  EXPECT_TRUE(std::all_of(scan.sets.begin(), scan.sets.end(), [](const FoundSet& s) {
    return s.ready();
  })) << all_statuses(scan);
  EXPECT_EQ(scan.loras.size(), 100u);
  EXPECT_EQ(scan.unrecognised.size(), 340u);
  EXPECT_LT(seconds, 30.0);
}

// DiffSynth's MiniMax-H3 NF4 set at small shapes (header-only): its audio VAE, which io cannot open
// as a whole (32-wide NF4 rows), is recognised from its header, so the set is ready; without the
// video VAE the set says so.
TEST(LibraryScan, TheH3Nf4SetIsReadyWithTheAudioVaeReadFromItsHeader) {
  test::ScratchDir dir;
  models::h3::SyntheticShapes s;
  s.dit_hidden = 64, s.dit_heads = 1, s.dit_layers = 2, s.dit_ffn = 128, s.refiner_layers = 1;
  s.time_hidden = 64, s.time_dim = 64;
  s.vocab = 1024, s.text_dim = 128, s.text_heads = 2, s.text_kv_heads = 1, s.text_ffn = 256;
  s.vision_dim = 144, s.vision_ffn = 128, s.vision_side = 4;
  s.vae_dim = 64, s.vae_ffn = 128, s.vae_blocks = 2;
  models::h3::write_header_only_set(dir / "h3", s);
  LibraryScan scan = scan_library({dir / "h3"});
  ASSERT_EQ(scan.sets.size(), 1u) << all_statuses(scan);
  EXPECT_EQ(scan.sets[0].status(), "MiniMax-H3 FL2VA (nf4) — ready");
  EXPECT_EQ(scan.sets[0].parts.size(), 4u);
  EXPECT_TRUE(scan.unreadable.empty()) << all_statuses(scan);

  fs::remove(dir / "h3" / models::h3::SyntheticFiles::kVideoVae);
  scan = scan_library({dir / "h3"});
  ASSERT_EQ(scan.sets.size(), 1u);
  EXPECT_EQ(scan.sets[0].status(), "MiniMax-H3 FL2VA (nf4) — missing the H3 video VAE");
}

TEST(LibraryScan, AMissingRootIsSaidAndTheOthersStillScanned) {
  test::ScratchDir dir;
  write_dit(dir / "a" / "dit.safetensors", tiny_dit(256, 48, 48));
  const LibraryScan scan = scan_library({dir / "nowhere", dir / "a"});
  ASSERT_EQ(scan.unreadable.size(), 1u);
  EXPECT_EQ(scan.unreadable[0].first, dir / "nowhere");
  EXPECT_EQ(scan.sets.size(), 1u);
}

TEST(LibraryScan, CancelStopsTheScan) {
  test::ScratchDir dir;
  write_dit(dir / "a" / "dit.safetensors", tiny_dit(256, 48, 48));
  EXPECT_EQ(test::error_code_of([&] { scan_library({dir / "a"}, [] { return true; }); }),
            ErrorCode::kCancelled);
}

}  // namespace
}  // namespace ferry::library
