// The CPU backend: the readable reference every other backend is checked against, and the
// fallback on machines without an NVIDIA GPU. Computes in f32 (statistics in f64), GEMMs through
// OpenBLAS or our own blocked GEMM, rows spread over a thread pool.
#pragma once

#include <memory>
#include <vector>

#include "core/backend/backend.h"
#include "core/backend/cpu/gemm.h"
#include "core/backend/cpu/thread_pool.h"

namespace ferry::cpu {

class CpuBackend final : public Backend {
 public:
  // `gemm`: the GEMM every product runs on (tests pick Ferry's own, whose sums do not depend on
  // the row count, where they compare row chunks with whole products).
  explicit CpuBackend(ThreadPool& pool = default_thread_pool(),
                      GemmPath gemm = default_gemm_path());

  Device device() const override { return Device::kCpu; }
  std::string name() const override;
  DeviceCapabilities capabilities() const override { return kHostCapabilities; }

  std::unique_ptr<DeviceBuffer> allocate(std::size_t bytes) override;
  void upload(const Tensor& dst, const void* host) override;
  void download(const Tensor& src, void* host) override;
  void synchronize() override {}

  memory::HostAllocator& host_allocator() override;
  std::unique_ptr<CopyQueue> create_copy_queue() override;
  void wait_for(memory::Fence& fence) override { fence.wait(); }
  // Already complete: CPU ops have finished when they return.
  std::shared_ptr<memory::Fence> record_compute() override { return compute_done_; }

  void linear(const Tensor& x, const Tensor& w, const Tensor* bias, const Tensor& y,
              const WeightScaling& w_scaling) override;
  void linear_add(const Tensor& x, const Tensor& w, const Tensor& y,
                  const WeightScaling& w_scaling) override;
  void rms_norm(const Tensor& x, const Tensor& weight, float eps, const Tensor& y) override;
  void layer_norm(const Tensor& x, const Tensor* weight, const Tensor* bias, float eps,
                  const Tensor& y) override;
  void channel_rms_norm(const Tensor& x, const Tensor& gamma, const Tensor& y) override;
  void modulate(const Tensor& x, const Tensor& scale, const Tensor& shift,
                const Tensor& y) override;
  void gated_add(const Tensor& x, const Tensor& y, const Tensor* gate) override;
  void add_scaled(const Tensor& x, const Tensor& y, float alpha) override;
  void add(const Tensor& a, const Tensor& b, const Tensor& out) override;
  void mul(const Tensor& a, const Tensor& b, const Tensor& out) override;
  void gelu_tanh(const Tensor& x, const Tensor& y) override;
  void silu(const Tensor& x, const Tensor& y) override;
  void clamp(const Tensor& x, float lo, float hi, const Tensor& y) override;
  void tanh_clamp(const Tensor& x, float limit, const Tensor& y) override;
  void gelu_erf(const Tensor& x, const Tensor& y) override;
  void snake_beta_alias_free(const Tensor& x, const Tensor& alpha, const Tensor& beta,
                             const Tensor& filters, const Tensor& y) override;
  void softmax(const Tensor& x, const Tensor& y) override;
  void convert(const Tensor& x, const Tensor& y) override;
  void attention(const Tensor& q, const Tensor& k, const Tensor& v, float scale,
                 const Tensor* relative_bias, bool causal, const Tensor& o) override;
  void rope_halves(const Tensor& x, const Tensor& cos, const Tensor& sin) override;
  void rope_3d(const Tensor& x, const RopeGrid& grid) override;
  void conv3d(const Tensor& x, const Tensor& w, const Tensor* bias, const Conv3dParams& params,
              const Tensor& y) override;
  void upsample_nearest_2x(const Tensor& x, const Tensor& y) override;
  void avg_down_3d(const Tensor& x, int ft, int fs, const Tensor& y) override;
  void dup_up_3d(const Tensor& x, int ft, int fs, const Tensor& y) override;
  void permute(const Tensor& x, const std::vector<int>& order, const Tensor& y) override;
  void concat(const Tensor& a, const Tensor& b, int dim, const Tensor& y) override;
  void slice(const Tensor& x, int dim, std::int64_t begin, const Tensor& y) override;
  void embedding(const Tensor& table, const Tensor& ids, const Tensor& y) override;

 private:
  // linear (accumulate false: y = product + bias) and linear_add (true: y += product).
  void product(const Tensor& x, const Tensor& w, const Tensor* bias, const Tensor& y,
               const WeightScaling& w_scaling, bool accumulate);
  // gated_add (x += y · gate) and add_scaled (x += alpha · y, gate null).
  void add_rows(const Tensor& x, const Tensor& y, const Tensor* gate, float alpha, const char* op);

  ThreadPool& pool_;
  GemmPath gemm_;
  std::shared_ptr<memory::Fence> compute_done_;
  // Scratch for the ops that run on the calling thread: grown on first use, then reused (no
  // per-step allocation).
  std::vector<float> scratch_a_;
  std::vector<float> scratch_b_;
  std::vector<float> scratch_c_;
  std::vector<float> scratch_d_;     // linear: an fp8 weight's widened panel; conv3d: the bias
  std::vector<double> rope_tables_;  // rope_3d: cos/sin per position and pair, for each axis
};

}  // namespace ferry::cpu
