// The CUDA backend's GEMM-based ops, linear and conv3d: operands converted (or unrolled) into
// the workspace block by block, multiplied by cuBLASLt with f32 accumulation, and the bias added
// in f32 before the one rounding to the output dtype.
#include <algorithm>
#include <string>

#include "core/backend/convrot.h"
#include "core/backend/op_shapes.h"
#include "core/error.h"
#include "cuda/conv.cuh"
#include "cuda/convrot.cuh"
#include "cuda/cuda_backend.h"
#include "cuda/cuda_backend_detail.h"
#include "cuda/cuda_log.h"
#include "cuda/gemm.h"
#include "cuda/gemm_plan.h"
#include "cuda/linear.cuh"
#include "cuda/linear_plan.h"
#include "cuda/quant.cuh"

namespace ferry::cuda {

using namespace detail;

namespace {

cudaDataType_t cuda_type(DType t) {
  switch (t) {
    case DType::kF32:
      return CUDA_R_32F;
    case DType::kBF16:
      return CUDA_R_16BF;
    case DType::kF16:
      return CUDA_R_16F;
    default:
      throw Error(ErrorCode::kInternal, "no cuBLAS type for " + std::string(dtype_name(t)));
  }
}

std::string plan_failure(const char* op, std::size_t budget) {
  return std::string(op) + ": not even one row fits the CUDA workspace of " +
         std::to_string(budget) + " bytes";
}

}  // namespace

// How linear multiplies (x rounded to y's dtype, as the CPU backend does, then times w):
// - the GEMM's input type t is 16-bit when both operands' values fit it exactly (bf16/f16 x
//   and y with w of that type, or an fp8 w, whose values every 16-bit type holds), else f32;
// - x is converted into the workspace when its values or type differ from t's (row blocks),
//   and w when its type differs (panels of weight rows: fp8 dequantised, 16-bit widened;
//   the per-tensor scale stays outside, as the GEMM's alpha);
// - the product goes straight into y when cuBLASLt can write y's dtype from t (the bias, when
//   y's dtype holds it exactly, preloaded there and added by the GEMM with beta = 1), else into
//   an f32 block of the workspace, and an epilogue adds the bias and rounds.
// - a quantised weight (ggml blocks, bitsandbytes 4-bit) stays compressed in device memory: its
//   panels of whole rows (N-panels, the full K) are dequantised into the workspace, exactly in f32
//   and rounded once to t (bf16 when x's values are bf16, else f32: linear_gemm_type). Whole rows
//   rather than K-slices, so that one GEMM call accumulates the whole K in f32 and rounds once,
//   as every other path does, with no partial sums carried between calls; and a panel of rows is
//   one contiguous run of blocks. With panels outer (plan_linear's order when it converts less)
//   each panel is dequantised once per call whatever the token count.
// When cuBLASLt has no algorithm for one of the 16-bit products (an alignment or a type pair it
// does not take), the whole op takes the f32 path instead: both operands widened exactly to f32,
// the same f32 accumulation, the result staged and rounded once. The fallback is logged.
// linear_add is the same with y's old values added: by the GEMM (beta = 1) when the product goes
// straight into y, else by the epilogue.
void CudaBackend::linear(const Tensor& x, const Tensor& w, const Tensor* bias, const Tensor& y,
                         const WeightScaling& w_scaling) {
  product(x, w, bias, y, w_scaling, false);
}

void CudaBackend::linear_add(const Tensor& x, const Tensor& w, const Tensor& y,
                             const WeightScaling& w_scaling) {
  product(x, w, nullptr, y, w_scaling, true);
}

void CudaBackend::product(const Tensor& x, const Tensor& w, const Tensor* bias, const Tensor& y,
                          const WeightScaling& w_scaling, bool accumulate) {
  const char* op = accumulate ? "linear_add" : "linear";
  const float w_scale = w_scaling.scale;
  const auto [m, k, n] = check_linear(x, w, bias, y);
  const bool quantised = dtype_is_blocked(w.dtype);
  const bool convrot = w.dtype == DType::kI8;
  QuantWeight qw;
  if (quantised) {
    qw = quant_weight(w, w_scaling.bnb4, op, "w");
  } else if (convrot) {
    require(w_scaling.convrot != nullptr, op, "an int8 weight without its ConvRot state");
    check_convrot(w.shape, *w_scaling.convrot, op);
    require(w_scaling.convrot->group_size <= kMaxConvRotGroup, op, "a ConvRot group of ",
            w_scaling.convrot->group_size, " values (at most ", kMaxConvRotGroup, ")");
    require_cuda(w, op, "w");
    require_cuda(w_scaling.convrot->row_scale, op, "the ConvRot row scale");
  } else {
    require(w.dtype == DType::kF32 || is_16bit_float(w.dtype) || is_fp8(w.dtype), op,
            "weights of dtype ", w.dtype);
    require(w_scaling.bnb4 == nullptr, op, "a bitsandbytes quant state came with weights of dtype ",
            w.dtype);
    require_input(w, op, "w");
  }
  require_input(x, op, "x");
  require_output(y, op, "y");
  if (bias != nullptr) require_input(*bias, op, "bias");
  if (m == 0 || n == 0) return;

  Epilogue bias_only;
  bias_only.rows = m;
  bias_only.cols = n;
  bias_only.out = y.data;
  bias_only.out_dtype = y.dtype;
  bias_only.out_ld = n;
  if (bias != nullptr) {
    bias_only.bias = bias->data;
    bias_only.bias_dtype = bias->dtype;
  }
  if (k == 0) {  // an empty product: y = bias (or 0); linear_add leaves y as it is
    if (!accumulate) launch_epilogue(bias_only, stream_);
    return;
  }
  bias_only.accumulate = accumulate;

  const DType* bias_dtype = bias != nullptr ? &bias->dtype : nullptr;
  const auto plan_for = [&](DType t) {
    const auto plan =
        plan_linear(m, k, n, x.dtype, w.dtype, bias_dtype, y.dtype, t, options_.workspace_bytes);
    require(plan.has_value(), op, plan_failure(op, options_.workspace_bytes));
    return *plan;
  };
  auto* workspace = static_cast<std::byte*>(workspace_.get());
  // Column-major, as cuBLAS sees it: yᵀ[panel × rows] = w_panel[k × panel]ᵀ · xᵀ[k × rows].
  const auto gemm_call = [&](const LinearPlan& p, std::int64_t r0, std::int64_t rows,
                             std::int64_t n0, std::int64_t panel) {
    GemmCall call;
    call.m = panel;
    call.n = rows;
    call.k = k;
    const void* w_ptr = p.convert_w ? workspace + p.w_panel : element_ptr(w, n0 * k);
    const void* a_ptr = p.convert_x ? workspace + p.a_block : element_ptr(x, r0 * k);
    call.a = GemmOperand{w_ptr, cuda_type(p.t), k, true};
    call.b = GemmOperand{a_ptr, cuda_type(p.t), k, false};
    call.alpha = w_scale;
    if (p.staging) {
      call.d = workspace + p.acc;
      call.d_type = CUDA_R_32F;
      call.ldd = panel;
    } else {
      call.d = element_ptr(y, r0 * n + n0);
      call.d_type = cuda_type(y.dtype);
      call.ldd = n;
      if (bias != nullptr || accumulate) call.beta = 1.0f;
    }
    return call;
  };

  const DType t = linear_gemm_type(x.dtype, w.dtype, y.dtype);
  LinearPlan plan = plan_for(t);
  if (t != DType::kF32) {
    bool planned = true;
    for_each_linear_block(
        plan, m, n, [&](std::int64_t r0, std::int64_t rows, std::int64_t n0, std::int64_t panel) {
          if (planned) planned = gemm_->can_run(gemm_call(plan, r0, rows, n0, panel));
        });
    if (!planned) {
      log_once("linear " + std::to_string(m) + "x" + std::to_string(k) + "->" + std::to_string(n) +
               " (x " + std::string(dtype_name(x.dtype)) + ", w " +
               std::string(dtype_name(w.dtype)) + ", y " + std::string(dtype_name(y.dtype)) +
               (bias != nullptr ? ", bias " + std::string(dtype_name(bias->dtype)) : "") +
               "): no cuBLASLt algorithm for the " + std::string(dtype_name(t)) +
               " products, falling back to f32 operands");
      plan = plan_for(DType::kF32);
    }
  }

  std::int64_t x_in_block = -1;  // the row block (r0) the workspace's x block holds
  std::int64_t w_in_panel = -1;  // the panel (n0) the workspace's weight panel holds
  for_each_linear_block(
      plan, m, n, [&](std::int64_t r0, std::int64_t rows, std::int64_t n0, std::int64_t panel) {
        if (plan.convert_x && x_in_block != r0) {
          launch_convert(element_ptr(x, r0 * k), x.dtype, workspace + plan.a_block, plan.t, y.dtype,
                         rows * k, stream_);
          x_in_block = r0;
        }
        if (plan.convert_w && w_in_panel != n0) {
          if (quantised) {  // rows [n0, n0 + panel) are whole blocks: values n0·k onwards
            launch_dequantize(qw, n0 * k, panel * k, workspace + plan.w_panel, plan.t, stream_);
          } else if (convrot) {
            launch_dequantize_convrot(w.as<const std::int8_t>(),
                                      w_scaling.convrot->row_scale.as<const float>(), k,
                                      w_scaling.convrot->group_size, n0, panel,
                                      workspace + plan.w_panel, plan.t, stream_);
          } else {
            launch_convert(element_ptr(w, n0 * k), w.dtype, workspace + plan.w_panel, plan.t,
                           plan.t, panel * k, stream_);
          }
          w_in_panel = n0;
        }
        const GemmCall call = gemm_call(plan, r0, rows, n0, panel);
        void* out_block = element_ptr(y, r0 * n + n0);
        if (!plan.staging && bias != nullptr) {
          Epilogue preload = bias_only;
          preload.rows = rows;
          preload.cols = panel;
          preload.out = out_block;
          preload.bias_offset = n0;
          launch_epilogue(preload, stream_);
        }
        gemm_->run(call, stream_);
        if (plan.staging) {
          Epilogue e = bias_only;
          e.acc = reinterpret_cast<float*>(workspace + plan.acc);
          e.acc_ld = panel;
          e.rows = rows;
          e.cols = panel;
          e.out = out_block;
          e.bias_offset = n0;
          launch_epilogue(e, stream_);
        }
      });
}

// conv3d as the CPU backend computes it: per output frame, blocks of output positions unrolled
// (im2col, f32) and multiplied by the weight [Co, K] as f32 (true f32: no TF32), bias added in
// f32, one rounding. Weights of another dtype are widened panel by panel into the workspace.
void CudaBackend::conv3d(const Tensor& x, const Tensor& w, const Tensor* bias,
                         const Conv3dParams& p, const Tensor& y) {
  const char* op = "conv3d";
  const Conv3dShape s = check_conv3d(x, w, bias, p, y);
  const std::int64_t ci = s.ci, t = s.t, h = s.h, wd = s.w;
  const std::int64_t co = s.co, kt = s.kt, kh = s.kh, kw = s.kw;
  const std::int64_t to = s.to, ho = s.ho, wo = s.wo;
  require_input(x, op, "x");
  require_input(w, op, "w");
  require_output(y, op, "y");
  if (bias != nullptr) require_input(*bias, op, "bias");
  if (y.numel() == 0) return;

  const std::int64_t k = ci * kt * kh * kw;
  const std::int64_t plane = ho * wo;
  Epilogue bias_only;
  bias_only.out_dtype = y.dtype;
  bias_only.out_ld = to * plane;
  bias_only.bias_per_row = true;
  if (bias != nullptr) {
    bias_only.bias = bias->data;
    bias_only.bias_dtype = bias->dtype;
  }
  if (k == 0) {  // no input channels: y = bias (or 0), frame by frame
    for (std::int64_t ot = 0; ot < to; ++ot) {
      Epilogue e = bias_only;
      e.rows = co;
      e.cols = plane;
      e.out = element_ptr(y, ot * plane);
      launch_epilogue(e, stream_);
    }
    return;
  }

  const bool convert_w = w.dtype != DType::kF32;
  const bool staging = y.dtype != DType::kF32;
  GemmStaging need;
  need.total_rows = plane;
  need.total_panel = co;
  need.a_row_bytes = static_cast<std::size_t>(k) * sizeof(float);  // an im2col column
  need.w_row_bytes = convert_w ? static_cast<std::size_t>(k) * sizeof(float) : 0;
  need.staging = staging;
  const auto chunks = plan_gemm_chunks(need, options_.workspace_bytes);
  require(chunks.has_value(), op, plan_failure(op, options_.workspace_bytes));

  WorkspaceCursor ws(workspace_.get(), options_.workspace_bytes);
  auto* cols =
      static_cast<float*>(ws.take(static_cast<std::size_t>(chunks->rows) * need.a_row_bytes, op));
  void* w_panel =
      convert_w ? ws.take(static_cast<std::size_t>(chunks->panel) * need.w_row_bytes, op) : nullptr;
  auto* acc = staging
                  ? static_cast<float*>(ws.take(
                        static_cast<std::size_t>(chunks->rows * chunks->panel) * sizeof(float), op))
                  : nullptr;

  Im2col g;
  g.x = x.data;
  g.x_dtype = x.dtype;
  g.ci = ci;
  g.t = t;
  g.h = h;
  g.w = wd;
  g.kt = kt;
  g.kh = kh;
  g.kw = kw;
  g.stride_t = p.stride_t;
  g.stride_h = p.stride_h;
  g.stride_w = p.stride_w;
  g.pad_front = p.pad_front;
  g.pad_top = p.pad_top;
  g.pad_left = p.pad_left;
  g.wo = wo;
  g.cols = cols;

  for (std::int64_t c0 = 0; c0 < co; c0 += chunks->panel) {
    const std::int64_t panel = std::min(chunks->panel, co - c0);
    const void* w_ptr = element_ptr(w, c0 * k);
    if (convert_w) {
      launch_convert(w_ptr, w.dtype, w_panel, DType::kF32, DType::kF32, panel * k, stream_);
      w_ptr = w_panel;
    }
    for (std::int64_t ot = 0; ot < to; ++ot) {
      for (std::int64_t p0 = 0; p0 < plane; p0 += chunks->rows) {
        g.ot = ot;
        g.p0 = p0;
        g.n = std::min(chunks->rows, plane - p0);
        launch_im2col(g, stream_);
        // Column-major: out[n × panel] = cols[n × k] · w_panel[k × panel], where cols is the
        // row-major [k, n] block and w_panel the row-major [panel, k] weight rows.
        GemmCall call;
        call.m = g.n;
        call.n = panel;
        call.k = k;
        call.a = GemmOperand{cols, CUDA_R_32F, g.n, false};
        call.b = GemmOperand{w_ptr, CUDA_R_32F, k, false};
        void* out_block = element_ptr(y, (c0 * to + ot) * plane + p0);
        Epilogue e = bias_only;
        e.rows = panel;
        e.cols = g.n;
        e.out = out_block;
        e.bias_offset = c0;
        if (staging) {
          call.d = acc;
          call.d_type = CUDA_R_32F;
          call.ldd = g.n;
        } else {
          call.d = out_block;
          call.d_type = CUDA_R_32F;
          call.ldd = to * plane;
          if (bias != nullptr) {
            launch_epilogue(e, stream_);
            call.beta = 1.0f;
          }
        }
        gemm_->run(call, stream_);
        if (staging) {
          e.acc = acc;
          e.acc_ld = g.n;
          launch_epilogue(e, stream_);
        }
      }
    }
  }
}

}  // namespace ferry::cuda
