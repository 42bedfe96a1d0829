#include "core/models/h3/model_set.h"

#include <algorithm>
#include <cctype>
#include <fstream>
#include <map>
#include <optional>
#include <string_view>
#include <utility>

#include "core/error.h"
#include "core/io/bnb4.h"
#include "core/io/detail/os_file.h"
#include "core/io/model_folder.h"
#include "core/io/safetensors.h"
#include "core/io/shape_text.h"
#include "core/models/family.h"

namespace ferry::models::h3 {
namespace {

namespace fs = std::filesystem;
using io::detail::display;

[[noreturn]] void bad(const std::string& message) {
  throw Error(ErrorCode::kBadModelFile, message);
}

std::string lowercase(std::string text) {
  for (char& c : text) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return text;
}

bool has_prefix(const io::TensorSet& set, std::string_view prefix) {
  return std::any_of(
      set.entries().begin(), set.entries().end(),
      [&](const io::TensorSet::Entry& e) { return e.tensor->name.starts_with(prefix); });
}

// ---- Diffusion model (§C.11) ------------------------------------------------------------------

// Some third-party files keep ComfyUI's prefix (DiffSynth's converter strips it).
constexpr std::string_view kComfyPrefix = "model.diffusion_model.";

std::string dit_prefix(const io::TensorSet& set) {
  return set.find(std::string(kComfyPrefix) + "video_patch_proj.weight") != nullptr ||
                 set.find(std::string(kComfyPrefix) + "proj_in.weight") != nullptr
             ? std::string(kComfyPrefix)
             : std::string();
}

std::optional<DitInfo::Keys> dit_keys(const io::TensorSet& set, const std::string& prefix) {
  if (set.find(prefix + "video_patch_proj.weight") != nullptr &&
      set.find(prefix + "blocks.0.attn.qkv_proj.weight") != nullptr) {
    return DitInfo::Keys::kOriginal;
  }
  // diffusers' H3 transformer: the audio projection is what no other diffusers DiT has.
  if (set.find(prefix + "audio_proj_in.weight") != nullptr &&
      set.find(prefix + "transformer_blocks.0.attn.to_q.weight") != nullptr) {
    return DitInfo::Keys::kDiffusers;
  }
  return std::nullopt;
}

// Dimension `axis` of a 2-D tensor of the part.
std::int64_t dim_of(const io::TensorSet& set, const std::string& name, std::size_t axis,
                    std::string_view part) {
  const io::TensorSet::Entry* e = set.find(name);
  if (e == nullptr) {
    throw Error(ErrorCode::kMissingTensor,
                std::string(part) + " " + display(set.path()) + " has no tensor " + name);
  }
  if (e->tensor->shape.size() != 2 || e->tensor->shape[axis] == 0) {
    bad(std::string(part) + " " + display(set.path()) + ": " + name + " is " +
        io::shape_text(e->tensor->shape) + ", not a Linear's [out, in]");
  }
  return static_cast<std::int64_t>(e->tensor->shape[axis]);
}

std::int64_t count_layers(const io::TensorSet& set, const std::string& before,
                          const std::string& after) {
  std::int64_t n = 0;
  while (set.find(before + std::to_string(n) + after) != nullptr) ++n;
  return n;
}

// ---- Storage formats ----------------------------------------------------------------------------

std::string float_name(DType t) {
  switch (t) {
    case DType::kBF16:
      return "bf16";
    case DType::kF16:
      return "fp16";
    case DType::kF32:
      return "fp32";
    default:
      return lowercase(std::string(dtype_name(t)));
  }
}

// How a part's weights are stored: the quantised kinds its Linears use, then the dtype of most of
// the other bytes ("NF4 (double-quantised), bf16 rest"; "bf16"; "int8 ConvRot, bf16 rest").
std::string storage_format(const std::vector<const io::TensorInfo*>& tensors) {
  std::vector<std::string> quantised;
  const auto note = [&](std::string kind) {
    if (std::find(quantised.begin(), quantised.end(), kind) == quantised.end()) {
      quantised.push_back(std::move(kind));
    }
  };
  const bool comfy_quant = std::any_of(tensors.begin(), tensors.end(), [](const io::TensorInfo* t) {
    return t->name.ends_with(".comfy_quant");
  });
  // A set opened whole has its bitsandbytes weights grouped (kBnb4); a header read alone has
  // only their quant-state tensors to show them.
  const bool grouped = std::any_of(tensors.begin(), tensors.end(), [](const io::TensorInfo* t) {
    return t->dtype == DType::kBnb4;
  });
  std::map<DType, std::uint64_t> float_bytes;
  for (const io::TensorInfo* tensor : tensors) {
    const io::TensorInfo& t = *tensor;
    if (!grouped && t.name.ends_with(std::string(io::kBnb4QuantStateMarker) + "nf4")) {
      note("NF4");  // a header read alone: the state's JSON is not parsed
    } else if (t.dtype == DType::kBnb4 && t.bnb4 != nullptr) {
      const std::string kind = t.bnb4->quant_type == "nf4" ? "NF4" : "FP4";
      note(t.bnb4->nested ? kind + " (double-quantised)" : kind);
    } else if (dtype_is_blocked(t.dtype)) {
      note(std::string(dtype_name(t.dtype)));
    } else if (t.dtype == DType::kI8 && t.shape.size() == 2) {
      note(comfy_quant ? "int8 ConvRot" : "int8");
    } else if ((t.dtype == DType::kF8E4M3 || t.dtype == DType::kF8E5M2) && t.shape.size() == 2) {
      note("fp8 (scaled)");
    } else if (t.dtype == DType::kF32 || t.dtype == DType::kF16 || t.dtype == DType::kBF16) {
      // Side tensors (bitsandbytes code books and scales, fp8 scales) do not say the format.
      if (t.name.find(".weight.") == std::string::npos && !t.name.ends_with("_scale") &&
          !t.name.ends_with("scale_weight")) {
        float_bytes[t.dtype] += t.bytes;
      }
    }
  }
  std::string floats;
  std::uint64_t most = 0;
  for (const auto& [dtype, bytes] : float_bytes) {
    if (bytes > most) most = bytes, floats = float_name(dtype);
  }
  std::string text;
  for (const std::string& q : quantised) text += (text.empty() ? "" : ", ") + q;
  if (text.empty()) return floats.empty() ? "no weights" : floats;
  return floats.empty() ? text : text + ", " + floats + " rest";
}

std::string storage_format(const io::TensorSet& set) {
  std::vector<const io::TensorInfo*> tensors;
  for (const io::TensorSet::Entry& e : set.entries()) tensors.push_back(e.tensor);
  return storage_format(tensors);
}

// The header of a safetensors file TensorSet::open refused as a whole, read alone (names,
// dtypes, shapes), or nothing when it cannot be read either.
std::optional<io::SafetensorsHeader> read_header_alone(const fs::path& path) {
  try {
    std::ifstream f(path, std::ios::binary);
    std::error_code ec;
    const std::uint64_t size = fs::file_size(path, ec);
    std::vector<std::byte> bytes(8);
    if (!f || ec || !f.read(reinterpret_cast<char*>(bytes.data()), 8)) return std::nullopt;
    const std::uint64_t length = io::safetensors_header_length(bytes, size, display(path));
    bytes.resize(8 + length);
    if (!f.read(reinterpret_cast<char*>(bytes.data()) + 8, static_cast<std::streamsize>(length))) {
      return std::nullopt;
    }
    return io::parse_safetensors_header(bytes, size, display(path));
  } catch (const Error&) {
    return std::nullopt;
  }
}

// ---- Part recognition ---------------------------------------------------------------------------

enum class Part { kNone, kDit, kTextEncoder, kVideoVae, kAudioVae };

// Qwen3-VL's language model as H3 reads it: Qwen3's q_norm, and either transformers' VL names
// (model.language_model.*) or ComfyUI's names next to the vision tower (visual.*), so that a
// plain Qwen3 text encoder of another model is not taken for H3's.
bool is_text_encoder(const io::TensorSet& set) {
  if (set.find("model.language_model.layers.0.self_attn.q_norm.weight") != nullptr) return true;
  return set.find("model.layers.0.self_attn.q_norm.weight") != nullptr &&
         (has_prefix(set, "visual.") || has_prefix(set, "model.visual."));
}

// The video VAE's ViT decoder (§E.3): transformer blocks after an x_embedder (official and
// DiffSynth names) or a proj_in (diffusers). Wan's VAEs are convolutional throughout.
bool is_video_vae(const io::TensorSet& set) {
  return has_prefix(set, "decoder.transformer_blocks.") &&
         (set.find("decoder.x_embedder.weight") != nullptr ||
          set.find("decoder.proj_in.weight") != nullptr);
}

// The audio VAE (§F): DAC's latent input projection and BigVGAN's first convolution.
bool is_audio_vae(const io::TensorSet& set) {
  return has_prefix(set, "dec_in_proj.") && has_prefix(set, "decoder.conv_pre.");
}

Part classify(const io::TensorSet& set) {
  if (dit_keys(set, dit_prefix(set))) return Part::kDit;
  if (is_text_encoder(set)) return Part::kTextEncoder;
  if (is_video_vae(set)) return Part::kVideoVae;
  if (is_audio_vae(set)) return Part::kAudioVae;
  return Part::kNone;
}

DitInfo read_dit_info(const io::TensorSet& set) {
  DitInfo d;
  d.prefix = dit_prefix(set);
  d.keys = *dit_keys(set, d.prefix);
  const std::string& p = d.prefix;
  constexpr std::string_view kPart = "the H3 diffusion model";
  if (d.keys == DitInfo::Keys::kOriginal) {
    d.hidden = dim_of(set, p + "video_patch_proj.weight", 0, kPart);
    d.heads = dim_of(set, p + "blocks.0.attn.qkv_proj.weight", 0, kPart) / (3 * 128);
    d.ffn_dim = dim_of(set, p + "blocks.0.mlp.fc1.weight", 0, kPart) / 2;
    d.text_dim = dim_of(set, p + "condition_proj.weight", 1, kPart);
    d.latents = dim_of(set, p + "final_layer.video_out.weight", 0, kPart) / 4;
    d.layers = count_layers(set, p + "blocks.", ".attn.qkv_proj.weight");
  } else {
    d.hidden = dim_of(set, p + "proj_in.weight", 0, kPart);
    d.heads = dim_of(set, p + "transformer_blocks.0.attn.to_q.weight", 0, kPart) / 128;
    d.ffn_dim = dim_of(set, p + "transformer_blocks.0.ff.net.0.proj.weight", 0, kPart) / 2;
    d.text_dim = dim_of(set, p + "context_embedder.weight", 1, kPart);
    d.latents = dim_of(set, p + "proj_out.weight", 0, kPart) / 4;
    d.layers = count_layers(set, p + "transformer_blocks.", ".attn.to_q.weight");
  }
  d.pruned = set.find(p + "adaln_t_table") != nullptr;
  d.format = storage_format(set);
  return d;
}

TextEncoderInfo read_text_encoder_info(const io::TensorSet& set) {
  TextEncoderInfo t;
  const bool release = set.find("model.language_model.embed_tokens.weight") != nullptr;
  const std::string p = release ? "model.language_model." : "model.";
  constexpr std::string_view kPart = "the H3 text encoder";
  t.dim = dim_of(set, p + "embed_tokens.weight", 1, kPart);
  const std::int64_t q_rows = dim_of(set, p + "layers.0.self_attn.q_proj.weight", 0, kPart);
  const std::int64_t k_rows = dim_of(set, p + "layers.0.self_attn.k_proj.weight", 0, kPart);
  const io::TensorSet::Entry* q_norm = set.find(p + "layers.0.self_attn.q_norm.weight");
  const std::int64_t head = q_norm != nullptr && q_norm->tensor->shape.size() == 1
                                ? static_cast<std::int64_t>(q_norm->tensor->shape[0])
                                : 0;
  if (head == 0) bad("the H3 text encoder " + display(set.path()) + " has no per-head q_norm");
  t.heads = q_rows / head;
  t.kv_heads = k_rows / head;
  t.file_layers = count_layers(set, p + "layers.", ".self_attn.q_proj.weight");
  t.vision = has_prefix(set, "model.visual.") || has_prefix(set, "visual.");
  t.format = storage_format(set);
  return t;
}

// ---- Choosing among candidates ------------------------------------------------------------------

// The names of a file and of the folders it sits in, up to `levels` up, lowercased (never the
// user's folders above: a test or a user may name those anything).
std::vector<std::string> near_names(const fs::path& path, int levels) {
  std::vector<std::string> names{lowercase(display(path.filename()))};
  fs::path dir = path.parent_path();
  for (int i = 0; i < levels && dir.has_filename(); ++i, dir = dir.parent_path()) {
    names.push_back(lowercase(display(dir.filename())));
  }
  return names;
}

// The release's original partitions (FL2VA/, Ref2VA/) repeat the parts of its diffusers root; the
// deepest part is FL2VA/video_vae/source/model.safetensors.
bool in_partition(const fs::path& path) {
  const std::vector<std::string> names = near_names(path, 3);
  return std::any_of(names.begin() + 1, names.end(),
                     [](const std::string& n) { return n == "fl2va" || n == "ref2va"; });
}

// A Ref2VA diffusion model, by its path (the only difference from FL2VA's; see model_set.h): a
// file named so (DiffSynth, GGUF: *ref2va*), or the release's folders for it (transformer_ref/,
// Ref2VA/transformer/). Folders further up are the user's, named anything.
bool is_ref2va(const fs::path& path) {
  const std::vector<std::string> names = near_names(path, 2);
  return names[0].find("ref2va") != std::string::npos ||
         (names.size() > 1 && names[1] == "transformer_ref") ||
         (names.size() > 2 && names[1] == "transformer" && names[2] == "ref2va");
}

struct Candidate {
  fs::path path;
  io::TensorSet set;
};

// The one candidate for a part: the only one, or the only one outside the release's partitions
// (the others set aside, said in `ignored`). Two that remain are an error.
std::optional<Candidate> choose(std::vector<Candidate>& found, std::string_view part, ModelSet& m) {
  if (found.empty()) return std::nullopt;
  if (found.size() > 1) {
    std::vector<Candidate> kept, partitions;
    for (Candidate& c : found) (in_partition(c.path) ? partitions : kept).push_back(std::move(c));
    if (kept.empty()) {
      kept = std::move(partitions);  // only partitions: they must be one
    } else {
      for (const Candidate& c : partitions) {
        m.ignored.emplace_back(c.path, "the release's original partition; the " +
                                           std::string(part) + " of its diffusers root is used");
      }
    }
    found = std::move(kept);
  }
  if (found.size() > 1) {
    bad("two H3 " + std::string(part) + "s: " + display(found[0].path) + " and " +
        display(found[1].path) + "; point Ferry at a folder (or files) with one of each part");
  }
  return std::move(found.front());
}

// The Qwen2 tokenizer files (tokenizer.json, or vocab.json + merges.txt) of a text encoder: in its
// folder, or a tokenizer/ or processor/ folder there or above, up to the folder the user gave.
fs::path find_tokenizer(const fs::path& text_encoder, const std::vector<fs::path>& roots) {
  std::error_code ec;
  const auto has_tokenizer = [&](const fs::path& dir) {
    return fs::is_regular_file(dir / "tokenizer.json", ec) ||
           (fs::is_regular_file(dir / "vocab.json", ec) &&
            fs::is_regular_file(dir / "merges.txt", ec));
  };
  for (fs::path dir = text_encoder.parent_path(); !dir.empty(); dir = dir.parent_path()) {
    for (const fs::path& candidate : {dir, dir / "tokenizer", dir / "processor"}) {
      if (has_tokenizer(candidate)) return candidate;
    }
    const bool at_root = std::any_of(roots.begin(), roots.end(), [&](const fs::path& r) {
      return fs::equivalent(dir, r, ec) || fs::equivalent(dir, r.parent_path(), ec);
    });
    if (at_root || dir == dir.parent_path()) break;
  }
  return {};
}

// "FL2VA, pruned AdaLN (5376 wide, 50 blocks, 56 heads, original names), NF4 …".
std::string dit_text(const DitInfo& d) {
  return "FL2VA" + std::string(d.pruned ? ", pruned AdaLN" : "") + " (" + std::to_string(d.hidden) +
         " wide, " + std::to_string(d.layers) + " blocks, " + std::to_string(d.heads) + " heads, " +
         (d.keys == DitInfo::Keys::kOriginal ? "original" : "diffusers") + " names), " + d.format;
}

// "Qwen3-VL-32B, 50 of 64 layers, NF4 (double-quantised), bf16 rest, with its vision tower".
std::string text_encoder_text(const TextEncoderInfo& t) {
  // Qwen3-VL-32B has 64 layers; H3 reads the output of the 50th (text_encoder_weights.h).
  const bool qwen32b = t.dim == 5120 && t.heads == 64;
  const std::string layers =
      qwen32b ? "Qwen3-VL-32B, 50 of 64 layers"
              : "Qwen3-VL (" + std::to_string(t.dim) + " wide), 50 of its layers";
  const std::string unread =
      t.file_layers > 50
          ? " (the file's other " + std::to_string(t.file_layers - 50) + " are never read)"
          : std::string();
  return layers + unread + ", " + t.format +
         (t.vision ? ", with its vision tower" : ", no vision tower (no keyframes)");
}

}  // namespace

std::string ModelSet::name() const {
  return dit_info.pruned ? "minimax-h3-fl2va-pruned" : "minimax-h3-fl2va";
}

std::optional<PartSketch> sketch_part(const io::TensorSet& set) {
  PartSketch s;
  try {
    switch (classify(set)) {
      case Part::kDit: {
        const DitInfo d = read_dit_info(set);
        s.role = "diffusion model";
        s.set_name = d.pruned ? "MiniMax-H3 FL2VA (pruned)" : "MiniMax-H3 FL2VA";
        s.description = s.set_name + " diffusion model, " + d.format;
        s.needs = {{"h3/text:" + std::to_string(d.text_dim),
                    "a Qwen3-VL text encoder (" + std::to_string(d.text_dim) + " wide)"},
                   {"h3/video-vae", "the H3 video VAE"},
                   {"h3/audio-vae", "the H3 audio VAE"}};
        if (is_ref2va(set.path())) {
          s.unsupported = "MiniMax-H3's Ref2VA model, which Ferry does not run yet";
        }
        return s;
      }
      case Part::kTextEncoder: {
        const TextEncoderInfo t = read_text_encoder_info(set);
        s.role = "text encoder";
        s.description = "Qwen3-VL text encoder, " + std::to_string(t.dim) + " wide, " + t.format;
        s.provides.push_back("h3/text:" + std::to_string(t.dim));
        return s;
      }
      case Part::kVideoVae:
        s.role = "video VAE";
        s.description = "H3 video VAE, " + storage_format(set);
        s.provides.push_back("h3/video-vae");
        return s;
      case Part::kAudioVae:
        s.role = "audio VAE";
        s.description = "H3 audio VAE, " + storage_format(set);
        s.provides.push_back("h3/audio-vae");
        return s;
      case Part::kNone:
        break;
    }
  } catch (const Error&) {
    // Named like a part but with shapes Ferry does not read: not an H3 part.
  }
  return std::nullopt;
}

std::optional<PartSketch> sketch_unopenable_part(const fs::path& path) {
  const std::optional<io::SafetensorsHeader> header = read_header_alone(path);
  if (!header) return std::nullopt;
  const auto named = [&](std::string_view prefix) {
    return std::any_of(header->tensors.begin(), header->tensors.end(),
                       [&](const io::TensorInfo& t) { return t.name.starts_with(prefix); });
  };
  if (!named("dec_in_proj.") || !named("decoder.conv_pre.")) return std::nullopt;
  std::vector<const io::TensorInfo*> tensors;
  for (const io::TensorInfo& t : header->tensors) tensors.push_back(&t);
  PartSketch s;
  s.role = "audio VAE";
  s.description = "H3 audio VAE, " + storage_format(tensors) + " (header read alone)";
  s.provides.push_back("h3/audio-vae");
  return s;
}

bool is_h3_part(const io::TensorSet& set) {
  return classify(set) != Part::kNone;
}

ModelSet find_model_set(const std::vector<fs::path>& paths, OpenedParts* opened) {
  if (paths.empty()) throw Error(ErrorCode::kBadArgument, "no model folder or files given");
  ModelSet m;
  std::vector<fs::path> sets;
  for (const fs::path& p : paths) {
    std::error_code ec;
    const fs::file_status status = fs::status(p, ec);
    if (!fs::exists(status)) throw Error(ErrorCode::kBadArgument, display(p) + " does not exist");
    if (fs::is_directory(status)) {
      for (fs::path& s : io::find_safetensors_sets(p, &m.pickles)) sets.push_back(std::move(s));
    } else if (io::is_pickle_file(p)) {
      throw io::pickle_refusal(p);
    } else {
      sets.push_back(p);
    }
  }

  std::vector<Candidate> dits, ref2va, text_encoders, video_vaes, audio_vaes;
  std::vector<fs::path> others;
  // Audio VAEs whose header alone could be read (see ModelSet::audio_vae_unopened).
  std::vector<std::pair<fs::path, std::string>> unopened_audio;
  std::uint64_t unopened_audio_bytes = 0;
  std::string unopened_audio_format;
  for (const fs::path& path : sets) {
    io::TensorSet set;
    try {
      set = io::TensorSet::open(path);
    } catch (const Error& e) {
      if (e.code() != ErrorCode::kUnsupported) throw;
      const std::optional<io::SafetensorsHeader> header = read_header_alone(path);
      const auto named = [&](std::string_view prefix) {
        return header &&
               std::any_of(header->tensors.begin(), header->tensors.end(),
                           [&](const io::TensorInfo& t) { return t.name.starts_with(prefix); });
      };
      if (!named("dec_in_proj.") || !named("decoder.conv_pre.")) throw;
      unopened_audio.emplace_back(path, e.what());
      std::vector<const io::TensorInfo*> tensors;
      unopened_audio_bytes = 0;
      for (const io::TensorInfo& t : header->tensors) {
        tensors.push_back(&t);
        unopened_audio_bytes += t.bytes;
      }
      unopened_audio_format = storage_format(tensors);
      continue;
    }
    switch (classify(set)) {
      case Part::kDit:
        (is_ref2va(path) ? ref2va : dits).push_back({path, std::move(set)});
        break;
      case Part::kTextEncoder:
        text_encoders.push_back({path, std::move(set)});
        break;
      case Part::kVideoVae:
        video_vaes.push_back({path, std::move(set)});
        break;
      case Part::kAudioVae:
        audio_vaes.push_back({path, std::move(set)});
        break;
      case Part::kNone:
        others.push_back(path);
        break;
    }
  }
  const std::string where = paths.size() == 1 ? display(paths.front()) : "the files given";
  if (dits.empty() && ref2va.empty() && text_encoders.empty() && video_vaes.empty() &&
      audio_vaes.empty() && unopened_audio.empty()) {
    throw NotThisFamily(
        "no MiniMax-H3 part (diffusion model, Qwen3-VL text encoder, video or "
        "audio VAE) in " +
        where);
  }
  for (const fs::path& p : others) m.ignored.emplace_back(p, "not an H3 part");

  if (dits.empty() && !ref2va.empty()) {
    bad(display(ref2va.front().path) +
        " is MiniMax-H3's Ref2VA model (video from reference images, audio or video), which "
        "Ferry does not run yet: use the FL2VA model (DiffSynth's minimax-h3-fl2va-nf4 or "
        "-pruned-nf4, the release's transformer/ or FL2VA/transformer/) for text, first- or "
        "last-frame to video");
  }
  for (const Candidate& c : ref2va) {
    m.ignored.emplace_back(c.path, "MiniMax-H3's Ref2VA model: not supported yet");
  }

  std::optional<Candidate> dit = choose(dits, "diffusion model", m);
  std::optional<Candidate> text = choose(text_encoders, "text encoder", m);
  std::optional<Candidate> video = choose(video_vaes, "video VAE", m);
  std::optional<Candidate> audio = choose(audio_vaes, "audio VAE", m);
  // What is there, said with what is missing (inspect of one part names it this way).
  if (dit) m.dit = dit->path, m.dit_info = read_dit_info(dit->set);
  if (text) m.text_encoder = text->path, m.text = read_text_encoder_info(text->set);
  if (video) m.video_vae = video->path, m.video_vae_format = storage_format(video->set);
  if (audio) {
    m.audio_vae = audio->path;
    m.audio_vae_format = storage_format(audio->set);
    m.audio_vae_bytes = audio->set.tensor_bytes();
  } else if (unopened_audio.size() > 1) {
    bad("two H3 audio VAEs: " + display(unopened_audio[0].first) + " and " +
        display(unopened_audio[1].first) +
        "; point Ferry at a folder (or files) with one of each part");
  } else if (!unopened_audio.empty()) {
    m.audio_vae = unopened_audio.front().first;
    m.audio_vae_format = unopened_audio_format;
    m.audio_vae_bytes = unopened_audio_bytes;
    m.audio_vae_unopened = unopened_audio.front().second;
  }
  std::string found;
  const auto note = [&](bool present, const std::string& line) {
    if (present) found += (found.empty() ? "; found its " : ", its ") + line;
  };
  note(dit.has_value(), "diffusion model (" + dit_text(m.dit_info) + ")");
  note(text.has_value(), "text encoder (" + text_encoder_text(m.text) + ")");
  note(video.has_value(), "video VAE (" + m.video_vae_format + ")");
  note(!m.audio_vae.empty(), "audio VAE (" + m.audio_vae_format + ")");
  const auto missing = [&](const std::string& what) { bad(what + " in " + where + found); };
  if (!dit) {
    missing(
        "no MiniMax-H3 diffusion model (DiffSynth's minimax-h3-fl2va-nf4 or -pruned-nf4, "
        "Comfy-Org's minimax_h3_fl2va file, or the release's transformer/ folder)");
  }
  if (!text) {
    missing(
        "no H3 text encoder (DiffSynth's minimax-h3-text-encoder-nf4, Comfy-Org's Qwen3-VL file "
        "or the release's text_encoder/ folder)");
  }
  if (!video) {
    missing(
        "no H3 video VAE (DiffSynth's video_vae_nf4, Comfy-Org's minimax_h3_video_vae or the "
        "release's vae/ folder)");
  }
  if (m.audio_vae.empty()) {
    missing(
        "no H3 audio VAE (DiffSynth's audio_vae_nf4, Comfy-Org's minimax_h3_audio_vae or the "
        "release's audio_vae/ folder)");
  }

  if (m.text.dim != m.dit_info.text_dim) {
    bad("the text encoder " + display(m.text_encoder) + " gives " + std::to_string(m.text.dim) +
        "-wide states, but the diffusion model " + display(m.dit) + " reads " +
        std::to_string(m.dit_info.text_dim) + "-wide ones: they are not parts of one model");
  }
  m.tokenizer = find_tokenizer(m.text_encoder, paths);
  if (m.tokenizer.empty()) {
    bad("the H3 text encoder " + display(m.text_encoder) +
        " has no tokenizer: put the release's tokenizer/ folder (vocab.json and merges.txt, or "
        "tokenizer.json; MiniMaxAI/MiniMax-H3) or DiffSynth's processor/ folder next to it");
  }
  if (opened != nullptr) {
    opened->dit = std::move(dit->set);
    opened->text_encoder = std::move(text->set);
    opened->video_vae = std::move(video->set);
    if (audio) opened->audio_vae = std::move(audio->set);
  }
  return m;
}

std::vector<std::string> describe(const ModelSet& set) {
  std::vector<std::string> lines;
  lines.push_back("diffusion model: " + dit_text(set.dit_info) + " in " + display(set.dit));
  lines.push_back("text encoder: " + text_encoder_text(set.text) + " in " +
                  display(set.text_encoder));
  lines.push_back("tokenizer: Qwen2 byte-level BPE in " + display(set.tokenizer));
  lines.push_back("video VAE: MiniMax-H3 (ViT decoder), " + set.video_vae_format + " in " +
                  display(set.video_vae));
  lines.push_back("audio VAE: MiniMax-H3 (DAC + BigVGAN), " + set.audio_vae_format + " in " +
                  display(set.audio_vae) +
                  (set.audio_vae_unopened.empty()
                       ? std::string()
                       : " (recognised from its header; Ferry cannot open it whole yet: " +
                             set.audio_vae_unopened + ")"));
  for (const auto& [path, why] : set.ignored) {
    lines.push_back("ignored (" + why + "): " + display(path));
  }
  for (const auto& p : set.pickles) {
    lines.push_back("skipped (pickle, never loaded): " + display(p));
  }
  return lines;
}

}  // namespace ferry::models::h3
