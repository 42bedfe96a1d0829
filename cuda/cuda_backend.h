// The CUDA backend: every Backend op on one NVIDIA GPU, queued on the backend's own compute
// stream. Matches the CPU backend (core/backend/cpu) op for op: the same f32 (or f64) math, the
// same rounding points, checked by tests/backend/backend_parity_test.cpp.
//
// Memory: allocate() is cudaMalloc. Besides what callers allocate, the backend holds one fixed
// workspace (allocated once, here) for everything an op stages — operands converted to a GEMM's
// input type, dequantised weight panels, im2col blocks, f32 result blocks, RoPE tables — and
// cuBLASLt's split-K workspace. Ops never allocate and never synchronise the device; embedding()
// alone waits for the compute stream, to read back its id check.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

#include "core/backend/backend.h"
#include "cuda/device_info.h"
#include "cuda/pinned_host_allocator.h"

namespace ferry::cuda {

class LtGemm;
class EventPool;

struct CudaBackendOptions {
  std::size_t workspace_bytes = std::size_t{64} << 20;       // staging for linear, conv3d, rope
  std::size_t gemm_workspace_bytes = std::size_t{32} << 20;  // cuBLASLt split-K partial sums
  // false: every attention runs the generic tiled kernel (the parity test checks both).
  bool flash_attention = true;
};

class CudaBackend final : public Backend {
 public:
  // Uses the first CUDA device (query_device). Throws Error(kUnsupported) without one and
  // Error(kOutOfMemory) when the workspace cannot be allocated.
  explicit CudaBackend(const CudaBackendOptions& options = {});
  ~CudaBackend() override;
  CudaBackend(const CudaBackend&) = delete;
  CudaBackend& operator=(const CudaBackend&) = delete;

  Device device() const override { return Device::kCuda; }
  std::string name() const override;
  DeviceCapabilities capabilities() const override { return capabilities_of(info_); }

  std::unique_ptr<DeviceBuffer> allocate(std::size_t bytes) override;
  // Queued on the compute stream. From pageable host memory the copy has read `host` when this
  // returns; from pinned memory it reads it later: keep it unchanged until synchronize().
  void upload(const Tensor& dst, const void* host) override;
  void download(const Tensor& src, void* host) override;
  void synchronize() override;

  // Pinned (cudaHostAlloc) host memory; copy queues are streams of their own whose fences are
  // events the compute stream waits on without the host waiting, and which wait on the compute
  // stream's events the same way.
  memory::HostAllocator& host_allocator() override { return pinned_; }
  std::unique_ptr<CopyQueue> create_copy_queue() override;
  void wait_for(memory::Fence& fence) override;
  std::shared_ptr<memory::Fence> record_compute() override;

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

  // The stream every op is queued on: the weight streamer makes it wait for its copy events
  // and records its own "slot free" events on it.
  cudaStream_t stream() const { return stream_; }
  const DeviceInfo& device_info() const { return info_; }

 private:
  // linear (accumulate false: y = product + bias) and linear_add (true: y += product).
  void product(const Tensor& x, const Tensor& w, const Tensor* bias, const Tensor& y,
               const WeightScaling& w_scaling, bool accumulate);
  // Owners of a stream, a cudaMalloc'd block and a cudaHostAlloc'd block.
  struct StreamDestroy {
    void operator()(cudaStream_t s) const noexcept;
  };
  struct DeviceFree {
    void operator()(void* p) const noexcept;
  };
  struct HostFree {
    void operator()(void* p) const noexcept;
  };

  int compute_capability() const { return info_.compute_major * 10 + info_.compute_minor; }

  // Declared in release order (last destroyed first): the stream outlives the memory.
  CudaBackendOptions options_;
  DeviceInfo info_;
  std::unique_ptr<std::remove_pointer_t<cudaStream_t>, StreamDestroy> stream_owner_;
  cudaStream_t stream_ = nullptr;
  std::unique_ptr<void, DeviceFree> workspace_;
  std::unique_ptr<void, DeviceFree> gemm_workspace_;
  std::unique_ptr<void, DeviceFree> flag_;    // embedding's first-bad-id index
  std::unique_ptr<void, HostFree> readback_;  // pinned: the flag and one id, read back
  std::unique_ptr<LtGemm> gemm_;
  PinnedHostAllocator pinned_;
  std::unique_ptr<EventPool> compute_events_;  // record_compute()'s events, reused
};

}  // namespace ferry::cuda
