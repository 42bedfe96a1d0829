// The CPU backend's convolutions (im2col in bounded column blocks, then GEMM) and the Wan VAE's
// resampling ops, written as the loops of wan.md §C.
#include <algorithm>
#include <string>
#include <vector>

#include "core/backend/cpu/cpu_backend.h"
#include "core/backend/cpu/cpu_rows.h"
#include "core/backend/cpu/gemm.h"
#include "core/backend/op_shapes.h"

namespace ferry::cpu {

using namespace detail;

void CpuBackend::conv3d(const Tensor& x, const Tensor& w, const Tensor* bias,
                        const Conv3dParams& p, const Tensor& y) {
  const Conv3dShape s = check_conv3d(x, w, bias, p, y);
  const std::int64_t ci = s.ci, t = s.t, h = s.h, wd = s.w;
  const std::int64_t co = s.co, kt = s.kt, kh = s.kh, kw = s.kw;
  const std::int64_t to = s.to, ho = s.ho, wo = s.wo;

  const std::int64_t k = ci * kt * kh * kw;
  const std::int64_t plane = ho * wo;
  // Weights as f32 [Co, K]: used in place when they already are.
  const float* wf = w.as<const float>();
  if (w.dtype != DType::kF32) {
    float* converted = grow(scratch_c_, static_cast<std::size_t>(co * k));
    load(w, 0, co * k, converted);
    wf = converted;
  }
  float* bias_f = grow(scratch_d_, static_cast<std::size_t>(co));
  if (bias != nullptr) {
    load(*bias, 0, co, bias_f);
  } else {
    std::fill(bias_f, bias_f + co, 0.0f);
  }

  // Output positions per block: the [K, block] column matrix stays within 16 MiB.
  const std::int64_t block = std::clamp<std::int64_t>((std::int64_t{1} << 22) / std::max<std::int64_t>(k, 1), 1, plane);
  float* cols = grow(scratch_a_, static_cast<std::size_t>(k * block));
  float* out = grow(scratch_b_, static_cast<std::size_t>(co * block));

  for (std::int64_t ot = 0; ot < to; ++ot) {
    for (std::int64_t p0 = 0; p0 < plane; p0 += block) {
      const std::int64_t n = std::min(block, plane - p0);
      // im2col: one task per (input channel, kernel frame): its plane is widened once.
      pool_.parallel_for(static_cast<std::size_t>(ci * kt), 1, [&](std::size_t lo, std::size_t hi) {
        float* src = row_buffer(0, static_cast<std::size_t>(h * wd));
        for (std::size_t task = lo; task < hi; ++task) {
          const std::int64_t c = static_cast<std::int64_t>(task) / kt;
          const std::int64_t dt = static_cast<std::int64_t>(task) % kt;
          const std::int64_t it = ot * p.stride_t + dt - p.pad_front;
          const bool frame = it >= 0 && it < t;
          if (frame) load(x, (c * t + it) * h * wd, h * wd, src);
          for (std::int64_t dh = 0; dh < kh; ++dh) {
            for (std::int64_t dw = 0; dw < kw; ++dw) {
              float* row = cols + (((c * kt + dt) * kh + dh) * kw + dw) * n;
              for (std::int64_t i = 0; i < n; ++i) {
                const std::int64_t oy = (p0 + i) / wo;
                const std::int64_t ox = (p0 + i) % wo;
                const std::int64_t iy = oy * p.stride_h + dh - p.pad_top;
                const std::int64_t ix = ox * p.stride_w + dw - p.pad_left;
                row[i] = frame && iy >= 0 && iy < h && ix >= 0 && ix < wd ? src[iy * wd + ix] : 0.0f;
              }
            }
          }
        }
      });
      gemm_f32(static_cast<std::size_t>(co), static_cast<std::size_t>(n),
               static_cast<std::size_t>(k), 1.0f, wf, static_cast<std::size_t>(k), cols,
               static_cast<std::size_t>(n), false, 0.0f, out, static_cast<std::size_t>(n), pool_,
               gemm_);
      for (std::int64_t c = 0; c < co; ++c) {
        float* row = out + c * n;
        for (std::int64_t i = 0; i < n; ++i) row[i] += bias_f[c];
        store(row, y, (c * to + ot) * plane + p0, n);
      }
    }
  }
}

void CpuBackend::upsample_nearest_2x(const Tensor& x, const Tensor& y) {
  const char* op = "upsample_nearest_2x";
  require(x.shape.rank() == 4, op, "x must be [C, T, H, W]");
  const std::int64_t c = x.shape[0], t = x.shape[1], h = x.shape[2], w = x.shape[3];
  require_shape(y, Shape{c, t, 2 * h, 2 * w}, op, "y");
  pool_.parallel_for(static_cast<std::size_t>(c * t * h), grain_for(w), [&](std::size_t lo, std::size_t hi) {
    float* in = row_buffer(0, static_cast<std::size_t>(w));
    float* wide = row_buffer(1, static_cast<std::size_t>(2 * w));
    for (std::size_t r = lo; r < hi; ++r) {
      const auto row = static_cast<std::int64_t>(r);  // (c, t, h) flattened
      load(x, row * w, w, in);
      for (std::int64_t i = 0; i < w; ++i) wide[2 * i] = wide[2 * i + 1] = in[i];
      store(wide, y, (2 * row) * 2 * w, 2 * w);
      store(wide, y, (2 * row + 1) * 2 * w, 2 * w);
    }
  });
}

void CpuBackend::avg_down_3d(const Tensor& x, int ft, int fs, const Tensor& y) {
  const char* op = "avg_down_3d";
  require(x.shape.rank() == 4 && y.shape.rank() == 4 && ft > 0 && fs > 0, op, "x and y must be [C, T, H, W]");
  const std::int64_t ci = x.shape[0], t = x.shape[1], h = x.shape[2], w = x.shape[3];
  const std::int64_t co = y.shape[0];
  require(t % ft == 0 && h % fs == 0 && w % fs == 0, op, x.shape,
          " is not a multiple of the factors");
  require_shape(y, Shape{co, t / ft, h / fs, w / fs}, op, "y");
  const std::int64_t expanded = ci * ft * fs * fs;
  require(co > 0 && expanded % co == 0, op, "channels do not group evenly");
  const std::int64_t group = expanded / co;
  const std::int64_t oh = h / fs, ow = w / fs;
  // One task per output plane (o, t'): the mean of `group` strided samples at each pixel.
  pool_.parallel_for(static_cast<std::size_t>(co * (t / ft)), 1, [&](std::size_t lo, std::size_t hi) {
    float* src = row_buffer(0, static_cast<std::size_t>(h * w));
    float* acc = row_buffer(1, static_cast<std::size_t>(oh * ow));
    for (std::size_t task = lo; task < hi; ++task) {
      const std::int64_t o = static_cast<std::int64_t>(task) / (t / ft);
      const std::int64_t ot = static_cast<std::int64_t>(task) % (t / ft);
      std::fill(acc, acc + oh * ow, 0.0f);
      std::int64_t loaded = -1;
      for (std::int64_t e = o * group; e < (o + 1) * group; ++e) {
        const std::int64_t c = e / (ft * fs * fs);
        const std::int64_t i = (e / (fs * fs)) % ft;
        const std::int64_t j = (e / fs) % fs;
        const std::int64_t kk = e % fs;
        const std::int64_t source = c * t + ot * ft + i;
        if (source != loaded) {
          load(x, source * h * w, h * w, src);
          loaded = source;
        }
        for (std::int64_t yy = 0; yy < oh; ++yy) {
          for (std::int64_t xx = 0; xx < ow; ++xx) acc[yy * ow + xx] += src[(yy * fs + j) * w + xx * fs + kk];
        }
      }
      const float inv = 1.0f / static_cast<float>(group);
      for (std::int64_t i = 0; i < oh * ow; ++i) acc[i] *= inv;
      store(acc, y, (o * (t / ft) + ot) * oh * ow, oh * ow);
    }
  });
}

void CpuBackend::dup_up_3d(const Tensor& x, int ft, int fs, const Tensor& y) {
  const char* op = "dup_up_3d";
  require(x.shape.rank() == 4 && y.shape.rank() == 4 && ft > 0 && fs > 0, op, "x and y must be [C, T, H, W]");
  const std::int64_t ci = x.shape[0], t = x.shape[1], h = x.shape[2], w = x.shape[3];
  const std::int64_t co = y.shape[0];
  require_shape(y, Shape{co, t * ft, h * fs, w * fs}, op, "y");
  const std::int64_t expanded = co * ft * fs * fs;
  require(ci > 0 && expanded % ci == 0, op, "channels do not repeat evenly");
  const std::int64_t repeats = expanded / ci;
  const std::int64_t yh = h * fs, yw = w * fs;
  // One task per output plane (o, t·ft + i).
  pool_.parallel_for(static_cast<std::size_t>(co * t * ft), 1, [&](std::size_t lo, std::size_t hi) {
    float* src = row_buffer(0, static_cast<std::size_t>(h * w));
    float* dst = row_buffer(1, static_cast<std::size_t>(yh * yw));
    for (std::size_t task = lo; task < hi; ++task) {
      const std::int64_t o = static_cast<std::int64_t>(task) / (t * ft);
      const std::int64_t frame = static_cast<std::int64_t>(task) % (t * ft);
      const std::int64_t it = frame / ft;
      const std::int64_t i = frame % ft;
      std::int64_t loaded = -1;
      for (std::int64_t j = 0; j < fs; ++j) {
        for (std::int64_t kk = 0; kk < fs; ++kk) {
          const std::int64_t c = (((o * ft + i) * fs + j) * fs + kk) / repeats;
          if (c != loaded) {
            load(x, (c * t + it) * h * w, h * w, src);
            loaded = c;
          }
          for (std::int64_t yy = 0; yy < h; ++yy) {
            for (std::int64_t xx = 0; xx < w; ++xx) dst[(yy * fs + j) * yw + xx * fs + kk] = src[yy * w + xx];
          }
        }
      }
      store(dst, y, (o * t * ft + frame) * yh * yw, yh * yw);
    }
  });
}

}  // namespace ferry::cpu
