#include "core/models/wan/flow_unipc.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "core/error.h"
#include "core/models/wan/no_fp_contraction.h"  // last: it applies to what follows

namespace ferry::models::wan {
namespace {

constexpr int kSolverOrder = 2;

// fp32 log and expm1 rounded from fp64: correctly rounded, and the same on every platform. The
// official scalars come from torch's CPU kernels (MKL VML) and differ in the last bit for
// about one value in ten; the tests bound what that does to a trajectory.
float log_f32(float x) {
  return static_cast<float>(std::log(static_cast<double>(x)));
}
float expm1_f32(float x) {
  return static_cast<float>(std::expm1(static_cast<double>(x)));
}

// λ(σ) = log α - log σ with α = 1 - σ (fp32); +inf at σ = 0.
float lambda_of(float sigma) {
  return log_f32(1.0f - sigma) - log_f32(sigma);
}

void check_size(std::size_t got, std::size_t want, const char* what) {
  if (got != want) {
    throw Error(ErrorCode::kBadArgument, std::string("UniPC step: ") + what + " has " +
                                             std::to_string(got) + " elements, the sampler " +
                                             std::to_string(want));
  }
}

}  // namespace

FlowUniPC::FlowUniPC(std::span<const float> sigmas, std::size_t sample_size)
    : sigmas_(sigmas.begin(), sigmas.end()),
      m_this_(sample_size),
      m_prev_(sample_size),
      m_prev2_(sample_size),
      last_sample_(sample_size) {
  if (sigmas_.size() < 2 || sigmas_.back() != 0.0f || !(sigmas_.front() < 1.0f)) {
    throw Error(ErrorCode::kBadArgument, "UniPC needs at least two sigmas, below 1, ending with 0");
  }
}

void FlowUniPC::step(std::span<const float> velocity, std::span<float> sample) {
  if (step_index_ >= steps()) {
    throw Error(ErrorCode::kBadArgument, "UniPC step: every step has already been taken");
  }
  check_size(velocity.size(), m_this_.size(), "the velocity");
  check_size(sample.size(), m_this_.size(), "the sample");

  // Data prediction from the sample the model saw (before the corrector).
  const float sigma = sigmas_[static_cast<std::size_t>(step_index_)];
  for (std::size_t k = 0; k < sample.size(); ++k) {
    const float scaled = sigma * velocity[k];
    m_this_[k] = sample[k] - scaled;
  }
  if (step_index_ > 0) correct(sample);

  std::swap(m_prev2_, m_prev_);
  std::swap(m_prev_, m_this_);  // m_prev_ is now this step's prediction

  const int order = std::min({kSolverOrder, steps() - step_index_, lower_order_nums_ + 1});
  last_order_ = order;
  std::copy(sample.begin(), sample.end(), last_sample_.begin());
  predict(sample);

  lower_order_nums_ = std::min(lower_order_nums_ + 1, kSolverOrder);
  ++step_index_;
}

// UniC of order last_order_ at step i = step_index_ > 0: rewrites x_i from the previous corrected
// sample and the data predictions m_{i-2}, m_{i-1}, m_i (m_prev2_, m_prev_, m_this_).
void FlowUniPC::correct(std::span<float> sample) const {
  const std::size_t i = static_cast<std::size_t>(step_index_);
  const float sigma_t = sigmas_[i];
  const float sigma_s0 = sigmas_[i - 1];
  const float alpha_t = 1.0f - sigma_t;
  const float lambda_t = lambda_of(sigma_t);
  const float lambda_s0 = lambda_of(sigma_s0);
  const float h = lambda_t - lambda_s0;
  const float hh = -h;
  const float h_phi_1 = expm1_f32(hh);
  const float b_h = h_phi_1;  // bh2

  const float c_x = sigma_t / sigma_s0;
  const float c_m = alpha_t * h_phi_1;
  const float c_res = alpha_t * b_h;

  if (last_order_ == 1) {
    for (std::size_t k = 0; k < sample.size(); ++k) {
      const float a = c_x * last_sample_[k];
      const float b = c_m * m_prev_[k];
      const float base = a - b;
      const float d1_t = m_this_[k] - m_prev_[k];
      const float res = 0.5f * d1_t;
      const float corr = c_res * res;
      sample[k] = base - corr;
    }
    return;
  }

  // Order 2: ρ solves [[1, 1], [r, 1]]·ρ = [b0, b1].
  const float lambda_s1 = lambda_of(sigmas_[i - 2]);
  const float rk = (lambda_s1 - lambda_s0) / h;
  float h_phi_k = h_phi_1 / hh - 1.0f;
  const float b0 = h_phi_k * 1.0f / b_h;
  h_phi_k = h_phi_k / hh - 0.5f;
  const float b1 = h_phi_k * 2.0f / b_h;
  // LU with partial pivoting and reciprocal scaling, the operation order of the LAPACK
  // (MKL sgesv) solve torch.linalg.solve calls; this matches its result bit for bit.
  float rho0 = 0.0f;
  float rho1 = 0.0f;
  if (std::fabs(rk) <= 1.0f) {
    const float l = rk;
    const float u = 1.0f - l;
    const float y1 = b1 - l * b0;
    rho1 = y1 * (1.0f / u);
    rho0 = b0 - rho1;
  } else {
    const float l = 1.0f / rk;
    const float u = 1.0f - l;
    const float y1 = b0 - l * b1;
    rho1 = y1 * (1.0f / u);
    rho0 = (b1 - rho1) * (1.0f / rk);
  }

  for (std::size_t k = 0; k < sample.size(); ++k) {
    const float a = c_x * last_sample_[k];
    const float b = c_m * m_prev_[k];
    const float base = a - b;
    const float d1 = (m_prev2_[k] - m_prev_[k]) / rk;
    const float corr_res = rho0 * d1;
    const float d1_t = m_this_[k] - m_prev_[k];
    const float t1 = rho1 * d1_t;
    const float res = corr_res + t1;
    const float corr = c_res * res;
    sample[k] = base - corr;
  }
}

// UniP of order last_order_ from σ_i to σ_{i+1}, with m_i = m_prev_ and m_{i-1} = m_prev2_.
void FlowUniPC::predict(std::span<float> sample) {
  const std::size_t i = static_cast<std::size_t>(step_index_);
  const float sigma_t = sigmas_[i + 1];
  const float sigma_s0 = sigmas_[i];
  const float alpha_t = 1.0f - sigma_t;
  const float lambda_s0 = lambda_of(sigma_s0);
  float h = 0.0f;
  float h_phi_1 = -1.0f;  // the limit at σ_{i+1} = 0, where λ = +inf: x_{i+1} = m_i
  if (sigma_t > 0.0f) {
    h = lambda_of(sigma_t) - lambda_s0;
    h_phi_1 = expm1_f32(-h);
  }
  const float b_h = h_phi_1;  // bh2
  const float c_x = sigma_t / sigma_s0;
  const float c_m = alpha_t * h_phi_1;

  if (last_order_ == 1) {
    for (std::size_t k = 0; k < sample.size(); ++k) {
      const float a = c_x * sample[k];
      const float b = c_m * m_prev_[k];
      sample[k] = a - b;
    }
    return;
  }

  // Order 2 never reaches σ = 0 (the last step is order 1), so h is finite here.
  const float rk = (lambda_of(sigmas_[i - 1]) - lambda_s0) / h;
  const float c_res = alpha_t * b_h;
  for (std::size_t k = 0; k < sample.size(); ++k) {
    const float a = c_x * sample[k];
    const float b = c_m * m_prev_[k];
    const float base = a - b;
    const float d1 = (m_prev2_[k] - m_prev_[k]) / rk;
    const float res = 0.5f * d1;
    const float corr = c_res * res;
    sample[k] = base - corr;
  }
}

}  // namespace ferry::models::wan
