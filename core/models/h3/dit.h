// H3's DiT forward (minimax_h3.md §C.4–C.8): one packed sequence (dit_sequence.h) of text,
// keyframe, audio and video rows through the token refiner (text rows), the blocks (full
// attention over every row, AdaLN per row's (timestep, modality)) and the final layer, on a
// Backend, the groups of DitWeights delivered by the offload engine (streamed block by block or
// resident: the same bits either way).
//
// Numerics follow diffusers 0.42.1 with the release's mixed precision (§1): the patch
// projections, the time MLP and the output heads in f32; the text projection, the refiner, every
// block Linear (AdaLN projections included), norms, modulation, residual stream and attention in
// bf16; RoPE angles in f32 from the f64 positions, cos/sin rounded to bf16.
//
// AdaLN: the sinusoid and time MLP run once per forward for the few distinct timesteps (1–4),
// each block's projection then on those rows only ([timesteps, 18·hidden]), never per token; the
// rows a token reads are chosen by runs of equal (timestep, modality). Pruned files take the
// curve table's value for each timestep instead, without SiLU (§C.10).
//
// Per-token work runs in chunks of chunk_tokens rows (the modulated input, the fused QKV output,
// the attention output and the SwiGLU hidden): q, k and v are kept for every row, the rest is
// chunk-sized. Chunking changes no sum's order.
#pragma once

#include <atomic>
#include <cstdint>
#include <span>
#include <vector>

#include "core/backend/backend.h"
#include "core/memory/arena.h"
#include "core/models/h3/dit_sequence.h"
#include "core/models/h3/dit_weights.h"
#include "core/models/lora/lora_binding.h"
#include "core/offload/plan.h"
#include "core/offload/streamer.h"
#include "core/offload/weight_source.h"

namespace ferry::models::h3::dit {

// One forward's inputs on the host, in diffusers' row orders.
struct DitInput {
  const PackedSequence* sequence = nullptr;
  const RowTimesteps* timesteps = nullptr;
  std::span<const float> video;         // [keyframe rows + target rows, patch_dim] f32
  std::span<const float> audio;         // [2A, audio_channels] f32
  std::span<const std::uint16_t> text;  // [L, text_dim] bf16 bits (the conditioner's rows)
  // Runtime LoRA terms bound to the weights' groups (bind_dit_loras, dit_loras.h), applied in
  // bypass form, y = W·x + s·B·(A·x), the model's tensors never written: A·x rounded to y's dtype
  // (as the base product's x is), s·B·t added to y's f32 accumulator (Backend::linear_add). Terms
  // on the QKV and fc1 Linears are added after the model's split, each third or half of their
  // rows to q, k, v or gate, value as their LoraRows say (lora_names.h). The arena then holds
  // their scratch (activation_bytes with lora_scratch_rank(loras)).
  std::span<const lora::BoundTerm> loras;
};

// The velocities (data-ward: x0 = x_t + σ·v) of the video rows (keyframe rows first, which
// callers ignore) and the audio rows, f32.
struct DitOutput {
  std::vector<float> video;  // [keyframe + target rows, patch_dim]
  std::vector<float> audio;  // [2A, audio_channels]
  offload::StreamStats stream;
  std::uint64_t activation_bytes = 0;
  std::uint64_t activation_peak = 0;
};

// One pass over `weights_source` (built on weights' groups) with activations from `arena` (at
// least weights.activation_bytes(S, L, chunk_tokens, timesteps)). Error(kBadArgument) when the
// inputs do not match the sequence or the model; kCancelled; kIo / kOutOfMemory from below.
DitOutput dit_forward(Backend& backend, const DitWeights& weights,
                      offload::WeightSource& weights_source, memory::Arena& arena,
                      const DitInput& input, std::int64_t chunk_tokens = 0,
                      const std::atomic<bool>* cancel = nullptr);

struct DitForwardOptions {
  std::int64_t chunk_tokens = 0;      // 0: every row at once
  offload::StreamerOptions streamer;  // `passes` is set to 1
  const std::atomic<bool>* cancel = nullptr;
  // The weights' layout with the input's LoRA terms bound to it (bind_dit_loras); nullptr: the
  // weights' own (DitWeights::model_layout).
  const offload::ModelLayout* layout = nullptr;
};

// The same with a streamer of its own under `plan` and an arena of exactly the estimate.
DitOutput dit_forward(Backend& backend, const DitWeights& weights, const offload::Plan& plan,
                      const DitInput& input, const DitForwardOptions& options = {});

// The rank the LoRA scratch is sized for: the largest term's (0 without terms).
std::int64_t lora_scratch_rank(std::span<const lora::BoundTerm> terms);

// The f32 sinusoid of diffusers' Timesteps(flip_sin_to_cos=True, shift 0) for t in [0, 1]
// (unscaled): [cos(t·f_k) | sin(t·f_k)], f_k = exp(−ln(10000)·k/(width/2)).
std::vector<float> timestep_sinusoid(std::span<const float> timesteps, std::int64_t width);
// The pruned files' time value: lerp(T[i0], T[i0 + 1], p − i0), p = clamp(t, 0, 1)·(rows − 1),
// i0 = min(⌊p⌋, rows − 2), f32; `table` is [rows, width].
std::vector<float> curve_time(std::span<const float> timesteps, std::span<const float> table,
                              std::int64_t width);
// The rotary tables of the packed sequence (§C.4): per row the angles [t·inv | h·inv | w·inv] of
// the f32 positions, inv_i = 1/θ^(i/n) for n = rope_freq_dim frequencies; cos and sin as bf16
// bits, [rows, 3n] each (Backend::rope_halves on the first 6n dims).
struct DitRopeTables {
  std::vector<std::uint16_t> cos, sin;
};
DitRopeTables dit_rope_tables(const PackedSequence& sequence, std::int64_t rope_freq_dim,
                              float theta);

}  // namespace ferry::models::h3::dit
