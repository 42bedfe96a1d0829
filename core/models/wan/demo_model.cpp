#include "core/models/wan/demo_model.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <span>
#include <string>
#include <system_error>

#include "core/error.h"
#include "core/io/detail/os_file.h"
#include "core/io/tensor_file.h"
#include "core/models/umt5/tokenizer.h"
#include "core/models/wan/vae_synth.h"
#include "core/tensor/convert.h"

namespace ferry::models::wan {
namespace {

namespace fs = std::filesystem;
using io::TensorSpec;

// ---- The generator: SplitMix64 and an integer-exact mapping to floats ------------------------
//
// Byte-identical output everywhere rules out the standard distributions (their algorithms differ
// between libraries) and transcendental functions (their last bit differs between C runtimes).
// A value is mean + stddev · n, where n sums four 16-bit uniforms (Irwin–Hall: unit variance,
// bounded at ±2√3, close enough to normal for random weights) as an exact integer; that integer
// times a float-precision unit is exact in double, so the one rounding left (adding the mean,
// then to float) is the same with or without fused multiply-add.

constexpr std::uint64_t kGolden = 0x9E3779B97F4A7C15ull;
constexpr double kSqrt3 = 1.7320508075688772;

std::uint64_t splitmix64(std::uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

std::uint64_t fnv1a64(std::span<const std::byte> bytes,
                      std::uint64_t hash = 0xCBF29CE484222325ull) {
  for (std::byte b : bytes) hash = (hash ^ static_cast<std::uint64_t>(b)) * 0x100000001B3ull;
  return hash;
}

std::uint64_t fnv1a64(std::string_view text) {
  return fnv1a64(std::as_bytes(std::span(text.data(), text.size())));
}

struct Init {
  double mean = 0.0;
  double stddev = 1.0;
};

void fill_random(std::uint64_t seed, Init init, std::span<float> out) {
  // Sum of four uniforms on [0, 65535], centred and doubled: variance 4·(65536² − 1)/3.
  const auto unit = static_cast<double>(static_cast<float>(kSqrt3 / 131072.0 * init.stddev));
  std::uint64_t state = seed;
  for (float& v : out) {
    state += kGolden;
    std::uint64_t r = splitmix64(state);
    std::int64_t sum = 0;
    for (int i = 0; i < 4; ++i, r >>= 16) sum += static_cast<std::int64_t>(r & 0xFFFF);
    const std::int64_t centred = 2 * sum - 4 * 65535;
    v = static_cast<float>(init.mean + static_cast<double>(centred) * unit);
  }
}

bool ends_with(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

bool contains(std::string_view s, std::string_view part) {
  return s.find(part) != std::string_view::npos;
}

// Inputs a weight's output sums over: every dimension but the first.
double fan_in(const TensorSpec& t) {
  std::uint64_t n = 1;
  for (std::size_t i = 1; i < t.shape.size(); ++i) n *= t.shape[i];
  return static_cast<double>(n);
}

Init linear(const TensorSpec& t) {
  return {0.0, 1.0 / std::sqrt(fan_in(t))};
}

// umT5 (Hugging Face names): T5's own initialisation, which matters because its attention has
// no 1/√d scaling (q is scaled instead), and RMSNorm gains around 1.
Init text_encoder_init(const TensorSpec& t) {
  const auto& c = DemoModel::kTextEncoder;
  if (t.name == "shared.weight") return {0.0, 1.0};
  if (contains(t.name, "layer_norm.weight")) return {1.0, 0.1};
  if (contains(t.name, "relative_attention_bias")) return {0.0, 0.5};
  if (contains(t.name, "SelfAttention.q.weight")) {
    return {0.0, 1.0 / std::sqrt(static_cast<double>(c.dim * c.head_dim))};
  }
  return linear(t);
}

// The DiT: modulation tables as Wan initialises them (randn / √D), RMSNorm and LayerNorm gains
// around 1, small biases, 1/√fan_in weights (so every Linear keeps unit-scale activations and
// the head's velocity is of the latent's scale).
Init dit_init(const TensorSpec& t) {
  if (ends_with(t.name, "modulation")) {
    return {0.0, 1.0 / std::sqrt(static_cast<double>(DemoModel::kDit.dim))};
  }
  // Cross-attention's q/k gains sharpen its logits (about 9 apart instead of 1): the few rows of
  // a prompt then outweigh the context's ~500 identical padding rows, so the prompt shows.
  if (contains(t.name, "cross_attn.norm_")) return {3.0, 0.3};
  if (ends_with(t.name, "norm_q.weight") || ends_with(t.name, "norm_k.weight") ||
      ends_with(t.name, "norm3.weight")) {
    return {1.0, 0.1};
  }
  if (ends_with(t.name, ".bias")) return {0.0, 0.02};
  return linear(t);
}

// The VAE: the recipe of the test fixtures (tools/reference/make_vae_reference.py).
Init vae_init(const TensorSpec& t) {
  if (ends_with(t.name, "gamma")) return {1.0, 0.2};
  if (ends_with(t.name, "bias")) return {0.0, 0.1};
  return linear(t);
}

// ---- The three files -------------------------------------------------------------------------

// A file's tensors and its exact data section, built in memory (a few MB) before anything is
// compared or written.
struct Part {
  std::string file;
  std::vector<TensorSpec> tensors;
  std::vector<std::uint64_t> offsets;  // of each tensor in `data`
  std::vector<std::byte> data;
  std::map<std::string, std::string> metadata;
};

std::string hex64(std::uint64_t v) {
  std::string text(16, '0');
  for (std::size_t i = 16; i-- > 0; v >>= 4) text[i] = "0123456789abcdef"[v & 0xF];
  return text;
}

Part make_part(std::string_view file, std::vector<TensorSpec> tensors,
               Init (*init)(const TensorSpec&)) {
  Part p;
  p.file = std::string(file);
  p.tensors = std::move(tensors);
  std::uint64_t total = 0;
  for (const TensorSpec& t : p.tensors) {
    p.offsets.push_back(total);
    total += t.bytes();
  }
  p.data.resize(static_cast<std::size_t>(total));
  std::vector<float> values;
  for (std::size_t i = 0; i < p.tensors.size(); ++i) {
    const TensorSpec& t = p.tensors[i];
    std::byte* out = p.data.data() + p.offsets[i];
    if (t.name == umt5::kSpieceModelTensor) {
      const auto model = demo_tokenizer_model();
      std::copy(model.begin(), model.end(), out);
      continue;
    }
    values.resize(static_cast<std::size_t>(t.bytes() / dtype_size(t.dtype)));
    // Each tensor's stream depends on the file and its name only, not on its place.
    fill_random(fnv1a64(p.file + "/" + t.name), init(t), values);
    convert_from_f32(values.data(), t.dtype, out, values.size());
  }
  p.metadata = {{"format", "pt"},
                {"ferry.demo.version", std::string(DemoModel::kFormatVersion)},
                {"ferry.demo.content_fnv1a64", hex64(fnv1a64(p.data))}};
  return p;
}

std::vector<TensorSpec> sorted(std::vector<TensorSpec> tensors) {
  std::sort(tensors.begin(), tensors.end(),
            [](const TensorSpec& a, const TensorSpec& b) { return a.name < b.name; });
  return tensors;
}

// umt5_xxl_fp16's layout: Hugging Face names in F16, sorted, then the tokenizer as U8 bytes.
std::vector<TensorSpec> text_encoder_tensors() {
  std::vector<TensorSpec> out = umt5::encoder_tensor_specs(
      DemoModel::kTextEncoder, umt5::KeyLayout::kHuggingFace, DType::kF16);
  out = sorted(std::move(out));
  out.push_back({std::string(umt5::kSpieceModelTensor),
                 DType::kU8,
                 {static_cast<std::uint64_t>(demo_tokenizer_model().size())}});
  return out;
}

std::vector<Part> demo_parts() {
  std::vector<Part> parts;
  parts.push_back(
      make_part(DemoModel::kTextEncoderFile, text_encoder_tensors(), &text_encoder_init));
  parts.push_back(make_part(DemoModel::kDitFile,
                            dit_tensors(DemoModel::kDit, DType::kBF16), &dit_init));
  parts.push_back(make_part(DemoModel::kVaeFile,
                            sorted(wan22_vae_tensor_specs(
                                DemoModel::kVaeEncoderDim, DemoModel::kVaeDecoderDim, DType::kF16)),
                            &vae_init));
  return parts;
}

// Whether `path` holds exactly what `part` would write: this version's metadata, the same
// tensor table and the same data, nothing missing and nothing after it.
bool is_current(const fs::path& path, const Part& part) {
  std::error_code ec;
  if (!fs::is_regular_file(path, ec)) return false;
  try {
    const io::TensorFile file = io::TensorFile::open(path);
    if (file.metadata() != part.metadata) return false;
    if (file.file_size() != file.data_offset() + part.data.size()) return false;
    const auto& tensors = file.tensors();
    if (tensors.size() != part.tensors.size()) return false;
    for (std::size_t i = 0; i < tensors.size(); ++i) {
      const io::TensorInfo& t = tensors[i];
      const TensorSpec& want = part.tensors[i];
      if (t.name != want.name || t.dtype != want.dtype || t.shape != want.shape ||
          t.offset != file.data_offset() + part.offsets[i]) {
        return false;
      }
    }
    std::vector<std::byte> bytes(part.data.size());
    file.mapped_file().map(file.data_offset(), bytes.size()).copy_to(0, bytes);
    return bytes == part.data;
  } catch (const Error&) {
    return false;  // unreadable or malformed: rewritten
  }
}

}  // namespace

fs::path write_demo_model(const fs::path& folder) {
  std::error_code ec;
  fs::create_directories(folder, ec);
  if (ec) {
    throw Error(ErrorCode::kIo, "cannot create the demo model folder " +
                                    io::detail::display(folder) + ": " + ec.message());
  }
  for (const Part& part : demo_parts()) {
    const fs::path path = folder / part.file;
    if (is_current(path, part)) continue;
    io::write_safetensors(path, part.tensors, part.metadata,
                          [&](std::size_t index, std::uint64_t offset, std::span<std::byte> out) {
                            const std::byte* from = part.data.data() + part.offsets[index] + offset;
                            std::copy(from, from + out.size(), out.begin());
                          });
  }
  return folder;
}

}  // namespace ferry::models::wan
