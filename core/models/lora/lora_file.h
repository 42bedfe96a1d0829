// A LoRA file as runtime (bypass) application needs it (formats_lora_moe.md §4.1–4.3): its
// tensors grouped into one Term per adapted module, whatever key format the trainer wrote
// (official names, diffusers/PEFT `lora_A`/`lora_B`, kohya `lora_unet_*`, `lora_up`/`lora_down`,
// LightX2V's `.diff`/`.diff_b`/`diff_m`, the prefixes of §4.3 step 1), with the scale rule
// applied. Family-independent: which model tensor a Term adapts is the family's business
// (wan/lora_names.h). Only safetensors files are read; a pickle is refused by its content.
//
//   LoraFile lora = open_lora(path);        header validated, nothing else read
//   for (const Term& t : lora.terms) ...    t.down / t.up name tensors of lora.file
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "core/io/tensor_file.h"

namespace ferry::models::lora {

// What a Term adds to its module.
enum class TermKind {
  kLowRank,     // y += s · up · (down · x): up [out, r], down [r, in] (Conv: down [r, in·k])
  kWeightDiff,  // <module>.diff:   <module>.weight += strength · diff (same shape)
  kBiasDiff,    // <module>.diff_b, <module>.lora_B.bias:  <module>.bias += strength · diff
  kModulationDiff,  // blocks.N.diff_m (LightX2V):  blocks.N.modulation += strength · diff
};

// How the module is spelled, which decides how a family resolves it.
enum class KeyStyle {
  kDotted,       // "blocks.0.self_attn.q" (official) or "blocks.0.attn1.to_q" (diffusers)
  kUnderscored,  // kohya / LyCORIS: "blocks_0_self_attn_q" (dots became underscores)
};

struct Term {
  // The module with the file's prefix and the term's suffix removed ("blocks.0.self_attn.q",
  // "blocks_0_self_attn_q", "blocks.0.attn1.to_q", "blocks.0" for a diff_m).
  std::string module;
  KeyStyle style = KeyStyle::kDotted;
  TermKind kind = TermKind::kLowRank;
  // Tensor names in the file. kLowRank: down = A [r, in], up = B [out, r]. The diffs: up is the
  // delta, down is empty.
  std::string down, up;
  std::int64_t rank = 0;     // kLowRank: rows of down; 0 for the diffs
  float alpha_scale = 1.0f;  // kLowRank: alpha / rank when the file has `<module>.alpha`, else 1
  // (a `.scale` key overrides it, as sd.cpp reads it); 1 for the diffs
};

struct LoraFile {
  std::filesystem::path path;
  std::unique_ptr<io::TensorFile> file;  // header validated; the Terms name its tensors
  std::vector<Term> terms;               // in the file's key order of their first tensor
  // Keys that are no part of any Term, verbatim (a trainer's extra state, e.g.
  // `text_encoder.*`): reported by the family with the unmatched modules, never applied.
  std::vector<std::string> ignored;
};

// Error(kBadModelFile) naming the file and the key for: a file that is not safetensors (a
// pickle: "PyTorch pickle files are not loaded; convert it to safetensors"), a bad or truncated
// header (io's own messages), a down without its up or the reverse, a rank that disagrees
// between down and up, an alpha or scale that is not one finite value, a LoRA tensor that is not
// f32/f16/bf16 or not 2-D (a Conv down [r, in, k…] is flattened to [r, in·k…]), an adapter kind
// Ferry does not apply (LoHa `hada_*`, LoKr `lokr_*`, DoRA `dora_scale`, `lora_mid`: named in
// the message), or a file with no Term at all.
LoraFile open_lora(const std::filesystem::path& path);

// The file's shapes of a Term's tensors, flattened as it applies them (a Conv down as 2-D).
// Shapes of the diffs are the delta's, as stored.
std::vector<std::int64_t> down_shape(const LoraFile& lora, const Term& term);
std::vector<std::int64_t> up_shape(const LoraFile& lora, const Term& term);

}  // namespace ferry::models::lora
