// What the Wan DiT tests share (wan_dit_test.cpp, wan_dit_lora_test.cpp): the reference files of
// tools/reference, the error bounds, plans with chosen placements, and one forward of a DiT file
// on the model tests' backend (CPU in ferry_tests, CUDA in ferry_cuda_model_tests).
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <span>
#include <string>
#include <vector>

#include "core/io/safetensors_writer.h"
#include "core/io/tensor_file.h"
#include "core/io/tensor_set.h"
#include "core/models/wan/dit.h"
#include "core/models/wan/dit_loras.h"
#include "core/offload/planner.h"
#include "core/offload/streamer.h"
#include "core/tensor/convert.h"
#include "tests/models/model_test_backend.h"
#include "tests/models/model_test_tensors.h"
#include "tests/test_support.h"

namespace ferry::models::wan::dit_test {

using offload::Placement;
using offload::Plan;
using offload::ReadMethod;

// Ferry's velocity against the official one, relative to the official velocity's size: the
// largest |difference| over max |v|, and the RMS difference over RMS(v). The reference has the
// same dtype at every op boundary, so what remains is bf16 roundings that flip on near-ties (GEMM
// summation orders; attention probabilities, which Ferry's CPU attention keeps in f32 and
// PyTorch's rounds to bf16), growing through the layers. How big that floor is: perturbing the
// reference's own input latent by 1e-6 (relative) moves its output by 1.6e-3 (max) / 1.1e-3 (RMS).
// Measured here (CPU backend, OpenBLAS GEMM, all cases, bf16 and f32 weights): max 1.0e-3 ..
// 1.6e-3, RMS 0.97e-3 .. 1.08e-3 — at the floor. The RMS bound also catches a recipe deviation:
// running the reference with f32 Linears instead of bf16 moves it by 2.3e-3 .. 2.5e-3 RMS.
// The same bounds hold the CUDA backend: its GEMMs (cuBLASLt, bf16 in, f32 accumulation, one
// rounding) round at the same points as the CPU's, only in another summation order, and its
// flash attention rounds the probabilities to bf16 before P·V as PyTorch's does (cuda/README.md,
// Precision): the same floor, one source of difference fewer, nothing that adds a new one.
constexpr double kMaxErrorBound = 4e-3;
constexpr double kRmsErrorBound = 1.75e-3;

inline std::filesystem::path fixture(std::string_view name) {
  return test::data_path(std::string("wan/dit/") + std::string(name));
}

inline std::vector<float> read_f32(const io::TensorFile& file, const io::TensorInfo& info) {
  std::vector<std::byte> raw(info.bytes);
  file.map(info).copy_to(0, raw);
  std::vector<float> out(info.element_count());
  convert_to_f32(info.dtype, raw.data(), out.data(), out.size());
  return out;
}

inline Shape shape_of(const io::TensorInfo& info) {
  Shape s;
  if (info.shape.size() == 2) s = Shape{0, 0};
  if (info.shape.size() == 4) s = Shape{0, 0, 0, 0};
  for (std::size_t i = 0; i < info.shape.size(); ++i)
    s[static_cast<int>(i)] = static_cast<std::int64_t>(info.shape[i]);
  return s;
}

struct Case {
  std::vector<float> t;  // per token
  std::vector<float> v;  // official velocity
};

struct Reference {
  std::vector<float> x;
  Shape x_shape;
  std::vector<float> context;
  Shape context_shape;
  std::vector<Case> cases;
  std::int64_t out_channels = 0;
};

inline Reference load_reference_file(const std::filesystem::path& path) {
  const auto file = io::TensorFile::open(path);
  Reference r;
  r.x = read_f32(file, file.at("x"));
  r.x_shape = shape_of(file.at("x"));
  r.context = read_f32(file, file.at("context"));
  r.context_shape = shape_of(file.at("context"));
  for (int i = 0; file.find("t." + std::to_string(i)) != nullptr; ++i) {
    r.cases.push_back({read_f32(file, file.at("t." + std::to_string(i))),
                       read_f32(file, file.at("v." + std::to_string(i)))});
  }
  r.out_channels = static_cast<std::int64_t>(file.at("v.0").shape[0]);
  return r;
}

inline Reference load_reference(std::string_view config) {
  return load_reference_file(fixture(std::string(config) + "_reference.safetensors"));
}

// A device tensor with its own memory (test inputs and outputs).
using Owned = test::OwnedTensor;
using test::compare;
using test::Deviation;
using test::same_bits;

// A plan with the blocks placed as given (embeddings and head always on the device).
inline Plan plan_for(const offload::ModelLayout& layout, const std::vector<Placement>& blocks,
                     ReadMethod method = ReadMethod::kMapped) {
  Plan plan;
  plan.look_ahead = 1;
  plan.read_method = method;
  plan.placement.push_back(Placement::kDevice);
  plan.placement.insert(plan.placement.end(), blocks.begin(), blocks.end());
  plan.placement.push_back(Placement::kDevice);
  std::uint64_t largest = 0;
  for (std::size_t g = 0; g < layout.groups.size(); ++g) {
    if (plan.placement[g] != Placement::kDevice)
      largest = std::max(largest, layout.groups[g].slot_bytes());
  }
  plan.device_slots = 2;
  plan.device_slot_bytes = largest;
  plan.staging_slots = 3;
  plan.staging_slot_bytes = 64 << 10;  // smaller than a block: each streams in chunks
  return plan;
}

inline std::vector<Placement> resident(std::size_t layers) {
  return std::vector<Placement>(layers, Placement::kDevice);
}

struct RunResult {
  std::vector<std::vector<float>> velocities;
  std::size_t peak = 0;
  std::uint64_t estimate = 0;
};

// One forward of the DiT in `set` (its blocks placed as `blocks`), one velocity per context, on
// `on` (default: the model tests' backend).
inline RunResult run(const io::TensorSet& set, const Reference& r, const std::vector<float>& t,
                     const std::vector<std::vector<float>>& contexts,
                     std::vector<Placement> blocks = {}, ReadMethod method = ReadMethod::kMapped,
                     std::int64_t chunk_tokens = 0, int passes = 1,
                     std::span<const LoraChoice> loras = {}, Backend* on = nullptr) {
  Backend& backend = on != nullptr ? *on : test::model_backend();
  offload::ModelLayout layout = dit_model_layout(set, 1, 1, 1, 0);
  const std::int64_t tokens = r.x_shape[1] * (r.x_shape[2] / 2) * (r.x_shape[3] / 2);
  const lora::LoraBinding bound = bind_dit_loras(loras, set, layout, tokens, chunk_tokens);
  WanDit model(backend, set, layout, bound.terms());
  if (blocks.empty()) blocks = resident(model.config().layers);
  offload::StreamerOptions options;
  options.passes = static_cast<std::size_t>(passes);
  offload::WeightStreamer streamer(backend, layout, plan_for(layout, blocks, method), options);

  std::vector<float> sorted = t;
  std::sort(sorted.begin(), sorted.end());
  const auto distinct = std::unique(sorted.begin(), sorted.end()) - sorted.begin();
  RunResult out;
  out.estimate = dit_activation_bytes(model.config(), tokens, chunk_tokens,
                                      static_cast<std::int64_t>(contexts.size()), distinct,
                                      WanDit::lora_scratch_rank(bound.terms()));

  const Owned latent(backend, DType::kF32, r.x_shape, r.x.data());
  std::vector<Owned> ctx;
  std::vector<Owned> vel;
  std::vector<Tensor> ctx_t, vel_t;
  for (const auto& c : contexts) {
    const Shape shape{static_cast<std::int64_t>(c.size()) / r.context_shape[1], r.context_shape[1]};
    ctx.emplace_back(backend, DType::kBF16, shape, c.data());
    vel.emplace_back(backend, DType::kF32,
                     Shape{r.out_channels, r.x_shape[1], r.x_shape[2], r.x_shape[3]});
  }
  for (std::size_t i = 0; i < ctx.size(); ++i) {
    ctx_t.push_back(ctx[i].tensor);
    vel_t.push_back(vel[i].tensor);
  }
  out.peak = test::arena_peak(backend, out.estimate, [&](memory::Arena& arena) {
    for (int p = 0; p < passes; ++p) {
      model.forward(streamer, arena, latent.tensor, t, ctx_t, vel_t, chunk_tokens);
    }
    EXPECT_EQ(arena.used(), 0u) << "the forward gives back everything it took";
  });
  for (const Tensor& v : vel_t) {
    std::vector<float> host(static_cast<std::size_t>(v.numel()));
    backend.download(v, host.data());
    out.velocities.push_back(std::move(host));
  }
  return out;
}

inline void expect_matches_reference(const io::TensorSet& set, const Reference& r,
                                     const char* what) {
  for (std::size_t i = 0; i < r.cases.size(); ++i) {
    const RunResult got = run(set, r, r.cases[i].t, {r.context});
    const Deviation err = compare(got.velocities[0], r.cases[i].v);
    EXPECT_LT(err.max_rel, kMaxErrorBound) << what << ", case " << i;
    EXPECT_LT(err.rms_rel, kRmsErrorBound) << what << ", case " << i;
    EXPECT_TRUE(std::isfinite(err.max_rel));
    std::printf("  [%s case %zu] max error %.2e of max|v|, rms error %.2e of rms(v)\n", what, i,
                err.max_rel, err.rms_rel);
  }
}

// The fixture's tensors (official names, any dtype) rewritten into one file: names through
// `rename`, each tensor stored as `dtype(name, stored dtype)`. fp8 tensors get ComfyUI's
// per-tensor `<name without .weight>.scale_weight` (max |w| / 448) and the `scaled_fp8` marker.
template <typename Rename, typename Dtype>
io::TensorSet rewrite(const io::TensorSet& set, const std::filesystem::path& path, Rename rename,
                      Dtype dtype) {
  std::vector<io::TensorSpec> specs;
  std::vector<std::vector<std::byte>> data;
  bool fp8 = false;
  for (const auto& e : set.entries()) {
    std::vector<float> values = read_f32(*e.file, *e.tensor);
    const std::string name = rename(e.tensor->name);
    const DType to = dtype(e.tensor->name, e.tensor->dtype);
    float scale = 1.0f;
    if (to == DType::kF8E4M3) {
      fp8 = true;
      float amax = 0;
      for (float v : values) amax = std::max(amax, std::abs(v));
      scale = amax / 448.0f;
      for (float& v : values) v /= scale;
    }
    specs.push_back({name, to, e.tensor->shape});
    data.emplace_back(values.size() * dtype_size(to));
    convert_from_f32(values.data(), to, data.back().data(), values.size());
    if (to == DType::kF8E4M3) {
      specs.push_back({name.substr(0, name.size() - 7) + ".scale_weight", DType::kF32, {}});
      data.emplace_back(4);
      std::memcpy(data.back().data(), &scale, 4);
    }
  }
  if (fp8) {
    specs.push_back({"scaled_fp8", DType::kF8E4M3, {0}});
    data.emplace_back();
  }
  io::write_safetensors(path, specs, {{"format", "pt"}},
                        [&](std::size_t index, std::uint64_t offset, std::span<std::byte> out) {
                          std::memcpy(out.data(), data[index].data() + offset, out.size());
                        });
  return io::TensorSet::open(path);
}

}  // namespace ferry::models::wan::dit_test
