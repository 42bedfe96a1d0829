// Device-side element access by dtype (every kernel reads and writes tensors through these, so
// rounding matches core/tensor/convert.h), and the element-conversion kernel.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "core/tensor/dtype.h"
#include "cuda/float_codec.h"

namespace ferry::cuda {

#if defined(__CUDACC__)

// Element i of a float tensor (F32, BF16, F16, F8E4M3, F8E5M2), widened exactly to f32. The
// host checks dtypes before launching; anything else reads as 0.
__device__ __forceinline__ float load_f32(const void* p, DType t, std::int64_t i) {
  switch (t) {
    case DType::kF32:
      return static_cast<const float*>(p)[i];
    case DType::kBF16:
      return codec::decode_bf16(static_cast<const std::uint16_t*>(p)[i]);
    case DType::kF16:
      return codec::decode_f16(static_cast<const std::uint16_t*>(p)[i]);
    case DType::kF8E4M3:
      return codec::decode_e4m3(static_cast<const std::uint8_t*>(p)[i]);
    case DType::kF8E5M2:
      return codec::decode_e5m2(static_cast<const std::uint8_t*>(p)[i]);
    default:
      return 0.0f;
  }
}

// Element i of a float tensor = v rounded to its dtype (to nearest even, convert.h's rules).
__device__ __forceinline__ void store_f32(void* p, DType t, std::int64_t i, float v) {
  switch (t) {
    case DType::kF32:
      static_cast<float*>(p)[i] = v;
      return;
    case DType::kBF16:
      static_cast<std::uint16_t*>(p)[i] = codec::encode_bf16(v);
      return;
    case DType::kF16:
      static_cast<std::uint16_t*>(p)[i] = codec::encode_f16(v);
      return;
    case DType::kF8E4M3:
      static_cast<std::uint8_t*>(p)[i] = codec::encode_e4m3(v);
      return;
    case DType::kF8E5M2:
      static_cast<std::uint8_t*>(p)[i] = codec::encode_e5m2(v);
      return;
    default:
      return;
  }
}

// round_to(t, v) of convert.h: the value after a round trip through t.
__device__ __forceinline__ float round_as(DType t, float v) {
  switch (t) {
    case DType::kBF16:
      return codec::decode_bf16(codec::encode_bf16(v));
    case DType::kF16:
      return codec::decode_f16(codec::encode_f16(v));
    case DType::kF8E4M3:
      return codec::decode_e4m3(codec::encode_e4m3(v));
    case DType::kF8E5M2:
      return codec::decode_e5m2(codec::encode_e5m2(v));
    default:
      return v;
  }
}

#endif  // __CUDACC__

// Whether the kernels can read (load_f32) or write (store_f32) this dtype.
inline bool device_loadable(DType t) {
  return t == DType::kF32 || t == DType::kBF16 || t == DType::kF16 || t == DType::kF8E4M3 ||
         t == DType::kF8E5M2;
}
inline bool device_storable(DType t) {
  return device_loadable(t);
}

// y[i] = x[i] rounded first to `through`, then stored as y's dtype (round_to(through, x) when y
// can hold every value of `through`; the plain conversion when through == yt).
void launch_convert(const void* x, DType xt, void* y, DType yt, DType through, std::int64_t n,
                    cudaStream_t stream);

}  // namespace ferry::cuda
