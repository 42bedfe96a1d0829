// `ferry-cli synth`: writes a Wan DiT checkpoint in the official key layout with random weights
// (deterministic for a seed), for benchmarks and for trying the tools without a real model; with
// --lora-rank, a LoRA for such a DiT (or for the DiT of --like FILE) instead: rank-R factors on
// every block Linear, official names with the `diffusion_model.` prefix, alpha = R. With --set,
// a whole header-only model set instead (synth_set.cpp).
#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>

#include "cli/args.h"
#include "cli/commands.h"
#include "core/error.h"
#include "core/io/detail/os_file.h"
#include "core/io/safetensors_writer.h"
#include "core/io/tensor_set.h"
#include "core/models/wan/dit_layout.h"

namespace ferry::cli {
namespace {

// Round-to-nearest-even float → bfloat16 bits (finite inputs only, which is all we make).
std::uint16_t to_bf16(float value) {
  std::uint32_t bits = 0;
  std::memcpy(&bits, &value, sizeof bits);
  bits += 0x7fff + ((bits >> 16) & 1);
  return static_cast<std::uint16_t>(bits >> 16);
}

// A counter-based generator: element i of tensor t is the same wherever a chunk starts.
float uniform(std::uint64_t seed, std::uint64_t tensor, std::uint64_t element) {
  std::uint64_t x = seed * 0x9e3779b97f4a7c15ull ^ (tensor << 40) ^ element;
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdull;
  x ^= x >> 33;
  x *= 0xc4ceb9fe1a85ec53ull;
  x ^= x >> 33;
  return static_cast<float>(x >> 40) / static_cast<float>(1 << 24) * 2.0f - 1.0f;
}

}  // namespace

int run_synth(const std::vector<std::string>& argv) {
  const Args args(argv, {"config", "blocks", "dtype", "seed", "out", "lora-rank", "like", "set"},
                  {});
  if (const auto set = args.value("set")) {
    const auto out = args.value("out");
    for (const char* other : {"config", "dtype", "seed", "lora-rank", "like"}) {
      if (args.value(other)) {
        throw Error(ErrorCode::kBadArgument,
                    "--" + std::string(other) + " does not apply to --set (a set has its own)");
      }
    }
    if (!out || !args.positional().empty()) {
      throw Error(ErrorCode::kBadArgument,
                  "usage: ferry-cli synth --set KIND --out DIR [--blocks N]");
    }
    return run_synth_set(*set, io::detail::path_from_utf8(*out),
                         static_cast<std::uint64_t>(args.integer_or("blocks", 0, 1, 64)));
  }
  std::string config_name = args.value_or("config", "ti2v-5b");
  const models::wan::DitConfig* base = models::wan::find_dit_config(config_name);
  models::wan::DitConfig like;
  if (const auto file = args.value("like")) {
    like = models::wan::infer_dit_config(io::TensorSet::open(io::detail::path_from_utf8(*file)));
    base = &like;
    config_name = std::string(like.name.empty() ? "like " + *file : like.name);
  }
  if (base == nullptr) {
    throw Error(ErrorCode::kBadArgument,
                "unknown --config '" + config_name + "' (t2v-1.3b, ti2v-5b or t2v-14b)");
  }
  const auto out = args.value("out");
  if (!out || !args.positional().empty()) {
    throw Error(ErrorCode::kBadArgument,
                "usage: ferry-cli synth --out FILE.safetensors [--config ti2v-5b | --like "
                "DIT.safetensors] [--blocks N] [--dtype bf16|f32] [--seed N] [--lora-rank R], or "
                "ferry-cli synth --set KIND --out DIR [--blocks N]");
  }
  models::wan::DitConfig config = *base;
  config.layers = static_cast<std::uint64_t>(
      args.integer_or("blocks", static_cast<long long>(base->layers), 0, 64));
  const std::string dtype_text = args.value_or("dtype", "bf16");
  if (dtype_text != "bf16" && dtype_text != "f32") {
    throw Error(ErrorCode::kBadArgument, "--dtype must be bf16 or f32");
  }
  const DType dtype = dtype_text == "bf16" ? DType::kBF16 : DType::kF32;
  const auto seed = static_cast<std::uint64_t>(args.integer_or("seed", 1, 0, 1LL << 62));

  const auto rank = static_cast<std::uint64_t>(args.integer_or("lora-rank", 0, 0, 4096));
  const auto tensors = rank > 0 ? models::wan::dit_lora_tensors(config, rank, dtype)
                                : models::wan::dit_tensors(config, dtype);
  const float scale = 0.02f;
  io::write_safetensors(
      io::detail::path_from_utf8(*out), tensors,
      {{"format", "pt"},
       {"ferry.synthetic", "random weights; Wan DiT " + config_name + " layout, " +
                               std::to_string(config.layers) + " blocks, seed " +
                               std::to_string(seed)}},
      [&](std::size_t index, std::uint64_t offset, std::span<std::byte> chunk) {
        if (tensors[index].dtype == DType::kF32 && tensors[index].shape.empty()) {  // an alpha
          const auto alpha = static_cast<float>(rank);
          std::memcpy(chunk.data(), &alpha, 4);
          return;
        }
        const std::size_t item = dtype_size(dtype);
        const std::uint64_t first = offset / item;
        for (std::size_t i = 0; i < chunk.size() / item; ++i) {
          const float v = scale * uniform(seed, index, first + i);
          if (dtype == DType::kBF16) {
            const std::uint16_t b = to_bf16(v);
            std::memcpy(chunk.data() + i * 2, &b, 2);
          } else {
            std::memcpy(chunk.data() + i * 4, &v, 4);
          }
        }
      });

  std::uint64_t bytes = 0;
  for (const auto& t : tensors) bytes += t.bytes();
  std::printf("wrote %s: %s Wan DiT %s layout, %llu blocks, %zu tensors, %s, random weights\n",
              out->c_str(),
              rank > 0 ? ("a rank-" + std::to_string(rank) + " LoRA for the").c_str() : "the",
              config_name.c_str(), static_cast<unsigned long long>(config.layers), tensors.size(),
              human_bytes(bytes).c_str());
  return 0;
}

}  // namespace ferry::cli
