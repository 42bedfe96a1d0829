#include "core/models/h3/synthetic_set.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/io/detail/os_file.h"
#include "core/models/h3/byte_level.h"

namespace ferry::models::h3 {
namespace {

namespace fs = std::filesystem;
using Shape = std::vector<std::uint64_t>;

std::uint64_t u(std::int64_t v) {
  return static_cast<std::uint64_t>(v);
}

// NF4's code book (bitsandbytes; minimax_h3.md §G.2).
constexpr float kNf4CodeBook[16] = {-1.0f,
                                    -0.6961928009986877f,
                                    -0.5250730514526367f,
                                    -0.39491748809814453f,
                                    -0.28444138169288635f,
                                    -0.18477343022823334f,
                                    -0.09105003625154495f,
                                    0.0f,
                                    0.07958029955625534f,
                                    0.16093020141124725f,
                                    0.24611230194568634f,
                                    0.33791524171829224f,
                                    0.44070982933044434f,
                                    0.5626170039176941f,
                                    0.7229568362236023f,
                                    1.0f};

// bitsandbytes' create_dynamic_map(signed=True): 7 exponent ranges of 2^i midpoints each side,
// 0 and 1, sorted (the nested scales' 8-bit code book).
std::vector<float> dynamic_code_book() {
  std::vector<float> data;
  for (int i = 0; i < 7; ++i) {
    const int items = (1 << i) + 1;
    const double scale = std::pow(10.0, -6 + i);
    for (int k = 0; k + 1 < items; ++k) {
      const float lo = 0.1f + 0.9f * static_cast<float>(k) / static_cast<float>(items - 1);
      const float hi = 0.1f + 0.9f * static_cast<float>(k + 1) / static_cast<float>(items - 1);
      const double mean = (static_cast<double>(lo) + hi) / 2;
      data.push_back(static_cast<float>(scale * mean));
      data.push_back(static_cast<float>(-scale * mean));
    }
  }
  data.push_back(0.0f);
  data.push_back(1.0f);
  std::sort(data.begin(), data.end());
  return data;
}

// bitsandbytes' QuantState.as_dict(packed=True), as json.dumps writes it.
std::string quant_state_json(std::uint64_t out, std::uint64_t in) {
  char offset[32];
  std::snprintf(offset, sizeof offset, "%.17g", kNestedOffset);
  return "{\"quant_type\": \"nf4\", \"blocksize\": 64, \"dtype\": \"bfloat16\", \"shape\": [" +
         std::to_string(out) + ", " + std::to_string(in) +
         "], \"nested_blocksize\": 256, \"nested_offset\": " + offset +
         ", \"nested_dtype\": \"float32\"}";
}

// A part as a module list before quantisation: each Linear weight is marked.
struct Builder {
  std::vector<io::TensorSpec> specs;
  std::vector<bool> linear;  // quantised when the part is NF4

  void add(std::string name, DType dtype, Shape shape, bool is_linear = false) {
    specs.push_back({std::move(name), dtype, std::move(shape)});
    linear.push_back(is_linear);
  }
  // A Linear: its weight [out, in] (NF4 when `quantise`), its bias when it has one.
  void linear_layer(const std::string& p, std::uint64_t out, std::uint64_t in, bool bias,
                    bool quantise = true) {
    add(p + ".weight", DType::kBF16, {out, in}, quantise);
    if (bias) add(p + ".bias", DType::kBF16, {out});
  }
  void norm(const std::string& p, std::uint64_t width, bool bias = false) {
    add(p + ".weight", DType::kBF16, {width});
    if (bias) add(p + ".bias", DType::kBF16, {width});
  }
};

// The safetensors library's file order: dtype, widest first (its Dtype enum descending), then name.
int dtype_rank(DType t) {
  switch (t) {
    case DType::kF64:
    case DType::kI64:
      return 0;
    case DType::kF32:
    case DType::kI32:
      return 1;
    case DType::kBF16:
      return 2;
    case DType::kF16:
      return 3;
    case DType::kI16:
      return 4;
    case DType::kF8E4M3:
    case DType::kF8E5M2:
      return 5;
    case DType::kI8:
      return 6;
    default:
      return 7;  // U8, bool
  }
}

// The safetensors library's order of two tensors in a file.
bool in_file_order(const io::TensorSpec& x, const io::TensorSpec& y) {
  const int rx = dtype_rank(x.dtype), ry = dtype_rank(y.dtype);
  return rx != ry ? rx < ry : x.name < y.name;
}

SyntheticPart finish(Builder b, bool nf4) {
  SyntheticPart part;
  for (std::size_t i = 0; i < b.specs.size(); ++i) {
    io::TensorSpec& t = b.specs[i];
    if (!nf4 || !b.linear[i]) {
      part.specs.push_back(std::move(t));
      continue;
    }
    const std::uint64_t out = t.shape[0], in = t.shape[1], n = out * in, blocks = n / 64;
    const std::string state_name = t.name + ".quant_state.bitsandbytes__nf4";
    std::string json = quant_state_json(out, in);
    part.specs.push_back({t.name, DType::kU8, {n / 2, 1}});
    part.specs.push_back({t.name + ".absmax", DType::kU8, {blocks}});
    part.specs.push_back({t.name + ".quant_map", DType::kF32, {16}});
    part.specs.push_back({t.name + ".nested_absmax", DType::kF32, {(blocks + 255) / 256}});
    part.specs.push_back({t.name + ".nested_quant_map", DType::kF32, {256}});
    part.specs.push_back({state_name, DType::kU8, {json.size()}});
    part.states.emplace(state_name, std::move(json));
  }
  std::stable_sort(part.specs.begin(), part.specs.end(), in_file_order);
  return part;
}

// A DiT block's (or refiner block's) attention and MLP, original names (§C.11).
void dit_block_body(Builder& b, const std::string& p, const SyntheticShapes& s) {
  const std::uint64_t h = u(s.dit_hidden), inner = u(s.dit_heads * 128), f = u(s.dit_ffn);
  b.norm(p + "norm1", h);
  b.norm(p + "norm2", h);
  b.linear_layer(p + "attn.qkv_proj", 3 * inner, h, false);
  b.norm(p + "attn.q_norm", 128);
  b.norm(p + "attn.k_norm", 128);
  b.linear_layer(p + "attn.out_proj", h, inner, false);
  b.linear_layer(p + "mlp.fc1", 2 * f, h, false);
  b.linear_layer(p + "mlp.fc2", h, f, false);
}

std::string layer_name(std::int64_t l) {
  return "model.language_model.layers." + std::to_string(l) + ".";
}

// A weight-normed convolution (legacy weight_g / weight_v names): v [a, b, k], g [a, 1, 1].
void wn_conv(Builder& b, const std::string& p, std::uint64_t a, std::uint64_t c, std::uint64_t k,
             std::uint64_t bias) {
  b.add(p + ".weight_g", DType::kBF16, {a, 1, 1});
  b.add(p + ".weight_v", DType::kBF16, {a, c, k});
  if (bias != 0) b.add(p + ".bias", DType::kBF16, {bias});
}

// An anti-aliased SnakeBeta activation of `c` channels (§F.2).
void amp_activation(Builder& b, const std::string& p, std::uint64_t c) {
  b.add(p + ".act.alpha", DType::kBF16, {c});
  b.add(p + ".act.beta", DType::kBF16, {c});
  b.add(p + ".upsample.filter", DType::kF32, {1, 1, 12});
  b.add(p + ".downsample.lowpass.filter", DType::kF32, {1, 1, 12});
}

void write_text(const fs::path& path, const std::string& text) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f << text;
  if (!f.flush()) throw Error(ErrorCode::kIo, "cannot write " + io::detail::display(path));
}

// A Qwen2 tokenizer with the byte-level alphabet as its vocabulary (ids 0-255), no merges, and
// the release's added tokens at their ids (§A.1), H3's seven in additional_special_tokens.
void write_tokenizer(const fs::path& folder) {
  fs::create_directories(folder);
  nlohmann::ordered_json vocab = nlohmann::ordered_json::object();
  for (int byte = 0; byte < 256; ++byte) {
    const char32_t c = byte_to_unicode(static_cast<std::uint8_t>(byte));
    std::string utf8;
    if (c < 0x80) {
      utf8 += static_cast<char>(c);
    } else {
      utf8 += static_cast<char>(0xC0 | (c >> 6));
      utf8 += static_cast<char>(0x80 | (c & 0x3F));
    }
    vocab[utf8] = byte;
  }
  write_text(folder / "vocab.json", vocab.dump());
  write_text(folder / "merges.txt", "#version: 0.2\n");
  const char* const added[] = {"<|endoftext|>",
                               "<|im_start|>",
                               "<|im_end|>",
                               "<|object_ref_start|>",
                               "<|object_ref_end|>",
                               "<|box_start|>",
                               "<|box_end|>",
                               "<|quad_start|>",
                               "<|quad_end|>",
                               "<|vision_start|>",
                               "<|vision_end|>",
                               "<|vision_pad|>",
                               "<|image_pad|>",
                               "<|video_pad|>",
                               "<tool_call>",
                               "</tool_call>",
                               "<|fim_prefix|>",
                               "<|fim_middle|>",
                               "<|fim_suffix|>",
                               "<|fim_pad|>",
                               "<|repo_name|>",
                               "<|file_sep|>",
                               "<tool_response>",
                               "</tool_response>",
                               "<think>",
                               "</think>"};
  nlohmann::ordered_json decoder = nlohmann::ordered_json::object();
  int id = 151643;
  for (const char* token : added) {
    const bool special = id <= 151656;
    decoder[std::to_string(id++)] = {{"content", token},     {"lstrip", false},
                                     {"normalized", false},  {"rstrip", false},
                                     {"single_word", false}, {"special", special}};
  }
  nlohmann::ordered_json config = {{"add_bos_token", false},
                                   {"add_prefix_space", false},
                                   {"added_tokens_decoder", decoder},
                                   {"additional_special_tokens",
                                    {"<d>", "</d>", "<|cutoff|>", "<|lyrics_start|>",
                                     "<|lyrics_end|>", "<|caption_start|>", "<|caption_end|>"}},
                                   {"bos_token", nullptr},
                                   {"clean_up_tokenization_spaces", false},
                                   {"eos_token", "<|im_end|>"},
                                   {"errors", "replace"},
                                   {"model_max_length", 262144},
                                   {"pad_token", "<|endoftext|>"},
                                   {"split_special_tokens", false},
                                   {"tokenizer_class", "Qwen2Tokenizer"},
                                   {"unk_token", nullptr}};
  write_text(folder / "tokenizer_config.json", config.dump(2));
  // Qwen3-VL's processor settings as the release's processor/preprocessor_config.json has them.
  const nlohmann::ordered_json processor = {
      {"do_normalize", true},
      {"do_rescale", true},
      {"do_resize", true},
      {"image_mean", {0.5, 0.5, 0.5}},
      {"image_std", {0.5, 0.5, 0.5}},
      {"merge_size", 2},
      {"patch_size", 16},
      {"temporal_patch_size", 2},
      {"size", {{"longest_edge", 16777216}, {"shortest_edge", 65536}}},
      {"image_processor_type", "Qwen2VLImageProcessorFast"}};
  write_text(folder / "preprocessor_config.json", processor.dump(2));
}

}  // namespace

Bnb4Part SyntheticPart::bnb4_part(std::size_t index) const {
  const io::TensorSpec& t = specs[index];
  const std::string& n = t.name;
  if (states.count(n) != 0) return Bnb4Part::kState;
  if (n.ends_with(".weight.absmax")) return Bnb4Part::kAbsmax;
  if (n.ends_with(".weight.quant_map")) return Bnb4Part::kQuantMap;
  if (n.ends_with(".weight.nested_absmax")) return Bnb4Part::kNestedAbsmax;
  if (n.ends_with(".weight.nested_quant_map")) return Bnb4Part::kNestedQuantMap;
  if (t.dtype == DType::kU8 && n.ends_with(".weight") && t.shape.size() == 2 && t.shape[1] == 1) {
    return Bnb4Part::kCodes;
  }
  return Bnb4Part::kNone;
}

bool SyntheticPart::fill_known_bytes(std::size_t index, std::uint64_t offset,
                                     std::span<std::byte> out) const {
  const auto copy = [&](const void* data, std::size_t size) {
    if (offset + out.size() > size) throw Error(ErrorCode::kInternal, "synthetic set: bad fill");
    std::memcpy(out.data(), static_cast<const std::byte*>(data) + offset, out.size());
    return true;
  };
  switch (bnb4_part(index)) {
    case Bnb4Part::kState: {
      const std::string& json = states.at(specs[index].name);
      return copy(json.data(), json.size());
    }
    case Bnb4Part::kQuantMap:
      return copy(kNf4CodeBook, sizeof kNf4CodeBook);
    case Bnb4Part::kNestedQuantMap: {
      static const std::vector<float> book = dynamic_code_book();
      return copy(book.data(), book.size() * sizeof(float));
    }
    default:
      return false;
  }
}

namespace {

std::uint64_t mix(std::uint64_t x) {  // splitmix64's finaliser
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

std::uint16_t bf16_bits(float v) {
  std::uint32_t bits;
  std::memcpy(&bits, &v, sizeof bits);
  return static_cast<std::uint16_t>(bits >> 16);
}

}  // namespace

void SyntheticPart::fill_random(std::size_t index, std::uint64_t offset,
                                std::span<std::byte> out) const {
  if (fill_known_bytes(index, offset, out)) return;
  const io::TensorSpec& t = specs[index];
  const Bnb4Part kind = bnb4_part(index);
  const std::uint64_t seed = mix(index + 1) << 1;
  if (kind == Bnb4Part::kCodes || kind == Bnb4Part::kAbsmax) {
    for (std::size_t k = 0; k < out.size(); ++k) {
      const std::uint64_t p = offset + k;
      out[k] = static_cast<std::byte>(mix(seed ^ (p >> 3)) >> (8 * (p & 7)));
    }
    return;
  }
  // Element-wise values: each output byte is a byte of its element's value.
  const auto by_element = [&](std::size_t size, const auto& value_bits) {
    for (std::size_t k = 0; k < out.size(); ++k) {
      const std::uint64_t p = offset + k, element = p / size;
      const std::uint64_t bits = value_bits(element);
      out[k] = static_cast<std::byte>(bits >> (8 * (p % size)));
    }
  };
  if (kind == Bnb4Part::kNestedAbsmax) {
    std::uint32_t bits;
    std::memcpy(&bits, &kNestedAbsmax, sizeof bits);
    by_element(4, [&](std::uint64_t) { return bits; });
  } else if (t.dtype == DType::kBF16 && t.shape.size() == 1) {
    by_element(2, [](std::uint64_t) { return bf16_bits(1.0f); });
  } else if (t.dtype == DType::kBF16) {
    by_element(2, [&](std::uint64_t e) {
      const double u01 = static_cast<double>(mix(seed ^ e) >> 11) * 0x1.0p-53;
      return bf16_bits(static_cast<float>((u01 * 2 - 1) * 0.02));
    });
  } else {
    std::memset(out.data(), 0, out.size());
  }
}

void write_with_data(const fs::path& path, const SyntheticPart& part,
                     const std::function<bool(const io::TensorSpec&)>& hole) {
  io::write_safetensors(
      path, part.specs,
      {{"format", "pt"},
       {"ferry.synthetic",
        "MiniMax-H3, DiffSynth NF4 layout, random data of plausible size (Ferry benchmark)"}},
      [&](std::size_t i, std::uint64_t offset, std::span<std::byte> out) {
        part.fill_random(i, offset, out);
      },
      [&](std::size_t i) {
        // What a reader reads at open is never a hole.
        const Bnb4Part k = part.bnb4_part(i);
        const bool known =
            k == Bnb4Part::kState || k == Bnb4Part::kQuantMap || k == Bnb4Part::kNestedQuantMap;
        return !known && hole(part.specs[i]);
      });
}

SyntheticPart dit_part(const SyntheticShapes& s, bool nf4) {
  Builder b;
  const std::uint64_t h = u(s.dit_hidden), adaln_in = s.pruned ? 8 : u(s.time_dim);
  const std::uint64_t video = u(s.latents) * 4, audio = u(s.audio_latents);
  for (std::int64_t i = 0; i < s.dit_layers; ++i) {
    const std::string p = "blocks." + std::to_string(i) + ".";
    dit_block_body(b, p, s);
    // DiffSynth keeps the pruned model's rank-8 AdaLN projections in bf16 (§G.2).
    b.linear_layer(p + "adaln_proj.linear", 18 * h, adaln_in, true, !s.pruned);
  }
  for (std::int64_t j = 0; j < s.refiner_layers; ++j) {
    dit_block_body(b, "token_refiner.blocks." + std::to_string(j) + ".", s);
  }
  b.norm("token_refiner.final_norm", h);
  // The fp32 islands are stored bf16 in DiffSynth's files.
  b.linear_layer("video_patch_proj", h, video, true, false);
  b.linear_layer("audio_patch_proj", h, audio, true, false);
  b.linear_layer("condition_proj", h, u(s.text_dim), true, false);
  if (s.pruned) {
    b.add("adaln_t_table", DType::kF32, {1025, 8});
  } else {
    b.linear_layer("time_embedder.proj_in", u(s.time_hidden), u(s.freq_dim), true, false);
    b.linear_layer("time_embedder.proj_out", u(s.time_dim), u(s.time_hidden), true, false);
  }
  b.add("rope.inv_freq", DType::kF32, {16});
  b.norm("final_layer.norm", h);
  b.linear_layer("final_layer.adaln_proj.linear", 2 * h, adaln_in, true, !s.pruned);
  b.linear_layer("final_layer.video_out", video, h, true, false);
  b.linear_layer("final_layer.audio_out", audio, h, true, false);
  return finish(std::move(b), nf4);
}

SyntheticPart text_encoder_part(const SyntheticShapes& s, bool nf4) {
  Builder b;
  const std::uint64_t d = u(s.text_dim), q = u(s.text_heads * s.head_dim),
                      kv = u(s.text_kv_heads * s.head_dim), f = u(s.text_ffn), hd = u(s.head_dim);
  b.add("model.language_model.embed_tokens.weight", DType::kBF16, {u(s.vocab), d});
  for (std::int64_t l = 0; l < s.text_layers; ++l) {
    const std::string p = layer_name(l);
    b.norm(p + "input_layernorm", d);
    b.linear_layer(p + "self_attn.q_proj", q, d, false);
    b.linear_layer(p + "self_attn.k_proj", kv, d, false);
    b.linear_layer(p + "self_attn.v_proj", kv, d, false);
    b.norm(p + "self_attn.q_norm", hd);
    b.norm(p + "self_attn.k_norm", hd);
    b.linear_layer(p + "self_attn.o_proj", d, q, false);
    b.norm(p + "post_attention_layernorm", d);
    b.linear_layer(p + "mlp.gate_proj", f, d, false);
    b.linear_layer(p + "mlp.up_proj", f, d, false);
    b.linear_layer(p + "mlp.down_proj", d, f, false);
  }
  // The vision tower stays bf16 (§G.2).
  const std::uint64_t v = u(s.vision_dim), vf = u(s.vision_ffn),
                      m = v * u(s.vision_merge * s.vision_merge);
  const std::string pre = "model.visual.";
  b.add(pre + "patch_embed.proj.weight", DType::kBF16,
        {v, 3, u(s.vision_temporal_patch), u(s.vision_patch), u(s.vision_patch)});
  b.add(pre + "patch_embed.proj.bias", DType::kBF16, {v});
  b.add(pre + "pos_embed.weight", DType::kBF16, {u(s.vision_side * s.vision_side), v});
  for (std::int64_t k = 0; k < s.vision_depth; ++k) {
    const std::string p = pre + "blocks." + std::to_string(k) + ".";
    b.norm(p + "norm1", v, true);
    b.linear_layer(p + "attn.qkv", 3 * v, v, true, false);
    b.linear_layer(p + "attn.proj", v, v, true, false);
    b.norm(p + "norm2", v, true);
    b.linear_layer(p + "mlp.linear_fc1", vf, v, true, false);
    b.linear_layer(p + "mlp.linear_fc2", v, vf, true, false);
  }
  const auto merger = [&](const std::string& p, std::uint64_t norm_width) {
    b.norm(p + "norm", norm_width, true);
    b.linear_layer(p + "linear_fc1", m, m, true, false);
    b.linear_layer(p + "linear_fc2", d, m, true, false);
  };
  merger(pre + "merger.", v);
  for (std::size_t k = 0; k < s.deepstack_blocks.size(); ++k) {
    merger(pre + "deepstack_merger_list." + std::to_string(k) + ".", m);
  }
  return finish(std::move(b), nf4);
}

SyntheticPart video_vae_part(const SyntheticShapes& s, bool nf4) {
  Builder b;
  // Encoder (§E.2): bf16 convolutions and group norms.
  const auto conv = [&](const std::string& p, std::uint64_t out, std::uint64_t in,
                        std::uint64_t k) {
    b.add(p + ".weight", DType::kBF16, {out, in, k, k, k});
    b.add(p + ".bias", DType::kBF16, {out});
  };
  const std::vector<std::int64_t>& channels = s.vae_encoder_channels;
  std::uint64_t in = u(channels.front());
  conv("encoder.conv_in", in, 3, 3);
  for (std::size_t level = 0; level < channels.size(); ++level) {
    const std::uint64_t out = u(channels[level]);
    for (int r = 0; r < 2; ++r) {
      const std::string p =
          "encoder.down." + std::to_string(level) + ".block." + std::to_string(r) + ".";
      const std::uint64_t cin = r == 0 ? in : out;
      b.norm(p + "norm1", cin, true);
      conv(p + "conv1", out, cin, 3);
      b.norm(p + "norm2", out, true);
      conv(p + "conv2", out, out, 3);
      if (cin != out) conv(p + "nin_shortcut", out, cin, 1);
    }
    if (level < 4) conv("encoder.down." + std::to_string(level) + ".downsample.conv", out, out, 3);
    in = out;
  }
  b.norm("encoder.norm_out", in, true);
  conv("encoder.conv_out", 2 * u(s.latents), in, 3);
  conv("quant_conv", 2 * u(s.latents), 2 * u(s.latents), 1);
  conv("post_quant_conv", u(s.latents), u(s.latents), 1);
  // ViT decoder (§E.3), DiffSynth's names: its Linears NF4 except the x_embedder.
  const std::uint64_t d = u(s.vae_dim), f = u(s.vae_ffn);
  b.linear_layer("decoder.x_embedder", d, u(s.latents), true, false);
  b.add("decoder.register_tokens.weight", DType::kBF16, {1, 4, d});
  for (std::int64_t k = 0; k < s.vae_blocks; ++k) {
    const std::string p = "decoder.transformer_blocks." + std::to_string(k) + ".";
    b.norm(p + "norm1", d);
    b.linear_layer(p + "attn.to_qkv", 3 * d, d, true);
    b.linear_layer(p + "attn.to_out", d, d, true);
    b.add(p + "scale1.weight", DType::kBF16, {d});
    b.norm(p + "norm2", d);
    b.linear_layer(p + "ff.w1", 2 * f, d, true);
    b.linear_layer(p + "ff.w2", d, f, true);
    b.add(p + "scale2.weight", DType::kBF16, {d});
  }
  b.norm("decoder.norm_out", d, true);
  b.linear_layer("decoder.proj_out", 3 * 4 * 16 * 16, d, true);
  return finish(std::move(b), nf4);
}

SyntheticPart audio_vae_part(const SyntheticShapes& s, bool nf4) {
  Builder b;
  // Encoder (§F.4): WN-Conv 1->64, five strided blocks of three residual units, a last conv.
  std::uint64_t c = u(s.audio_encoder_dim);
  wn_conv(b, "encoder.block.0", c, 1, 7, c);
  const std::uint64_t strides[] = {2, 4, 4, 5, 5};
  for (int i = 0; i < 5; ++i) {
    const std::string p = "encoder.block." + std::to_string(i + 1) + ".block.";
    for (int j = 0; j < 3; ++j) {
      const std::string unit = p + std::to_string(j) + ".block.";
      b.add(unit + "0.alpha", DType::kBF16, {1, c, 1});
      wn_conv(b, unit + "1", c, c, 7, c);
      b.add(unit + "2.alpha", DType::kBF16, {1, c, 1});
      wn_conv(b, unit + "3", c, c, 1, c);
    }
    b.add(p + "3.alpha", DType::kBF16, {1, c, 1});
    wn_conv(b, p + "4", 2 * c, c, 2 * strides[i], 2 * c);
    c *= 2;
  }
  b.add("encoder.block.6.alpha", DType::kBF16, {1, c, 1});
  wn_conv(b, "encoder.block.7", c, c, 3, c);
  // The encoder's attention pre-block: its Linears NF4 in DiffSynth's file (§G.2), three of them
  // only 32 wide, so their 64-value blocks straddle rows.
  const std::uint64_t latent_dim = c;  // 2048 in the release
  b.norm("pre_block.norm1", latent_dim, true);
  b.norm("pre_block.norm3", latent_dim, true);
  b.linear_layer("pre_block.proj", 32, latent_dim, true);
  b.linear_layer("pre_block.attn.qkv", 3 * latent_dim, latent_dim, false);
  for (const char* bias : {"q_bias", "v_bias", "zero_k_bias"}) {
    b.add("pre_block.attn." + std::string(bias) + ".weight", DType::kBF16, {latent_dim});
  }
  b.linear_layer("pre_block.attn.proj", 32, 32, true);
  b.norm("pre_block.norm2", 32, true);
  b.norm("pre_block.mlp.norm", 32, true);
  b.linear_layer("pre_block.mlp.w0", 64, 32, false);
  b.linear_layer("pre_block.mlp.w1", 64, 32, false);
  b.linear_layer("pre_block.mlp.w2", 32, 64, false);
  for (const char* head : {"mean_proj", "logs_proj"}) {
    b.add(std::string(head) + ".weight", DType::kBF16, {32, 32, 1});
    b.add(std::string(head) + ".bias", DType::kBF16, {32});
  }
  // Decoder (§F.3): the latent projection, BigVGAN's upsampling stages and AMP blocks.
  b.add("dec_in_proj.weight", DType::kBF16, {latent_dim, 32, 1});
  b.add("dec_in_proj.bias", DType::kBF16, {latent_dim});
  wn_conv(b, "decoder.conv_pre", u(s.audio_decoder_dim), latent_dim, 7, u(s.audio_decoder_dim));
  const std::uint64_t rates[] = {5, 5, 2, 2, 2, 2, 2}, kernels[] = {9, 9, 4, 4, 4, 4, 4};
  const std::uint64_t amp_kernels[] = {3, 7, 11};
  c = u(s.audio_decoder_dim);
  for (int i = 0; i < 7; ++i) {
    // A transposed convolution's v is [in, out, k] and its g per input channel.
    b.add("decoder.ups." + std::to_string(i) + ".0.weight_g", DType::kBF16, {c, 1, 1});
    b.add("decoder.ups." + std::to_string(i) + ".0.weight_v", DType::kBF16, {c, c / 2, kernels[i]});
    b.add("decoder.ups." + std::to_string(i) + ".0.bias", DType::kBF16, {c / 2});
    (void)rates[i];
    c /= 2;
    for (int j = 0; j < 3; ++j) {
      const std::string p = "decoder.resblocks." + std::to_string(i * 3 + j) + ".";
      for (const char* convs : {"convs1.", "convs2."}) {
        for (int k = 0; k < 3; ++k) {
          wn_conv(b, p + convs + std::to_string(k), c, c, amp_kernels[j], c);
        }
      }
      for (int a = 0; a < 6; ++a) amp_activation(b, p + "activations." + std::to_string(a), c);
    }
  }
  amp_activation(b, "decoder.activation_post", c);
  wn_conv(b, "decoder.conv_post", 1, c, 7, 0);
  return finish(std::move(b), nf4);
}

void write_header_only(const fs::path& path, const SyntheticPart& part) {
  write_header_only(path, part, "DiffSynth NF4 layout", "the quant states and code books");
}

void write_header_only(const fs::path& path, const SyntheticPart& part, const std::string& layout,
                       const std::string& kept) {
  const std::map<std::string, std::string> metadata = {
      {"format", "pt"},
      {"ferry.synthetic", "header only (MiniMax-H3, " + layout +
                              "): tensor data are sparse holes but " + kept +
                              ", for planning; see ferry-cli synth --set"}};
  io::write_safetensors(
      path, part.specs, metadata,
      [&](std::size_t i, std::uint64_t offset, std::span<std::byte> out) {
        part.fill_known_bytes(i, offset, out);
      },
      [&](std::size_t i) {
        const Bnb4Part k = part.bnb4_part(i);
        return k != Bnb4Part::kState && k != Bnb4Part::kQuantMap && k != Bnb4Part::kNestedQuantMap;
      });
}

std::vector<fs::path> write_header_only_set(const fs::path& folder, const SyntheticShapes& shapes) {
  constexpr bool nf4 = true;
  fs::create_directories(folder);
  std::vector<fs::path> files;
  const auto write = [&](const char* name, const SyntheticPart& part) {
    write_header_only(folder / name, part);
    files.emplace_back(name);
  };
  write(shapes.pruned ? SyntheticFiles::kDitPruned : SyntheticFiles::kDit, dit_part(shapes, nf4));
  write(SyntheticFiles::kTextEncoder, text_encoder_part(shapes, nf4));
  write(SyntheticFiles::kVideoVae, video_vae_part(shapes, nf4));
  write(SyntheticFiles::kAudioVae, audio_vae_part(shapes, nf4));
  write_tokenizer(folder / "processor");
  for (const char* f :
       {"vocab.json", "merges.txt", "tokenizer_config.json", "preprocessor_config.json"}) {
    files.push_back(fs::path("processor") / f);
  }
  return files;
}

// ---- Comfy-Org's repackaged set
// ------------------------------------------------------------------

std::string comfy_quant_json(std::int64_t group_size) {
  return "{\"format\": \"int8_tensorwise\", \"convrot\": true, \"convrot_groupsize\": " +
         std::to_string(group_size) + "}";
}

namespace {

// A part in Comfy-Org's layout as it is built: each tensor with its dtype, and each int8 ConvRot
// Linear weight with its group size (0 for every other tensor).
struct ComfyBuilder {
  std::vector<io::TensorSpec> specs;
  std::vector<std::int64_t> groups;

  void add(std::string name, DType dtype, Shape shape, std::int64_t group_size = 0) {
    specs.push_back({std::move(name), dtype, std::move(shape)});
    groups.push_back(group_size);
  }
  // A Linear: its weight [out, in] int8 ConvRot in groups of `group_size` (0: stored as `dtype`),
  // its bias, when it has one, as `dtype`.
  void linear_layer(const std::string& p, std::uint64_t out, std::uint64_t in, bool bias,
                    DType dtype, std::int64_t group_size = 0) {
    add(p + ".weight", dtype, {out, in}, group_size);
    if (bias) add(p + ".bias", dtype, {out});
  }
  void norm(const std::string& p, std::uint64_t width) {
    add(p + ".weight", DType::kBF16, {width});
  }
};

// Each int8 Linear as its three tensors, the JSONs kept as the part's states; file order.
SyntheticPart finish_comfy(ComfyBuilder b) {
  SyntheticPart part;
  for (std::size_t i = 0; i < b.specs.size(); ++i) {
    io::TensorSpec& t = b.specs[i];
    if (b.groups[i] == 0) {
      part.specs.push_back(std::move(t));
      continue;
    }
    const std::string base = t.name.substr(0, t.name.size() - std::strlen(".weight"));
    std::string json = comfy_quant_json(b.groups[i]);
    part.specs.push_back({t.name, DType::kI8, t.shape});
    part.specs.push_back({base + ".weight_scale", DType::kF32, {t.shape[0], 1}});
    part.specs.push_back({base + ".comfy_quant", DType::kU8, {json.size()}});
    part.states.emplace(base + ".comfy_quant", std::move(json));
  }
  std::stable_sort(part.specs.begin(), part.specs.end(), in_file_order);
  return part;
}

// A DiT block's attention and MLP: int8 in groups of `group_size`, or bf16 when it is 0 (the
// token refiner's).
void comfy_block_body(ComfyBuilder& b, const std::string& p, const SyntheticShapes& s,
                      std::int64_t group_size) {
  const std::uint64_t h = u(s.dit_hidden), inner = u(s.dit_heads * 128), f = u(s.dit_ffn);
  b.norm(p + "norm1", h);
  b.norm(p + "norm2", h);
  b.linear_layer(p + "attn.qkv_proj", 3 * inner, h, false, DType::kBF16, group_size);
  b.norm(p + "attn.q_norm", 128);
  b.norm(p + "attn.k_norm", 128);
  b.linear_layer(p + "attn.out_proj", h, inner, false, DType::kBF16, group_size);
  b.linear_layer(p + "mlp.fc1", 2 * f, h, false, DType::kBF16, group_size);
  b.linear_layer(p + "mlp.fc2", h, f, false, DType::kBF16, group_size);
}

// A DiffSynth-layout part at another dtype and with official names: every float tensor as
// `dtype`, the `.weight` DiffSynth appends taken off the names `renamed` (§G.1).
SyntheticPart official_names(SyntheticPart part, DType dtype,
                             const std::function<bool(const std::string&)>& renamed) {
  for (io::TensorSpec& t : part.specs) {
    if (t.dtype == DType::kBF16 || t.dtype == DType::kF32) t.dtype = dtype;
    if (renamed(t.name)) t.name.resize(t.name.size() - std::strlen(".weight"));
  }
  std::stable_sort(part.specs.begin(), part.specs.end(), in_file_order);
  return part;
}

}  // namespace

SyntheticPart comfy_dit_part(const SyntheticShapes& s) {
  ComfyBuilder b;
  const std::uint64_t h = u(s.dit_hidden), video = u(s.latents) * 4, audio = u(s.audio_latents);
  // The pruned AdaLN's rank-8 projections are F16 in the file; the full model's int8.
  const auto adaln = [&](const std::string& p, std::uint64_t out) {
    if (s.pruned) {
      b.linear_layer(p, out, 8, true, DType::kF16);
    } else {
      b.linear_layer(p, out, u(s.time_dim), true, DType::kBF16, kComfyAdalnGroup);
    }
  };
  for (std::int64_t i = 0; i < s.dit_layers; ++i) {
    const std::string p = "blocks." + std::to_string(i) + ".";
    comfy_block_body(b, p, s, kComfyGroup);
    adaln(p + "adaln_proj.linear", 18 * h);
  }
  for (std::int64_t j = 0; j < s.refiner_layers; ++j) {
    comfy_block_body(b, "token_refiner.blocks." + std::to_string(j) + ".", s, 0);
  }
  b.norm("token_refiner.final_norm", h);
  // The release's fp32 islands stay F32 in Comfy-Org's files.
  b.linear_layer("video_patch_proj", h, video, true, DType::kF32);
  b.linear_layer("audio_patch_proj", h, audio, true, DType::kF32);
  b.linear_layer("condition_proj", h, u(s.text_dim), true, DType::kBF16);
  if (s.pruned) {
    b.add("adaln_t_table", DType::kF32, {1025, 8});
  } else {
    b.linear_layer("time_embedder.proj_in", u(s.time_hidden), u(s.freq_dim), true, DType::kF32);
    b.linear_layer("time_embedder.proj_out", u(s.time_dim), u(s.time_hidden), true, DType::kF32);
  }
  b.add("rope.inv_freq", DType::kF32, {16});
  b.norm("final_layer.norm", h);
  adaln("final_layer.adaln_proj.linear", 2 * h);
  b.linear_layer("final_layer.video_out", video, h, true, DType::kF32);
  b.linear_layer("final_layer.audio_out", audio, h, true, DType::kF32);
  return finish_comfy(std::move(b));
}

SyntheticPart comfy_text_encoder_part(const SyntheticShapes& s) {
  ComfyBuilder b;
  const std::uint64_t d = u(s.text_dim), q = u(s.text_heads * s.head_dim),
                      kv = u(s.text_kv_heads * s.head_dim), f = u(s.text_ffn), hd = u(s.head_dim);
  b.add("model.embed_tokens.weight", DType::kBF16, {u(s.vocab), d});
  for (std::int64_t l = 0; l < s.text_layers; ++l) {
    const std::string p = "model.layers." + std::to_string(l) + ".";
    const auto int8 = [&](const std::string& name, std::uint64_t out, std::uint64_t in) {
      b.linear_layer(p + name, out, in, false, DType::kBF16, kComfyGroup);
    };
    b.norm(p + "input_layernorm", d);
    int8("self_attn.q_proj", q, d);
    int8("self_attn.k_proj", kv, d);
    int8("self_attn.v_proj", kv, d);
    b.norm(p + "self_attn.q_norm", hd);
    b.norm(p + "self_attn.k_norm", hd);
    int8("self_attn.o_proj", d, q);
    b.norm(p + "post_attention_layernorm", d);
    int8("mlp.gate_proj", f, d);
    int8("mlp.up_proj", f, d);
    int8("mlp.down_proj", d, f);
  }
  // The vision tower, bf16 as in DiffSynth's file, under ComfyUI's `visual.` prefix.
  SyntheticShapes vision_only = s;
  vision_only.text_layers = 0;
  for (const io::TensorSpec& t : text_encoder_part(vision_only, false).specs) {
    if (t.name.starts_with("model.visual.")) {
      b.add(t.name.substr(std::strlen("model.")), t.dtype, t.shape);
    }
  }
  return finish_comfy(std::move(b));
}

SyntheticPart comfy_video_vae_part(const SyntheticShapes& s) {
  return official_names(video_vae_part(s, false), DType::kF16, [](const std::string& n) {
    return n == "decoder.register_tokens.weight" ||
           (n.starts_with("decoder.transformer_blocks.") &&
            (n.ends_with(".scale1.weight") || n.ends_with(".scale2.weight")));
  });
}

SyntheticPart comfy_audio_vae_part(const SyntheticShapes& s) {
  return official_names(audio_vae_part(s, false), DType::kF32, [](const std::string& n) {
    return n == "pre_block.attn.q_bias.weight" || n == "pre_block.attn.v_bias.weight" ||
           n == "pre_block.attn.zero_k_bias.weight";
  });
}

std::vector<fs::path> write_comfy_header_only_set(const fs::path& folder,
                                                  const SyntheticShapes& shapes) {
  std::vector<fs::path> files;
  const auto write = [&](const char* name, const SyntheticPart& part) {
    const fs::path path = folder / fs::path(name);
    fs::create_directories(path.parent_path());
    write_header_only(path, part, "Comfy-Org int8 ConvRot layout", "the comfy_quant JSONs");
    files.push_back(fs::path(name).make_preferred());
  };
  write(shapes.pruned ? ComfyFiles::kDitPruned : ComfyFiles::kDit, comfy_dit_part(shapes));
  write(ComfyFiles::kTextEncoder, comfy_text_encoder_part(shapes));
  write(ComfyFiles::kVideoVae, comfy_video_vae_part(shapes));
  write(ComfyFiles::kAudioVae, comfy_audio_vae_part(shapes));
  write_tokenizer(folder / "processor");
  for (const char* f :
       {"vocab.json", "merges.txt", "tokenizer_config.json", "preprocessor_config.json"}) {
    files.push_back(fs::path("processor") / f);
  }
  return files;
}

}  // namespace ferry::models::h3
