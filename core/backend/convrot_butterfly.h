// The h4 butterfly of Comfy-Org's int8 ConvRot rotation (convrot.h), written once for the CPU's
// rotate_convrot_groups and the CUDA dequantiser (cuda/convrot.cu). Plain C++ when a host
// compiler includes it; __host__ __device__ under nvcc, as cuda/float_codec.h does.
#pragma once

#include <cstdint>

#if defined(__CUDACC__)
#define FERRY_CONVROT_HD __host__ __device__ __forceinline__
#else
#define FERRY_CONVROT_HD inline
#endif

namespace ferry {

// v[0], v[stride], v[2·stride], v[3·stride] ← h4 · (those four). Row i of h4 is all ones but for
// a −1 at column 3 − i, so h4·v = Σv − 2·v[3 − i]; Σv is summed as (a + b) + (c + d) on both
// sides, and 2·v is exact, so host and device round alike.
FERRY_CONVROT_HD void h4_butterfly(float* v, std::int64_t stride) {
  const float a = v[0], b = v[stride], c = v[2 * stride], d = v[3 * stride];
  const float sum = (a + b) + (c + d);
  v[0] = sum - 2.0f * d;
  v[stride] = sum - 2.0f * c;
  v[2 * stride] = sum - 2.0f * b;
  v[3 * stride] = sum - 2.0f * a;
}

}  // namespace ferry
