// `ferry-cli synth --set KIND --out DIR`: a whole Wan model set as users download it — the
// diffusion model (or A14B's two experts), the umT5 text encoder and the VAE, under the file
// names, tensor names, dtypes and type mixes of the distributions (formats_lora_moe.md §1.3-1.5,
// §3, §6.5; wan.md §F) and at the real shapes, but header-only: every tensor's data is a sparse
// hole (the files show their real size and take no disk). What a loader reads when it opens a
// file is real: the fp8 scales (umT5's are read at open) and the tokenizer (the demo's small
// SentencePiece model, as the `spiece_model` tensor or as a GGUF's tokenizer.ggml keys), so the
// set is recognised and planned exactly as the real one (`ferry-cli plan`); generating with it
// makes a video of zeros. Image-to-video sets also get grey start images at 832×480 and
// 1280×720 for `plan --image`. MiniMax-H3 sets are DiffSynth's NF4 files (h3-nf4, h3-nf4-pruned)
// or Comfy-Org's int8 ConvRot ones with its fp16 / fp32 VAEs (h3-int8, h3-int8-pruned)
// (core/models/h3/synthetic_set.h).
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "cli/args.h"
#include "cli/commands.h"
#include "core/error.h"
#include "core/io/detail/os_file.h"
#include "core/io/gguf_writer.h"
#include "core/io/safetensors_writer.h"
#include "core/media/image.h"
#include "core/models/h3/synthetic_set.h"
#include "core/models/umt5/encoder_weights.h"
#include "core/models/umt5/tokenizer.h"
#include "core/models/umt5/unigram_model.h"
#include "core/models/wan/demo_model.h"
#include "core/models/wan/dit_layout.h"
#include "core/models/wan/vae_synth.h"

namespace ferry::cli {
namespace {

namespace fs = std::filesystem;
namespace wan = models::wan;
namespace umt5 = models::umt5;

// How a part is stored: the distributions' formats.
enum class Format {
  kGgufQ4KM,   // city96 / QuantStack Q4_K_M (Q4_K, Q6_K for V and FFN-down; §1.3, §1.5)
  kGgufQ8_0,   // Q8_0
  kF16,        // ComfyUI's fp16 single files
  kBF16,       // bf16 single files
  kFp8Scaled,  // Comfy-Org's legacy scaled fp8: F8_E4M3 Linears + scale_weight (§3.1)
};

struct SetKind {
  std::string_view name;
  const wan::DitConfig* dit;
  Format dit_format;
  Format text_format;
  std::string_view description;
};

constexpr SetKind kSets[] = {
    {"ti2v-5b-q4_k_m", &wan::kTI2V_5B, Format::kGgufQ4KM, Format::kGgufQ4KM,
     "Wan 2.2 TI2V-5B, QuantStack Q4_K_M GGUF + city96 umT5 Q4_K_M GGUF + Wan 2.2 VAE"},
    {"ti2v-5b-q8_0", &wan::kTI2V_5B, Format::kGgufQ8_0, Format::kGgufQ8_0,
     "Wan 2.2 TI2V-5B, QuantStack Q8_0 GGUF + city96 umT5 Q8_0 GGUF + Wan 2.2 VAE"},
    {"ti2v-5b-fp16", &wan::kTI2V_5B, Format::kF16, Format::kF16,
     "Wan 2.2 TI2V-5B, Comfy-Org fp16 + umt5_xxl_fp16 + Wan 2.2 VAE"},
    {"t2v-14b-bf16", &wan::kT2V_14B, Format::kBF16, Format::kF16,
     "Wan 2.1 T2V-14B, Comfy-Org bf16 + umt5_xxl_fp16 + Wan 2.1 VAE"},
    {"t2v-14b-q4_k_m", &wan::kT2V_14B, Format::kGgufQ4KM, Format::kGgufQ4KM,
     "Wan 2.1 T2V-14B, city96 Q4_K_M GGUF + umT5 Q4_K_M GGUF + Wan 2.1 VAE"},
    {"i2v-a14b-fp8", &wan::kI2V_A14B, Format::kFp8Scaled, Format::kFp8Scaled,
     "Wan 2.2 I2V-A14B, Comfy-Org fp8_scaled experts + umt5_xxl_fp8_e4m3fn_scaled + Wan 2.1 VAE"},
    {"i2v-a14b-q4_k_m", &wan::kI2V_A14B, Format::kGgufQ4KM, Format::kGgufQ4KM,
     "Wan 2.2 I2V-A14B, QuantStack Q4_K_M GGUF experts + umT5 Q4_K_M GGUF + Wan 2.1 VAE"},
    {"t2v-a14b-fp8", &wan::kT2V_A14B, Format::kFp8Scaled, Format::kFp8Scaled,
     "Wan 2.2 T2V-A14B, Comfy-Org fp8_scaled experts + umt5_xxl_fp8_e4m3fn_scaled + Wan 2.1 VAE"},
    {"t2v-a14b-q4_k_m", &wan::kT2V_A14B, Format::kGgufQ4KM, Format::kGgufQ4KM,
     "Wan 2.2 T2V-A14B, QuantStack Q4_K_M GGUF experts + umT5 Q4_K_M GGUF + Wan 2.1 VAE"},
};

bool is_gguf(Format f) {
  return f == Format::kGgufQ4KM || f == Format::kGgufQ8_0;
}

std::string_view format_tag(Format f) {
  switch (f) {
    case Format::kGgufQ4KM:
      return "Q4_K_M";
    case Format::kGgufQ8_0:
      return "Q8_0";
    case Format::kF16:
      return "fp16";
    case Format::kBF16:
      return "bf16";
    case Format::kFp8Scaled:
      return "fp8_scaled";
  }
  return "?";
}

std::uint64_t element_count(const io::TensorSpec& t) {
  std::uint64_t n = 1;
  for (std::uint64_t d : t.shape) n *= d;
  return n;
}

// A Linear's weight: 2-D and named `.weight` (modulation is 3-D, the patch embedding 5-D).
bool is_linear_weight(const io::TensorSpec& t) {
  return t.shape.size() == 2 && t.name.ends_with(".weight");
}

// ---- Diffusion models -------------------------------------------------------------------------

// What llama-quantize with city96's lcpp.patch makes of one tensor of a bf16 DiT (§1.3): F32 for
// 1-D, small and modulation tensors and the 5-D patch weight; the FTYPE's types for the 2-D
// block weights (Q4_K_M: Q6_K for V and FFN-down); the other 2-D weights stay BF16.
DType city96_dit_type(const io::TensorSpec& t, Format f) {
  const std::string& n = t.name;
  if (n == "patch_embedding.weight" || t.shape.size() == 1 || element_count(t) <= 1024 ||
      n.find(".modulation") != std::string::npos) {
    return DType::kF32;
  }
  if (!n.starts_with("blocks.") || !is_linear_weight(t)) return DType::kBF16;
  if (f == Format::kGgufQ8_0) return DType::kQ8_0;
  const bool more_bits = n.ends_with(".v.weight") || n.ends_with("ffn.2.weight");
  const DType wanted = more_bits ? DType::kQ6_K : DType::kQ4_K;
  return t.shape.back() % 256 == 0 ? wanted : DType::kF16;  // K types need 256-wide rows
}

std::uint32_t gguf_file_type(Format f) {
  return f == Format::kGgufQ8_0 ? 7 : 15;
}  // llama.cpp

// Comfy-Org's legacy scaled fp8 (§3.1, §3.3; sizes match the published 14.3 GB experts only with
// every Linear in fp8): each Linear's weight F8_E4M3 followed by its F32 `scale_weight` scalar,
// the other tensors in `rest`, and the empty `scaled_fp8` marker that says which format it is.
std::vector<io::TensorSpec> fp8_scaled(const std::vector<io::TensorSpec>& tensors, DType rest,
                                       bool (*quantized)(const io::TensorSpec&)) {
  std::vector<io::TensorSpec> out;
  for (io::TensorSpec t : tensors) {
    const bool fp8 = quantized(t);
    t.dtype = fp8 ? DType::kF8E4M3 : rest;
    out.push_back(t);
    if (fp8) {
      out.push_back({t.name.substr(0, t.name.size() - std::strlen("weight")) + "scale_weight",
                     DType::kF32,
                     {}});
    }
  }
  out.push_back({"scaled_fp8", DType::kF8E4M3, {0}});
  return out;
}

// A plausible fp8 scale (real ones are about 1e-3: weights up to ~0.45 over e4m3's 448).
constexpr float kFp8Scale = 0.001f;

bool is_scale(const io::TensorSpec& t) {
  return t.name.ends_with(".scale_weight");
}

// Writes a safetensors file whose tensors are holes, except the scales and the tokenizer.
void write_sparse_safetensors(const fs::path& path, const std::vector<io::TensorSpec>& tensors,
                              const std::string& what) {
  const std::span<const std::byte> tokenizer = wan::demo_tokenizer_model();
  const auto written = [&](std::size_t i) {
    return is_scale(tensors[i]) || tensors[i].name == umt5::kSpieceModelTensor;
  };
  io::write_safetensors(
      path, tensors,
      {{"format", "pt"},
       {"ferry.synthetic", "header only (" + what +
                               "): tensor data are sparse holes, for planning; see ferry-cli "
                               "synth --set"}},
      [&](std::size_t i, std::uint64_t offset, std::span<std::byte> out) {
        if (is_scale(tensors[i])) {
          std::memcpy(out.data(), &kFp8Scale, sizeof kFp8Scale);
        } else {
          std::memcpy(out.data(), tokenizer.data() + offset, out.size());
        }
      },
      [&](std::size_t i) { return !written(i); });
}

std::vector<io::TensorSpec> dit_specs(const wan::DitConfig& config, Format f) {
  switch (f) {
    case Format::kF16:
      return wan::dit_tensors(config, DType::kF16);
    case Format::kBF16:
      return wan::dit_tensors(config, DType::kBF16);
    case Format::kFp8Scaled:
      return fp8_scaled(wan::dit_tensors(config, DType::kF16), DType::kF16, is_linear_weight);
    case Format::kGgufQ4KM:
    case Format::kGgufQ8_0: {
      std::vector<io::TensorSpec> specs = wan::dit_tensors(config, DType::kBF16);
      for (io::TensorSpec& s : specs) s.dtype = city96_dit_type(s, f);
      return specs;
    }
  }
  throw Error(ErrorCode::kInternal, "synth --set: unknown DiT format");
}

// The file of one diffusion model (or expert: "high" / "low", empty for a single model), relative
// to the set's folder, as its distribution names it (§1.4, §6.5).
fs::path dit_file(const SetKind& k, std::string_view expert) {
  const std::string tag(format_tag(k.dit_format));
  const std::string_view n = k.dit->name;
  if (is_gguf(k.dit_format)) {
    if (n == wan::kTI2V_5B.name)
      return fs::path("diffusion_models") / ("Wan2.2-TI2V-5B-" + tag + ".gguf");
    if (n == wan::kT2V_14B.name)
      return fs::path("diffusion_models") / ("wan2.1-t2v-14b-" + tag + ".gguf");
    const std::string task = n == wan::kI2V_A14B.name ? "I2V" : "T2V";
    const std::string role = expert == "high" ? "HighNoise" : "LowNoise";
    return fs::path("diffusion_models") / role /
           ("Wan2.2-" + task + "-A14B-" + role + "-" + tag + ".gguf");
  }
  if (n == wan::kTI2V_5B.name)
    return fs::path("diffusion_models") / ("wan2.2_ti2v_5B_" + tag + ".safetensors");
  if (n == wan::kT2V_14B.name)
    return fs::path("diffusion_models") / ("wan2.1_t2v_14B_" + tag + ".safetensors");
  const std::string task = n == wan::kI2V_A14B.name ? "i2v" : "t2v";
  return fs::path("diffusion_models") /
         ("wan2.2_" + task + "_" + std::string(expert) + "_noise_14B_" + tag + ".safetensors");
}

void write_dit(const fs::path& path, const wan::DitConfig& config, Format f) {
  fs::create_directories(path.parent_path());
  const std::vector<io::TensorSpec> specs = dit_specs(config, f);
  if (is_gguf(f)) {
    io::write_gguf(path,
                   {{"general.architecture", io::gguf_string("wan")},
                    {"general.quantization_version", io::gguf_uint(io::GgufType::kU32, 2)},
                    {"general.file_type", io::gguf_uint(io::GgufType::kU32, gguf_file_type(f))}},
                   specs, {});
  } else {
    write_sparse_safetensors(path, specs, "Wan DiT " + std::string(config.name));
  }
}

// ---- Text encoder -----------------------------------------------------------------------------

// llama.cpp's use_more_bits (llama-quant.cpp): the first and last eighth of the layers and every
// third one between get the larger type in the _M mixes.
bool use_more_bits(std::int64_t layer, std::int64_t layers) {
  return layer < layers / 8 || layer >= 7 * layers / 8 || (layer - layers / 8) % 3 == 2;
}

// city96's umT5 GGUF (§1.5): llama.cpp's T5-encoder names; its standard LLM mix for Q4_K_M
// (Q4_K, Q6_K for attn_v and ffn_down of the use_more_bits layers; the per-tensor types of the
// real file are unconfirmed) or Q8_0 for every 2-D weight including token_embd; norms and the
// relative-position tables (never quantized) F32.
std::vector<io::TensorSpec> umt5_gguf_specs(const umt5::EncoderConfig& c, Format f) {
  std::vector<io::TensorSpec> specs =
      umt5::encoder_tensor_specs(c, umt5::KeyLayout::kGguf, DType::kF32);
  for (io::TensorSpec& t : specs) {
    if (t.name == "shared.weight") t.name = "token_embd.weight";
    if (t.name == "encoder.final_layer_norm.weight") t.name = "enc.output_norm.weight";
    if (!is_linear_weight(t) || t.name.ends_with("attn_rel_b.weight")) continue;
    if (f == Format::kGgufQ8_0) {
      t.dtype = DType::kQ8_0;
      continue;
    }
    t.dtype = DType::kQ4_K;
    const bool v_or_down = t.name.ends_with("attn_v.weight") || t.name.ends_with("ffn_down.weight");
    if (v_or_down) {
      const std::int64_t layer = std::stoll(t.name.substr(std::strlen("enc.blk.")));
      if (use_more_bits(layer, c.layers)) t.dtype = DType::kQ6_K;
    }
  }
  return specs;
}

// The tokenizer keys of llama.cpp's T5 converter (§1.5), holding the demo's SentencePiece model:
// a real umT5 vocabulary cannot be shipped, and recognising the set needs only that a T5
// tokenizer is there (the embedding keeps its 256 384 rows).
std::vector<io::GgufKeyValue> umt5_gguf_metadata(const umt5::EncoderConfig& c, Format f) {
  const std::span<const std::byte> bytes = wan::demo_tokenizer_model();
  const umt5::UnigramModel model = umt5::parse_unigram_model(bytes, "the demo tokenizer");
  std::vector<std::string> tokens;
  std::vector<double> scores;
  std::vector<std::int64_t> types;
  for (const umt5::UnigramPiece& p : model.pieces) {
    tokens.push_back(p.text);
    scores.push_back(p.score);
    types.push_back(static_cast<std::int64_t>(p.type));
  }
  std::vector<std::int64_t> charsmap;
  for (char ch : model.precompiled_charsmap) charsmap.push_back(static_cast<std::uint8_t>(ch));
  const auto u32 = [](std::uint64_t v) { return io::gguf_uint(io::GgufType::kU32, v); };
  std::vector<io::GgufKeyValue> kv = {
      {"general.architecture", io::gguf_string("t5encoder")},
      {"general.name", io::gguf_string("umt5-xxl-encoder (Ferry synthetic, header only)")},
      {"general.file_type", u32(gguf_file_type(f))},
      {"general.quantization_version", u32(2)},
      {"t5encoder.context_length", u32(512)},
      {"t5encoder.embedding_length", u32(static_cast<std::uint64_t>(c.dim))},
      {"t5encoder.feed_forward_length", u32(static_cast<std::uint64_t>(c.ffn_dim))},
      {"t5encoder.block_count", u32(static_cast<std::uint64_t>(c.layers))},
      {"t5encoder.attention.head_count", u32(static_cast<std::uint64_t>(c.heads))},
      {"t5encoder.attention.key_length", u32(static_cast<std::uint64_t>(c.head_dim))},
      {"t5encoder.attention.value_length", u32(static_cast<std::uint64_t>(c.head_dim))},
      {"t5encoder.attention.layer_norm_epsilon", io::gguf_float(io::GgufType::kF32, 1e-6)},
      {"t5encoder.attention.relative_buckets_count", u32(32)},
      {"tokenizer.ggml.model", io::gguf_string("t5")},
      {"tokenizer.ggml.tokens", io::gguf_string_array(std::move(tokens))},
      {"tokenizer.ggml.scores", io::gguf_float_array(io::GgufType::kF32, std::move(scores))},
      {"tokenizer.ggml.token_type", io::gguf_int_array(io::GgufType::kI32, std::move(types))},
      {"tokenizer.ggml.add_space_prefix",
       io::gguf_uint(io::GgufType::kBool, model.add_dummy_prefix ? 1 : 0)},
      {"tokenizer.ggml.remove_extra_whitespaces",
       io::gguf_uint(io::GgufType::kBool, model.remove_extra_whitespaces ? 1 : 0)},
      {"tokenizer.ggml.precompiled_charsmap",
       io::gguf_int_array(io::GgufType::kU8, std::move(charsmap))},
  };
  const auto add_id = [&](const char* key, std::int32_t id) {
    if (id >= 0) kv.push_back({key, u32(static_cast<std::uint64_t>(id))});
  };
  add_id("tokenizer.ggml.eos_token_id", model.control_id(model.eos_piece));
  add_id("tokenizer.ggml.padding_token_id", model.control_id(model.pad_piece));
  add_id("tokenizer.ggml.unknown_token_id", model.unk_id);
  return kv;
}

bool is_umt5_block_linear(const io::TensorSpec& t) {
  return is_linear_weight(t) && t.name.starts_with("encoder.block.") &&
         t.name.find("relative_attention_bias") == std::string::npos;
}

fs::path text_encoder_file(Format f) {
  const fs::path dir = "text_encoders";
  switch (f) {
    case Format::kGgufQ4KM:
    case Format::kGgufQ8_0:
      return dir / ("umt5-xxl-encoder-" + std::string(format_tag(f)) + ".gguf");
    case Format::kF16:
    case Format::kBF16:
      return dir / "umt5_xxl_fp16.safetensors";
    case Format::kFp8Scaled:
      return dir / "umt5_xxl_fp8_e4m3fn_scaled.safetensors";
  }
  throw Error(ErrorCode::kInternal, "synth --set: unknown text encoder format");
}

// ComfyUI's umT5 files (wan.md §F.2): Hugging Face names, F16 (the fp8 file: its 7 Linears per
// block in F8_E4M3 with a scale each, 168 for 24 blocks), and the tokenizer as `spiece_model`.
void write_text_encoder(const fs::path& path, const umt5::EncoderConfig& c, Format f) {
  fs::create_directories(path.parent_path());
  if (is_gguf(f)) {
    io::write_gguf(path, umt5_gguf_metadata(c, f), umt5_gguf_specs(c, f), {});
    return;
  }
  std::vector<io::TensorSpec> specs =
      umt5::encoder_tensor_specs(c, umt5::KeyLayout::kHuggingFace, DType::kF16);
  if (f == Format::kFp8Scaled) specs = fp8_scaled(specs, DType::kF16, is_umt5_block_linear);
  specs.push_back({std::string(umt5::kSpieceModelTensor),
                   DType::kU8,
                   {static_cast<std::uint64_t>(wan::demo_tokenizer_model().size())}});
  write_sparse_safetensors(path, specs, "umT5-XXL encoder");
}

// ---- VAE and start images ---------------------------------------------------------------------

fs::path vae_file(wan::VaeKind kind) {
  return fs::path("vae") /
         (kind == wan::VaeKind::kWan22 ? "wan2.2_vae.safetensors" : "wan_2.1_vae.safetensors");
}

// Without FFmpeg (the mingw lane) there are no images to write, nor to plan with.
bool write_start_image(const fs::path& path, int width, int height) {
#ifndef FERRY_HAVE_FFMPEG
  (void)path, (void)width, (void)height;
  return false;
#else
  media::RgbImage image;
  image.width = width;
  image.height = height;
  image.rgb.assign(static_cast<std::size_t>(width) * static_cast<std::size_t>(height) * 3, 128);
  media::save_png(image, path);
  return true;
#endif
}

// MiniMax-H3 sets: DiffSynth's MiniMax-H3-NF4 files (minimax_h3.md §G.2) or Comfy-Org's
// repackaged ones (§G.3: int8 ConvRot DiT and text encoder, fp16 video VAE, fp32 audio VAE), the
// full or the pruned-AdaLN diffusion model.
struct H3Kind {
  std::string_view name;
  bool pruned;
  bool comfy;
  std::string_view description;
};
constexpr H3Kind kH3Sets[] = {
    {"h3-nf4", false, false, "MiniMax-H3 FL2VA, DiffSynth's MiniMax-H3-NF4 files (full DiT)"},
    {"h3-nf4-pruned", true, false,
     "MiniMax-H3 FL2VA, DiffSynth's MiniMax-H3-NF4 files (pruned-AdaLN DiT)"},
    {"h3-int8", false, true,
     "MiniMax-H3 FL2VA, Comfy-Org's int8 ConvRot files (full DiT) and fp16 / fp32 VAEs"},
    {"h3-int8-pruned", true, true,
     "MiniMax-H3 FL2VA, Comfy-Org's int8 ConvRot files (pruned-AdaLN DiT) and fp16 / fp32 VAEs"},
};

std::string kind_names() {
  std::string names;
  for (const SetKind& k : kSets) names += (names.empty() ? "" : ", ") + std::string(k.name);
  for (const H3Kind& k : kH3Sets) names += ", " + std::string(k.name);
  return names;
}

void report(const fs::path& dir, const fs::path& file) {
  std::printf("  %-64s %10s\n", io::detail::display(file).c_str(),
              human_bytes(fs::file_size(dir / file)).c_str());
}

// An H3 set; `blocks` > 0 keeps that many DiT and video-decoder blocks (the text encoder keeps
// the 50 layers H3 reads: its holes take no disk).
int run_synth_h3_set(const H3Kind& kind, const fs::path& out, std::uint64_t blocks) {
  models::h3::SyntheticShapes shapes;
  shapes.pruned = kind.pruned;
  if (blocks > 0) {
    shapes.dit_layers =
        std::min<std::int64_t>(static_cast<std::int64_t>(blocks), shapes.dit_layers);
    shapes.vae_blocks =
        std::min<std::int64_t>(static_cast<std::int64_t>(blocks), shapes.vae_blocks);
  }
  std::vector<fs::path> files = kind.comfy ? models::h3::write_comfy_header_only_set(out, shapes)
                                           : models::h3::write_header_only_set(out, shapes);
  // Keyframes for `plan --image / --end-image` at the two canvases the front ends use.
  for (const auto& [w, h] : {std::pair{832, 480}, std::pair{1344, 768}}) {
    const fs::path image = "start_" + std::to_string(w) + "x" + std::to_string(h) + ".png";
    if (write_start_image(out / image, w, h)) files.push_back(image);
  }
  std::printf("wrote %s: %s, %lld DiT blocks, header only (tensor data are sparse holes)\n",
              io::detail::display(out).c_str(), std::string(kind.description).c_str(),
              static_cast<long long>(shapes.dit_layers));
  for (const fs::path& f : files) report(out, f);
  return 0;
}

}  // namespace

int run_synth_set(const std::string& kind_name, const fs::path& out, std::uint64_t blocks) {
  for (const H3Kind& k : kH3Sets) {
    if (k.name == kind_name) return run_synth_h3_set(k, out, blocks);
  }
  const SetKind* kind = nullptr;
  for (const SetKind& k : kSets) {
    if (k.name == kind_name) kind = &k;
  }
  if (kind == nullptr) {
    throw Error(ErrorCode::kBadArgument,
                "unknown --set '" + kind_name + "' (" + kind_names() + ")");
  }
  wan::DitConfig config = *kind->dit;
  umt5::EncoderConfig text = umt5::kUmt5Xxl;
  if (blocks > 0) {  // a small set for tests: fewer blocks, every width real
    config.layers = std::min<std::uint64_t>(blocks, config.layers);
    text.layers = std::min<std::int64_t>(static_cast<std::int64_t>(blocks), text.layers);
  }
  const bool experts = config.name == wan::kI2V_A14B.name || config.name == wan::kT2V_A14B.name;
  const wan::VaeKind vae_kind = config.in_dim == 48 ? wan::VaeKind::kWan22 : wan::VaeKind::kWan21;

  std::vector<fs::path> files;
  for (std::string_view expert :
       experts ? std::vector<std::string_view>{"high", "low"} : std::vector<std::string_view>{""}) {
    files.push_back(dit_file(*kind, expert));
    write_dit(out / files.back(), config, kind->dit_format);
  }
  files.push_back(text_encoder_file(kind->text_format));
  write_text_encoder(out / files.back(), text, kind->text_format);
  files.push_back(vae_file(vae_kind));
  fs::create_directories((out / files.back()).parent_path());
  wan::write_header_only_safetensors(out / files.back(),
                                     wan::wan_vae_tensor_specs(vae_kind, DType::kBF16));
  if (config.in_dim == wan::kI2V_A14B.in_dim) {
    for (const auto& [w, h] : {std::pair{832, 480}, std::pair{1280, 720}}) {
      const fs::path image = "start_" + std::to_string(w) + "x" + std::to_string(h) + ".png";
      if (write_start_image(out / image, w, h)) files.push_back(image);
    }
  }

  std::printf("wrote %s: %s, %llu blocks, header only (tensor data are sparse holes)\n",
              io::detail::display(out).c_str(), std::string(kind->description).c_str(),
              static_cast<unsigned long long>(config.layers));
  for (const fs::path& f : files) report(out, f);
  return 0;
}

}  // namespace ferry::cli
