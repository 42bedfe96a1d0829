// The Wan DiT forward pass (wan.md §B): latent, timesteps and text contexts in, flow velocity
// out, on any Backend, with the weights delivered group by group by the offload engine's
// WeightStreamer (the layout of dit_model_layout: "embeddings", one group per block, "head").
//
// Numerics follow the official recipe of wan.md §1 op by op: bf16 inputs and outputs for every
// Linear (patch embedding, q/k/v/o, FFN, text MLP), the time MLP, modulation, gated residual adds
// and the whole head in f32, LayerNorms in f32 (block 0's first one rounded to bf16, the dtype of
// its input), q/k RMSNorm rounded to bf16 before the f32 weight, RoPE in f64, attention on bf16
// q/k/v, and an f32 residual stream from block 0's first gated add on.
//
// CFG: one forward runs several contexts (conditional and unconditional) through each block while
// the block is loaded, each in its own residual stream, so every streamed weight crosses once per
// step. Activations come from an Arena sized by dit_activation_bytes, which runs this same
// forward on the shapes-only backend and reports its arena peak; nothing else is allocated once
// the first forward has run (tests/memory/counting counts it on the CPU backend).
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "core/backend/backend.h"
#include "core/io/tensor_set.h"
#include "core/memory/arena.h"
#include "core/models/lora/lora_binding.h"
#include "core/models/wan/dit_layout.h"
#include "core/models/weight_scaling.h"
#include "core/offload/layer_group.h"
#include "core/offload/weight_source.h"

namespace ferry::models::wan {

class WanDit {
 public:
  // `set` holds the checkpoint (official, ComfyUI or diffusers names; f32, bf16, f16, or fp8
  // e4m3 with ComfyUI's per-tensor `<name>.scale_weight`), `layout` is dit_model_layout(set,
  // ...) — the streamer that feeds forward() must be built on the same layout. Reads the fp8
  // scales and allocates the 512-row zero context padding once. Error(kBadModelFile) when a
  // tensor is missing or misshapen.
  //
  // `loras`: runtime LoRA terms bound to the same layout (lora::LoraBinding::bind, which appended
  // their tensors to the groups): each Linear adds its low-rank terms s·B·(A·x) and full weight
  // deltas with Backend::linear_add, and biases, norm weights and modulations their deltas, into
  // a copy (add_scaled): the model's tensors are never written. Error(kBadModelFile) when a term
  // adapts a tensor this forward does not read, or a low-rank term a tensor that is no Linear's.
  WanDit(Backend& backend, const io::TensorSet& set, const offload::ModelLayout& layout,
         std::span<const lora::BoundTerm> loras = {});

  const DitConfig& config() const { return config_; }
  std::int64_t heads() const { return static_cast<std::int64_t>(config_.dim / kDitHeadDim); }

  // One pass of `streamer` (begin_pass, then every group acquired and released in order):
  // velocities[b] = v(latent, timesteps, contexts[b]) for every b.
  //   latent      [C_in, F, H, W] float, H and W even
  //   timesteps   one value for all tokens, or one per token (F·H/2·W/2, tokens ordered
  //               frame, row, column); the time MLP runs once per distinct value
  //   contexts    [L ≤ 512, text_dim] float each (umT5 output rows; padded here with zero rows)
  //   velocities  [C_out, F, H, W] F32 each, as many as contexts
  // Everything lives on this backend's device. chunk_tokens > 0: each block's per-token work
  // runs in chunks of that many tokens (only the self-attention's keys and values are held for
  // all), which bounds the working memory and changes no sum's order, on a GEMM whose order does
  // not depend on the row count. The arena must hold dit_activation_bytes(config, tokens,
  // chunk_tokens, contexts.size(), distinct timesteps); Error(kOutOfMemory) if not.
  void forward(offload::WeightSource& weights, memory::Arena& arena, const Tensor& latent,
               std::span<const float> timesteps, std::span<const Tensor> contexts,
               std::span<const Tensor> velocities, std::int64_t chunk_tokens = 0);

  // The arena bytes of a forward of `config` at `tokens` with `branches` contexts and
  // `distinct_timesteps` timestep values (dit_activation_bytes): the peak of the forward's own
  // code run on the shapes-only backend, with weights that have shapes and no memory.
  // `lora_rank` > 0: with LoRA terms of up to that rank (their scratch; lora_scratch_rank).
  static std::uint64_t measure_activation_bytes(const DitConfig& config, std::int64_t tokens,
                                                std::int64_t chunk_tokens, std::int64_t branches,
                                                std::int64_t distinct_timesteps,
                                                std::int64_t lora_rank = 0);

  // The rank the LoRA scratch of `terms` is sized for: 0 without terms, else the largest rank
  // (at least 1: a LoRA of deltas alone still needs the parameter scratch).
  static std::int64_t lora_scratch_rank(std::span<const lora::BoundTerm> terms);

 private:
  class ShapeOnlyWeights;
  using GroupTensors = std::span<const Tensor>;

  struct Run {  // tokens [begin, end) share distinct timestep `value`
    std::int64_t begin = 0, end = 0, value = 0;
  };
  struct Weights {  // per group: index of each tensor in the group, what scales each weight
    std::vector<int> index;
    std::vector<WeightScalingSource> scaling;
    std::vector<std::vector<lora::BoundTerm>> lora;  // per tensor (index's order): its terms
  };
  // One branch's tensors for a block: the residual stream and the embedded context.
  struct Stream {
    Tensor x;    // F32 [L, D]
    Tensor ctx;  // BF16 [512, D]
  };
  // A block's temporaries, shared by the branches in turn: the self-attention's keys and values
  // of every token, and one chunk's (`rows` tokens) working tensors.
  struct Scratch {
    Tensor k, v;    // BF16 [L, D]
    Tensor a, r;    // F32 [rows, D]: modulated input; q/k RMSNorm output
    Tensor q, o;    // BF16 [rows, D]: queries (and projections' outputs); attention output
    Tensor ck, cv;  // BF16 [512, D]: the context's keys and values
    Tensor cr;      // F32 [512, D]
    Tensor hidden;  // BF16 [rows, F]
  };

  // The shapes-only model of measure_activation_bytes: the tensors in dit_tensors' order, the
  // context padding without memory. `backend` computes nothing.
  WanDit(Backend& backend, const DitConfig& config);

  void plan_timesteps(std::span<const float> timesteps, std::int64_t tokens);
  // The arena bytes forward() checks for, measured once per size and kept (no allocation once
  // the sizes repeat).
  std::uint64_t activation_bytes(std::int64_t tokens, std::int64_t chunk_tokens,
                                 std::int64_t branches, std::int64_t values);
  // One pass over the groups, timesteps planned: what forward() runs, and the estimate too.
  void run_pass(offload::WeightSource& weights, memory::Arena& arena, const Tensor& latent,
                std::span<const Tensor> contexts, std::span<const Tensor> velocities,
                std::int64_t chunk_rows);
  void embed(GroupTensors w, memory::Arena& arena, const Tensor& latent,
             std::span<const Tensor> contexts, std::span<Stream> streams, const Tensor& e,
             const Tensor& e0);
  // One block on one branch, its per-token work in chunks of chunk_rows tokens.
  void block(GroupTensors w, const Weights& ix, bool first, Stream& s, const Scratch& t,
             const Tensor& mod, std::int64_t chunk_rows, const RopeGrid& grid);
  void head(GroupTensors w, memory::Arena& arena, const Tensor& x, const Tensor& hm,
            const Tensor& velocity, const RopeGrid& grid);
  // x = in · (1 + scale) + shift, with the scale and shift rows of each token run's timestep;
  // x and in hold the tokens from `first` on (a chunk).
  void modulate_runs(const Tensor& x, const Tensor& in, const Tensor& table, int scale_row,
                     int shift_row, int rows_per_value, std::int64_t first = 0);
  void gated_add_runs(const Tensor& x, const Tensor& y, const Tensor& table, int gate_row,
                      std::int64_t first = 0);
  const Tensor& tensor(GroupTensors w, const Weights& ix, int i) const;
  // y = x · W[weight]ᵀ + bias[weight + 1] with their LoRA terms (the weight seen as `view` when
  // given: the patch embedding's kernel as a matrix).
  void linear(GroupTensors w, const Weights& ix, int weight, const Tensor& x, const Tensor& y,
              const Tensor* view = nullptr);
  // Tensor i, or with LoRA deltas a copy of it plus them (F32, in scratch `slot` of 2: valid
  // until the next call for the same slot).
  const Tensor& param(GroupTensors w, const Weights& ix, int i, int slot);
  void bind_loras(std::span<const lora::BoundTerm> loras);
  // Weight i's scaling for one call: valid until the next call (a bitsandbytes weight's side
  // tensors are held in bnb4_call_).
  WeightScaling scaling(GroupTensors w, const Weights& ix, int i);

  Backend& backend_;
  DitConfig config_;
  std::size_t groups_ = 0;  // embeddings, blocks, head
  Weights outer_embed_, outer_head_;
  std::vector<Weights> blocks_;
  Bnb4State bnb4_call_;
  // LoRA scratch (lora_rank_ > 0), from the arena for each pass: the low-rank product A·x (rows
  // up to max(tokens, 512) × rank, any float dtype), and two parameter copies with their deltas.
  std::int64_t lora_rank_ = 0;
  Tensor lora_t_, lora_p_;
  std::array<Tensor, 2> lora_param_;
  std::unique_ptr<DeviceBuffer> zeros_memory_;  // [512, text_dim] BF16 zeros: context padding
  Tensor zeros_;

  // Host scratch, reused from call to call (no allocation once sizes repeat).
  std::vector<float> distinct_;
  std::vector<Run> runs_;
  std::vector<float> sinusoid_;
  std::vector<Stream> streams_;
  std::vector<int> patch_order_, unpatch_order_;
  struct Estimate {                    // one size's activation bytes
    std::int64_t tokens = -1, chunk_tokens = 0, branches = 0, values = 0, lora_rank = 0;
    std::uint64_t bytes = 0;
  };
  std::array<Estimate, 4> estimates_{};
  std::size_t next_estimate_ = 0;
};

}  // namespace ferry::models::wan
