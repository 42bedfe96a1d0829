#include "core/models/h3/text_encoder.h"

#include <array>
#include <cmath>
#include <cstddef>
#include <string>

#include "core/error.h"
#include "core/tensor/convert.h"

namespace ferry::models::h3 {
namespace {

using Loaded = offload::LoadedGroup;

// What one decoder layer reads: its acquired tensors and each Linear's scaling.
struct Layer {
  const Loaded& w;
  std::array<WeightScaling, kLayerTensorCount> scaling;
  std::array<Bnb4State, kLayerTensorCount> bnb4;  // what `scaling` points at for NF4 weights
  std::array<ConvRotState, kLayerTensorCount> convrot;  // and for int8 ConvRot weights

  Layer(const TextEncoderWeights& weights, std::int64_t index, const Loaded& group) : w(group) {
    for (std::size_t t = 0; t < kLayerTensorCount; ++t) {
      if (is_linear(LayerTensor(t))) {
        scaling[t] =
            weights.scaling(index, LayerTensor(t)).resolve(group.tensors(), bnb4[t], convrot[t]);
      }
    }
  }
  Layer(const Layer&) = delete;
  Layer& operator=(const Layer&) = delete;

  const Tensor& operator[](LayerTensor t) const { return w.tensor(static_cast<std::size_t>(t)); }
  void linear(Backend& backend, const Tensor& x, LayerTensor t, const Tensor& y) const {
    backend.linear(x, (*this)[t], nullptr, y, scaling[t]);
  }
};

void check_input(const TextEncoderWeights& weights, const TextEncoderInput& input) {
  const TextEncoderConfig& c = weights.config();
  const auto len = static_cast<std::int64_t>(input.ids.size());
  if (len == 0) throw Error(ErrorCode::kBadArgument, "no prompt to encode");
  for (std::int32_t id : input.ids) {
    if (id < 0 || id >= c.vocab_rows) {
      throw Error(ErrorCode::kBadModelFile,
                  "token id " + std::to_string(id) + " is outside the text encoder's " +
                      std::to_string(c.vocab_rows) +
                      "-row embedding table: the tokenizer does not belong to " +
                      weights.set().path().string());
    }
  }
  const RopePositions& p = input.positions;
  if (p.size() != 0 &&
      (p.t.size() != input.ids.size() || p.h.size() != p.t.size() || p.w.size() != p.t.size())) {
    throw Error(ErrorCode::kBadArgument,
                std::to_string(p.t.size()) + " positions for " + std::to_string(len) + " tokens");
  }
  if (input.vision == nullptr) return;
  const VisionRows& v = *input.vision;
  const auto n = static_cast<std::int64_t>(v.rows.size());
  for (std::size_t i = 0; i < v.rows.size(); ++i) {
    if (v.rows[i] < 0 || v.rows[i] >= len || (i > 0 && v.rows[i] <= v.rows[i - 1])) {
      throw Error(ErrorCode::kBadArgument,
                  "vision rows must be ascending rows of the prompt; row " +
                      std::to_string(v.rows[i]) + " of " + std::to_string(len));
    }
  }
  const auto block = static_cast<std::size_t>(n * c.dim);
  if (v.embeddings.size() != block) {
    throw Error(ErrorCode::kBadArgument,
                "vision embeddings hold " + std::to_string(v.embeddings.size()) + " values for " +
                    std::to_string(n) + " rows of " + std::to_string(c.dim));
  }
  if (static_cast<std::int64_t>(v.deepstack.size()) > c.layers) {
    throw Error(ErrorCode::kBadArgument, std::to_string(v.deepstack.size()) +
                                             " DeepStack additions for " +
                                             std::to_string(c.layers) + " layers");
  }
  for (const auto& d : v.deepstack) {
    if (d.size() != block) {
      throw Error(ErrorCode::kBadArgument,
                  "a DeepStack addition holds " + std::to_string(d.size()) + " values for " +
                      std::to_string(n) + " rows of " + std::to_string(c.dim));
    }
  }
}

// h = E[ids] with the vision rows' embeddings in place of theirs: each table row copied out of
// the file's mapping (a fault from a truncated file becomes Error(kIo)), converted to bf16.
void embed(Backend& backend, const TextEncoderWeights& weights, const TextEncoderInput& input,
           const Tensor& hidden) {
  const io::TensorInfo& table = *weights.embedding().tensor;
  const std::int64_t dim = weights.config().dim;
  const auto row_bytes =
      static_cast<std::size_t>(dtype_storage_bytes(table.dtype, static_cast<std::uint64_t>(dim)));
  const io::MappedView view = weights.embedding().file->map(table);
  const VisionRows* vision = input.vision;
  std::vector<std::byte> stored(row_bytes);
  std::vector<float> row(static_cast<std::size_t>(dim));
  std::vector<std::uint16_t> host(input.ids.size() * row.size());
  std::size_t next_vision = 0;
  for (std::size_t i = 0; i < input.ids.size(); ++i) {
    std::uint16_t* out = host.data() + i * row.size();
    if (vision != nullptr && next_vision < vision->rows.size() &&
        vision->rows[next_vision] == static_cast<std::int64_t>(i)) {
      const std::uint16_t* in = vision->embeddings.data() + next_vision * row.size();
      std::copy(in, in + row.size(), out);
      ++next_vision;
      continue;
    }
    view.copy_to(static_cast<std::uint64_t>(input.ids[i]) * row_bytes, stored);
    convert_to_f32(table.dtype, stored.data(), row.data(), row.size());
    convert_from_f32(row.data(), DType::kBF16, out, row.size());
  }
  backend.upload(hidden, host.data());
  backend.synchronize();  // `host` goes when this returns
}

// h += o(attention(rope(k_norm(k(rms(h)))), rope(q_norm(q(rms(h)))), v(rms(h)))), causal.
void self_attention(Backend& backend, memory::Arena& arena, const TextEncoderConfig& c,
                    const Layer& w, const Tensor& cos, const Tensor& sin, const Tensor& h) {
  const std::size_t mark = arena.mark();
  const std::int64_t len = h.shape[0];
  const Tensor a = arena.allocate(DType::kBF16, Shape{len, c.dim});
  backend.rms_norm(h, w[kInputNorm], c.norm_eps, a);
  const Tensor q = arena.allocate(DType::kBF16, Shape{len, c.heads, c.head_dim});
  const Tensor k = arena.allocate(DType::kBF16, Shape{len, c.kv_heads, c.head_dim});
  const Tensor v = arena.allocate(DType::kBF16, Shape{len, c.kv_heads, c.head_dim});
  w.linear(backend, a, kQProj, q.reshaped(Shape{len, c.q_width()}));
  w.linear(backend, a, kKProj, k.reshaped(Shape{len, c.kv_width()}));
  w.linear(backend, a, kVProj, v.reshaped(Shape{len, c.kv_width()}));
  // Per-head RMSNorm over head_dim, in place, then the rotation (§B.2: norm before RoPE).
  const Tensor q_rows = q.reshaped(Shape{len * c.heads, c.head_dim});
  const Tensor k_rows = k.reshaped(Shape{len * c.kv_heads, c.head_dim});
  backend.rms_norm(q_rows, w[kQNorm], c.norm_eps, q_rows);
  backend.rms_norm(k_rows, w[kKNorm], c.norm_eps, k_rows);
  backend.rope_halves(q, cos, sin);
  backend.rope_halves(k, cos, sin);
  const Tensor o = arena.allocate(DType::kBF16, Shape{len, c.heads, c.head_dim});
  const float scale = 1.0f / std::sqrt(static_cast<float>(c.head_dim));
  backend.attention(q, k, v, scale, nullptr, /*causal=*/true, o);
  w.linear(backend, o.reshaped(Shape{len, c.q_width()}), kOProj, a);
  backend.gated_add(h, a, nullptr);
  arena.release_to(mark);
}

// h += down(silu(gate(rms(h))) · up(rms(h))).
void mlp(Backend& backend, memory::Arena& arena, const TextEncoderConfig& c, const Layer& w,
         const Tensor& h) {
  const std::size_t mark = arena.mark();
  const std::int64_t len = h.shape[0];
  const Tensor a = arena.allocate(DType::kBF16, Shape{len, c.dim});
  backend.rms_norm(h, w[kPostNorm], c.norm_eps, a);
  const Tensor gate = arena.allocate(DType::kBF16, Shape{len, c.ffn_dim});
  const Tensor up = arena.allocate(DType::kBF16, Shape{len, c.ffn_dim});
  w.linear(backend, a, kGateProj, gate);
  backend.silu(gate, gate);
  w.linear(backend, a, kUpProj, up);
  backend.mul(gate, up, gate);
  w.linear(backend, gate, kDownProj, a);
  backend.gated_add(h, a, nullptr);
  arena.release_to(mark);
}

// h[rows] += addition, one gated_add per run of consecutive rows.
void add_deepstack(Backend& backend, memory::Arena& arena, const VisionRows& vision,
                   const std::vector<std::uint16_t>& addition, const Tensor& h) {
  const std::size_t mark = arena.mark();
  const auto n = static_cast<std::int64_t>(vision.rows.size());
  const Tensor d = arena.allocate(DType::kBF16, Shape{n, h.shape[1]});
  backend.upload(d, addition.data());
  for (std::int64_t begin = 0; begin < n;) {
    std::int64_t end = begin + 1;
    const auto row = [&](std::int64_t i) { return vision.rows[static_cast<std::size_t>(i)]; };
    while (end < n && row(end) == row(end - 1) + 1) ++end;
    backend.gated_add(h.rows(row(begin), row(end - 1) + 1), d.rows(begin, end), nullptr);
    begin = end;
  }
  // The upload's host bytes are the caller's; the tensor goes back to the arena only once the
  // backend has read them.
  backend.synchronize();
  arena.release_to(mark);
}

}  // namespace

float TextStates::at(std::int64_t row, std::int64_t col) const {
  return bf16_to_f32(bf16.at(static_cast<std::size_t>(row * dim + col)));
}

TextEncodeResult encode(Backend& backend, const TextEncoderWeights& weights,
                        offload::WeightSource& weights_source, memory::Arena& arena,
                        const TextEncoderInput& input, const std::atomic<bool>* cancel) {
  check_input(weights, input);
  const TextEncoderConfig& c = weights.config();
  const auto len = static_cast<std::int64_t>(input.ids.size());

  const Tensor h = arena.allocate(DType::kBF16, Shape{len, c.dim});
  embed(backend, weights, input, h);
  const RopeTables tables =
      rope_tables(input.positions.size() != 0 ? input.positions : text_positions(len), c.head_dim,
                  c.rope_theta, c.mrope_section);
  const Tensor cos = arena.allocate(DType::kBF16, Shape{len, c.head_dim / 2});
  const Tensor sin = arena.allocate(DType::kBF16, Shape{len, c.head_dim / 2});
  backend.upload(cos, tables.cos.data());
  backend.upload(sin, tables.sin.data());

  weights_source.begin_pass();
  for (std::int64_t l = 0; l < c.layers; ++l) {
    // The owner of the weight source stops its reads when the error unwinds past it.
    if (cancel != nullptr && cancel->load()) {
      throw Error(ErrorCode::kCancelled, "text encoding cancelled");
    }
    const auto group = static_cast<std::size_t>(l);
    const Layer w(weights, l, weights_source.acquire(group));
    self_attention(backend, arena, c, w, cos, sin, h);
    mlp(backend, arena, c, w, h);
    weights_source.release(group);
    if (input.vision != nullptr && l < static_cast<std::int64_t>(input.vision->deepstack.size())) {
      add_deepstack(backend, arena, *input.vision,
                    input.vision->deepstack[static_cast<std::size_t>(l)], h);
    }
  }

  TextEncodeResult result;
  result.states.rows = len;
  result.states.dim = c.dim;
  result.states.bf16.resize(static_cast<std::size_t>(h.numel()));
  backend.download(h, result.states.bf16.data());
  result.activation_bytes = arena.capacity();
  result.activation_peak = arena.peak();
  return result;
}

TextEncodeResult encode(Backend& backend, const TextEncoderWeights& weights,
                        const offload::Plan& plan, const TextEncoderInput& input,
                        const TextEncodeOptions& options) {
  check_input(weights, input);
  const offload::ModelLayout layout = weights.model_layout();
  const std::int64_t vision_rows =
      input.vision != nullptr ? static_cast<std::int64_t>(input.vision->rows.size()) : 0;
  const std::uint64_t arena_bytes =
      weights.activation_bytes(static_cast<std::int64_t>(input.ids.size()), vision_rows);
  const std::unique_ptr<DeviceBuffer> activations =
      backend.allocate(static_cast<std::size_t>(arena_bytes));
  memory::Arena arena(activations->data(), static_cast<std::size_t>(arena_bytes), backend.device());
  offload::StreamerOptions streamer_options = options.streamer;
  streamer_options.passes = 1;
  offload::WeightStreamer streamer(backend, layout, plan, streamer_options);
  TextEncodeResult result = encode(backend, weights, streamer, arena, input, options.cancel);
  result.stream = streamer.stats();
  return result;
}

}  // namespace ferry::models::h3
