// The tensors of H3's conditioner, the Qwen3-VL language model (minimax_h3.md §B.1–B.2, §G), in a
// checkpoint: which key layout the file uses, the configuration its shapes imply, and the layout
// the offload engine plans with. H3 reads hidden_states[50]: the output of the 50th decoder layer,
// before the final norm, so only layers 0–49 are ever read (the release's 64-layer file keeps
// 14 more, its norm and lm_head, all left on disk). Files read:
//   - the MiniMaxAI release (text_encoder/ of the diffusers root, FL2VA/text_encoder/) and
//     transformers' Qwen3VLForConditionalGeneration saves: model.language_model.{embed_tokens,
//     layers.N.{input_layernorm, self_attn.{q,k,v,o}_proj, self_attn.{q,k}_norm,
//     post_attention_layernorm, mlp.{gate,up,down}_proj}}, bf16;
//   - DiffSynth's NF4 file: the same names, layers 0–49, the seven Linears as bitsandbytes NF4
//     (core/io/bnb4.h groups each into a kBnb4 weight; its side tensors travel in the layer's
//     group);
//   - ComfyUI's text-encoder names: model.embed_tokens, model.layers.N.*, float or scaled-fp8
//     Linears (`.weight_scale` / `.scale_weight`). Its int8 ConvRot file is refused (kUnsupported).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "core/io/tensor_set.h"
#include "core/models/weight_scaling.h"
#include "core/offload/layer_group.h"

namespace ferry::models::h3 {

// H3 takes hidden_states[50]: decoder layers 0…49 run, the 50th's output is the conditioning.
inline constexpr std::int64_t kOutputLayer = 50;

struct TextEncoderConfig {
  std::int64_t vocab_rows = 0;   // embedding rows (151 936)
  std::int64_t dim = 0;          // hidden size (5120)
  std::int64_t heads = 0;        // query heads (64)
  std::int64_t kv_heads = 0;     // key/value heads (8), dividing heads
  std::int64_t head_dim = 0;     // 128
  std::int64_t ffn_dim = 0;      // MLP width (25 600)
  std::int64_t file_layers = 0;  // decoder layers the file holds (64 in the release, 50 in NF4)
  std::int64_t layers = kOutputLayer;  // decoder layers run
  // Not in the weights: Qwen3-VL's config.json values (§B.1).
  float rope_theta = 5.0e6f;
  float norm_eps = 1e-6f;
  // Interleaved MRoPE: frequencies given to the t, h and w positions (§B.3).
  std::array<std::int64_t, 3> mrope_section{24, 20, 20};

  std::int64_t q_width() const { return heads * head_dim; }
  std::int64_t kv_width() const { return kv_heads * head_dim; }
};

enum class KeyLayout {
  kRelease,  // model.language_model.* (the release, transformers, DiffSynth's NF4)
  kComfy,    // model.embed_tokens, model.layers.N.*
};

// A decoder layer's tensors, in the order the layer reads them (and its layer group's first
// entries; a quantized Linear's side tensors follow them).
enum LayerTensor : std::size_t {
  kInputNorm,
  kQProj,
  kKProj,
  kVProj,
  kQNorm,
  kKNorm,
  kOProj,
  kPostNorm,
  kGateProj,
  kUpProj,
  kDownProj,
  kLayerTensorCount
};

bool is_linear(LayerTensor t);

class TextEncoderWeights {
 public:
  // Recognises the key layout, infers the configuration from the shapes (heads from q_norm's
  // width) and checks that layers 0…49 are complete. Error(kBadModelFile) when the file is not a
  // Qwen3-VL language model or has fewer than 50 decoder layers; Error(kMissingTensor) naming the
  // first absent tensor; Error(kUnsupported) for a weight type no backend runs (int8 ConvRot).
  // `set` must outlive this. `layers` below 50 runs only the first ones (a benchmark of the real
  // layer shapes with fewer layers of data; the output is then not H3's conditioning).
  static TextEncoderWeights from(const io::TensorSet& set, std::int64_t layers = kOutputLayer);

  const TextEncoderConfig& config() const { return config_; }
  // The MRoPE sections are not in the weights; a caller with the model's config.json sets them.
  void set_mrope_section(const std::array<std::int64_t, 3>& section);
  KeyLayout key_layout() const { return layout_; }
  const io::TensorSet& set() const { return *set_; }

  const io::TensorSet::Entry& embedding() const { return embedding_; }
  const io::TensorSet::Entry& layer_tensor(std::int64_t layer, LayerTensor t) const;
  // What a Linear's weight is multiplied by (fp8 scale, bitsandbytes side tensors), resolved
  // against its layer group's acquired tensors.
  const WeightScalingSource& scaling(std::int64_t layer, LayerTensor t) const;

  // Device memory of one forward over a prompt of `tokens` rows with `vision_rows` injected
  // rows (the DeepStack additions are uploaded one layer at a time), bf16 throughout: exactly
  // what encode() allocates, so its arena peak equals it.
  std::uint64_t activation_bytes(std::int64_t tokens, std::int64_t vision_rows = 0) const;

  // One group per decoder layer run ("layers.N": its tensors in LayerTensor order, then the side
  // tensors of quantized Linears). The embedding table is no group: encode() reads the rows a
  // prompt needs from the file. Activations sized for `tokens` rows, all of them vision rows at
  // worst (kPlanTokens: a 512-token prompt with two 768x1344 keyframes of 1008 tokens each).
  static constexpr std::int64_t kPlanTokens = 512 + 2 * 1008;
  offload::ModelLayout model_layout(std::int64_t tokens = kPlanTokens) const;

 private:
  TextEncoderWeights() = default;

  const io::TensorSet* set_ = nullptr;
  TextEncoderConfig config_;
  KeyLayout layout_ = KeyLayout::kRelease;
  io::TensorSet::Entry embedding_{};
  std::vector<std::array<io::TensorSet::Entry, kLayerTensorCount>> layers_;
  std::vector<offload::LayerGroup> groups_;
  std::vector<std::array<WeightScalingSource, kLayerTensorCount>> scaling_;
};

// The name of a layer tensor in a key layout ("model.language_model.layers.3.mlp.up_proj.weight").
std::string layer_tensor_name(KeyLayout layout, std::int64_t layer, LayerTensor t);
std::string embedding_name(KeyLayout layout);

}  // namespace ferry::models::h3
