#include "core/models/h3/dit.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <memory>
#include <string>

#include "core/error.h"
#include "core/models/h3/lora_names.h"
#include "core/tensor/convert.h"

namespace ferry::models::h3::dit {
namespace {

// The six modulation vectors of a block's AdaLN row, in diffusers' chunk order.
enum Chunk : std::int64_t { kShift1, kScale1, kGate1, kShift2, kScale2, kGate2, kChunks };

// Rows [begin, end) read AdaLN table row `row` (timestep index · 3 + modality tag; for the final
// layer the timestep index alone).
struct Run {
  std::int64_t begin = 0, end = 0, row = 0;
};

std::vector<Run> runs_of(std::span<const std::int32_t> index, std::span<const std::uint8_t> tags,
                         std::int64_t first, bool by_tag) {
  std::vector<Run> runs;
  for (std::size_t r = static_cast<std::size_t>(first); r < index.size(); ++r) {
    const std::int64_t row = by_tag ? index[r] * DitConfig::kModalityRows + tags[r] : index[r];
    const auto at = static_cast<std::int64_t>(r);
    if (!runs.empty() && runs.back().row == row && runs.back().end == at) {
      runs.back().end = at + 1;
    } else {
      runs.push_back({at, at + 1, row});
    }
  }
  return runs;
}

bool is_outer_linear(OuterTensor t) {
  return t == kVideoInWeight || t == kAudioInWeight || t == kTextInWeight || t == kTime1Weight ||
         t == kTime2Weight || t == kFinalAdaWeight || t == kVideoOutWeight || t == kAudioOutWeight;
}

// A group's LoRA terms by the tensor they adapt (its index in GroupIndex::at).
using GroupLoras = std::vector<std::vector<const lora::BoundTerm*>>;

LoraRows rows_of(const lora::BoundTerm& u) {
  return static_cast<LoraRows>(u.rows);
}

// What a group reads: its acquired tensors by kind and each Linear's scaling.
struct Group {
  std::span<const Tensor> tensors;
  const GroupIndex& index;
  const GroupLoras& loras;
  std::vector<Bnb4State> bnb4;        // what a resolved scaling points at
  std::vector<ConvRotState> convrot;  // (int8 ConvRot weights)

  Group(const offload::LoadedGroup& g, const GroupIndex& ix, const GroupLoras& l)
      : tensors(g.tensors()), index(ix), loras(l), bnb4(ix.at.size()), convrot(ix.at.size()) {}
  bool has(std::size_t t) const { return index.at[t] >= 0; }
  const std::vector<const lora::BoundTerm*>& terms(std::size_t t) const { return loras[t]; }
  const Tensor& operator[](std::size_t t) const {
    return tensors[static_cast<std::size_t>(index.at[t])];
  }
  void linear(Backend& backend, const Tensor& x, std::size_t weight, const Tensor* bias,
              const Tensor& y) {
    const WeightScaling s = index.scaling[weight].resolve(tensors, bnb4[weight], convrot[weight]);
    backend.linear(x, (*this)[weight], bias, y, s);
  }
};

class Forward {
 public:
  Forward(Backend& backend, const DitWeights& weights, memory::Arena& arena, const DitInput& in,
          std::int64_t chunk_tokens)
      : backend_(backend),
        w_(weights),
        c_(weights.config()),
        arena_(arena),
        in_(in),
        s_(*in.sequence),
        chunk_(chunk_tokens),
        loras_(loras_by_group(weights, in.loras)),
        lora_rank_(lora_scratch_rank(in.loras)) {}

  DitOutput run(offload::WeightSource& source, const std::atomic<bool>* cancel);

 private:
  std::int64_t chunk_rows(std::int64_t rows) const {
    return chunk_ > 0 ? std::min(chunk_, rows) : rows;
  }
  static std::vector<GroupLoras> loras_by_group(const DitWeights& w,
                                                std::span<const lora::BoundTerm> terms);
  Group acquire(offload::WeightSource& source, std::size_t group) {
    return Group(source.acquire(group), w_.index(group), loras_[group]);
  }
  // y = x·Wᵀ + bias plus the terms whose rows are the tensor's own.
  void linear(Group& g, const Tensor& x, std::size_t weight, const Tensor* bias, const Tensor& y);
  // t = A·x of a term, rounded to `dtype` (in the LoRA scratch).
  Tensor lora_input(Group& g, const lora::BoundTerm& u, const Tensor& x, DType dtype);
  // The QKV terms added to q, k, v [rows, inner]; the fc1 terms to gate and value.
  void qkv_loras(Group& g, const Tensor& a, const Tensor& q, const Tensor& k, const Tensor& v);
  void fc1_loras(Group& g, const Tensor& a, const Tensor& gate, const Tensor& value);
  void upload_rope();
  void embed(Group& g);
  void time_input(Group& g);
  // One block (modulated, with RoPE) or refiner block (neither) on x's rows.
  void block(Group& g, const Tensor& x, bool modulated);
  void project_qkv(Group& g, const Tensor& a, const Tensor& q, const Tensor& k, const Tensor& v,
                   const Tensor& fused);
  void ffn(Group& g, const Tensor& a, const Tensor& h, const Tensor& gate, const Tensor& value,
           const Tensor& out);
  void modulate(const Tensor& a, const Tensor& table, Chunk scale, Chunk shift, std::int64_t first);
  void gated_add(const Tensor& x, const Tensor& y, const Tensor& table, Chunk gate,
                 std::int64_t first);
  void head(Group& g, DitOutput& out);

  Backend& backend_;
  const DitWeights& w_;
  const DitConfig& c_;
  memory::Arena& arena_;
  const DitInput& in_;
  const PackedSequence& s_;
  std::int64_t chunk_;
  std::vector<GroupLoras> loras_;  // per group
  std::int64_t lora_rank_ = 0;
  Tensor lora_t_, lora_up_;  // A·x; a DiffSynth QKV term's up reordered to stacked
  Tensor x_, cos_, sin_, time_in_;
  std::vector<Run> runs_;  // blocks: by (timestep, modality)
};

std::vector<GroupLoras> Forward::loras_by_group(const DitWeights& w,
                                                std::span<const lora::BoundTerm> terms) {
  std::vector<GroupLoras> out(w.group_count());
  for (std::size_t g = 0; g < out.size(); ++g) out[g].resize(w.index(g).at.size());
  for (const lora::BoundTerm& u : terms) {
    const auto fail = [&](const std::string& why) {
      throw Error(ErrorCode::kBadModelFile, "a LoRA term on group " + std::to_string(u.group) +
                                                ", tensor " + std::to_string(u.target) + " " + why);
    };
    if (u.group >= out.size() || u.kind != lora::TermKind::kLowRank) {
      fail("is not a low-rank term on a Linear of the H3 DiT");
    }
    const std::vector<int>& at = w.index(u.group).at;
    const auto role = std::find(at.begin(), at.end(), static_cast<int>(u.target));
    if (role == at.end()) fail("adapts a tensor the H3 DiT does not read");
    const auto t = static_cast<std::size_t>(role - at.begin());
    const bool outer = u.group == DitWeights::kEmbeddingsGroup || u.group == w.head_group() ||
                       u.group == w.refiner_norm_group();
    const LoraRows rows = rows_of(u);
    const bool qkv = !outer && (t == kQ || t == kK || t == kV);
    const bool fc1 = !outer && t == kFc1;
    const bool fits = qkv   ? rows >= LoraRows::kQ && rows <= LoraRows::kQkvInterleaved
                      : fc1 ? rows == LoraRows::kFc1GateFirst || rows == LoraRows::kFc1ValueFirst
                            : rows == LoraRows::kSame;
    const bool linear = outer ? is_outer_linear(static_cast<OuterTensor>(t))
                              : is_linear(static_cast<BlockTensor>(t));
    if (!linear || !fits) fail("does not fit the Linear it is bound to");
    out[u.group][t].push_back(&u);
  }
  return out;
}

void Forward::linear(Group& g, const Tensor& x, std::size_t weight, const Tensor* bias,
                     const Tensor& y) {
  g.linear(backend_, x, weight, bias, y);
  for (const lora::BoundTerm* u : g.terms(weight)) {
    if (rows_of(*u) != LoraRows::kSame) continue;  // QKV and fc1 terms: after the split
    const Tensor t = lora_input(g, *u, x, y.dtype);
    const Tensor up = g.tensors[u->up].reshaped(Shape{y.shape.cols(), u->rank});
    backend_.linear_add(t, up, y, u->scale);
  }
}

Tensor Forward::lora_input(Group& g, const lora::BoundTerm& u, const Tensor& x, DType dtype) {
  const Tensor t{lora_t_.data, dtype, Shape{x.shape.rows(), u.rank}, lora_t_.device};
  backend_.linear(x, g.tensors[u.down].reshaped(Shape{u.rank, x.shape.cols()}), nullptr, t);
  return t;
}

void Forward::qkv_loras(Group& g, const Tensor& a, const Tensor& q, const Tensor& k,
                        const Tensor& v) {
  const Tensor* parts[3] = {&q, &k, &v};
  const std::int64_t inner = c_.inner();
  for (std::size_t role : {kQ, kK, kV}) {
    for (const lora::BoundTerm* u : g.terms(role)) {
      const Tensor t = lora_input(g, *u, a, q.dtype);
      const Tensor& up = g.tensors[u->up];
      const LoraRows rows = rows_of(*u);
      if (rows == LoraRows::kQ || rows == LoraRows::kK || rows == LoraRows::kV) {
        const auto part = static_cast<std::size_t>(rows) - static_cast<std::size_t>(LoraRows::kQ);
        backend_.linear_add(t, up.reshaped(Shape{inner, u->rank}), *parts[part], u->scale);
        continue;
      }
      Tensor stacked = up.reshaped(Shape{3 * inner, u->rank});
      if (rows == LoraRows::kQkvInterleaved) {
        // [heads][q, k, v][head_dim] rows → [q, k, v][heads][head_dim], in the scratch.
        const std::int64_t row_values = c_.head_dim * u->rank;
        const Tensor order{lora_up_.data, up.dtype, Shape{3, c_.heads, row_values},
                           lora_up_.device};
        backend_.permute(up.reshaped(Shape{c_.heads, 3, row_values}), {1, 0, 2}, order);
        stacked = order.reshaped(Shape{3 * inner, u->rank});
      }
      for (std::size_t i = 0; i < 3; ++i) {
        const auto b = static_cast<std::int64_t>(i) * inner;
        backend_.linear_add(t, stacked.rows(b, b + inner), *parts[i], u->scale);
      }
    }
  }
}

void Forward::fc1_loras(Group& g, const Tensor& a, const Tensor& gate, const Tensor& value) {
  for (const lora::BoundTerm* u : g.terms(kFc1)) {
    const Tensor t = lora_input(g, *u, a, gate.dtype);
    const Tensor up = g.tensors[u->up].reshaped(Shape{2 * c_.ffn, u->rank});
    const bool gate_first = rows_of(*u) == LoraRows::kFc1GateFirst;
    backend_.linear_add(t, up.rows(0, c_.ffn), gate_first ? gate : value, u->scale);
    backend_.linear_add(t, up.rows(c_.ffn, 2 * c_.ffn), gate_first ? value : gate, u->scale);
  }
}

void Forward::upload_rope() {
  const DitRopeTables t = dit_rope_tables(s_, c_.rope_freq_dim, c_.rope_theta);
  const std::int64_t half = c_.rotary_dims() / 2;
  cos_ = arena_.allocate(DType::kBF16, Shape{s_.length(), half});
  sin_ = arena_.allocate(DType::kBF16, Shape{s_.length(), half});
  backend_.upload(cos_, t.cos.data());
  backend_.upload(sin_, t.sin.data());
  backend_.synchronize();
}

// Text rows: context_embedder (bf16) into x's first L rows, where the refiner works in place.
// Video and audio rows: their f32 projections rounded to bf16 into their ranges of x.
void Forward::embed(Group& g) {
  const std::size_t mark = arena_.mark();
  const std::int64_t L = s_.text_rows;
  const Tensor text = arena_.allocate(DType::kBF16, Shape{L, c_.text_dim});
  backend_.upload(text, in_.text.data());
  linear(g, text, kTextInWeight, &g[kTextInBias], x_.rows(0, L));
  backend_.synchronize();
  arena_.release_to(mark);

  const std::int64_t media = s_.length() - L;
  const Tensor rows =
      arena_.allocate(DType::kF32, Shape{media * std::max(c_.patch_dim, c_.audio_channels)});
  const Tensor embeds = arena_.allocate(DType::kF32, Shape{media, c_.hidden});
  const auto project = [&](std::span<const float> host, std::int64_t width, std::size_t weight,
                           std::size_t bias,
                           std::span<const std::pair<std::int64_t, std::int64_t>> ranges) {
    const auto n = static_cast<std::int64_t>(host.size()) / width;
    const Tensor in = Tensor{rows.data, DType::kF32, Shape{n, width}, rows.device};
    backend_.upload(in, host.data());
    const Tensor out = embeds.rows(0, n);
    linear(g, in, weight, &g[bias], out);
    std::int64_t at = 0;
    for (const auto& [begin, end] : ranges) {
      backend_.convert(out.rows(at, at + end - begin), x_.rows(begin, end));
      at += end - begin;
    }
    backend_.synchronize();  // `host` and `rows` are reused
  };
  const std::pair<std::int64_t, std::int64_t> video[] = {{s_.condition_start(), s_.audio_start()},
                                                         {s_.video_start(), s_.length()}};
  project(in_.video, c_.patch_dim, kVideoInWeight, kVideoInBias, video);
  const std::pair<std::int64_t, std::int64_t> audio[] = {{s_.audio_start(), s_.video_start()}};
  project(in_.audio, c_.audio_channels, kAudioInWeight, kAudioInBias, audio);
  arena_.release_to(mark);
}

// time_in_ = silu(time MLP(sinusoid(t))) per distinct timestep (full files), or the curve
// table's value (pruned): what every AdaLN projection takes, f32 [timesteps, time_dim].
void Forward::time_input(Group& g) {
  const std::span<const float> values = in_.timesteps->values;
  const auto n = static_cast<std::int64_t>(values.size());
  if (c_.pruned) {
    const Tensor& table = g[kCurveTable];
    std::vector<float> host(static_cast<std::size_t>(table.numel()));
    std::vector<std::byte> raw(table.bytes());
    backend_.download(table, raw.data());
    convert_to_f32(table.dtype, raw.data(), host.data(), host.size());
    const std::vector<float> t = curve_time(values, host, c_.time_dim);
    backend_.upload(time_in_, t.data());
    backend_.synchronize();
    return;
  }
  const std::size_t mark = arena_.mark();
  const std::vector<float> sinusoid = timestep_sinusoid(values, c_.freq_dim);
  const Tensor s = arena_.allocate(DType::kF32, Shape{n, c_.freq_dim});
  const Tensor h = arena_.allocate(DType::kF32, Shape{n, c_.time_hidden});
  backend_.upload(s, sinusoid.data());
  linear(g, s, kTime1Weight, &g[kTime1Bias], h);
  backend_.silu(h, h);
  linear(g, h, kTime2Weight, &g[kTime2Bias], time_in_);
  backend_.silu(time_in_, time_in_);
  backend_.synchronize();
  arena_.release_to(mark);
}

// a = a · (1 + scale) + shift with each run's table rows; a holds the rows from `first` on.
void Forward::modulate(const Tensor& a, const Tensor& table, Chunk scale, Chunk shift,
                       std::int64_t first) {
  const std::int64_t last = first + a.shape[0];
  for (const Run& r : runs_) {
    const std::int64_t b = std::max(r.begin, first), e = std::min(r.end, last);
    if (b >= e) continue;
    const std::int64_t base = r.row * kChunks;
    backend_.modulate(a.rows(b - first, e - first), table.rows(base + scale, base + scale + 1),
                      table.rows(base + shift, base + shift + 1), a.rows(b - first, e - first));
  }
}

void Forward::gated_add(const Tensor& x, const Tensor& y, const Tensor& table, Chunk gate,
                        std::int64_t first) {
  const std::int64_t last = first + y.shape[0];
  for (const Run& r : runs_) {
    const std::int64_t b = std::max(r.begin, first), e = std::min(r.end, last);
    if (b >= e) continue;
    const std::int64_t row = r.row * kChunks + gate;
    const Tensor g = table.rows(row, row + 1);
    backend_.gated_add(x.rows(b, e), y.rows(b - first, e - first), &g);
  }
}

// q, k, v rows of `a`: three Linears, or the fused one and its rows split by layout.
void Forward::project_qkv(Group& g, const Tensor& a, const Tensor& q, const Tensor& k,
                          const Tensor& v, const Tensor& fused) {
  const std::int64_t n = a.shape[0];
  if (w_.qkv_layout() == QkvLayout::kSplit) {
    linear(g, a, kQ, nullptr, q);
    linear(g, a, kK, nullptr, k);
    linear(g, a, kV, nullptr, v);
    qkv_loras(g, a, q, k, v);
    return;
  }
  const Tensor y = fused.rows(0, n);
  linear(g, a, kQ, nullptr, y);
  const Tensor* out[3] = {&q, &k, &v};
  for (std::int64_t i = 0; i < 3; ++i) {
    if (w_.qkv_layout() == QkvLayout::kStacked) {  // [n, 3, inner]
      backend_.slice(y.reshaped(Shape{n, 3, c_.inner()}), 1, i,
                     out[i]->reshaped(Shape{n, 1, c_.inner()}));
    } else {  // [n, heads, 3, head_dim]
      backend_.slice(y.reshaped(Shape{n, c_.heads, 3, c_.head_dim}), 2, i,
                     out[i]->reshaped(Shape{n, c_.heads, 1, c_.head_dim}));
    }
  }
  qkv_loras(g, a, q, k, v);
}

// out = fc2(value · silu(gate)) with [gate | value] = fc1(a) (the halves in the file's order).
void Forward::ffn(Group& g, const Tensor& a, const Tensor& h, const Tensor& gate,
                  const Tensor& value, const Tensor& out) {
  linear(g, a, kFc1, nullptr, h);
  const bool gate_first = w_.gate_first();
  backend_.slice(h, 1, gate_first ? 0 : c_.ffn, gate);
  backend_.slice(h, 1, gate_first ? c_.ffn : 0, value);
  fc1_loras(g, a, gate, value);
  backend_.silu(gate, gate);
  backend_.mul(value, gate, value);
  linear(g, value, kFc2, nullptr, out);
}

void Forward::block(Group& g, const Tensor& x, bool modulated) {
  const std::size_t mark = arena_.mark();
  const std::int64_t rows = x.shape[0];
  const std::int64_t chunk = chunk_rows(rows);
  Tensor table;
  if (modulated) {
    const auto n = static_cast<std::int64_t>(in_.timesteps->values.size());
    table = arena_.allocate(DType::kBF16, Shape{n, c_.modulation_width()});
    linear(g, time_in_, kAdaWeight, &g[kAdaBias], table);
    table = table.reshaped(Shape{n * DitConfig::kModalityRows * kChunks, c_.hidden});
  }
  const Tensor q = arena_.allocate(DType::kBF16, Shape{rows, c_.heads, c_.head_dim});
  const Tensor k = arena_.allocate(DType::kBF16, Shape{rows, c_.heads, c_.head_dim});
  const Tensor v = arena_.allocate(DType::kBF16, Shape{rows, c_.heads, c_.head_dim});
  const auto flat = [&](const Tensor& t, std::int64_t b, std::int64_t e) {
    return t.rows(b, e).reshaped(Shape{e - b, c_.inner()});
  };

  // q, k, v of every row, a chunk at a time: norm, modulation, projection, q/k norm, rotation.
  {
    const std::size_t inner_mark = arena_.mark();
    const Tensor a = arena_.allocate(DType::kBF16, Shape{chunk, c_.hidden});
    const Tensor fused = w_.qkv_layout() == QkvLayout::kSplit
                             ? Tensor{}
                             : arena_.allocate(DType::kBF16, Shape{chunk, 3 * c_.inner()});
    for (std::int64_t b = 0; b < rows; b += chunk) {
      const std::int64_t e = std::min(rows, b + chunk);
      const Tensor ab = a.rows(0, e - b);
      backend_.rms_norm(x.rows(b, e), g[kNorm1], c_.eps, ab);
      if (modulated) modulate(ab, table, kScale1, kShift1, b);
      project_qkv(g, ab, flat(q, b, e), flat(k, b, e), flat(v, b, e), fused);
      const Tensor qh = q.rows(b, e).reshaped(Shape{(e - b) * c_.heads, c_.head_dim});
      const Tensor kh = k.rows(b, e).reshaped(Shape{(e - b) * c_.heads, c_.head_dim});
      backend_.rms_norm(qh, g[kQNorm], c_.eps, qh);
      backend_.rms_norm(kh, g[kKNorm], c_.eps, kh);
      if (modulated) {
        backend_.rope_halves(q.rows(b, e), cos_.rows(b, e), sin_.rows(b, e));
        backend_.rope_halves(k.rows(b, e), cos_.rows(b, e), sin_.rows(b, e));
      }
    }
    arena_.release_to(inner_mark);
  }

  // Per chunk of queries: attention over every row, the output projection and gated residual,
  // then the SwiGLU FFN and its gated residual (rows of other chunks are not read again).
  const Tensor a = arena_.allocate(DType::kBF16, Shape{chunk, c_.hidden});
  const float scale = 1.0f / std::sqrt(static_cast<float>(c_.head_dim));
  for (std::int64_t b = 0; b < rows; b += chunk) {
    const std::int64_t e = std::min(rows, b + chunk);
    const Tensor ab = a.rows(0, e - b);
    const std::size_t inner_mark = arena_.mark();
    {
      const Tensor o = arena_.allocate(DType::kBF16, Shape{e - b, c_.heads, c_.head_dim});
      backend_.attention(q.rows(b, e), k, v, scale, nullptr, /*causal=*/false, o);
      linear(g, o.reshaped(Shape{e - b, c_.inner()}), kOut, nullptr, ab);
      if (modulated) {
        gated_add(x, ab, table, kGate1, b);
      } else {
        backend_.gated_add(x.rows(b, e), ab, nullptr);
      }
    }
    arena_.release_to(inner_mark);
    {
      const Tensor h = arena_.allocate(DType::kBF16, Shape{e - b, 2 * c_.ffn});
      const Tensor gate = arena_.allocate(DType::kBF16, Shape{e - b, c_.ffn});
      const Tensor value = arena_.allocate(DType::kBF16, Shape{e - b, c_.ffn});
      backend_.rms_norm(x.rows(b, e), g[kNorm2], c_.eps, ab);
      if (modulated) modulate(ab, table, kScale2, kShift2, b);
      ffn(g, ab, h, gate, value, ab);
      if (modulated) {
        gated_add(x, ab, table, kGate2, b);
      } else {
        backend_.gated_add(x.rows(b, e), ab, nullptr);
      }
    }
    arena_.release_to(inner_mark);
  }
  arena_.release_to(mark);
}

// y = final_norm(x)·(1 + scale[t]) + shift[t] (bf16) on the media rows, then the f32 heads on
// the video and audio rows.
void Forward::head(Group& g, DitOutput& out) {
  const std::size_t mark = arena_.mark();
  const auto n = static_cast<std::int64_t>(in_.timesteps->values.size());
  const std::int64_t L = s_.text_rows;
  const std::int64_t media = s_.length() - L;
  const Tensor table = arena_.allocate(DType::kBF16, Shape{n, 2 * c_.hidden});
  linear(g, time_in_, kFinalAdaWeight, &g[kFinalAdaBias], table);
  const Tensor rows = table.reshaped(Shape{2 * n, c_.hidden});  // per timestep: shift, scale
  const Tensor y = arena_.allocate(DType::kBF16, Shape{media, c_.hidden});
  backend_.rms_norm(x_.rows(L, s_.length()), g[kFinalNorm], c_.eps, y);
  for (const Run& r : runs_of(in_.timesteps->index, s_.tags, L, false)) {
    const Tensor part = y.rows(r.begin - L, r.end - L);
    backend_.modulate(part, rows.rows(2 * r.row + 1, 2 * r.row + 2),
                      rows.rows(2 * r.row, 2 * r.row + 1), part);
  }
  const Tensor yf = arena_.allocate(DType::kF32, Shape{media, c_.hidden});
  backend_.convert(y, yf);
  const Tensor result =
      arena_.allocate(DType::kF32, Shape{media * std::max(c_.patch_dim, c_.audio_channels)});
  const auto heads = [&](std::int64_t width, std::size_t weight, std::size_t bias,
                         std::span<const std::pair<std::int64_t, std::int64_t>> ranges,
                         std::vector<float>& host) {
    std::int64_t count = 0;
    for (const auto& [b, e] : ranges) count += e - b;
    const Tensor o = Tensor{result.data, DType::kF32, Shape{count, width}, result.device};
    std::int64_t at = 0;
    for (const auto& [b, e] : ranges) {
      if (e > b) linear(g, yf.rows(b - L, e - L), weight, &g[bias], o.rows(at, at + e - b));
      at += e - b;
    }
    host.resize(static_cast<std::size_t>(o.numel()));
    backend_.download(o, host.data());
  };
  const std::pair<std::int64_t, std::int64_t> video[] = {{s_.condition_start(), s_.audio_start()},
                                                         {s_.video_start(), s_.length()}};
  heads(c_.patch_dim, kVideoOutWeight, kVideoOutBias, video, out.video);
  const std::pair<std::int64_t, std::int64_t> audio[] = {{s_.audio_start(), s_.video_start()}};
  heads(c_.audio_channels, kAudioOutWeight, kAudioOutBias, audio, out.audio);
  arena_.release_to(mark);
}

DitOutput Forward::run(offload::WeightSource& source, const std::atomic<bool>* cancel) {
  const auto nt = static_cast<std::int64_t>(in_.timesteps->values.size());
  x_ = arena_.allocate(DType::kBF16, Shape{s_.length(), c_.hidden});
  upload_rope();
  time_in_ = arena_.allocate(DType::kF32, Shape{nt, c_.time_dim});
  runs_ = runs_of(in_.timesteps->index, s_.tags, 0, true);
  if (lora_rank_ > 0) {  // as dit_activation_bytes counts them
    lora_t_ = arena_.allocate(DType::kF32, Shape{std::max(s_.length(), nt), lora_rank_});
    lora_up_ = arena_.allocate(DType::kF32, Shape{3 * c_.inner(), lora_rank_});
  }

  const auto check_cancel = [&] {
    // The owner of the weight source stops its reads when the error unwinds past it.
    if (cancel != nullptr && cancel->load()) throw Error(ErrorCode::kCancelled, "DiT cancelled");
  };
  DitOutput out;
  source.begin_pass();
  {
    Group g = acquire(source, DitWeights::kEmbeddingsGroup);
    embed(g);
    time_input(g);
    source.release(DitWeights::kEmbeddingsGroup);
  }
  const Tensor text = x_.rows(0, s_.text_rows);
  for (std::int64_t j = 0; j < c_.refiner_layers; ++j) {
    check_cancel();
    const std::size_t gi = w_.refiner_group(j);
    Group r = acquire(source, gi);
    block(r, text, /*modulated=*/false);
    source.release(gi);
  }
  {
    const std::size_t gi = w_.refiner_norm_group();
    Group g = acquire(source, gi);
    backend_.rms_norm(text, g[kRefinerNorm], c_.eps, text);
    source.release(gi);
  }
  for (std::int64_t i = 0; i < c_.layers; ++i) {
    check_cancel();
    const std::size_t gi = w_.block_group(i);
    Group g = acquire(source, gi);
    block(g, x_, /*modulated=*/true);
    source.release(gi);
  }
  {
    Group g = acquire(source, w_.head_group());
    head(g, out);
    source.release(w_.head_group());
  }
  out.activation_bytes = arena_.capacity();
  out.activation_peak = arena_.peak();
  return out;
}

void check_input(const DitWeights& weights, const DitInput& in) {
  const DitConfig& c = weights.config();
  if (in.sequence == nullptr || in.timesteps == nullptr) {
    throw Error(ErrorCode::kBadArgument, "a DiT forward needs its packed sequence and timesteps");
  }
  if (c.rotary_dims() > c.head_dim) {
    throw Error(ErrorCode::kBadArgument,
                std::to_string(c.rope_freq_dim) + " rotary frequencies per axis (" +
                    std::to_string(c.rotary_dims()) + " dims) do not fit heads of " +
                    std::to_string(c.head_dim) + ": the model's rope_freq_dim is not set");
  }
  const PackedSequence& s = *in.sequence;
  const auto want = [](const char* what, std::size_t got, std::int64_t rows, std::int64_t width) {
    if (got != static_cast<std::size_t>(rows * width)) {
      throw Error(ErrorCode::kBadArgument, std::string(what) + " hold " + std::to_string(got) +
                                               " values for " + std::to_string(rows) + " rows of " +
                                               std::to_string(width));
    }
  };
  want("the video rows", in.video.size(), s.condition_rows + s.video_rows, c.patch_dim);
  want("the audio rows", in.audio.size(), s.audio_rows, c.audio_channels);
  want("the text rows", in.text.size(), s.text_rows, c.text_dim);
  const RowTimesteps& t = *in.timesteps;
  if (t.index.size() != static_cast<std::size_t>(s.length()) || t.values.empty() ||
      s.tags.size() != t.index.size()) {
    throw Error(ErrorCode::kBadArgument, std::to_string(t.index.size()) +
                                             " row timesteps for a sequence of " +
                                             std::to_string(s.length()) + " rows");
  }
  for (std::size_t r = 0; r < t.index.size(); ++r) {
    if (t.index[r] < 0 || static_cast<std::size_t>(t.index[r]) >= t.values.size() ||
        s.tags[r] >= DitConfig::kModalityRows) {
      throw Error(ErrorCode::kBadArgument, "row " + std::to_string(r) + " has timestep index " +
                                               std::to_string(t.index[r]) + " of " +
                                               std::to_string(t.values.size()) +
                                               " and modality tag " + std::to_string(s.tags[r]));
    }
  }
}

}  // namespace

std::int64_t lora_scratch_rank(std::span<const lora::BoundTerm> terms) {
  std::int64_t rank = 0;
  for (const lora::BoundTerm& t : terms) rank = std::max(rank, t.rank);
  return rank;
}

std::vector<float> timestep_sinusoid(std::span<const float> timesteps, std::int64_t width) {
  const std::int64_t half = width / 2;
  const float log_period = static_cast<float>(-std::log(10000.0));
  std::vector<float> freq(static_cast<std::size_t>(half));
  for (std::int64_t k = 0; k < half; ++k) {
    freq[static_cast<std::size_t>(k)] =
        std::exp(log_period * static_cast<float>(k) / static_cast<float>(half));
  }
  std::vector<float> out(timesteps.size() * static_cast<std::size_t>(width));
  for (std::size_t i = 0; i < timesteps.size(); ++i) {
    float* row = out.data() + i * static_cast<std::size_t>(width);
    for (std::int64_t k = 0; k < half; ++k) {
      const float a = timesteps[i] * freq[static_cast<std::size_t>(k)];
      row[k] = std::cos(a);
      row[half + k] = std::sin(a);
    }
  }
  return out;
}

std::vector<float> curve_time(std::span<const float> timesteps, std::span<const float> table,
                              std::int64_t width) {
  const auto rows = static_cast<std::int64_t>(table.size()) / width;
  std::vector<float> out(timesteps.size() * static_cast<std::size_t>(width));
  for (std::size_t i = 0; i < timesteps.size(); ++i) {
    const float p = std::clamp(timesteps[i], 0.0f, 1.0f) * static_cast<float>(rows - 1);
    const auto i0 = std::min(static_cast<std::int64_t>(std::floor(p)), rows - 2);
    const float f = p - static_cast<float>(i0);
    const float* a = table.data() + i0 * width;
    const float* b = a + width;
    for (std::int64_t j = 0; j < width; ++j) {
      // torch.lerp: from the nearer end, so that weight 1 gives b exactly.
      const float d = b[j] - a[j];
      out[i * static_cast<std::size_t>(width) + static_cast<std::size_t>(j)] =
          f < 0.5f ? a[j] + f * d : b[j] - d * (1.0f - f);
    }
  }
  return out;
}

DitRopeTables dit_rope_tables(const PackedSequence& sequence, std::int64_t n, float theta) {
  std::vector<float> inv(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i) {
    const float e = static_cast<float>(2 * i) / static_cast<float>(2 * n);
    inv[static_cast<std::size_t>(i)] = 1.0f / std::pow(theta, e);
  }
  const std::int64_t width = 3 * n;
  DitRopeTables t;
  t.cos.resize(sequence.positions.size() * static_cast<std::size_t>(width));
  t.sin.resize(t.cos.size());
  std::vector<float> c(static_cast<std::size_t>(width)), s(c.size());
  for (std::size_t r = 0; r < sequence.positions.size(); ++r) {
    for (std::int64_t axis = 0; axis < 3; ++axis) {
      const auto p = static_cast<float>(sequence.positions[r][static_cast<std::size_t>(axis)]);
      for (std::int64_t i = 0; i < n; ++i) {
        const float angle = p * inv[static_cast<std::size_t>(i)];
        c[static_cast<std::size_t>(axis * n + i)] = std::cos(angle);
        s[static_cast<std::size_t>(axis * n + i)] = std::sin(angle);
      }
    }
    convert_from_f32(c.data(), DType::kBF16, t.cos.data() + r * c.size(), c.size());
    convert_from_f32(s.data(), DType::kBF16, t.sin.data() + r * s.size(), s.size());
  }
  return t;
}

DitOutput dit_forward(Backend& backend, const DitWeights& weights,
                      offload::WeightSource& weights_source, memory::Arena& arena,
                      const DitInput& input, std::int64_t chunk_tokens,
                      const std::atomic<bool>* cancel) {
  check_input(weights, input);
  Forward f(backend, weights, arena, input, chunk_tokens);
  return f.run(weights_source, cancel);
}

DitOutput dit_forward(Backend& backend, const DitWeights& weights, const offload::Plan& plan,
                      const DitInput& input, const DitForwardOptions& options) {
  check_input(weights, input);
  const std::int64_t chunk_tokens = options.chunk_tokens;
  const PackedSequence& s = *input.sequence;
  offload::ModelLayout layout = options.layout != nullptr
                                    ? *options.layout
                                    : weights.model_layout(s.length(), s.text_rows, chunk_tokens);
  const std::uint64_t bytes = weights.activation_bytes(
      s.length(), s.text_rows, chunk_tokens,
      static_cast<std::int64_t>(input.timesteps->values.size()), lora_scratch_rank(input.loras));
  layout.activation_bytes = bytes;
  const std::unique_ptr<DeviceBuffer> activations =
      backend.allocate(static_cast<std::size_t>(bytes));
  memory::Arena arena(activations->data(), static_cast<std::size_t>(bytes), backend.device());
  offload::StreamerOptions streamer_options = options.streamer;
  streamer_options.passes = 1;
  offload::WeightStreamer streamer(backend, layout, plan, streamer_options);
  DitOutput out =
      dit_forward(backend, weights, streamer, arena, input, chunk_tokens, options.cancel);
  out.stream = streamer.stats();
  return out;
}

}  // namespace ferry::models::h3::dit
