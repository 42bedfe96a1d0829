#include "core/models/wan/model_set.h"

#include <algorithm>
#include <cctype>
#include <string_view>
#include <utility>

#include "core/error.h"
#include "core/io/detail/os_file.h"
#include "core/io/model_folder.h"
#include "core/io/tensor_set.h"
#include "core/models/umt5/encoder_weights.h"
#include "core/models/umt5/tokenizer.h"
#include "core/models/wan/demo_model.h"

namespace ferry::models::wan {
namespace {

namespace fs = std::filesystem;
using io::detail::display;

enum class Part { kNone, kDit, kTextEncoder, kVae, kPreviewDecoder };

bool ends_with(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

// Which part a set is, from its names alone (the part's own loader validates it afterwards).
Part classify(const io::TensorSet& set) {
  bool patch = false, text = false, vae = false, taehv_in = false, taehv_block = false;
  bool vit_decoder = false;
  for (const auto& e : set.entries()) {
    const std::string_view n = e.tensor->name;
    // MiniMax-H3's video VAE has a Wan-like encoder.conv_in but a ViT decoder: not a Wan VAE.
    vit_decoder |= n.starts_with("decoder.transformer_blocks.");
    patch |= ends_with(n, "patch_embedding.weight");
    // city96's umT5 GGUFs name the embedding token_embd (llama.cpp's T5 names).
    text |= n == "token_embedding.weight" || n == "shared.weight" ||
            n == "encoder.embed_tokens.weight" || n == "token_embd.weight";
    vae |= n == "decoder.conv1.weight" || n == "decoder.conv_in.weight" ||
           n == "encoder.conv1.weight" || n == "encoder.conv_in.weight";
    // TAEHV's decoder: an nn.Sequential, so numbered modules (taehv_weights.h).
    taehv_in |= n == "decoder.1.weight";
    taehv_block |= n == "decoder.3.conv.0.weight";
  }
  if (patch) return Part::kDit;
  if (text) return Part::kTextEncoder;
  if (vae && !vit_decoder) return Part::kVae;
  if (taehv_in && taehv_block) return Part::kPreviewDecoder;
  return Part::kNone;
}

[[noreturn]] void bad(const std::string& message) {
  throw Error(ErrorCode::kBadModelFile, message);
}

void take(fs::path& slot, const fs::path& candidate, const char* part) {
  if (!slot.empty()) {
    bad("two " + std::string(part) + "s: " + display(slot) + " and " + display(candidate) +
        "; point Ferry at a folder (or files) with one of each part");
  }
  slot = candidate;
}

// The tokenizer of a text encoder that does not carry one: a diffusers tokenizer/ folder next
// to its text_encoder/ folder, or a spiece.model in the folder of the file or above it, up to
// the folder the user gave.
fs::path find_tokenizer(const fs::path& text_encoder, const std::vector<fs::path>& roots) {
  std::error_code ec;
  for (fs::path dir = text_encoder.parent_path(); !dir.empty(); dir = dir.parent_path()) {
    for (const fs::path& candidate :
         {dir / umt5::kSpieceModelFile, dir / "tokenizer" / umt5::kSpieceModelFile}) {
      if (fs::is_regular_file(candidate, ec)) return candidate;
    }
    const bool at_root = std::any_of(roots.begin(), roots.end(),
                                     [&](const fs::path& r) { return fs::equivalent(dir, r, ec); });
    if (at_root || dir == dir.parent_path()) break;
  }
  return {};
}

std::string lowercase(std::string text) {
  for (char& c : text) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return text;
}

bool mentions(const std::string& lowered, std::string_view a, std::string_view b) {
  return lowered.find(a) != std::string::npos || lowered.find(b) != std::string::npos;
}

// The diffusion models found, sorted into the set's experts: one model, or A14B's two.
void assign_experts(ModelSet& m, std::vector<std::pair<fs::path, io::TensorSet>>& dits,
                    OpenedParts* opened) {
  if (dits.empty()) return;
  const auto keep = [opened](io::TensorSet OpenedParts::*slot, io::TensorSet& set) {
    if (opened != nullptr) opened->*slot = std::move(set);
  };
  if (dits.size() > 2) {
    bad("three or more diffusion models: " + display(dits[0].first) + ", " +
        display(dits[1].first) + ", " + display(dits[2].first) +
        "; point Ferry at a folder (or files) with one model (two for Wan 2.2 A14B's experts)");
  }
  if (dits.size() == 1) {
    const ExpertRole role = expert_role(dits[0].first);
    if (role != ExpertRole::kUnknown) {
      const bool high = role == ExpertRole::kHighNoise;
      bad(display(dits[0].first) + " is Wan 2.2 A14B's " + (high ? "high" : "low") +
          "-noise expert, but its " + (high ? "low" : "high") +
          "-noise expert is missing: A14B needs both (they sit side by side: " +
          (high ? "low_noise_model/, transformer_2/ or a *low_noise* file"
                : "high_noise_model/, transformer/ or a *high_noise* file") +
          ")");
    }
    m.dit = dits[0].first;
    m.dit_config = infer_dit_config(dits[0].second);
    keep(&OpenedParts::dit, dits[0].second);
    return;
  }
  ExpertRole roles[2] = {expert_role(dits[0].first), expert_role(dits[1].first)};
  if (roles[0] == roles[1] || roles[0] == ExpertRole::kUnknown ||
      roles[1] == ExpertRole::kUnknown) {
    bad("two diffusion models: " + display(dits[0].first) + " and " + display(dits[1].first) +
        "; two are only used as Wan 2.2 A14B's experts, named as distributed (high_noise_model/ "
        "and low_noise_model/, transformer/ and transformer_2/, or *high_noise* and *low_noise* "
        "files); otherwise point Ferry at one");
  }
  const std::size_t high = roles[0] == ExpertRole::kHighNoise ? 0 : 1;
  m.dit = dits[high].first;
  m.low_noise_dit = dits[1 - high].first;
  m.dit_config = infer_dit_config(dits[high].second);
  const DitConfig low = infer_dit_config(dits[1 - high].second);
  const DitConfig& c = m.dit_config;
  if (low.dim != c.dim || low.ffn_dim != c.ffn_dim || low.layers != c.layers ||
      low.in_dim != c.in_dim || low.out_dim != c.out_dim || low.text_dim != c.text_dim) {
    bad("the experts disagree: the high-noise expert " + display(m.dit) + " is " +
        std::to_string(c.dim) + " wide with " + std::to_string(c.layers) + " blocks and " +
        std::to_string(c.in_dim) + " input channels, the low-noise expert " +
        display(m.low_noise_dit) + " " + std::to_string(low.dim) + " wide with " +
        std::to_string(low.layers) + " blocks and " + std::to_string(low.in_dim) +
        " (a T2V and an I2V expert, or experts of two model sizes)");
  }
  m.dit_config.name = c.in_dim == kI2V_A14B.in_dim ? kI2V_A14B.name : kT2V_A14B.name;
  keep(&OpenedParts::dit, dits[high].second);
  keep(&OpenedParts::low_noise_dit, dits[1 - high].second);
}

// Wan 2.1's image-to-video and first-last-frame models condition on CLIP image features
// (img_emb, k_img), which Ferry does not compute.
bool has_clip_conditioning(const io::TensorSet& set) {
  for (const auto& e : set.entries()) {
    if (e.tensor->name.find("img_emb.") != std::string::npos) return true;
  }
  return false;
}

// The preview decoder for the DiT's latent channels: one found among the sets, else the
// published file name next to the diffusion model (or in the folder above a diffusers
// transformer/). A decoder for the other latent space, or a second one, is ignored (listed): a
// preview is optional and never stops a generation.
void choose_preview_decoder(ModelSet& m, std::vector<std::pair<fs::path, io::TensorSet>>& found,
                            OpenedParts* opened) {
  const auto channels = [](const io::TensorSet& set) -> std::uint64_t {
    const io::TensorSet::Entry* e = set.find("decoder.1.weight");
    return e != nullptr && e->tensor->shape.size() == 4 ? e->tensor->shape[1] : 0;
  };
  const std::uint64_t wanted = m.dit_config.out_dim;
  for (auto& [path, set] : found) {
    if (m.preview_decoder.empty() && channels(set) == wanted) {
      m.preview_decoder = path;
      if (opened != nullptr) opened->preview_decoder = std::move(set);
    } else {
      m.ignored.push_back(path);
    }
  }
  if (!m.preview_decoder.empty()) return;
  const fs::path folder = m.dit.parent_path();
  for (const fs::path& candidate : {folder / preview_decoder_file(wanted),
                                    folder.parent_path() / preview_decoder_file(wanted)}) {
    std::error_code ec;
    if (!fs::is_regular_file(candidate, ec)) continue;
    try {
      io::TensorSet set = io::TensorSet::open(candidate);
      if (classify(set) != Part::kPreviewDecoder || channels(set) != wanted) continue;
      m.preview_decoder = candidate;
      if (opened != nullptr) opened->preview_decoder = std::move(set);
      return;
    } catch (const Error&) {
      m.ignored.push_back(candidate);  // unreadable: listed, and previews stay projections
    }
  }
}

// The name users know a diffusion model by.
std::string set_title(const DitConfig& c, ExpertRole role) {
  if (role != ExpertRole::kUnknown) {
    return c.in_dim == kI2V_A14B.in_dim ? "Wan 2.2 A14B I2V" : "Wan 2.2 A14B T2V";
  }
  const std::string_view name = c.name;
  if (name == kT2V_1_3B.name) return "Wan 2.1 T2V-1.3B";
  if (name == kT2V_14B.name) return "Wan 2.1 T2V-14B";
  if (name == kTI2V_5B.name) return "Wan 2.2 TI2V-5B";
  return "Wan DiT " + std::to_string(c.dim) + " wide, " + std::to_string(c.layers) + " blocks";
}

std::string vae_key(VaeKind kind) {
  return kind == VaeKind::kWan22 ? "wan/vae:wan2.2" : "wan/vae:wan2.1";
}

// An A14B expert's partner: the other expert of the same shape.
std::string expert_key(ExpertRole role, const DitConfig& c) {
  return std::string(role == ExpertRole::kHighNoise ? "wan/expert-high:" : "wan/expert-low:") +
         std::to_string(c.dim) + "x" + std::to_string(c.layers) + "x" + std::to_string(c.in_dim);
}

PartSketch sketch_dit(const io::TensorSet& set) {
  const DitConfig c = infer_dit_config(set);
  const ExpertRole role = expert_role(set.path());
  PartSketch s;
  s.role = "diffusion model";
  s.set_name = set_title(c, role);
  s.description = s.set_name + " diffusion model";
  if (role != ExpertRole::kUnknown) {
    const bool high = role == ExpertRole::kHighNoise;
    s.description += high ? ", high-noise expert" : ", low-noise expert";
    s.provides.push_back(expert_key(role, c));
    const ExpertRole other = high ? ExpertRole::kLowNoise : ExpertRole::kHighNoise;
    s.needs.push_back(
        {expert_key(other, c), high ? "the low-noise expert" : "the high-noise expert"});
  }
  s.needs.push_back({"wan/text:" + std::to_string(c.text_dim),
                     "a umT5 text encoder (" + std::to_string(c.text_dim) + " wide)"});
  const VaeKind vae = c.in_dim == 48 ? VaeKind::kWan22 : VaeKind::kWan21;
  s.needs.push_back({vae_key(vae), "a " + std::string(vae_kind_name(vae))});
  if (has_clip_conditioning(set)) {
    s.unsupported =
        "a Wan 2.1 image-to-video or first-last-frame model, which conditions on CLIP image "
        "features: Ferry does not run those yet";
  }
  return s;
}

}  // namespace

std::optional<PartSketch> sketch_part(const io::TensorSet& set) {
  try {
    switch (classify(set)) {
      case Part::kDit:
        return sketch_dit(set);
      case Part::kTextEncoder: {
        const std::int64_t dim = umt5::EncoderWeights::from(set).config().dim;
        PartSketch s;
        s.role = "text encoder";
        s.description = "umT5 text encoder, " + std::to_string(dim) + " wide";
        s.provides.push_back("wan/text:" + std::to_string(dim));
        return s;
      }
      case Part::kVae: {
        std::vector<std::string_view> names;
        for (const auto& e : set.entries()) names.push_back(e.tensor->name);
        const VaeKind kind = detect_vae_kind(names);
        PartSketch s;
        s.role = "VAE";
        s.description = std::string(vae_kind_name(kind));
        s.provides.push_back(vae_key(kind));
        return s;
      }
      case Part::kPreviewDecoder: {
        PartSketch s;
        s.role = "preview decoder";
        s.description = "TAEHV preview decoder";
        return s;
      }
      case Part::kNone:
        break;
    }
  } catch (const Error&) {
    // Named like a part but not one Ferry reads (a broken layout): not a Wan part.
  }
  return std::nullopt;
}

std::string_view preview_decoder_file(std::uint64_t latent_channels) {
  return latent_channels == 48 ? "taew2_2.safetensors" : "taew2_1.safetensors";
}

ExpertRole expert_role(const fs::path& dit) {
  // The file's name and the folders it sits in, up to two levels (the shard index's folder and
  // a GGUF's HighNoise/ folder).
  const fs::path folder = dit.parent_path();
  const std::string file = lowercase(io::detail::display(dit.filename()));
  const std::string parent = lowercase(io::detail::display(folder.filename()));
  const std::string grandparent = lowercase(io::detail::display(folder.parent_path().filename()));
  for (const std::string& name : {file, parent, grandparent}) {
    const bool high =
        mentions(name, "high_noise", "highnoise") || name.find("high-noise") != std::string::npos;
    const bool low =
        mentions(name, "low_noise", "lownoise") || name.find("low-noise") != std::string::npos;
    if (high != low) return high ? ExpertRole::kHighNoise : ExpertRole::kLowNoise;
  }
  // diffusers: transformer/ is the high-noise expert, transformer_2/ the low-noise one. A lone
  // transformer/ is any diffusers model's, so only transformer_2 says "expert" by itself.
  if (parent == "transformer_2") return ExpertRole::kLowNoise;
  if (parent == "transformer" && fs::exists(folder.parent_path() / "transformer_2")) {
    return ExpertRole::kHighNoise;
  }
  return ExpertRole::kUnknown;
}

ModelSet find_model_set(const std::vector<fs::path>& paths) {
  return find_model_set(paths, nullptr);
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
      throw io::pickle_refusal(p);  // named by the user: say why it is not read
    } else {
      sets.push_back(p);
    }
  }

  std::vector<std::pair<fs::path, io::TensorSet>> dits;
  std::vector<std::pair<fs::path, io::TensorSet>> previews;
  for (const fs::path& path : sets) {
    io::TensorSet set = io::TensorSet::open(path);
    io::TensorSet* keep = nullptr;  // where the caller wants this part's opened set
    switch (classify(set)) {
      case Part::kDit:
        if (has_clip_conditioning(set)) {
          bad(display(path) +
              " is a Wan 2.1 image-to-video or first-last-frame model, which conditions on CLIP "
              "image features: Ferry does not run those yet (Wan 2.2 TI2V-5B and A14B I2V take "
              "a start image without CLIP)");
        }
        dits.emplace_back(path, std::move(set));
        break;
      case Part::kTextEncoder: {
        take(m.text_encoder, path, "text encoder");
        const auto weights = umt5::EncoderWeights::from(set);
        m.text_dim = weights.config().dim;
        const bool embedded = umt5::Tokenizer::in_checkpoint(set);
        if (!embedded) {
          m.tokenizer_model = find_tokenizer(path, paths);
          if (m.tokenizer_model.empty()) {
            bad("the text encoder " + display(path) +
                " has no tokenizer: put its tokenizer/ folder (spiece.model) next to it, or use a "
                "single-file umT5 that carries one (umt5_xxl_fp16, umt5_xxl_fp8_e4m3fn_scaled)");
          }
        }
        if (opened != nullptr) keep = &opened->text_encoder;
        break;
      }
      case Part::kVae: {
        take(m.vae, path, "VAE");
        std::vector<std::string_view> names;
        for (const auto& e : set.entries()) names.push_back(e.tensor->name);
        m.vae_kind = detect_vae_kind(names);
        if (opened != nullptr) keep = &opened->vae;
        break;
      }
      case Part::kPreviewDecoder:
        previews.emplace_back(path, std::move(set));
        break;
      case Part::kNone:
        m.ignored.push_back(path);
        break;
    }
    if (keep != nullptr) *keep = std::move(set);
  }
  assign_experts(m, dits, opened);
  if (!m.dit.empty()) choose_preview_decoder(m, previews, opened);

  const std::string where = paths.size() == 1 ? display(paths.front()) : "the files given";
  if (m.dit.empty()) {
    bad("no Wan diffusion model (a transformer/ folder or a wan2.x_*.safetensors file) in " +
        where);
  }
  if (m.text_encoder.empty()) {
    bad("no umT5 text encoder (a text_encoder/ folder or umt5_xxl_*.safetensors) in " + where);
  }
  if (m.vae.empty()) bad("no Wan VAE (a vae/ folder or wan_2.1_vae / wan2.2_vae) in " + where);

  // The parts must belong together: the VAE's latent channels are the DiT's input channels.
  const VaeKind needed = m.dit_config.in_dim == 48 ? VaeKind::kWan22 : VaeKind::kWan21;
  if (m.vae_kind != needed) {
    bad("the VAE " + display(m.vae) + " is a " + std::string(vae_kind_name(m.vae_kind)) +
        ", but the diffusion model " + std::string(m.dit_config.name) + " (" +
        std::to_string(m.dit_config.out_dim) + "-channel latent) needs a " +
        std::string(vae_kind_name(needed)));
  }
  if (static_cast<std::uint64_t>(m.text_dim) != m.dit_config.text_dim) {
    bad("the text encoder " + display(m.text_encoder) + " gives " + std::to_string(m.text_dim) +
        "-wide embeddings, but the diffusion model reads " + std::to_string(m.dit_config.text_dim) +
        "-wide ones: they are not parts of one model");
  }
  return m;
}

std::vector<std::string> describe(const ModelSet& set) {
  std::vector<std::string> lines;
  const auto& c = set.dit_config;
  const std::string shape = " (" + std::to_string(c.dim) + " wide, " + std::to_string(c.layers) +
                            " blocks, " + std::to_string(c.in_dim) + " latent channels) in ";
  if (set.two_experts()) {
    lines.push_back("diffusion model: " + std::string(c.name) + ", high-noise expert" + shape +
                    display(set.dit));
    lines.push_back("diffusion model: " + std::string(c.name) + ", low-noise expert" + shape +
                    display(set.low_noise_dit));
  } else {
    lines.push_back("diffusion model: " + std::string(c.name) + shape + display(set.dit));
  }
  lines.push_back("text encoder: umT5 (" + std::to_string(set.text_dim) + " wide) in " +
                  display(set.text_encoder));
  lines.push_back("tokenizer: " + (set.tokenizer_embedded()
                                       ? std::string("inside the text encoder file")
                                       : display(set.tokenizer_model)));
  lines.push_back("VAE: " + std::string(vae_kind_name(set.vae_kind)) + " in " + display(set.vae));
  if (!set.preview_decoder.empty()) {
    lines.push_back("preview decoder: TAEHV in " + display(set.preview_decoder));
  } else {
    lines.push_back("preview decoder: none (previews are a colour sketch of the latent; put " +
                    std::string(preview_decoder_file(set.dit_config.out_dim)) +
                    " from github.com/madebyollin/taehv next to the model for real pictures)");
  }
  for (const auto& p : set.ignored) lines.push_back("ignored (not a Wan part): " + display(p));
  for (const auto& p : set.pickles)
    lines.push_back("skipped (pickle, never loaded): " + display(p));
  return lines;
}

bool ModelSet::is_demo() const {
  return dit.filename() == fs::path(DemoModel::kDitFile);
}

}  // namespace ferry::models::wan
