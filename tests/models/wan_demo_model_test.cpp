// The built-in demo model set (core/models/wan/demo_model.h): the same bytes on every run and
// platform, found by find_model_set like a folder of ComfyUI single files, every part loadable by
// its own loader and runnable, and an intact demo reused while a damaged or outdated one is
// rebuilt.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <string>
#include <vector>

#include "core/backend/cpu/cpu_backend.h"
#include "core/io/tensor_file.h"
#include "core/io/tensor_set.h"
#include "core/memory/arena.h"
#include "core/models/umt5/encoder.h"
#include "core/models/umt5/encoder_weights.h"
#include "core/models/umt5/tokenizer.h"
#include "core/models/wan/demo_model.h"
#include "core/models/wan/dit.h"
#include "core/models/wan/model_set.h"
#include "core/models/wan/vae.h"
#include "core/models/wan/vae_synth.h"
#include "core/models/wan/vae_weights.h"
#include "core/offload/streamer.h"
#include "tests/test_support.h"

namespace ferry::models::wan {
namespace {

namespace fs = std::filesystem;

const char* const kFiles[] = {"umt5_demo.safetensors", "wan2.2_ti2v_demo.safetensors",
                              "wan2.2_vae_demo.safetensors"};

// The content hashes of format version 1, as written on x86-64 Linux. Every platform must write
// these exact bytes; a deliberate change to the demo bumps DemoModel::kFormatVersion and these.
const char* const kContentHashes[] = {"9e67848e67f4e66c", "4547ff8b153a1106", "d0850f7e800a590d"};

struct Stats {
  bool finite = true;
  double mean = 0, stddev = 0;
};

Stats stats_of(const std::vector<float>& v) {
  Stats s;
  double sum = 0, sq = 0;
  for (float x : v) {
    s.finite = s.finite && std::isfinite(x);
    sum += x;
    sq += static_cast<double>(x) * x;
  }
  const double n = static_cast<double>(v.size());
  s.mean = sum / n;
  s.stddev = std::sqrt(std::max(0.0, sq / n - s.mean * s.mean));
  return s;
}

TEST(DemoModel, writes_the_same_bytes_in_every_folder) {
  test::ScratchDir a, b;
  EXPECT_EQ(write_demo_model(a.path()), a.path());
  write_demo_model(b / "nested" / "demo");
  for (int i = 0; i < 3; ++i) {
    const auto first = test::read_file(a / kFiles[i]);
    const auto second = test::read_file(b / "nested" / "demo" / kFiles[i]);
    EXPECT_GT(first.size(), 100000u) << kFiles[i];
    EXPECT_TRUE(first == second) << kFiles[i] << " differs between two writes";
    const io::TensorFile file = io::TensorFile::open(a / kFiles[i]);
    EXPECT_EQ(file.metadata().at("ferry.demo.version"), DemoModel::kFormatVersion);
    EXPECT_EQ(file.metadata().at("ferry.demo.content_fnv1a64"), kContentHashes[i]) << kFiles[i];
    EXPECT_FALSE(fs::exists(a / (std::string(kFiles[i]) + ".partial")));
  }
}

TEST(DemoModel, is_found_as_a_folder_of_comfy_single_files) {
  test::ScratchDir dir;
  const ModelSet m = find_model_set({write_demo_model(dir.path())});
  EXPECT_EQ(m.text_encoder, dir / "umt5_demo.safetensors");
  EXPECT_EQ(m.dit, dir / "wan2.2_ti2v_demo.safetensors");
  EXPECT_EQ(m.vae, dir / "wan2.2_vae_demo.safetensors");
  EXPECT_TRUE(m.tokenizer_embedded());
  EXPECT_EQ(m.vae_kind, models::wan::VaeKind::kWan22);
  EXPECT_EQ(m.text_dim, DemoModel::kTextEncoder.dim);
  EXPECT_EQ(m.dit_config.text_dim, static_cast<std::uint64_t>(m.text_dim));
  EXPECT_EQ(m.dit_config.in_dim, 48u);
  EXPECT_EQ(m.dit_config.out_dim, 48u);
  EXPECT_TRUE(m.ignored.empty());
  EXPECT_TRUE(m.pickles.empty());
}

TEST(DemoModel, text_encoder_has_the_configured_shapes_and_its_tokenizer) {
  test::ScratchDir dir;
  write_demo_model(dir.path());
  const auto set = io::TensorSet::open(dir / "umt5_demo.safetensors");
  const auto w = models::umt5::EncoderWeights::from(set);
  const auto& want = DemoModel::kTextEncoder;
  EXPECT_EQ(w.key_layout(), models::umt5::KeyLayout::kHuggingFace);
  EXPECT_EQ(w.config().vocab_rows, want.vocab_rows);
  EXPECT_EQ(w.config().dim, want.dim);
  EXPECT_EQ(w.config().heads, want.heads);
  EXPECT_EQ(w.config().head_dim, want.head_dim);
  EXPECT_EQ(w.config().ffn_dim, want.ffn_dim);
  EXPECT_EQ(w.config().layers, want.layers);
  EXPECT_EQ(w.embedding().tensor->dtype, DType::kF16);
  const auto* spiece = set.find(models::umt5::kSpieceModelTensor);
  ASSERT_NE(spiece, nullptr);
  EXPECT_EQ(spiece->tensor->dtype, DType::kU8);
  EXPECT_EQ(spiece->tensor->bytes, demo_tokenizer_model().size());
  EXPECT_TRUE(test::read_file(test::data_path("umt5/tokenizer/spiece.model")) ==
              std::vector<std::byte>(demo_tokenizer_model().begin(), demo_tokenizer_model().end()))
      << "the built-in tokenizer is resources/demo/spiece.model";
}

// Prompt → the embedded tokenizer → ids inside the embedding table → finite, varied embeddings.
TEST(DemoModel, text_encoder_encodes_a_prompt_with_its_own_tokenizer) {
  test::ScratchDir dir;
  write_demo_model(dir.path());
  const auto set = io::TensorSet::open(dir / "umt5_demo.safetensors");
  const auto tokenizer = models::umt5::Tokenizer::from_checkpoint(set);
  EXPECT_LE(static_cast<std::int64_t>(tokenizer.vocab_size()), DemoModel::kTextEncoder.vocab_rows);
  const auto w = models::umt5::EncoderWeights::from(set);
  const auto ids = tokenizer.tokenize("A red fox runs through the snow at dawn");
  ASSERT_GT(ids.length(), 3u);

  cpu::CpuBackend backend;
  const offload::ModelLayout layout = w.model_layout();
  offload::Plan plan;
  plan.placement.assign(layout.groups.size(), offload::Placement::kDevice);
  plan.read_method = offload::ReadMethod::kMapped;
  plan.staging_slots = 3;
  plan.staging_slot_bytes = 64 << 10;
  const std::vector<std::vector<std::int32_t>> prompts{ids.ids};
  const auto r = models::umt5::encode(backend, w, plan, prompts);
  ASSERT_EQ(r.embeddings.size(), 1u);
  const auto& e = r.embeddings[0];
  std::vector<float> values;
  for (std::int64_t row = 0; row < e.rows; ++row) {
    for (std::int64_t col = 0; col < e.dim; ++col) values.push_back(e.at(row, col));
  }
  const Stats s = stats_of(values);
  EXPECT_TRUE(s.finite);
  EXPECT_GT(s.stddev, 0.3) << "the final RMSNorm gives rows of about unit scale";
  EXPECT_LT(s.stddev, 3.0);
}

TEST(DemoModel, dit_has_the_configured_shapes) {
  test::ScratchDir dir;
  write_demo_model(dir.path());
  const auto set = io::TensorSet::open(dir / "wan2.2_ti2v_demo.safetensors");
  const models::wan::DitConfig c = models::wan::infer_dit_config(set);
  const auto& want = DemoModel::kDit;
  EXPECT_EQ(c.dim, want.dim);
  EXPECT_EQ(c.dim % models::wan::kDitHeadDim, 0u);
  EXPECT_EQ(c.ffn_dim, want.ffn_dim);
  EXPECT_EQ(c.layers, want.layers);
  EXPECT_EQ(c.in_dim, 48u);
  EXPECT_EQ(c.out_dim, 48u);
  EXPECT_EQ(c.text_dim, static_cast<std::uint64_t>(DemoModel::kTextEncoder.dim));
  EXPECT_EQ(c.freq_dim, 256u);
  for (const auto& e : set.entries()) EXPECT_EQ(e.tensor->dtype, DType::kBF16) << e.tensor->name;
}

// One forward on a small latent with two contexts (as CFG runs it): finite velocities of about
// the latent's scale that differ from token to token and clearly between the contexts.
TEST(DemoModel, dit_gives_finite_velocities_of_the_latents_scale) {
  test::ScratchDir dir;
  write_demo_model(dir.path());
  const auto set = io::TensorSet::open(dir / "wan2.2_ti2v_demo.safetensors");
  cpu::CpuBackend backend;
  const offload::ModelLayout layout = models::wan::dit_model_layout(set, 64, 64, 5, 0);
  models::wan::WanDit dit(backend, set, layout);
  offload::Plan plan;
  plan.placement.assign(layout.groups.size(), offload::Placement::kDevice);
  plan.read_method = offload::ReadMethod::kMapped;
  plan.staging_slots = 3;
  plan.staging_slot_bytes = 64 << 10;
  offload::WeightStreamer streamer(backend, layout, plan);

  const auto upload = [&](const Shape& shape, const std::vector<float>& values,
                          std::vector<std::unique_ptr<DeviceBuffer>>& keep) {
    keep.push_back(backend.allocate(values.size() * sizeof(float)));
    const Tensor t{keep.back()->data(), DType::kF32, shape, backend.device()};
    backend.upload(t, values.data());
    return t;
  };
  const auto pattern = [](std::size_t n, int seed) {
    std::vector<float> v(n);
    for (std::size_t i = 0; i < n; ++i) {
      v[i] = static_cast<float>(static_cast<int>((i * 37 + static_cast<std::size_t>(seed)) % 31) -
                                15) /
             9.0f;
    }
    return v;
  };
  std::vector<std::unique_ptr<DeviceBuffer>> keep;
  const Shape latent_shape{48, 2, 4, 4};
  const Tensor latent = upload(latent_shape, pattern(48 * 2 * 4 * 4, 0), keep);
  const Tensor contexts[] = {upload(Shape{7, 64}, pattern(7 * 64, 1), keep),
                             upload(Shape{3, 64}, pattern(3 * 64, 5), keep)};
  const std::vector<float> zeros(static_cast<std::size_t>(latent_shape.numel()), 0.0f);
  const Tensor velocities[] = {upload(latent_shape, zeros, keep),
                               upload(latent_shape, zeros, keep)};
  const std::vector<float> t{900.0f};
  const std::uint64_t arena_bytes =
      models::wan::dit_activation_bytes(dit.config(), 2 * 2 * 2, 0, 2, 1);
  auto arena_memory = backend.allocate(arena_bytes);
  memory::Arena arena(arena_memory->data(), arena_bytes, backend.device());
  dit.forward(streamer, arena, latent, t, contexts, velocities);

  std::vector<float> v[2];
  for (int b = 0; b < 2; ++b) {
    v[b].resize(zeros.size());
    backend.download(velocities[b], v[b].data());
    const Stats s = stats_of(v[b]);
    EXPECT_TRUE(s.finite);
    EXPECT_GT(s.stddev, 0.2);
    EXPECT_LT(s.stddev, 5.0);
    ::testing::Test::RecordProperty("velocity_stddev_" + std::to_string(b),
                                    std::to_string(s.stddev));
  }
  double diff = 0, norm = 0;
  for (std::size_t i = 0; i < v[0].size(); ++i) {
    diff += (static_cast<double>(v[0][i]) - v[1][i]) * (static_cast<double>(v[0][i]) - v[1][i]);
    norm += static_cast<double>(v[0][i]) * v[0][i];
  }
  const double context_effect = std::sqrt(diff / norm);
  ::testing::Test::RecordProperty("context_effect", std::to_string(context_effect));
  EXPECT_GT(context_effect, 0.1) << "the prompt must show in the velocity";
}

// The VAE structure matches the official module's: the names and shapes of the fixture that
// tools/reference/make_vae_reference.py builds from the official code at base widths 4 and 4.
TEST(DemoModel, vae_structure_is_the_official_wan22_one) {
  const auto fixture = io::TensorFile::open(test::data_path("wan/vae/wan22_tiny.safetensors"));
  auto ours = models::wan::wan22_vae_tensor_specs(4, 4, DType::kF16);
  std::sort(ours.begin(), ours.end(),  // the file's order: a safetensors writer sorts by name
            [](const io::TensorSpec& a, const io::TensorSpec& b) { return a.name < b.name; });
  ASSERT_EQ(ours.size(), fixture.tensors().size());
  for (std::size_t i = 0; i < ours.size(); ++i) {
    EXPECT_EQ(ours[i].name, fixture.tensors()[i].name);
    EXPECT_EQ(ours[i].shape, fixture.tensors()[i].shape) << ours[i].name;
  }
}

TEST(DemoModel, vae_loads_and_decodes_a_latent_to_finite_varied_pixels) {
  test::ScratchDir dir;
  write_demo_model(dir.path());
  const auto set = io::TensorSet::open(dir / "wan2.2_vae_demo.safetensors");
  cpu::CpuBackend backend;
  const auto weights = models::wan::VaeWeights::load(backend, set);
  EXPECT_EQ(weights.config().kind, models::wan::VaeKind::kWan22);
  EXPECT_TRUE(weights.config().has_encoder);
  EXPECT_TRUE(weights.config().has_decoder);
  models::wan::WanVae vae(backend, weights);

  // A normalised latent [48, 2, 2, 2] (values as a sampler leaves them) → 5 frames of 32 × 32.
  const Shape shape{48, 2, 2, 2};
  std::vector<float> z(static_cast<std::size_t>(shape.numel()));
  for (std::size_t i = 0; i < z.size(); ++i) {
    z[i] = static_cast<float>(static_cast<int>((i * 37) % 29) - 14) / 7.0f;
  }
  auto latent_memory = backend.allocate(z.size() * sizeof(float));
  const Tensor latent{latent_memory->data(), DType::kF32, shape, backend.device()};
  backend.upload(latent, z.data());
  const std::size_t arena_bytes = models::wan::WanVae::decode_arena_bytes(weights, 2, 2);
  auto arena_memory = backend.allocate(arena_bytes);
  memory::Arena arena(arena_memory->data(), arena_bytes, backend.device());
  std::vector<float> pixels(3 * 5 * 32 * 32);
  vae.decode(latent, arena, pixels);

  const Stats s = stats_of(pixels);
  EXPECT_TRUE(s.finite);
  EXPECT_GT(s.stddev, 0.05) << "a demo video must not be one flat colour";
  std::size_t inside = 0;
  for (float p : pixels) inside += std::abs(p) < 1.0f ? 1 : 0;
  EXPECT_GT(inside, pixels.size() / 4) << "most pixels should not be clamped";
  ::testing::Test::RecordProperty("pixels_stddev", std::to_string(s.stddev));
  ::testing::Test::RecordProperty("pixels_unclamped_percent",
                                  std::to_string(100 * inside / pixels.size()));
}

// Sets each file's modification time an hour back and returns the times as the file system
// stores them (it may round them).
std::vector<fs::file_time_type> age(const fs::path& dir) {
  std::vector<fs::file_time_type> times;
  for (const char* f : kFiles) {
    fs::last_write_time(dir / f, fs::file_time_type::clock::now() - std::chrono::hours(1));
    times.push_back(fs::last_write_time(dir / f));
  }
  return times;
}

TEST(DemoModel, an_intact_demo_is_reused_without_rewriting) {
  test::ScratchDir dir;
  write_demo_model(dir.path());
  const auto old = age(dir.path());
  write_demo_model(dir.path());
  for (int i = 0; i < 3; ++i) EXPECT_EQ(fs::last_write_time(dir / kFiles[i]), old[i]) << kFiles[i];
}

TEST(DemoModel, a_truncated_corrupt_or_outdated_demo_is_rebuilt) {
  test::ScratchDir dir, reference;
  write_demo_model(reference.path());
  write_demo_model(dir.path());
  const auto old = age(dir.path());

  // The DiT cut short, one byte of the text encoder's weights flipped, the VAE from an older
  // version (same tensors, another version in its metadata).
  std::string error;
  const auto dit = dir / kFiles[1];
  ASSERT_TRUE(test::resize_file(dit, fs::file_size(dit) / 2, &error)) << error;
  auto bytes = test::read_file(dir / kFiles[0]);
  bytes[bytes.size() / 2] ^= std::byte{0x40};
  test::write_file(dir / kFiles[0], bytes);
  {
    const io::TensorFile vae = io::TensorFile::open(reference / kFiles[2]);
    std::vector<io::TensorSpec> specs;
    for (const auto& t : vae.tensors()) specs.push_back({t.name, t.dtype, t.shape});
    io::write_safetensors(dir / kFiles[2], specs, {{"format", "pt"}, {"ferry.demo.version", "0"}},
                          [](std::size_t, std::uint64_t, std::span<std::byte> out) {
                            std::fill(out.begin(), out.end(), std::byte{0});
                          });
  }
  write_demo_model(dir.path());
  for (int i = 0; i < 3; ++i) {
    EXPECT_TRUE(test::read_file(dir / kFiles[i]) == test::read_file(reference / kFiles[i]))
        << kFiles[i];
    EXPECT_NE(fs::last_write_time(dir / kFiles[i]), old[i]) << kFiles[i] << " was not rewritten";
  }
  find_model_set({dir.path()});
}

}  // namespace
}  // namespace ferry::models::wan
