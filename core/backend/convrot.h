// Comfy-Org's int8 ConvRot weights (minimax_h3.md §G.3, ConvRotState in core/tensor/quant.h):
// the checks every backend and weight reader shares, and the host rotation by H_g.
#pragma once

#include <cstdint>
#include <span>
#include <string_view>

#include "core/tensor/quant.h"
#include "core/tensor/tensor.h"

namespace ferry {

// True for 4, 16, 64, 256, ...: the orders of the regular Hadamard matrices h4 ⊗ h4 ⊗ ….
bool is_power_of_4(std::int64_t value);

// Error(kBadModelFile) naming `what` (the weight) when an int8 ConvRot weight [out, in] cannot be
// used: a group size that is not a power of 4 or does not divide `in`, or row scales that are not
// F32 [out, 1] or [out].
void check_convrot(const Shape& weight, const ConvRotState& state, std::string_view what);
void check_convrot_group(std::int64_t group_size, std::int64_t in, std::string_view what);
// The row-scale part of that check, for a weight of `out` rows whose scales are `dtype` of shape
// `scale`: run time (the tensor) and load (its header, WeightScalingSource::find) share it.
void check_convrot_row_scale(DType dtype, std::span<const std::int64_t> scale, std::int64_t out,
                             std::string_view what);

// Multiplies every group of `group_size` consecutive values of x[count] (count a multiple of
// group_size) by H_g in place: a fast transform of g·log4(g) butterflies of h4, whose row i is
// all ones but for a −1 at column 3 − i (h4·v = Σv − 2·v[3 − i]), then the 1/√g. H_g is
// symmetric, so this is also x · H_g.
void rotate_convrot_groups(float* x, std::int64_t count, std::int64_t group_size);

}  // namespace ferry
