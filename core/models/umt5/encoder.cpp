#include "core/models/umt5/encoder.h"

#include <algorithm>
#include <array>
#include <cstddef>
#include <string>

#include "core/backend/cpu/quant_blocks.h"
#include "core/error.h"
#include "core/memory/arena.h"
#include "core/models/umt5/tokenizer.h"
#include "core/tensor/convert.h"

namespace ferry::models::umt5 {
namespace {

using Loaded = offload::LoadedGroup;

// h = E[ids] for every prompt: each needed row copied out of the table's mapping (a fault from a
// truncated file becomes Error(kIo)), converted to bf16, uploaded. The view lives for this call.
void embed(Backend& backend, const EncoderWeights& weights,
           std::span<const std::vector<std::int32_t>> prompts, std::span<const Tensor> hidden) {
  const io::TensorInfo& table = *weights.embedding().tensor;
  const std::int64_t dim = weights.config().dim;
  // A row of a quantized table (city96's Q8_0 token_embd) is whole blocks: decoded on its own.
  const auto row_bytes = static_cast<std::size_t>(
      dtype_storage_bytes(table.dtype, static_cast<std::uint64_t>(dim)));
  const float scale = weights.embedding_scale();
  const io::MappedView view = weights.embedding().file->map(table);
  std::vector<std::byte> stored(row_bytes);
  std::vector<float> row(static_cast<std::size_t>(dim));
  std::vector<std::uint16_t> host;
  for (std::size_t p = 0; p < prompts.size(); ++p) {
    host.resize(prompts[p].size() * static_cast<std::size_t>(dim));
    for (std::size_t i = 0; i < prompts[p].size(); ++i) {
      const auto id = static_cast<std::uint64_t>(prompts[p][i]);
      view.copy_to(id * row_bytes, stored);
      if (dtype_is_blocked(table.dtype)) {
        cpu::dequantize(table.dtype, stored.data(), row.data(), dim);
      } else {
        convert_to_f32(table.dtype, stored.data(), row.data(), row.size());
      }
      if (scale != 1.0f) {
        for (float& x : row) x *= scale;
      }
      convert_from_f32(row.data(), DType::kBF16, host.data() + i * row.size(), row.size());
    }
    backend.upload(hidden[p], host.data());
  }
}

// h += o(attention(rmsnorm(h))) with the block's relative-position bias and no scaling.
void self_attention(Backend& backend, memory::Arena& arena, const EncoderConfig& c, const Loaded& w,
                    std::span<const float> scales, const Tensor& h) {
  const std::size_t mark = arena.mark();
  const std::int64_t len = h.shape[0];
  const Tensor a = arena.allocate(DType::kBF16, Shape{len, c.dim});
  backend.rms_norm(h, w.tensor(kNorm1), kNormEps, a);
  const Tensor q = arena.allocate(DType::kBF16, Shape{len, c.heads, c.head_dim});
  const Tensor k = arena.allocate(DType::kBF16, Shape{len, c.heads, c.head_dim});
  const Tensor v = arena.allocate(DType::kBF16, Shape{len, c.heads, c.head_dim});
  const Shape flat{len, c.inner()};
  backend.linear(a, w.tensor(kAttnQ), nullptr, q.reshaped(flat), scales[kAttnQ]);
  backend.linear(a, w.tensor(kAttnK), nullptr, k.reshaped(flat), scales[kAttnK]);
  backend.linear(a, w.tensor(kAttnV), nullptr, v.reshaped(flat), scales[kAttnV]);
  const Tensor o = arena.allocate(DType::kBF16, Shape{len, c.heads, c.head_dim});
  backend.attention(q, k, v, 1.0f, &w.tensor(kRelativeBias), /*causal=*/false, o);
  const Tensor projected = arena.allocate(DType::kBF16, Shape{len, c.dim});
  backend.linear(o.reshaped(flat), w.tensor(kAttnO), nullptr, projected, scales[kAttnO]);
  backend.gated_add(h, projected, nullptr);
  arena.release_to(mark);
}

// h += fc2(gelu_tanh(gate(rmsnorm(h))) · fc1(rmsnorm(h))).
void feed_forward(Backend& backend, memory::Arena& arena, const EncoderConfig& c, const Loaded& w,
                  std::span<const float> scales, const Tensor& h) {
  const std::size_t mark = arena.mark();
  const std::int64_t len = h.shape[0];
  const Tensor a = arena.allocate(DType::kBF16, Shape{len, c.dim});
  backend.rms_norm(h, w.tensor(kNorm2), kNormEps, a);
  const Tensor gate = arena.allocate(DType::kBF16, Shape{len, c.ffn_dim});
  const Tensor linear = arena.allocate(DType::kBF16, Shape{len, c.ffn_dim});
  backend.linear(a, w.tensor(kFfnGate), nullptr, gate, scales[kFfnGate]);
  backend.gelu_tanh(gate, gate);
  backend.linear(a, w.tensor(kFfnFc1), nullptr, linear, scales[kFfnFc1]);
  backend.mul(gate, linear, gate);
  const Tensor projected = arena.allocate(DType::kBF16, Shape{len, c.dim});
  backend.linear(gate, w.tensor(kFfnFc2), nullptr, projected, scales[kFfnFc2]);
  backend.gated_add(h, projected, nullptr);
  arena.release_to(mark);
}

void check_prompts(const EncoderWeights& weights,
                   std::span<const std::vector<std::int32_t>> prompts) {
  if (prompts.empty()) throw Error(ErrorCode::kBadArgument, "no prompt to encode");
  for (const auto& ids : prompts) {
    if (ids.empty() || ids.size() > kMaxTokens) {
      throw Error(ErrorCode::kBadArgument, "a prompt has " + std::to_string(ids.size()) +
                                               " token ids; the text encoder takes 1 to " +
                                               std::to_string(kMaxTokens));
    }
    for (std::int32_t id : ids) {
      if (id < 0 || id >= weights.config().vocab_rows) {
        throw Error(ErrorCode::kBadModelFile,
                    "token id " + std::to_string(id) + " is outside the text encoder's " +
                        std::to_string(weights.config().vocab_rows) +
                        "-row embedding table: the tokenizer does not belong to " +
                        weights.set().path().string());
      }
    }
  }
}

}  // namespace

float TextEmbedding::at(std::int64_t row, std::int64_t col) const {
  return bf16_to_f32(bf16.at(static_cast<std::size_t>(row * dim + col)));
}

EncodeResult encode(Backend& backend, const EncoderWeights& weights,
                    offload::WeightSource& weights_source, memory::Arena& arena,
                    std::span<const std::vector<std::int32_t>> prompts,
                    const std::atomic<bool>* cancel) {
  check_prompts(weights, prompts);
  const EncoderConfig& c = weights.config();

  std::vector<Tensor> hidden;
  for (const auto& ids : prompts) {
    hidden.push_back(
        arena.allocate(DType::kBF16, Shape{static_cast<std::int64_t>(ids.size()), c.dim}));
  }
  embed(backend, weights, prompts, hidden);

  weights_source.begin_pass();
  for (std::int64_t l = 0; l < c.layers; ++l) {
    // The owner of the weight source stops its reads when the error unwinds past it.
    if (cancel != nullptr && cancel->load()) {
      throw Error(ErrorCode::kCancelled, "text encoding cancelled");
    }
    const auto group = static_cast<std::size_t>(l);
    const Loaded& w = weights_source.acquire(group);
    std::array<float, kBlockTensorCount> scales{};
    for (std::size_t t = 0; t < kBlockTensorCount; ++t) {
      scales[t] = weights.block_scale(l, BlockTensor(t));
    }
    for (const Tensor& h : hidden) {
      self_attention(backend, arena, c, w, scales, h);
      feed_forward(backend, arena, c, w, scales, h);
    }
    weights_source.release(group);
  }

  EncodeResult result;
  const auto final_group = static_cast<std::size_t>(c.layers);
  const Loaded& final_norm = weights_source.acquire(final_group);
  for (const Tensor& h : hidden) {
    const std::size_t mark = arena.mark();
    const Tensor out = arena.allocate(DType::kBF16, h.shape);
    backend.rms_norm(h, final_norm.tensor(std::size_t{0}), kNormEps, out);
    TextEmbedding& e = result.embeddings.emplace_back();
    e.rows = h.shape[0];
    e.dim = c.dim;
    e.bf16.resize(static_cast<std::size_t>(out.numel()));
    backend.download(out, e.bf16.data());
    arena.release_to(mark);
  }
  weights_source.release(final_group);
  result.activation_bytes = arena.capacity();
  result.activation_peak = arena.peak();
  return result;
}

EncodeResult encode(Backend& backend, const EncoderWeights& weights, const offload::Plan& plan,
                    std::span<const std::vector<std::int32_t>> prompts,
                    const EncodeOptions& options) {
  check_prompts(weights, prompts);
  const offload::ModelLayout layout = weights.model_layout();
  const std::uint64_t arena_bytes = weights.activation_bytes(prompt_lengths(prompts));
  const std::unique_ptr<DeviceBuffer> activations =
      backend.allocate(static_cast<std::size_t>(arena_bytes));
  memory::Arena arena(activations->data(), static_cast<std::size_t>(arena_bytes), backend.device());
  offload::StreamerOptions streamer_options = options.streamer;
  streamer_options.passes = 1;
  offload::WeightStreamer streamer(backend, layout, plan, streamer_options);
  EncodeResult result = encode(backend, weights, streamer, arena, prompts, options.cancel);
  result.stream = streamer.stats();
  return result;
}

std::vector<std::int64_t> prompt_lengths(std::span<const std::vector<std::int32_t>> prompts) {
  std::vector<std::int64_t> lengths;
  for (const auto& ids : prompts) lengths.push_back(static_cast<std::int64_t>(ids.size()));
  return lengths;
}

}  // namespace ferry::models::umt5
