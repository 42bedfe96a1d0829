#include "core/backend/cpu/cpu_backend.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <string>

#include "core/backend/convrot.h"
#include "core/backend/cpu/cpu_copy_queue.h"
#include "core/backend/cpu/cpu_rows.h"
#include "core/backend/cpu/gemm.h"
#include "core/backend/op_shapes.h"
#include "core/backend/snake_beta.h"
#include "core/error.h"
#include "core/memory/aligned_buffer.h"
#include "core/tensor/convert.h"

namespace ferry::cpu {

using namespace detail;

namespace {

class HostBuffer final : public DeviceBuffer {
 public:
  explicit HostBuffer(std::size_t bytes) : buffer_(bytes, memory::host_page_size()) {}
  void* data() const override { return buffer_.data(); }
  std::size_t size() const override { return buffer_.size(); }

 private:
  memory::AlignedBuffer buffer_;
};

}  // namespace

CpuBackend::CpuBackend(ThreadPool& pool, GemmPath gemm) : pool_(pool), gemm_(gemm) {
  auto done = std::make_shared<memory::CpuFence>();
  done->signal();
  compute_done_ = std::move(done);
}

std::string CpuBackend::name() const {
  return "CPU (" + std::to_string(pool_.size()) +
         " threads, GEMM: " + (gemm_ == GemmPath::kOpenBlas ? "OpenBLAS" : "Ferry's own") + ")";
}

std::unique_ptr<DeviceBuffer> CpuBackend::allocate(std::size_t bytes) {
  return std::make_unique<HostBuffer>(bytes);
}

memory::HostAllocator& CpuBackend::host_allocator() { return memory::plain_host_allocator(); }

std::unique_ptr<CopyQueue> CpuBackend::create_copy_queue() {
  return std::make_unique<CpuCopyQueue>();
}

void CpuBackend::upload(const Tensor& dst, const void* host) {
  require_cpu(dst, "upload", "dst");
  std::memcpy(dst.data, host, dst.bytes());
}

void CpuBackend::download(const Tensor& src, void* host) {
  require_cpu(src, "download", "src");
  std::memcpy(host, src.data, src.bytes());
}

// ---- matrix products ----

void CpuBackend::linear(const Tensor& x, const Tensor& w, const Tensor* bias, const Tensor& y,
                        const WeightScaling& w_scaling) {
  product(x, w, bias, y, w_scaling, false);
}

void CpuBackend::linear_add(const Tensor& x, const Tensor& w, const Tensor& y,
                            const WeightScaling& w_scaling) {
  product(x, w, nullptr, y, w_scaling, true);
}

void CpuBackend::product(const Tensor& x, const Tensor& w, const Tensor* bias, const Tensor& y,
                         const WeightScaling& w_scaling, bool accumulate) {
  const char* op = accumulate ? "linear_add" : "linear";
  const float w_scale = w_scaling.scale;
  const auto [m, k, n] = check_linear(x, w, bias, y);

  // Row blocks of x keep the f32 scratch bounded whatever the token count.
  const std::int64_t block = std::max<std::int64_t>(1, std::min<std::int64_t>(m, (1 << 22) / std::max<std::int64_t>(k + n, 1)));
  float* xf = grow(scratch_a_, static_cast<std::size_t>(block * k));
  float* yf = grow(scratch_b_, static_cast<std::size_t>(block * n));
  float* bias_f = nullptr;
  if (bias != nullptr) {
    bias_f = grow(scratch_c_, static_cast<std::size_t>(n));
    load(*bias, 0, n, bias_f);
  }
  const bool fp8 = w.dtype == DType::kF8E4M3 || w.dtype == DType::kF8E5M2;
  // fp8 weights are widened panel by panel (bounded workspace) and multiplied as f32.
  constexpr std::int64_t kPanelRows = 256;
  float* panel =
      fp8 ? grow(scratch_d_, static_cast<std::size_t>(std::min(kPanelRows, n) * k)) : nullptr;
  // int8 ConvRot: x · Wᵀ = (x · H_g per group) · (q · s)ᵀ. Rotating x costs O(M·K·log g) once
  // per call, where rotating the weight back would cost O(N·K·log g) for every panel packed
  // (each row block of x packs the panels again); and the GEMM then reads q · s as it reads any
  // widened weight.
  const bool convrot = w.dtype == DType::kI8;
  if (convrot) {
    require(w_scaling.convrot != nullptr, op, "an int8 weight without its ConvRot state");
    check_convrot(w.shape, *w_scaling.convrot, op);
    require_cpu(w_scaling.convrot->row_scale, op, "the ConvRot row scale");
  }

  for (std::int64_t r0 = 0; r0 < m; r0 += block) {
    const std::int64_t rows = std::min(block, m - r0);
    load(x, r0 * k, rows * k, xf);
    if (y.dtype != DType::kF32) {
      for (std::int64_t i = 0; i < rows * k; ++i) xf[i] = round_to(y.dtype, xf[i]);
    }
    if (convrot) rotate_convrot_groups(xf, rows * k, w_scaling.convrot->group_size);
    const auto mm = static_cast<std::size_t>(rows);
    const auto nn = static_cast<std::size_t>(n);
    const auto kk = static_cast<std::size_t>(k);
    // linear_add: the GEMM adds its product to y's values (beta = 1), one rounding at the store.
    if (accumulate) load(y, r0 * n, rows * n, yf);
    const float beta = accumulate ? 1.0f : 0.0f;
    switch (w.dtype) {
      case DType::kF32:
        gemm_f32(mm, nn, kk, w_scale, xf, kk, w.as<const float>(), kk, true, beta, yf, nn, pool_,
                 gemm_);
        break;
      case DType::kBF16:
        gemm_bf16_weights(mm, nn, kk, w_scale, xf, kk, w.as<const std::uint16_t>(), kk, beta, yf,
                          nn, pool_, gemm_);
        break;
      case DType::kF16:
        gemm_f16_weights(mm, nn, kk, w_scale, xf, kk, w.as<const std::uint16_t>(), kk, beta, yf, nn,
                         pool_, gemm_);
        break;
      case DType::kF8E4M3:
      case DType::kF8E5M2:
        for (std::int64_t n0 = 0; n0 < n; n0 += kPanelRows) {
          const std::int64_t pn = std::min(kPanelRows, n - n0);
          load(w, n0 * k, pn * k, panel);
          gemm_f32(mm, static_cast<std::size_t>(pn), kk, w_scale, xf, kk, panel, kk, true, beta,
                   yf + n0, nn, pool_, gemm_);
        }
        break;
      case DType::kI8:
        gemm_i8_row_scaled_weights(mm, nn, kk, w_scale, xf, kk, w.as<const std::int8_t>(),
                                   w_scaling.convrot->row_scale.as<const float>(), beta, yf, nn,
                                   pool_, gemm_);
        break;
      default:
        // Block-quantised weights: dequantised into the GEMM's panels (never a whole f32 copy).
        require(dtype_is_blocked(w.dtype), op, "weights of dtype ", w.dtype);
        require(w.dtype != DType::kBnb4 || w_scaling.bnb4 != nullptr, op,
                "a bitsandbytes 4-bit weight without its quant state");
        gemm_quant_weights(mm, nn, kk, w_scale, xf, kk, w.dtype, w.data, w_scaling.bnb4, beta, yf,
                           nn, pool_, gemm_);
    }
    if (bias_f != nullptr) {
      for (std::int64_t i = 0; i < rows; ++i) {
        float* row = yf + i * n;
        for (std::int64_t j = 0; j < n; ++j) row[j] += bias_f[j];
      }
    }
    store(yf, y, r0 * n, rows * n);
  }
}

// ---- normalisation ----

void CpuBackend::rms_norm(const Tensor& x, const Tensor& weight, float eps, const Tensor& y) {
  const char* op = "rms_norm";
  require_same_shape(x, y, op);
  const std::int64_t rows = x.shape.rows();
  const std::int64_t cols = x.shape.cols();
  require(weight.numel() == cols, op, "weight is ", weight.shape);
  pool_.parallel_for(static_cast<std::size_t>(rows), grain_for(cols), [&](std::size_t b, std::size_t e) {
    float* v = row_buffer(0, static_cast<std::size_t>(cols));
    float* g = row_buffer(1, static_cast<std::size_t>(cols));
    load(weight, 0, cols, g);
    for (auto r = static_cast<std::int64_t>(b); r < static_cast<std::int64_t>(e); ++r) {
      load(x, r * cols, cols, v);
      double sum = 0;
      for (std::int64_t i = 0; i < cols; ++i) sum += static_cast<double>(v[i]) * v[i];
      const float inv = static_cast<float>(1.0 / std::sqrt(sum / static_cast<double>(cols) + eps));
      for (std::int64_t i = 0; i < cols; ++i) v[i] = round_to(x.dtype, v[i] * inv) * g[i];
      store(v, y, r * cols, cols);
    }
  });
}

void CpuBackend::layer_norm(const Tensor& x, const Tensor* weight, const Tensor* bias, float eps,
                            const Tensor& y) {
  const char* op = "layer_norm";
  require_same_shape(x, y, op);
  const std::int64_t rows = x.shape.rows();
  const std::int64_t cols = x.shape.cols();
  require(weight == nullptr || weight->numel() == cols, op, "weight size");
  require(bias == nullptr || bias->numel() == cols, op, "bias size");
  pool_.parallel_for(static_cast<std::size_t>(rows), grain_for(cols), [&](std::size_t b, std::size_t e) {
    float* v = row_buffer(0, static_cast<std::size_t>(cols));
    float* g = weight != nullptr ? row_buffer(1, static_cast<std::size_t>(cols)) : nullptr;
    float* bb = bias != nullptr ? row_buffer(2, static_cast<std::size_t>(cols)) : nullptr;
    if (g != nullptr) load(*weight, 0, cols, g);
    if (bb != nullptr) load(*bias, 0, cols, bb);
    for (auto r = static_cast<std::int64_t>(b); r < static_cast<std::int64_t>(e); ++r) {
      load(x, r * cols, cols, v);
      double mean = 0;
      for (std::int64_t i = 0; i < cols; ++i) mean += v[i];
      mean /= static_cast<double>(cols);
      double var = 0;
      for (std::int64_t i = 0; i < cols; ++i) var += (v[i] - mean) * (v[i] - mean);
      var /= static_cast<double>(cols);
      const double inv = 1.0 / std::sqrt(var + eps);
      for (std::int64_t i = 0; i < cols; ++i) {
        float n = static_cast<float>((v[i] - mean) * inv);
        if (g != nullptr) n *= g[i];
        if (bb != nullptr) n += bb[i];
        v[i] = n;
      }
      store(v, y, r * cols, cols);
    }
  });
}

void CpuBackend::channel_rms_norm(const Tensor& x, const Tensor& gamma, const Tensor& y) {
  const char* op = "channel_rms_norm";
  require_same_shape(x, y, op);
  require(x.shape.rank() >= 1, op, "x needs a channel dimension");
  const std::int64_t channels = x.shape[0];
  const std::int64_t positions = channels == 0 ? 0 : x.numel() / channels;
  require(gamma.numel() == channels, op, "gamma is ", gamma.shape);
  const float root_c = std::sqrt(static_cast<float>(channels));
  constexpr std::int64_t kSpan = 1024;  // positions per task
  const auto tasks = static_cast<std::size_t>((positions + kSpan - 1) / kSpan);
  pool_.parallel_for(tasks, 1, [&](std::size_t b, std::size_t e) {
    float* g = row_buffer(0, static_cast<std::size_t>(channels));
    float* v = row_buffer(1, static_cast<std::size_t>(kSpan));
    std::array<double, kSpan> sums;  // on the stack: a chunk allocates nothing
    load(gamma, 0, channels, g);
    for (std::size_t task = b; task < e; ++task) {
      const std::int64_t s0 = static_cast<std::int64_t>(task) * kSpan;
      const std::int64_t span = std::min(kSpan, positions - s0);
      std::fill(sums.begin(), sums.end(), 0.0);
      for (std::int64_t c = 0; c < channels; ++c) {
        load(x, c * positions + s0, span, v);
        for (std::int64_t s = 0; s < span; ++s) sums[s] += static_cast<double>(v[s]) * v[s];
      }
      for (std::int64_t c = 0; c < channels; ++c) {
        load(x, c * positions + s0, span, v);
        for (std::int64_t s = 0; s < span; ++s) {
          const float norm = std::max(static_cast<float>(std::sqrt(sums[s])), 1e-12f);
          v[s] = v[s] / norm * root_c * g[c];
        }
        store(v, y, c * positions + s0, span);
      }
    }
  });
}

// ---- elementwise ----

void CpuBackend::modulate(const Tensor& x, const Tensor& scale, const Tensor& shift,
                          const Tensor& y) {
  const char* op = "modulate";
  require_same_shape(x, y, op);
  const std::int64_t rows = x.shape.rows();
  const std::int64_t cols = x.shape.cols();
  pool_.parallel_for(static_cast<std::size_t>(rows), grain_for(cols), [&](std::size_t b, std::size_t e) {
    float* v = row_buffer(0, static_cast<std::size_t>(cols));
    float* sc = row_buffer(1, static_cast<std::size_t>(cols));
    float* sh = row_buffer(2, static_cast<std::size_t>(cols));
    for (auto r = static_cast<std::int64_t>(b); r < static_cast<std::int64_t>(e); ++r) {
      load(x, r * cols, cols, v);
      load(scale, param_offset(scale, rows, cols, r, op, "scale"), cols, sc);
      load(shift, param_offset(shift, rows, cols, r, op, "shift"), cols, sh);
      for (std::int64_t i = 0; i < cols; ++i) v[i] = v[i] * (1.0f + sc[i]) + sh[i];
      store(v, y, r * cols, cols);
    }
  });
}

void CpuBackend::gated_add(const Tensor& x, const Tensor& y, const Tensor* gate) {
  add_rows(x, y, gate, 1.0f, "gated_add");
}

void CpuBackend::add_scaled(const Tensor& x, const Tensor& y, float alpha) {
  add_rows(x, y, nullptr, alpha, "add_scaled");
}

void CpuBackend::add_rows(const Tensor& x, const Tensor& y, const Tensor* gate, float alpha,
                          const char* op) {
  require_same_shape(x, y, op);
  const std::int64_t rows = x.shape.rows();
  const std::int64_t cols = x.shape.cols();
  pool_.parallel_for(static_cast<std::size_t>(rows), grain_for(cols), [&](std::size_t b, std::size_t e) {
    float* acc = row_buffer(0, static_cast<std::size_t>(cols));
    float* add = row_buffer(1, static_cast<std::size_t>(cols));
    float* g = row_buffer(2, static_cast<std::size_t>(cols));
    for (auto r = static_cast<std::int64_t>(b); r < static_cast<std::int64_t>(e); ++r) {
      load(x, r * cols, cols, acc);
      load(y, r * cols, cols, add);
      if (gate != nullptr) {
        load(*gate, param_offset(*gate, rows, cols, r, op, "gate"), cols, g);
        for (std::int64_t i = 0; i < cols; ++i) acc[i] += add[i] * g[i];
      } else {
        // alpha is 1 for gated_add: 1 · add is add exactly.
        for (std::int64_t i = 0; i < cols; ++i) acc[i] += alpha * add[i];
      }
      store(acc, x, r * cols, cols);
    }
  });
}

namespace {

// Applies f to each row of x (and optionally b) into out: the shape of every simple op.
template <typename F>
void rowwise(ThreadPool& pool, const Tensor& x, const Tensor* b, const Tensor& out, F&& f) {
  const std::int64_t rows = x.shape.rows();
  const std::int64_t cols = x.shape.cols();
  pool.parallel_for(static_cast<std::size_t>(rows), grain_for(cols), [&](std::size_t lo, std::size_t hi) {
    float* v = row_buffer(0, static_cast<std::size_t>(cols));
    float* w = b != nullptr ? row_buffer(1, static_cast<std::size_t>(cols)) : nullptr;
    for (auto r = static_cast<std::int64_t>(lo); r < static_cast<std::int64_t>(hi); ++r) {
      load(x, r * cols, cols, v);
      if (w != nullptr) load(*b, r * cols, cols, w);
      f(v, w, cols);
      store(v, out, r * cols, cols);
    }
  });
}

}  // namespace

void CpuBackend::add(const Tensor& a, const Tensor& b, const Tensor& out) {
  require_same_shape(a, b, "add");
  require_same_shape(a, out, "add");
  rowwise(pool_, a, &b, out, [](float* v, const float* w, std::int64_t n) {
    for (std::int64_t i = 0; i < n; ++i) v[i] += w[i];
  });
}

void CpuBackend::mul(const Tensor& a, const Tensor& b, const Tensor& out) {
  require_same_shape(a, b, "mul");
  require_same_shape(a, out, "mul");
  rowwise(pool_, a, &b, out, [](float* v, const float* w, std::int64_t n) {
    for (std::int64_t i = 0; i < n; ++i) v[i] *= w[i];
  });
}

void CpuBackend::gelu_tanh(const Tensor& x, const Tensor& y) {
  require_same_shape(x, y, "gelu_tanh");
  rowwise(pool_, x, nullptr, y, [](float* v, const float*, std::int64_t n) {
    constexpr float kAlpha = 0.7978845608028654f;  // √(2/π)
    for (std::int64_t i = 0; i < n; ++i) {
      const float u = v[i];
      v[i] = 0.5f * u * (1.0f + std::tanh(kAlpha * (u + 0.044715f * u * u * u)));
    }
  });
}

void CpuBackend::gelu_erf(const Tensor& x, const Tensor& y) {
  require_same_shape(x, y, "gelu_erf");
  rowwise(pool_, x, nullptr, y, [](float* v, const float*, std::int64_t n) {
    constexpr float kSqrtHalf = 0.7071067811865476f;  // 1/√2
    for (std::int64_t i = 0; i < n; ++i) {
      const float u = v[i];
      v[i] = 0.5f * u * (1.0f + std::erf(u * kSqrtHalf));
    }
  });
}

void CpuBackend::snake_beta_alias_free(const Tensor& x, const Tensor& alpha, const Tensor& beta,
                                       const Tensor& filters, const Tensor& y) {
  check_snake_beta(x, alpha, beta, filters, y);
  const std::int64_t samples = x.shape[1];
  const float* taps = filters.as<const float>();
  pool_.parallel_for(static_cast<std::size_t>(x.shape[0]), grain_for(8 * samples),
                     [&](std::size_t lo, std::size_t hi) {
                       float* row = row_buffer(0, static_cast<std::size_t>(samples));
                       float* work = row_buffer(1, snake_beta_work_floats(samples));
                       for (auto c = static_cast<std::int64_t>(lo);
                            c < static_cast<std::int64_t>(hi); ++c) {
                         load(x, c * samples, samples, row);
                         snake_beta_alias_free_row(row, samples, alpha.as<const float>()[c],
                                                   beta.as<const float>()[c], taps,
                                                   taps + kSnakeFilterTaps, work, row);
                         store(row, y, c * samples, samples);
                       }
                     });
}

void CpuBackend::silu(const Tensor& x, const Tensor& y) {
  require_same_shape(x, y, "silu");
  rowwise(pool_, x, nullptr, y, [](float* v, const float*, std::int64_t n) {
    for (std::int64_t i = 0; i < n; ++i) v[i] = v[i] / (1.0f + std::exp(-v[i]));
  });
}

void CpuBackend::clamp(const Tensor& x, float lo, float hi, const Tensor& y) {
  require_same_shape(x, y, "clamp");
  rowwise(pool_, x, nullptr, y, [lo, hi](float* v, const float*, std::int64_t n) {
    for (std::int64_t i = 0; i < n; ++i) v[i] = std::min(std::max(v[i], lo), hi);
  });
}

void CpuBackend::tanh_clamp(const Tensor& x, float limit, const Tensor& y) {
  require_same_shape(x, y, "tanh_clamp");
  rowwise(pool_, x, nullptr, y, [limit](float* v, const float*, std::int64_t n) {
    for (std::int64_t i = 0; i < n; ++i) v[i] = std::tanh(v[i] / limit) * limit;
  });
}

void CpuBackend::softmax(const Tensor& x, const Tensor& y) {
  require_same_shape(x, y, "softmax");
  rowwise(pool_, x, nullptr, y, [](float* v, const float*, std::int64_t n) { softmax_row(v, n); });
}

void CpuBackend::convert(const Tensor& x, const Tensor& y) {
  require_same_shape(x, y, "convert");
  rowwise(pool_, x, nullptr, y, [](float*, const float*, std::int64_t) {});
}

}  // namespace ferry::cpu
