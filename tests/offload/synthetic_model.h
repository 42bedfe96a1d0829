// A synthetic layer stack for the streamer's tests and bench/overlap: an always-resident
// "embed" group, `layers` groups of an MLP block (w1 [hidden, dim] bf16, b1 [hidden] f32,
// w2 [dim, hidden] bf16, b2 [dim] f32), and a "head" group, written with write_safetensors.
// Header-only so the counting-allocator executable and ferry_tests can both use it.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "core/backend/backend.h"
#include "core/io/tensor_file.h"
#include "core/io/safetensors_writer.h"
#include "core/offload/layer_group.h"
#include "core/offload/plan.h"
#include "core/offload/streamer.h"
#include "core/tensor/convert.h"

namespace ferry::offload::synth {

struct SyntheticSpec {
  int layers = 6;
  std::int64_t dim = 64;
  std::int64_t hidden = 192;
  // Fast fill (a byte per tensor) instead of small random values: for the big memory tests,
  // whose compute only reads the weights.
  bool fast_fill = false;
};

inline std::uint64_t mix(std::uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

// Small values in [-scale, scale), deterministic per (tensor, element).
inline float synthetic_value(std::size_t tensor, std::uint64_t element, float scale) {
  const std::uint64_t r = mix((std::uint64_t{tensor} << 40) ^ element);
  return (static_cast<float>(r % 20001) / 10000.0f - 1.0f) * scale;
}

inline std::vector<io::TensorSpec> synthetic_tensors(const SyntheticSpec& s) {
  const auto d = static_cast<std::uint64_t>(s.dim);
  const auto h = static_cast<std::uint64_t>(s.hidden);
  std::vector<io::TensorSpec> t;
  t.push_back({"embed.scale", DType::kF32, {d}});
  for (int i = 0; i < s.layers; ++i) {
    const std::string p = "layers." + std::to_string(i) + ".";
    t.push_back({p + "w1", DType::kBF16, {h, d}});
    t.push_back({p + "b1", DType::kF32, {h}});
    t.push_back({p + "w2", DType::kBF16, {d, h}});
    t.push_back({p + "b2", DType::kF32, {d}});
  }
  t.push_back({"head.w", DType::kBF16, {d, d}});
  return t;
}

inline void write_synthetic_model(const std::filesystem::path& path, const SyntheticSpec& s) {
  const std::vector<io::TensorSpec> tensors = synthetic_tensors(s);
  io::write_safetensors(
      path, tensors, {{"format", "pt"}},
      [&](std::size_t index, std::uint64_t offset, std::span<std::byte> out) {
        if (s.fast_fill) {
          std::memset(out.data(), static_cast<int>(index * 37 + 11), out.size());
          return;
        }
        const io::TensorSpec& spec = tensors[index];
        const std::size_t size = dtype_size(spec.dtype);
        const float scale = 1.0f / std::sqrt(static_cast<float>(s.hidden));
        for (std::size_t i = 0; i < out.size(); ++i) {
          const std::uint64_t byte = offset + i;
          const std::uint64_t element = byte / size;
          const float v = synthetic_value(index, element, scale);
          std::uint32_t bits = 0;
          if (spec.dtype == DType::kBF16) {
            bits = f32_to_bf16(v);
          } else {
            std::memcpy(&bits, &v, 4);
          }
          out[i] = static_cast<std::byte>((bits >> (8 * (byte % size))) & 0xFF);
        }
      });
}

// The layout: embed (always resident), layers.i, head (always resident), in execution order.
struct SyntheticModel {
  std::unique_ptr<io::TensorFile> file;
  ModelLayout layout;
  SyntheticSpec spec;

  SyntheticModel(const std::filesystem::path& path, const SyntheticSpec& s) : spec(s) {
    file = std::make_unique<io::TensorFile>(io::TensorFile::open(path));
    layout.name = "synthetic MLP stack";
    auto group = [&](std::string name, std::vector<std::string> names, bool always) {
      LayerGroup g{std::move(name), {}, always};
      for (const std::string& n : names) g.weights.push_back(WeightRef{file.get(), &file->at(n)});
      layout.groups.push_back(std::move(g));
    };
    group("embed", {"embed.scale"}, true);
    for (int i = 0; i < s.layers; ++i) {
      const std::string p = "layers." + std::to_string(i) + ".";
      group("layers." + std::to_string(i), {p + "w1", p + "b1", p + "w2", p + "b2"}, false);
    }
    group("head", {"head.w"}, true);
  }
};

// A plan with the given placements for the layers (embed and head stay on the device).
inline Plan synthetic_plan(const ModelLayout& layout, const std::vector<Placement>& layers,
                           std::size_t look_ahead, ReadMethod method,
                           std::size_t staging_slots = 3,
                           std::uint64_t staging_slot_bytes = 16 << 10) {
  Plan plan;
  plan.look_ahead = look_ahead;
  plan.read_method = method;
  plan.placement.push_back(Placement::kDevice);
  for (Placement p : layers) plan.placement.push_back(p);
  plan.placement.push_back(Placement::kDevice);
  std::uint64_t largest = 0;
  for (std::size_t g = 0; g < layout.groups.size(); ++g) {
    if (plan.placement[g] != Placement::kDevice) {
      largest = std::max(largest, layout.groups[g].slot_bytes());
    }
  }
  plan.device_slots = look_ahead + 1;
  plan.device_slot_bytes = largest;
  plan.staging_slots = staging_slots;
  plan.staging_slot_bytes = staging_slot_bytes;
  return plan;
}

// `plan` with file-aligned slots and no staging ring: what the planner gives a device whose
// memory is host memory (the CPU) with unbuffered reads, which land straight in the slots.
inline Plan file_aligned(Plan plan, const ModelLayout& layout) {
  plan.slot_layout = SlotLayout::kFileAligned;
  plan.device_slot_bytes = 0;
  for (std::size_t g = 0; g < layout.groups.size(); ++g) {
    if (plan.placement[g] != Placement::kDevice) {
      plan.device_slot_bytes =
          std::max(plan.device_slot_bytes, group_slot_bytes(layout.groups[g], plan.slot_layout));
    }
  }
  plan.staging_slots = 0;
  plan.staging_slot_bytes = 0;
  return plan;
}

inline std::vector<Placement> all_layers(int layers, Placement p) {
  return std::vector<Placement>(static_cast<std::size_t>(layers), p);
}

// Activations of one forward pass, allocated once.
struct Activations {
  std::unique_ptr<DeviceBuffer> x, h, z;
  Tensor tx, th, tz;
  Activations(Backend& backend, std::int64_t tokens, std::int64_t dim, std::int64_t hidden) {
    x = backend.allocate(static_cast<std::size_t>(tokens * dim * 4));
    h = backend.allocate(static_cast<std::size_t>(tokens * hidden * 4));
    z = backend.allocate(static_cast<std::size_t>(tokens * dim * 4));
    tx = Tensor{x->data(), DType::kF32, Shape{tokens, dim}, backend.device()};
    th = Tensor{h->data(), DType::kF32, Shape{tokens, hidden}, backend.device()};
    tz = Tensor{z->data(), DType::kF32, Shape{tokens, dim}, backend.device()};
  }
};

// x ← x · embed.scale; per layer x ← x + w2 · gelu(w1 · x + b1) + b2; x ← head · x.
// The layer of group g is run `passes_per_acquire` times on separate activations (CFG).
inline void forward_layer(Backend& backend, const LoadedGroup& w, Activations& a) {
  backend.linear(a.tx, w.tensor("w1"), &w.tensor("b1"), a.th);
  backend.gelu_tanh(a.th, a.th);
  backend.linear(a.th, w.tensor("w2"), &w.tensor("b2"), a.tz);
  backend.add(a.tx, a.tz, a.tx);
}

inline void forward_embed(Backend& backend, const LoadedGroup& w, Activations& a) {
  const Tensor& scale = w.tensor("embed.scale");
  for (std::int64_t r = 0; r < a.tx.shape[0]; ++r) {
    backend.mul(a.tx.rows(r, r + 1).reshaped(Shape{a.tx.shape[1]}), scale,
                a.tx.rows(r, r + 1).reshaped(Shape{a.tx.shape[1]}));
  }
}

inline void forward_head(Backend& backend, const LoadedGroup& w, Activations& a) {
  backend.linear(a.tx, w.tensor("head.w"), nullptr, a.tz);
  backend.add(a.tx, a.tz, a.tx);
}

// One pass over the stack for each activation set in `acts` (CFG: conditional and
// unconditional), every group acquired once and released after all of them.
inline void run_pass(Backend& backend, WeightStreamer& streamer, std::vector<Activations*> acts) {
  streamer.begin_pass();
  for (std::size_t g = 0; g < streamer.group_count(); ++g) {
    const LoadedGroup& w = streamer.acquire(g);
    for (Activations* a : acts) {
      if (g == 0) {
        forward_embed(backend, w, *a);
      } else if (g + 1 == streamer.group_count()) {
        forward_head(backend, w, *a);
      } else {
        forward_layer(backend, w, *a);
      }
    }
    streamer.release(g);
  }
}

// Deterministic input x[tokens, dim].
inline std::vector<float> synthetic_input(std::int64_t tokens, std::int64_t dim, int seed) {
  std::vector<float> x(static_cast<std::size_t>(tokens * dim));
  for (std::size_t i = 0; i < x.size(); ++i) {
    x[i] = synthetic_value(1000 + static_cast<std::size_t>(seed), i, 1.0f);
  }
  return x;
}

}  // namespace ferry::offload::synth
