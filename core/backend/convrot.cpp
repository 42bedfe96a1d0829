#include "core/backend/convrot.h"

#include <cmath>
#include <string>

#include "core/error.h"

namespace ferry {

bool is_power_of_4(std::int64_t value) {
  if (value < 4) return false;
  while (value % 4 == 0) value /= 4;
  return value == 1;
}

void check_convrot_group(std::int64_t group_size, std::int64_t in, std::string_view what) {
  if (!is_power_of_4(group_size)) {
    throw Error(ErrorCode::kBadModelFile, std::string(what) + ": the ConvRot group size " +
                                              std::to_string(group_size) +
                                              " is not a power of 4 (4, 16, 64, 256, ...)");
  }
  if (in % group_size != 0) {
    throw Error(ErrorCode::kBadModelFile, std::string(what) + ": the ConvRot group size " +
                                              std::to_string(group_size) + " does not divide the " +
                                              std::to_string(in) + " input features");
  }
}

void check_convrot(const Shape& weight, const ConvRotState& state, std::string_view what) {
  if (weight.rank() != 2) {
    throw Error(ErrorCode::kBadModelFile,
                std::string(what) + ": an int8 ConvRot weight must be [out, in]");
  }
  check_convrot_group(state.group_size, weight[1], what);
  const Shape& s = state.row_scale.shape;
  const bool per_row =
      (s.rank() == 2 && s[0] == weight[0] && s[1] == 1) || (s.rank() == 1 && s[0] == weight[0]);
  if (state.row_scale.dtype != DType::kF32 || !per_row) {
    throw Error(ErrorCode::kBadModelFile,
                std::string(what) + ": the int8 ConvRot row scales must be F32 [" +
                    std::to_string(weight[0]) + ", 1], not " +
                    std::string(dtype_name(state.row_scale.dtype)) + " of " +
                    std::to_string(state.row_scale.numel()) + " values");
  }
}

namespace {

// v[0], v[stride], v[2·stride], v[3·stride] ← h4 · (those four).
void h4_butterfly(float* v, std::int64_t stride) {
  const float a = v[0], b = v[stride], c = v[2 * stride], d = v[3 * stride];
  const float sum = (a + b) + (c + d);
  v[0] = sum - 2.0f * d;
  v[stride] = sum - 2.0f * c;
  v[2 * stride] = sum - 2.0f * b;
  v[3 * stride] = sum - 2.0f * a;
}

}  // namespace

void rotate_convrot_groups(float* x, std::int64_t count, std::int64_t group_size) {
  const float norm = 1.0f / std::sqrt(static_cast<float>(group_size));
  for (std::int64_t g0 = 0; g0 < count; g0 += group_size) {
    float* group = x + g0;
    // h4 ⊗ … ⊗ h4 acts on each base-4 digit of the index on its own: one pass per digit.
    for (std::int64_t stride = 1; stride < group_size; stride *= 4) {
      for (std::int64_t block = 0; block < group_size; block += 4 * stride) {
        for (std::int64_t j = 0; j < stride; ++j) h4_butterfly(group + block + j, stride);
      }
    }
    for (std::int64_t i = 0; i < group_size; ++i) group[i] *= norm;
  }
}

}  // namespace ferry
