// MiniMax-H3's audio decoder (core/models/h3/audio_vae*) against diffusers 0.42.1's
// AutoencoderKLMiniMaxH3Audio.decode after the pipeline's z·σ + μ, on two tiny random
// configurations (tests/data/h3_audio_vae, made by tools/reference/make_h3_audio_vae_reference.py):
// "bigvgan" (rates 5, 2, 2 with kernels 9, 4, 4; AMP kernels 3, 7, 11 at dilations 1, 3, 5) and
// "dft" (diffusers' own test configuration), each at 1, 4 and 7 latents, from its f32 file and from
// its bf16 file (DiffSynth stores the convolutions in bf16). Also: each stereo channel is decoded
// alone, the arena estimate is what a decode takes, the computed Kaiser-sinc filter is the stored
// one, the anti-aliased SnakeBeta's host fallback is the CPU op, and files Ferry cannot run are
// refused with the error that says why. On the CPU backend in ferry_tests, on the CUDA backend in
// ferry_cuda_model_tests (tests/gpu/run.sh; the SnakeBeta there is Backend's host fallback).
#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "core/io/safetensors_writer.h"
#include "core/io/tensor_set.h"
#include "core/memory/arena.h"
#include "core/models/h3/audio_vae.h"
#include "core/models/h3/synthetic_set.h"
#include "core/tensor/convert.h"
#include "tests/models/model_test_backend.h"
#include "tests/models/model_test_tensors.h"
#include "tests/test_support.h"

namespace ferry::models::h3 {
namespace {

// |Ferry − reference| ≤ kFloors · floor + 1e-7, where floor is the largest |f32 − f64| of the same
// reference decode (the fixture's floor.A: 4e-8 to 2e-6 for waveforms of std 0.06 to 0.5). Ferry's
// f32 decode is another f32 evaluation of the same sums in another order (the weight norm and the
// de-normalisation folded at load in f64, the upsampler as phases, the AMP mean as Σ block/K),
// so it lies within about one floor of the f64 value, two of the reference. Measured on the CPU
// (OpenBLAS, x86-64; the test prints it): at most 2.5 floors on the committed fixtures, 3.0 on
// make_h3_audio_vae_reference.py --seed 5's, both where the floor is under 1e-7 (a few ulps of
// the samples, which the 1e-7 covers); 2.0 floors elsewhere.
constexpr double kFloors = 4.0;

struct Case {
  const char* config;
  std::vector<int> rates;
  std::vector<int> dilations;
};
const Case kBigvgan{"bigvgan", {5, 2, 2}, {1, 3, 5}};
const Case kDft{"dft", {2, 2}, {1, 3}};
constexpr std::int64_t kLengths[] = {1, 4, 7};

std::filesystem::path fixture(const std::string& file) {
  if (const char* other = std::getenv("FERRY_H3_AUDIO_VAE_FIXTURES");
      other != nullptr && *other != '\0')
    return std::filesystem::path(other) / file;
  return test::data_path("h3_audio_vae/" + file);
}

std::vector<float> read_values(const io::TensorSet& set, const std::string& name) {
  const io::TensorSet::Entry& entry = set.at(name);
  std::vector<std::byte> raw(static_cast<std::size_t>(entry.tensor->bytes));
  entry.file->map(*entry.tensor).copy_to(0, raw);
  std::vector<float> values(static_cast<std::size_t>(entry.tensor->element_count()));
  convert_to_f32(entry.tensor->dtype, raw.data(), values.data(), values.size());
  return values;
}

AudioVaeConfig config_of(const Case& c, const io::TensorSet& cases) {
  AudioVaeConfig config;
  config.rates = c.rates;
  config.dilations = c.dilations;
  config.latents_mean = read_values(cases, "mean");
  config.latents_std = read_values(cases, "std");
  return config;
}

class H3AudioVae : public test::ModelTest {
 protected:
  Backend& backend() { return test::model_backend(); }

  // Decodes latents [n, C, A] (host values) and returns pcm [n, hop·A]; `peak` gets the
  // arena's peak.
  std::vector<float> decode(const AudioVaeWeights& weights, const std::vector<float>& latents,
                            std::int64_t n, std::int64_t a, std::size_t* peak = nullptr) {
    AudioVaeDecoder decoder(backend(), weights);
    test::OwnedTensor in(backend(), DType::kF32, Shape{n, weights.latent_channels(), a},
                         latents.data());
    test::OwnedTensor out(backend(), DType::kF32, Shape{n, decoder.samples(a)});
    const std::size_t used = test::arena_peak(
        backend(), AudioVaeDecoder::decode_arena_bytes(weights, a),
        [&](memory::Arena& arena) { decoder.decode(in.tensor, arena, out.tensor); });
    if (peak != nullptr) *peak = used;
    std::vector<float> pcm(static_cast<std::size_t>(out.tensor.numel()));
    backend().download(out.tensor, pcm.data());
    return pcm;
  }

  // Every length of `c` from `weights_file` against `pcm<suffix>.A`.
  void expect_parity(const Case& c, const std::string& weights_file, const std::string& suffix) {
    const io::TensorSet cases =
        io::TensorSet::open(fixture(std::string(c.config) + ".cases.safetensors"));
    const io::TensorSet file = io::TensorSet::open(fixture(weights_file));
    const AudioVaeWeights weights = AudioVaeWeights::load(backend(), file, config_of(c, cases));
    for (const std::int64_t a : kLengths) {
      const std::string n = std::to_string(a);
      const std::vector<float> want = read_values(cases, "pcm" + suffix + "." + n);
      const double floor = read_values(cases, "floor" + suffix + "." + n)[0];
      const std::vector<float> got = decode(weights, read_values(cases, "latents." + n), 2, a);
      ASSERT_EQ(got.size(), want.size());
      double worst = 0;
      for (std::size_t i = 0; i < got.size(); ++i) {
        worst = std::max(worst, std::abs(double(got[i]) - want[i]));
      }
      std::printf("%s%s A=%lld: max |Ferry - diffusers| %.3g = %.2f floors (floor %.3g)\n",
                  c.config, suffix.c_str(), static_cast<long long>(a), worst, worst / floor, floor);
      EXPECT_LE(worst, kFloors * floor + 1e-7) << weights_file << " A=" << a;
    }
  }
};

TEST_F(H3AudioVae, decodes_as_diffusers_at_several_lengths_bigvgan_f32) {
  expect_parity(kBigvgan, "bigvgan.safetensors", "");
}

TEST_F(H3AudioVae, decodes_as_diffusers_at_several_lengths_dft_f32) {
  expect_parity(kDft, "dft.safetensors", "");
}

TEST_F(H3AudioVae, decodes_bf16_files_as_diffusers_decodes_their_weights) {
  expect_parity(kBigvgan, "bigvgan.bf16.safetensors", "_bf16w");
  expect_parity(kDft, "dft.bf16.safetensors", "_bf16w");
}

TEST_F(H3AudioVae, each_stereo_channel_is_decoded_alone_and_the_arena_estimate_is_the_peak) {
  const io::TensorSet cases = io::TensorSet::open(fixture("bigvgan.cases.safetensors"));
  const io::TensorSet file = io::TensorSet::open(fixture("bigvgan.safetensors"));
  const AudioVaeWeights weights =
      AudioVaeWeights::load(backend(), file, config_of(kBigvgan, cases));
  const std::vector<float> both = read_values(cases, "latents.7");
  std::size_t peak = 0;
  const std::vector<float> stereo = decode(weights, both, 2, 7, &peak);
  EXPECT_EQ(peak, AudioVaeDecoder::decode_arena_bytes(weights, 7));
  const std::vector<float> right_latent(both.begin() + static_cast<std::ptrdiff_t>(both.size() / 2),
                                        both.end());
  const std::vector<float> right = decode(weights, right_latent, 1, 7);
  const std::vector<float> stereo_right(
      stereo.begin() + static_cast<std::ptrdiff_t>(stereo.size() / 2), stereo.end());
  EXPECT_TRUE(test::same_bits(right, stereo_right));
}

TEST_F(H3AudioVae, the_soundtrack_is_the_decode_interleaved_at_the_configured_rate) {
  const io::TensorSet cases = io::TensorSet::open(fixture("dft.cases.safetensors"));
  const io::TensorSet file = io::TensorSet::open(fixture("dft.safetensors"));
  const AudioVaeWeights weights = AudioVaeWeights::load(backend(), file, config_of(kDft, cases));
  const std::vector<float> latents = read_values(cases, "latents.7");
  const std::vector<float> planar = decode(weights, latents, 2, 7);
  test::OwnedTensor in(backend(), DType::kF32, Shape{2, weights.latent_channels(), 7},
                       latents.data());
  const std::size_t bytes = AudioVaeDecoder::soundtrack_arena_bytes(weights, 2, 7);
  media::AudioTrack track;
  EXPECT_EQ(test::arena_peak(
                backend(), bytes,
                [&](memory::Arena& arena) {
                  track = AudioVaeDecoder(backend(), weights).decode_soundtrack(in.tensor, arena);
                  EXPECT_EQ(arena.used(), 0u);
                }),
            bytes);
  EXPECT_EQ(track.sample_rate, 32000);
  ASSERT_EQ(track.channels, 2);
  const std::size_t n = planar.size() / 2;
  ASSERT_EQ(track.samples.size(), planar.size());
  for (std::size_t i = 0; i < n; ++i) {
    ASSERT_EQ(track.samples[2 * i], planar[i]) << i;
    ASSERT_EQ(track.samples[2 * i + 1], planar[n + i]) << i;
  }
}

TEST_F(H3AudioVae, the_computed_filter_is_the_stored_one) {
  const io::TensorSet file = io::TensorSet::open(fixture("dft.safetensors"));
  const std::vector<float> stored =
      read_values(file, "decoder.resblocks.0.activations.0.upsample.filter");
  const std::array<float, 12> computed = alias_free_filter();
  for (std::size_t i = 0; i < computed.size(); ++i) {
    // torch builds it in f32 (kaiser_window, sinc), Ferry in f64 rounded once.
    EXPECT_NEAR(computed[i], stored[i], 2e-7) << "tap " << i;
  }
}

TEST_F(H3AudioVae, snake_beta_host_fallback_is_the_backend_op) {
  Backend& b = backend();
  const std::int64_t channels = 3, samples = 37;
  std::vector<float> x(channels * samples), alpha = {0.3f, -0.5f, 0.0f}, beta = {-0.2f, 0.4f, 0.1f};
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = std::sin(0.37f * i) * 2.0f;
  std::vector<float> filters;
  for (int r = 0; r < 2; ++r) {
    const auto f = alias_free_filter();
    filters.insert(filters.end(), f.begin(), f.end());
  }
  test::OwnedTensor xt(b, DType::kF32, Shape{channels, samples}, x.data());
  test::OwnedTensor at(b, DType::kF32, Shape{channels}, alpha.data());
  test::OwnedTensor bt(b, DType::kF32, Shape{channels}, beta.data());
  test::OwnedTensor ft(b, DType::kF32, Shape{2, 12}, filters.data());
  test::OwnedTensor op(b, DType::kF32, Shape{channels, samples});
  test::OwnedTensor fallback(b, DType::kF32, Shape{channels, samples});
  b.snake_beta_alias_free(xt.tensor, at.tensor, bt.tensor, ft.tensor, op.tensor);
  b.Backend::snake_beta_alias_free(xt.tensor, at.tensor, bt.tensor, ft.tensor, fallback.tensor);
  std::vector<float> a(x.size()), c(x.size());
  b.download(op.tensor, a.data());
  b.download(fallback.tensor, c.data());
  EXPECT_TRUE(test::same_bits(a, c));
  // A constant input passes the resamplers unchanged (filters sum to 1) and the activation
  // adds sin²(e^α·x)/(e^β + 1e-9).
  std::vector<float> constant(x.size(), 0.7f);
  test::OwnedTensor kt(b, DType::kF32, Shape{channels, samples}, constant.data());
  b.snake_beta_alias_free(kt.tensor, at.tensor, bt.tensor, ft.tensor, kt.tensor);
  b.download(kt.tensor, a.data());
  for (std::int64_t ch = 0; ch < channels; ++ch) {
    const double s = std::sin(std::exp(double(alpha[ch])) * 0.7);
    const double want = 0.7 + s * s / (std::exp(double(beta[ch])) + 1e-9);
    EXPECT_NEAR(a[static_cast<std::size_t>(ch * samples + samples / 2)], want, 1e-5);
  }
}

// The fixture's tensors without `drop`, written to `path`.
void rewrite(const std::filesystem::path& from, const std::filesystem::path& path,
             const std::string& drop) {
  const io::TensorSet set = io::TensorSet::open(from);
  std::vector<io::TensorSpec> specs;
  std::vector<const io::TensorSet::Entry*> kept;
  for (const io::TensorSet::Entry& entry : set.entries()) {
    if (entry.tensor->name == drop) continue;
    specs.push_back({entry.tensor->name, entry.tensor->dtype, entry.tensor->shape});
    kept.push_back(&entry);
  }
  io::write_safetensors(path, specs, {},
                        [&](std::size_t index, std::uint64_t offset, std::span<std::byte> out) {
                          kept[index]->file->map(*kept[index]->tensor).copy_to(offset, out);
                        });
}

TEST_F(H3AudioVae, files_it_cannot_run_are_refused_saying_why) {
  test::ScratchDir dir;
  const io::TensorSet cases = io::TensorSet::open(fixture("dft.cases.safetensors"));
  const AudioVaeConfig config = config_of(kDft, cases);
  rewrite(fixture("dft.safetensors"), dir / "a.safetensors", "decoder.ups.1.0.bias");
  const io::TensorSet missing = io::TensorSet::open(dir / "a.safetensors");
  EXPECT_EQ(test::error_code_of([&] { AudioVaeWeights::shapes_only(missing, config); }),
            ErrorCode::kMissingTensor);
  const io::TensorSet good = io::TensorSet::open(fixture("dft.safetensors"));
  AudioVaeConfig three_stages = config;
  three_stages.rates = {2, 2, 2};
  EXPECT_EQ(test::error_code_of([&] { AudioVaeWeights::shapes_only(good, three_stages); }),
            ErrorCode::kBadModelFile);
  AudioVaeConfig h3_normalisation = config;  // 32 channels for a file of 8
  h3_normalisation.latents_mean.clear();
  h3_normalisation.latents_std.clear();
  EXPECT_EQ(test::error_code_of([&] { AudioVaeWeights::shapes_only(good, h3_normalisation); }),
            ErrorCode::kBadModelFile);
  // Without the filter buffers, the computed filters give the same decode.
  rewrite(fixture("dft.safetensors"), dir / "b.safetensors",
          "decoder.activation_post.upsample.filter");
  const io::TensorSet no_filter = io::TensorSet::open(dir / "b.safetensors");
  const AudioVaeWeights a = AudioVaeWeights::load(backend(), good, config);
  const AudioVaeWeights b = AudioVaeWeights::load(backend(), no_filter, config);
  const std::vector<float> latents = read_values(cases, "latents.4");
  const test::Deviation d = test::compare(decode(b, latents, 2, 4), decode(a, latents, 2, 4));
  EXPECT_LT(d.max_rel, 1e-5);
}

TEST_F(H3AudioVae, a_diffsynth_nf4_file_opens_and_decodes_as_its_bf16_file) {
  // Its pre-block Linears are NF4 with 64-value blocks straddling their 8- to 24-wide rows: kept
  // flat by core/io/bnb4 and read whole as bitsandbytes' dequantize_4bit gives them.
  const io::TensorSet nf4 = io::TensorSet::open(fixture("bigvgan.nf4.safetensors"));
  const io::TensorSet cases = io::TensorSet::open(fixture("bigvgan.cases.safetensors"));
  for (const char* linear : {"pre_block.attn.qkv", "pre_block.proj", "pre_block.attn.proj",
                             "pre_block.mlp.w0", "pre_block.mlp.w1", "pre_block.mlp.w2"}) {
    const std::string weight = std::string(linear) + ".weight";
    const io::TensorInfo& info = *nf4.at(weight).tensor;
    EXPECT_EQ(info.dtype, DType::kBnb4) << weight;
    EXPECT_EQ(info.shape.size(), 1u) << weight << ": blocks straddle its rows";
    EXPECT_TRUE(test::same_bits(read_tensor_f32(nf4, weight),
                                read_values(cases, std::string("nf4.") + linear)))
        << weight;
  }
  // The decoder's own tensors are the bf16 file's: the same decode, bit for bit.
  const io::TensorSet bf16 = io::TensorSet::open(fixture("bigvgan.bf16.safetensors"));
  const AudioVaeConfig config = config_of(kBigvgan, cases);
  const AudioVaeWeights from_nf4 = AudioVaeWeights::load(backend(), nf4, config);
  const AudioVaeWeights from_bf16 = AudioVaeWeights::load(backend(), bf16, config);
  const std::vector<float> latents = read_values(cases, "latents.4");
  EXPECT_TRUE(test::same_bits(decode(from_nf4, latents, 2, 4), decode(from_bf16, latents, 2, 4)));
}

TEST_F(H3AudioVae, the_release_shapes_load_and_their_arena_is_eight_buffers_of_the_largest_stage) {
  // DiffSynth's NF4 audio VAE at its real shapes (ferry-cli synth --set h3-nf4's file).
  test::ScratchDir dir;
  write_header_only(dir / "audio_vae_nf4.safetensors", audio_vae_part(SyntheticShapes{}, true));
  const io::TensorSet set = io::TensorSet::open(dir / "audio_vae_nf4.safetensors");
  const AudioVaeWeights w = AudioVaeWeights::shapes_only(set);
  EXPECT_EQ(w.latent_channels(), 32);
  EXPECT_EQ(w.latent_dim(), 2048);
  EXPECT_EQ(w.initial_channels(), 1024);
  ASSERT_EQ(w.stages().size(), 7u);
  EXPECT_EQ(w.stages().back().channels, 8);
  EXPECT_EQ(w.config().hop(), 800);
  // ~65 M parameters (minimax_h3.md §F.3), nearly all the decoder's: 64.8 M as stored, 69 M as
  // loaded (the first two upsamplers' 9 taps at rate 5 become 3 taps for each of 5 phases).
  std::printf("release audio decoder: %.1f MiB of f32 weights\n", w.bytes() / 1048576.0);
  EXPECT_GT(w.bytes(), 65'000'000u * 4);
  EXPECT_LT(w.bytes(), 72'000'000u * 4);
  // 124 frames at 24 fps: 207 latents, 165,600 samples; the largest stage is 8 × 165,600 (the
  // last) against 512 × 1,035 (the first) and its dilation-padded rows.
  const std::size_t arena = AudioVaeDecoder::decode_arena_bytes(w, 207);
  const std::int64_t largest = 8 * ((165600 + 4) / 5 * 5);
  EXPECT_EQ(arena, 8 * memory::Arena::footprint(static_cast<std::size_t>(largest) * 4));
  std::printf("release audio decode of 207 latents: arena %.1f MiB\n", arena / 1048576.0);
}

}  // namespace
}  // namespace ferry::models::h3
