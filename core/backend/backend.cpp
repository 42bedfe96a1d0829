#include "core/backend/backend.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "core/backend/op_shapes.h"
#include "core/backend/snake_beta.h"
#include "core/error.h"
#include "core/tensor/convert.h"

namespace ferry {
namespace {

std::vector<float> download_f32(Backend& backend, const Tensor& t) {
  std::vector<std::byte> raw(t.bytes());
  backend.download(t, raw.data());
  std::vector<float> values(static_cast<std::size_t>(t.numel()));
  convert_to_f32(t.dtype, raw.data(), values.data(), values.size());
  return values;
}

}  // namespace

void Backend::snake_beta_alias_free(const Tensor& x, const Tensor& alpha, const Tensor& beta,
                                    const Tensor& filters, const Tensor& y) {
  check_snake_beta(x, alpha, beta, filters, y);
  const std::int64_t channels = x.shape[0], samples = x.shape[1];
  const std::vector<float> xs = download_f32(*this, x);
  const std::vector<float> alphas = download_f32(*this, alpha);
  const std::vector<float> betas = download_f32(*this, beta);
  const std::vector<float> taps = download_f32(*this, filters);
  std::vector<float> ys(xs.size());
  std::vector<float> work(snake_beta_work_floats(samples));
  for (std::int64_t c = 0; c < channels; ++c) {
    const std::size_t row = static_cast<std::size_t>(c * samples);
    snake_beta_alias_free_row(xs.data() + row, samples, alphas[static_cast<std::size_t>(c)],
                              betas[static_cast<std::size_t>(c)], taps.data(),
                              taps.data() + kSnakeFilterTaps, work.data(), ys.data() + row);
  }
  std::vector<std::byte> out(y.bytes());
  convert_from_f32(ys.data(), y.dtype, out.data(), ys.size());
  upload(y, out.data());
  synchronize();  // `out` dies here
}

int t5_relative_bucket(std::int64_t relative_position) {
  // wan.md §A.2: 16 buckets a direction, exact below 8, logarithmic up to 128, in float32.
  const int base = relative_position > 0 ? 16 : 0;
  const std::int64_t a = relative_position < 0 ? -relative_position : relative_position;
  if (a < 8) return base + static_cast<int>(a);
  const float scaled = std::log(static_cast<float>(a) / 8.0f) / static_cast<float>(std::log(16.0)) * 8.0f;
  return base + std::min(15, 8 + static_cast<int>(scaled));
}

}  // namespace ferry
