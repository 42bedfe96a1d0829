// The umT5 encoder's tensors in a checkpoint (wan.md §A.2, §F.2): which key layout the file uses,
// the configuration its shapes imply, the per-tensor fp8 scales, and the layout the offload engine
// plans with. Three kinds of file are read:
//   - Wan's own (models_t5_umt5-xxl-enc-bf16 converted to safetensors): token_embedding,
//     blocks.N.{norm1, attn.{q,k,v,o}, pos_embedding.embedding, norm2, ffn.{gate.0,fc1,fc2}}, norm;
//   - Hugging Face / diffusers `text_encoder/` and ComfyUI's single files (umt5_xxl_fp16):
//     shared (or encoder.embed_tokens), encoder.block.N.layer.{0,1}.…, encoder.final_layer_norm;
//   - ComfyUI's fp8 files (umt5_xxl_fp8_e4m3fn_scaled): the Hugging Face names, F8_E4M3 weights
//     each with an F32 scalar `<name without .weight>.scale_weight` (the older ComfyUI spelling) or
//     `.weight_scale` (the newer); stored · scale is the weight;
//   - city96's GGUFs (umt5-xxl-encoder-Q8_0.gguf ...): llama.cpp's T5 names, token_embd,
//     enc.blk.N.{attn_norm, attn_q/k/v/o, attn_rel_b, ffn_norm, ffn_gate, ffn_up, ffn_down},
//     enc.output_norm; Linear weights and the embedding in GGUF block types.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "core/io/tensor_set.h"
#include "core/io/safetensors_writer.h"
#include "core/offload/layer_group.h"

namespace ferry::models::umt5 {

struct EncoderConfig {
  std::int64_t vocab_rows = 0;  // embedding rows (umT5-XXL: 256 384)
  std::int64_t dim = 0;         // d_model (4096)
  std::int64_t heads = 0;       // 64
  std::int64_t head_dim = 0;    // d_kv (64)
  std::int64_t ffn_dim = 0;     // d_ff (10240)
  std::int64_t layers = 0;      // 24

  std::int64_t inner() const { return heads * head_dim; }
};

inline constexpr EncoderConfig kUmt5Xxl{256384, 4096, 64, 64, 10240, 24};
// T5 RMSNorm's epsilon (wan.md §A.2).
inline constexpr float kNormEps = 1e-6f;
// Relative-position buckets of the per-layer bias tables.
inline constexpr std::int64_t kRelativeBuckets = 32;

enum class KeyLayout { kOfficial, kHuggingFace, kGguf };

// A block's tensors, in the order the block reads them (and the order of its layer group).
enum BlockTensor : std::size_t {
  kNorm1,
  kAttnQ,
  kAttnK,
  kAttnV,
  kAttnO,
  kRelativeBias,
  kNorm2,
  kFfnGate,  // wi_0, the GELU branch
  kFfnFc1,   // wi_1, the linear branch
  kFfnFc2,   // wo
  kBlockTensorCount
};

class EncoderWeights {
 public:
  // Recognises the key layout and checks that every tensor is present with the shape the
  // configuration implies and a float dtype (F8 only with its scale, scales F32 scalars).
  // Error(kBadModelFile) when the file is not a umT5 encoder, or is one whose tensors disagree;
  // Error(kMissingTensor) naming the first tensor that is absent. `set` must outlive this.
  static EncoderWeights from(const io::TensorSet& set);

  const EncoderConfig& config() const { return config_; }
  KeyLayout key_layout() const { return layout_; }
  const io::TensorSet& set() const { return *set_; }

  const io::TensorSet::Entry& embedding() const { return embedding_; }
  float embedding_scale() const { return embedding_scale_; }
  const io::TensorSet::Entry& final_norm() const { return final_norm_; }
  const io::TensorSet::Entry& block_tensor(std::int64_t layer, BlockTensor t) const;
  // The factor the stored values are multiplied by (1 unless the tensor is scaled fp8).
  float block_scale(std::int64_t layer, BlockTensor t) const;

  // Device memory of one encoder pass over prompts of these lengths (rows): every prompt's
  // hidden state plus the larger sub-layer's scratch at the longest prompt, all bf16.
  std::uint64_t activation_bytes(std::span<const std::int64_t> prompt_lengths) const;

  // One group per block ("blocks.N", tensors in BlockTensor order), then "final_norm", always
  // resident. The embedding table is not a group: encode() reads the rows a prompt needs.
  // Sized for the prompt and the negative prompt at the full 512 tokens each.
  offload::ModelLayout model_layout() const;

 private:
  EncoderWeights() = default;

  const io::TensorSet* set_ = nullptr;
  EncoderConfig config_;
  KeyLayout layout_ = KeyLayout::kOfficial;
  io::TensorSet::Entry embedding_{};
  float embedding_scale_ = 1.0f;
  io::TensorSet::Entry final_norm_{};
  std::vector<std::array<io::TensorSet::Entry, kBlockTensorCount>> blocks_;
  std::vector<std::array<float, kBlockTensorCount>> scales_;
};

// The name a block tensor has in a key layout ("blocks.3.attn.q.weight",
// "encoder.block.3.layer.0.SelfAttention.q.weight").
std::string block_tensor_name(KeyLayout layout, std::int64_t layer, BlockTensor t);

// Every tensor of an encoder of configuration `c` as a checkpoint in `layout` names holds it, in
// `dtype` (the embedding, each block's tensors in BlockTensor order, the final norm), for
// synthetic checkpoints: the demo model, and the full-size umT5-XXL of bench/umt5_stream.
std::vector<io::TensorSpec> encoder_tensor_specs(const EncoderConfig& c, KeyLayout layout,
                                                 DType dtype);

}  // namespace ferry::models::umt5
