// Which tensor of H3's DiT a LoRA term adapts, and how its rows map onto that tensor's outputs
// (formats_lora_moe.md §4.3; minimax_h3.md §C.9, §C.11; what diffusers 0.42.1's
// _convert_non_diffusers_minimax_h3_lora_to_diffusers accepts). Every producer names the modules
// of one of two spellings, with any prefix open_lora strips (lightx2v/ai-toolkit's
// "diffusion_model.", ComfyUI's "model.diffusion_model.", diffusers' "transformer.", peft's
// "base_model.model.") or musubi-tuner's flattened "lora_unet_":
//   - the original checkpoint's: blocks.i.attn.qkv_proj (fused), .attn.out_proj, .mlp.fc1
//     ([gate; value]), .mlp.fc2, .adaln_proj.linear, token_refiner.blocks.j.*, video_patch_proj,
//     audio_patch_proj, condition_proj, time_embedder.proj_{in,out}, final_layer.{adaln_proj.
//     linear, video_out, audio_out};
//   - diffusers': transformer_blocks.i.attn.to_{q,k,v}, .attn.to_out.0, .ff.net.0.proj ([value;
//     gate]), .ff.net.2, token_refiner.refiner_blocks.j.*, proj_in, audio_proj_in,
//     context_embedder, time_embedder.linear_{1,2}, norm_out.linear, proj_out, audio_proj_out.
// A fused qkv_proj term's up rows are stacked [q|k|v] (every producer but one), or per-head
// interleaved [heads][q,k,v][head_dim] when its keys carry peft's ".default." infix (DiffSynth
// trains on the raw checkpoint's interleaved QKV). The model may hold any of the three QKV
// layouts and either fc1 order (dit_weights.h): the term is bound to the tensor the model has
// and tagged with its own row layout (LoraRows), which the forward maps (dit.h).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <unordered_map>

#include "core/models/h3/dit_weights.h"
#include "core/models/lora/lora_binding.h"
#include "core/models/lora/lora_file.h"

namespace ferry::models::h3 {

// How a term's up rows map onto the outputs of the tensor it is bound to (BoundTerm::rows).
enum class LoraRows : int {
  kSame = 0,        // one to one
  kQ,               // q's rows only (a diffusers to_q term)
  kK,               // k's
  kV,               // v's
  kQkvStacked,      // [q | k | v], each [heads][head_dim]
  kQkvInterleaved,  // [heads][q, k, v][head_dim] (DiffSynth)
  kFc1GateFirst,    // [gate; value] (original names)
  kFc1ValueFirst,   // [value; gate] (diffusers)
};

// What a module name adapts, whatever the spelling.
struct LoraModule {
  std::int64_t block = -1;  // -1: an outer tensor
  bool refiner = false;
  std::size_t role = 0;  // dit::BlockTensor (kQ for every QKV part) or dit::OuterTensor
  LoraRows rows = LoraRows::kSame;
};

// The alpha MiniMax-H3 LoRAs may record in their safetensors `__metadata__` ("alpha": a number),
// which diffusers' H3 loader reads as the network alpha every module was trained with (each
// scaled by alpha / rank) when the file has no `.alpha` tensors and no PEFT
// `lora_adapter_metadata` (whose own alpha open_lora applies); nullopt otherwise, and for an
// entry that is not a finite number (diffusers ignores it then too).
std::optional<float> network_alpha(const lora::LoraFile& file);

class H3LoraNames {
 public:
  // The modules of `weights`' configuration (its block and refiner counts) in both spellings.
  explicit H3LoraNames(const dit::DitWeights& weights);

  // The tensor of the model's file the term adds to, with the up rows it must have and its
  // LoraRows; nullopt for a term that adapts nothing here (a diff, a norm, a block the model does
  // not have, a text-encoder key): the caller lists those.
  std::optional<lora::TermTarget> target(const lora::Term& term) const;

 private:
  const dit::DitWeights& weights_;
  std::unordered_map<std::string, LoraModule> dotted_;        // both spellings
  std::unordered_map<std::string, std::string> underscored_;  // "blocks_0_attn_qkv_proj" → dotted
};

}  // namespace ferry::models::h3
