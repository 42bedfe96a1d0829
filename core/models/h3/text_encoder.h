// H3's conditioner forward (minimax_h3.md §B.1–B.3): the Qwen3-VL language model's first 50
// decoder layers as a causal prefill on a Backend, the layers streamed by the offload engine, the
// output the hidden state after layer 50 with no final norm ([L, hidden] bf16, as diffusers'
// hidden_states[50]). It runs once per request; everything it allocated is freed when encode()
// returns. The 151 936 x 5120 embedding table is never loaded: the rows a prompt needs are read
// from the file.
//
// Keyframes enter as vision rows: the caller (the vision tower) gives the embeddings that replace
// the table lookup at the <|image_pad|> rows and the DeepStack additions made to those rows after
// decoder layers 0, 1, 2 (§B.4.6), and the prompt's 3-axis positions (mrope.h).
#pragma once

#include <atomic>
#include <cstdint>
#include <vector>

#include "core/backend/backend.h"
#include "core/memory/arena.h"
#include "core/models/h3/mrope.h"
#include "core/models/h3/text_encoder_weights.h"
#include "core/offload/plan.h"
#include "core/offload/streamer.h"

namespace ferry::models::h3 {

// Rows of the prompt whose input is not the embedding table's (the image tokens).
struct VisionRows {
  std::vector<std::int64_t> rows;         // ascending prompt rows
  std::vector<std::uint16_t> embeddings;  // [rows, hidden] bf16 bits: replace the table rows
  // deepstack[k]: [rows, hidden] bf16 bits added to those rows after decoder layer k.
  std::vector<std::vector<std::uint16_t>> deepstack;
};

struct TextEncoderInput {
  std::vector<std::int32_t> ids;
  RopePositions positions;             // empty: text only, 0…L-1 on every axis
  const VisionRows* vision = nullptr;  // none: every row from the table
};

// The conditioning on the host: `rows` × `dim` bf16.
struct TextStates {
  std::int64_t rows = 0;
  std::int64_t dim = 0;
  std::vector<std::uint16_t> bf16;

  float at(std::int64_t row, std::int64_t col) const;
};

struct TextEncodeResult {
  TextStates states;
  offload::StreamStats stream;         // what the streamer moved (the plan overload only)
  std::uint64_t activation_bytes = 0;  // the activation arena's size
  std::uint64_t activation_peak = 0;   // and how much of it was used
};

struct TextEncodeOptions {
  offload::StreamerOptions streamer;  // `passes` is set to 1 by encode()
  const std::atomic<bool>* cancel = nullptr;
};

// Throws Error: kBadArgument for an empty prompt, positions or vision rows that do not match the
// ids; kBadModelFile for an id outside the embedding table (the tokenizer does not belong to the
// encoder); kCancelled; kIo / kOutOfMemory from the streamer or the backend.
TextEncodeResult encode(Backend& backend, const TextEncoderWeights& weights,
                        const offload::Plan& plan, const TextEncoderInput& input,
                        const TextEncodeOptions& options = {});

// The same forward on what a stage owns: `weights_source` (one pass over weights.model_layout())
// and `arena` (at least weights.activation_bytes(L, vision rows) bytes).
TextEncodeResult encode(Backend& backend, const TextEncoderWeights& weights,
                        offload::WeightSource& weights_source, memory::Arena& arena,
                        const TextEncoderInput& input, const std::atomic<bool>* cancel = nullptr);

}  // namespace ferry::models::h3
