// The umT5 encoder's forward pass (wan.md §A.2–§A.4) on a Backend, its blocks streamed by the
// offload engine. It runs once per prompt: the caller keeps the result (the pipeline caches it per
// prompt), and everything the encoder allocated is freed when encode() returns.
//
// Several prompts (the prompt and the negative prompt) go through each loaded block before it is
// released, so every streamed weight crosses once for all of them. Each prompt runs on its real
// tokens only; the 512-row context the DiT attends to is those rows followed by zero rows (§A.4),
// which the DiT adds. The 256 384 × 4096 embedding table is never loaded: the rows a prompt needs
// are read from the file.
#pragma once

#include <atomic>
#include <cstdint>
#include <span>
#include <vector>

#include "core/backend/backend.h"
#include "core/memory/arena.h"
#include "core/models/umt5/encoder_weights.h"
#include "core/offload/plan.h"
#include "core/offload/streamer.h"

namespace ferry::models::umt5 {

// One prompt's encoder output on the host: `rows` real tokens (EOS included) × `dim`, bf16.
struct TextEmbedding {
  std::int64_t rows = 0;
  std::int64_t dim = 0;
  std::vector<std::uint16_t> bf16;  // row-major bf16 bits

  float at(std::int64_t row, std::int64_t col) const;
};

struct EncodeOptions {
  // How the streamer runs (test hooks, eviction window); `passes` is set to 1 by encode().
  offload::StreamerOptions streamer;
  // Checked before every block; when it reads true, encode() stops and throws Error(kCancelled).
  const std::atomic<bool>* cancel = nullptr;
};

struct EncodeResult {
  std::vector<TextEmbedding> embeddings;  // one per prompt, in order
  offload::StreamStats stream;            // what the streamer moved (the plan overload only)
  std::uint64_t activation_bytes = 0;     // the activation arena's size
  std::uint64_t activation_peak = 0;      // and how much of it was used
};

// Encodes every prompt (token ids as the tokenizer gives them: at most 512, EOS last) with the
// encoder in `weights`, placing its blocks as `plan` says (a plan for weights.model_layout()).
// Throws Error: kBadArgument for an empty prompt or one longer than 512 ids; kBadModelFile for an
// id outside the embedding table (the tokenizer does not belong to this encoder); kCancelled;
// kIo / kOutOfMemory from the streamer or the backend.
EncodeResult encode(Backend& backend, const EncoderWeights& weights, const offload::Plan& plan,
                    std::span<const std::vector<std::int32_t>> prompts,
                    const EncodeOptions& options = {});

// The same forward on what a stage owns: `weights_source` (one pass over weights.model_layout()) and
// `arena` (at least weights.activation_bytes(prompt_lengths(prompts)) bytes). The pipeline's text
// stage runs this, so the stage — not the encoder — owns the streamer, the arena and the cancel.
EncodeResult encode(Backend& backend, const EncoderWeights& weights,
                    offload::WeightSource& weights_source, memory::Arena& arena,
                    std::span<const std::vector<std::int32_t>> prompts,
                    const std::atomic<bool>* cancel = nullptr);

// Each prompt's token count, for EncoderWeights::activation_bytes.
std::vector<std::int64_t> prompt_lengths(std::span<const std::vector<std::int32_t>> prompts);

}  // namespace ferry::models::umt5
