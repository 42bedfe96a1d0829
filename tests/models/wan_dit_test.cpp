// The Wan DiT forward against the official Wan code (tools/reference/make_dit_reference.py: two
// tiny DiTs, Wan 2.1 T2V-like with 16 channels and Wan 2.2 TI2V-like with 48 channels and
// per-token timesteps), in the official and diffusers key layouts, with bf16, f32 and scaled fp8
// weights; streamed = resident bit for bit; a CFG forward = two single forwards; the arena estimate
// holds the forward. On the CPU backend in ferry_tests, on the CUDA backend in
// ferry_cuda_model_tests (tests/gpu/run.sh).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "core/backend/cpu/cpu_backend.h"
#include "core/io/safetensors_writer.h"
#include "core/io/tensor_file.h"
#include "core/io/tensor_set.h"
#include "core/models/wan/dit.h"
#include "core/models/wan/dit_keys.h"
#include "core/offload/planner.h"
#include "core/offload/streamer.h"
#include "core/tensor/convert.h"
#include "tests/models/model_test_backend.h"
#include "tests/models/model_test_tensors.h"
#include "tests/models/wan_dit_fixture.h"
#include "tests/test_support.h"

namespace ferry::models::wan {
namespace {

using namespace dit_test;

// official → diffusers, as diffusers' own converter names them (written by the script).
std::map<std::string, std::string> diffusers_names() {
  std::ifstream in(fixture("diffusers_names.txt"));
  std::map<std::string, std::string> names;
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    std::istringstream fields(line);
    std::string official, diffusers;
    fields >> official >> diffusers;
    names[official] = diffusers;
  }
  return names;
}

io::TensorSet official(std::string_view config) {
  return io::TensorSet::open(fixture(std::string(config) + ".safetensors.index.json"));
}

// The suite's fixture (the model tests' backend, skipped on CUDA without a device). It hides the
// model class's name in this file from here on: that is wan::WanDit below.
class WanDit : public test::ModelTest {};

TEST_F(WanDit, ti2v_with_per_token_timesteps_matches_the_official_code) {
  const auto set = official("ti2v");
  const DitConfig c = infer_dit_config(set);
  EXPECT_EQ(c.dim, 256u);
  EXPECT_EQ(c.in_dim, 48u);
  EXPECT_EQ(c.out_dim, 48u);
  EXPECT_EQ(c.text_dim, 32u);
  EXPECT_EQ(c.layers, 2u);
  const Reference r = load_reference("ti2v");
  ASSERT_EQ(r.cases.size(), 4u);
  EXPECT_EQ(r.cases[0].t.front(), 0.0f) << "frame 0 (the image) at t = 0";
  EXPECT_EQ(r.cases[0].t.back(), 999.0f);
  expect_matches_reference(set, r, "ti2v official bf16");
}

TEST_F(WanDit, t2v_matches_the_official_code) {
  const auto set = official("t2v");
  EXPECT_EQ(infer_dit_config(set).in_dim, 16u);
  const Reference r = load_reference("t2v");
  expect_matches_reference(set, r, "t2v official bf16");
  // One timestep for every token is the same as the same value repeated per token.
  const std::vector<float> one{r.cases[1].t.front()};
  EXPECT_TRUE(same_bits(run(set, r, one, {r.context}).velocities[0],
                        run(set, r, r.cases[1].t, {r.context}).velocities[0]));
}

TEST_F(WanDit, diffusers_names_and_f32_weights_give_the_same_velocities) {
  test::ScratchDir dir;
  const auto names = diffusers_names();
  ASSERT_FALSE(names.empty());
  for (const char* config : {"t2v", "ti2v"}) {
    SCOPED_TRACE(config);
    const auto set = official(config);
    const auto diffusers = rewrite(
        set, dir / (std::string(config) + "_diffusers.safetensors"),
        [&](const std::string& n) { return names.at(n); },
        [](const std::string&, DType d) { return d; });
    EXPECT_NE(diffusers.find("blocks.0.attn1.to_q.weight"), nullptr);
    const auto f32 = rewrite(
        set, dir / (std::string(config) + "_f32.safetensors"),
        [](const std::string& n) { return n; },
        [](const std::string&, DType) { return DType::kF32; });
    const Reference r = load_reference(config);
    const RunResult base = run(set, r, r.cases[0].t, {r.context});
    // The same tensors under other names: the same bits.
    EXPECT_TRUE(
        same_bits(run(diffusers, r, r.cases[0].t, {r.context}).velocities[0], base.velocities[0]));
    expect_matches_reference(f32, r, (std::string(config) + " official f32").c_str());
  }
}

TEST_F(WanDit, comfy_scaled_fp8_weights_are_multiplied_by_their_scales) {
  test::ScratchDir dir;
  const auto set = official("ti2v");
  const auto is_linear = [](const std::string& n) {
    return n.starts_with("blocks.") && n.ends_with(".weight") &&
           n.find("norm") == std::string::npos;
  };
  const auto fp8 = rewrite(
      set, dir / "fp8.safetensors",
      [](const std::string& n) { return "model.diffusion_model." + n; },
      [&](const std::string& n, DType d) { return is_linear(n) ? DType::kF8E4M3 : d; });
  ASSERT_NE(fp8.find("model.diffusion_model.blocks.1.ffn.2.scale_weight"), nullptr);
  const Reference r = load_reference("ti2v");
  const auto got = run(fp8, r, r.cases[0].t, {r.context}).velocities[0];
  // What the fp8 file means: each f8 value times its tensor's scale, as f32 weights.
  std::map<std::string, float> scales;
  for (const auto& e : fp8.entries()) {
    if (e.tensor->name.ends_with(".scale_weight"))
      scales[e.tensor->name] = read_f32(*e.file, *e.tensor)[0];
  }
  std::vector<io::TensorSpec> specs;
  std::vector<std::vector<float>> data;
  for (const auto& e : fp8.entries()) {
    const std::string& n = e.tensor->name;
    if (n.ends_with(".scale_weight") || n == "scaled_fp8") continue;
    std::vector<float> v = read_f32(*e.file, *e.tensor);
    if (e.tensor->dtype == DType::kF8E4M3) {
      const float s = scales.at(n.substr(0, n.size() - 7) + ".scale_weight");
      for (float& x : v) x *= s;
    }
    specs.push_back({n, DType::kF32, e.tensor->shape});
    data.push_back(std::move(v));
  }
  io::write_safetensors(dir / "dequantised.safetensors", specs, {},
                        [&](std::size_t i, std::uint64_t offset, std::span<std::byte> out) {
                          std::memcpy(out.data(),
                                      reinterpret_cast<const std::byte*>(data[i].data()) + offset,
                                      out.size());
                        });
  const auto plain = io::TensorSet::open(dir / "dequantised.safetensors");
  const auto want = run(plain, r, r.cases[0].t, {r.context}).velocities[0];
  const Deviation vs_dequantised = compare(got, want);
  // Equal up to the bf16 rounding floor (alpha · (x · w8) vs x · (w8 · scale) in the GEMM); a
  // scale ignored or applied twice would be off by orders of magnitude.
  EXPECT_LT(vs_dequantised.max_rel, kMaxErrorBound);
  EXPECT_LT(vs_dequantised.rms_rel, kRmsErrorBound);
  // fp8 is coarse: the official bf16 velocity is further away, but not far (scales applied).
  const Deviation vs_official = compare(got, r.cases[0].v);
  EXPECT_LT(vs_official.max_rel, 0.2);
  EXPECT_GT(vs_official.rms_rel, kRmsErrorBound);
  std::printf("  [fp8] vs dequantised f32: max %.2e; vs official bf16: max %.2e, rms %.2e\n",
              vs_dequantised.max_rel, vs_official.max_rel, vs_official.rms_rel);
}

TEST_F(WanDit, distinct_timesteps_are_embedded_once_and_scattered_ones_match_per_token) {
  // Case 3 draws each token's t from {0, 250, 999}: dozens of runs over three values, which the
  // official code embeds token by token (expect_matches_reference checks it too).
  const auto set = official("ti2v");
  const Reference r = load_reference("ti2v");
  const Case& scattered = r.cases[3];
  int changes = 0;
  for (std::size_t n = 1; n < scattered.t.size(); ++n)
    changes += scattered.t[n] != scattered.t[n - 1];
  ASSERT_GT(changes, 20);
  const RunResult got = run(set, r, scattered.t, {r.context});
  EXPECT_LT(compare(got.velocities[0], scattered.v).rms_rel, kRmsErrorBound);
  // The time embedding takes room for 3 values, not 72 tokens: the estimate for 3 distinct
  // values holds the forward.
  EXPECT_LE(got.peak, got.estimate);
}

TEST_F(WanDit, streamed_blocks_give_the_resident_bits) {
  const auto set = official("ti2v");
  const Reference r = load_reference("ti2v");
  const std::vector<float>& t = r.cases[1].t;
  const auto reference = run(set, r, t, {r.context}).velocities[0];
  for (ReadMethod method : {ReadMethod::kMapped, ReadMethod::kDirect}) {
    for (const auto& blocks : {std::vector<Placement>{Placement::kDisk, Placement::kDisk},
                               std::vector<Placement>{Placement::kPinnedCache, Placement::kDisk},
                               std::vector<Placement>{Placement::kDisk, Placement::kDevice}}) {
      const RunResult streamed = run(set, r, t, {r.context}, blocks, method, 0, 2);
      EXPECT_TRUE(same_bits(streamed.velocities[0], reference));
    }
  }
}

TEST_F(WanDit, cfg_forward_equals_two_single_forwards) {
  const auto set = official("ti2v");
  const Reference r = load_reference("ti2v");
  // The unconditional context: fewer rows, other values.
  std::vector<float> uncond(r.context.begin(), r.context.begin() + 3 * r.context_shape[1]);
  for (float& v : uncond) v = -v;
  const std::vector<float>& t = r.cases[0].t;
  const RunResult cfg =
      run(set, r, t, {r.context, uncond}, {Placement::kDisk, Placement::kPinnedCache});
  const auto cond_only = run(set, r, t, {r.context}).velocities[0];
  const auto uncond_only = run(set, r, t, {uncond}).velocities[0];
  ASSERT_EQ(cfg.velocities.size(), 2u);
  EXPECT_TRUE(same_bits(cfg.velocities[0], cond_only));
  EXPECT_TRUE(same_bits(cfg.velocities[1], uncond_only));
  EXPECT_FALSE(same_bits(cond_only, uncond_only)) << "the context matters";
}

// The block's per-token work in chunks (any size, not dividing the tokens, timestep runs crossing
// chunk edges) computes the whole forward's velocities bit for bit: chunking only bounds the
// working memory. On Ferry's own GEMM, whose sums do not depend on the row count (OpenBLAS picks
// other kernels for fewer rows: there chunks differ from the whole by 4e-4 relative RMS, the
// bf16 roundings that a last-bit change of an f32 sum flips).
TEST_F(WanDit, token_chunks_give_the_whole_forward_bit_for_bit) {
  const auto set = official("ti2v");
  const Reference r = load_reference("ti2v");
  const std::vector<float>& t = r.cases[0].t;  // per-token timesteps: two runs
  std::vector<float> uncond(r.context.begin(), r.context.begin() + 3 * r.context_shape[1]);
  cpu::CpuBackend own(cpu::default_thread_pool(), cpu::GemmPath::kOwn);
  const auto forward = [&](std::int64_t chunk) {
    return run(set, r, t, {r.context, uncond}, {}, ReadMethod::kMapped, chunk, 1, {}, &own);
  };
  const RunResult whole = forward(0);
  for (std::int64_t chunk : {1, 7, 16}) {
    const RunResult chunked = forward(chunk);
    for (std::size_t b = 0; b < 2; ++b) {
      EXPECT_TRUE(same_bits(chunked.velocities[b], whole.velocities[b]))
          << "chunks of " << chunk << ", branch " << b;
    }
  }
}

TEST_F(WanDit, forward_fits_the_activation_estimate) {
  const auto set = official("ti2v");
  const Reference r = load_reference("ti2v");
  const std::vector<float>& t = r.cases[0].t;  // two distinct values
  for (std::int64_t chunk : {0, 16}) {
    for (int branches : {1, 2}) {
      std::vector<std::vector<float>> contexts(static_cast<std::size_t>(branches), r.context);
      const RunResult got = run(set, r, t, contexts, {}, ReadMethod::kMapped, chunk, 2);
      EXPECT_LE(got.peak, got.estimate) << "chunk " << chunk << ", branches " << branches;
      // The estimate is the forward's own accounting, not a loose bound.
      EXPECT_EQ(got.peak, got.estimate) << "chunk " << chunk << ", branches " << branches;
    }
  }
  // A real size: the lean working set of wan.md §E (≈2.1 GB for 5B at 704x1280x121, one branch).
  const std::int64_t tokens = dit_tokens(kTI2V_5B, 1280, 704, 121);
  EXPECT_EQ(tokens, 27280);
  const double gb = static_cast<double>(dit_activation_bytes(kTI2V_5B, tokens, 0, 1, 2)) / 1e9;
  EXPECT_GT(gb, 1.5);
  EXPECT_LT(gb, 3.0);
}

TEST_F(WanDit, a_short_arena_is_refused_before_the_pass_starts) {
  const auto set = official("t2v");
  const Reference r = load_reference("t2v");
  Backend& backend = test::model_backend();
  const offload::ModelLayout layout = dit_model_layout(set, 1, 1, 1, 0);
  wan::WanDit model(backend, set, layout);
  offload::WeightStreamer streamer(backend, layout, plan_for(layout, resident(2)));
  const std::uint64_t needed = dit_activation_bytes(model.config(), 72, 0, 1, 1);
  auto memory = backend.allocate(needed);
  const Owned latent(backend, DType::kF32, r.x_shape, r.x.data());
  const Owned context(backend, DType::kF32, r.context_shape, r.context.data());
  const Owned velocity(backend, DType::kF32, r.x_shape);
  const std::vector<float> t{500.0f};
  memory::Arena short_arena(memory->data(), needed - 1, backend.device());
  EXPECT_EQ(test::error_code_of([&] {
              model.forward(streamer, short_arena, latent.tensor, t, {&context.tensor, 1},
                            {&velocity.tensor, 1});
            }),
            ErrorCode::kOutOfMemory);
  // The streamer is still between passes: the next forward runs.
  memory::Arena arena(memory->data(), needed, backend.device());
  model.forward(streamer, arena, latent.tensor, t, {&context.tensor, 1}, {&velocity.tensor, 1});
  std::vector<float> v(r.x.size());
  backend.download(velocity.tensor, v.data());
  EXPECT_LT(compare(v, r.cases[1].v).rms_rel, kRmsErrorBound);
}

TEST_F(WanDit, a_context_of_the_wrong_width_is_refused) {
  const auto set = official("t2v");
  const Reference r = load_reference("t2v");
  const std::vector<float> wide(static_cast<std::size_t>(4 * (r.context_shape[1] + 1)), 0.5f);
  Reference bad = r;
  bad.context_shape[1] += 1;
  EXPECT_EQ(test::error_code_of([&] { run(set, bad, r.cases[0].t, {wide}); }),
            ErrorCode::kBadArgument);
  const std::vector<float> wrong_count(5, 1.0f);
  EXPECT_EQ(test::error_code_of([&] { run(set, r, wrong_count, {r.context}); }),
            ErrorCode::kBadArgument);
}


// ---- quantized weights (GGUF, bitsandbytes NF4) ----

// tools/reference/make_quant_dit_reference.py: the t2v DiT as city96's Q8_0 (prefixed, no
// general.architecture) and Q4_K_M (Q4_K + Q6_K + F16 fallback, alignment 64) GGUFs and
// DiffSynth's nested NF4, each with the official velocities on the weights the file means.
constexpr std::string_view kQuantFiles[] = {"t2v-Q8_0.gguf", "t2v-Q4_K_M.gguf",
                                            "t2v-nf4.safetensors"};

std::filesystem::path quant_fixture(std::string_view name) {
  return test::data_path(std::string("wan/dit_quant/") + std::string(name));
}

Reference quant_reference(std::string_view file) {
  const std::string stem(file.substr(0, file.find('.')));
  return load_reference_file(quant_fixture(stem + "_reference.safetensors"));
}

TEST_F(WanDit, quantized_files_match_the_official_code_on_the_weights_they_mean) {
  for (std::string_view file : kQuantFiles) {
    const auto set = io::TensorSet::open(quant_fixture(file));
    expect_matches_reference(set, quant_reference(file), std::string(file).c_str());
  }
}

TEST_F(WanDit, quantized_weights_streamed_from_disk_equal_them_resident_bit_for_bit) {
  for (std::string_view file : kQuantFiles) {
    SCOPED_TRACE(std::string(file));
    const auto set = io::TensorSet::open(quant_fixture(file));
    const Reference r = quant_reference(file);
    const RunResult resident_run = run(set, r, r.cases[1].t, {r.context});
    const std::vector<Placement> streamed = {Placement::kDisk, Placement::kPinnedCache};
    const RunResult streamed_run = run(set, r, r.cases[1].t, {r.context}, streamed);
    EXPECT_TRUE(same_bits(streamed_run.velocities[0], resident_run.velocities[0]));
  }
}

TEST_F(WanDit, a_quantized_layout_streams_the_compressed_bytes) {
  // The planner and the streamer count what the file stores: Q4_K_M blocks are a fraction of the
  // bf16 checkpoint's.
  const auto bf16 = io::TensorSet::open(fixture("t2v.safetensors.index.json"));
  const auto q4 = io::TensorSet::open(quant_fixture("t2v-Q4_K_M.gguf"));
  const auto nf4 = io::TensorSet::open(quant_fixture("t2v-nf4.safetensors"));
  const auto block_bytes = [](const io::TensorSet& set) {
    const offload::ModelLayout layout = dit_model_layout(set, 1, 1, 1, 0);
    return layout.groups[1].bytes();
  };
  const double q4_ratio = static_cast<double>(block_bytes(q4)) / block_bytes(bf16);
  const double nf4_ratio = static_cast<double>(block_bytes(nf4)) / block_bytes(bf16);
  std::printf("  block 0: bf16 %llu B, Q4_K_M %.3f of it, NF4 %.3f\n",
              static_cast<unsigned long long>(block_bytes(bf16)), q4_ratio, nf4_ratio);
  // Q4_K (4.5 bits) and Q6_K (6.56) on 90 % of the block, F16 on ffn.2 and F32 norms and biases.
  EXPECT_LT(q4_ratio, 0.45);
  EXPECT_LT(nf4_ratio, 0.40);
}

}  // namespace
}  // namespace ferry::models::wan
