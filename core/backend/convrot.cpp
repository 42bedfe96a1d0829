#include "core/backend/convrot.h"

#include <cmath>
#include <string>
#include <vector>

#include "core/backend/convrot_butterfly.h"
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
  std::vector<std::int64_t> dims;
  for (int i = 0; i < s.rank(); ++i) dims.push_back(s[i]);
  check_convrot_row_scale(state.row_scale.dtype, dims, weight[0], what);
}

void check_convrot_row_scale(DType dtype, std::span<const std::int64_t> scale, std::int64_t out,
                             std::string_view what) {
  const bool per_row = (scale.size() == 2 && scale[0] == out && scale[1] == 1) ||
                       (scale.size() == 1 && scale[0] == out);
  if (dtype == DType::kF32 && per_row) return;
  std::string dims;
  for (const std::int64_t d : scale) dims += (dims.empty() ? "" : ", ") + std::to_string(d);
  throw Error(ErrorCode::kBadModelFile, std::string(what) +
                                            ": the int8 ConvRot row scales must be F32 [" +
                                            std::to_string(out) + ", 1], not " +
                                            std::string(dtype_name(dtype)) + " [" + dims + "]");
}

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
