#include "cuda/cuda_backend.h"

#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>

#include "core/backend/op_shapes.h"
#include "core/error.h"
#include "core/memory/fence_pool.h"
#include "cuda/attention.cuh"
#include "cuda/cuda_backend_detail.h"
#include "cuda/cuda_error.h"
#include "cuda/elementwise.cuh"
#include "cuda/gemm.h"
#include "cuda/layout.cuh"
#include "cuda/norm.cuh"
#include "cuda/quant.cuh"
#include "cuda/resample.cuh"
#include "cuda/rope.cuh"

namespace ferry::cuda {

using namespace detail;

namespace {

std::string mib(std::uint64_t bytes) {
  char text[32];
  std::snprintf(text, sizeof text, "%.1f MiB", static_cast<double>(bytes) / (1 << 20));
  return text;
}

// cudaMalloc, or Error(kOutOfMemory) naming the request and what the device has free. A failed
// cudaMalloc is also the runtime's "last error": cleared, so the next launch check does not
// report it again.
void* device_malloc(std::size_t bytes, const char* what) {
  void* p = nullptr;
  const cudaError_t status = cudaMalloc(&p, bytes);
  if (status != cudaSuccess) {
    cudaGetLastError();
    std::string free_text;
    std::size_t free_bytes = 0, total_bytes = 0;
    if (cudaMemGetInfo(&free_bytes, &total_bytes) == cudaSuccess) {
      free_text = " (" + mib(free_bytes) + " free of " + mib(total_bytes) + ")";
    }
    cudaGetLastError();
    throw Error(
        status == cudaErrorMemoryAllocation ? ErrorCode::kOutOfMemory : ErrorCode::kInternal,
        std::string("could not allocate ") + mib(bytes) + " of GPU memory for " + what + free_text +
            ": " + cudaGetErrorString(status));
  }
  return p;
}

class CudaBuffer final : public DeviceBuffer {
 public:
  explicit CudaBuffer(std::size_t bytes)
      : data_(bytes == 0 ? nullptr : device_malloc(bytes, "a tensor buffer")), size_(bytes) {}
  ~CudaBuffer() override {
    if (data_ != nullptr) cudaFree(data_);
  }
  CudaBuffer(const CudaBuffer&) = delete;
  CudaBuffer& operator=(const CudaBuffer&) = delete;
  void* data() const override { return data_; }
  std::size_t size() const override { return size_; }

 private:
  void* data_;
  std::size_t size_;
};

void require_same_dtype(const Tensor& a, const Tensor& b, const char* op) {
  require(a.dtype == b.dtype, op,
          "dtypes " + std::string(dtype_name(a.dtype)) + " and " +
              std::string(dtype_name(b.dtype)) + " differ");
}

// A [C] or [R,C] parameter of a row op.
RowParam row_param(const Tensor& p, std::int64_t rows, std::int64_t cols, const char* op,
                   const char* name) {
  require_input(p, op, name);
  return RowParam{p.data, p.dtype, check_row_param(p, rows, cols, op, name)};
}

}  // namespace

void CudaBackend::StreamDestroy::operator()(cudaStream_t s) const noexcept {
  cudaStreamSynchronize(s);
  cudaStreamDestroy(s);
}
void CudaBackend::DeviceFree::operator()(void* p) const noexcept {
  cudaFree(p);
}
void CudaBackend::HostFree::operator()(void* p) const noexcept {
  cudaFreeHost(p);
}

// ---- streaming: fences and the copy queue ----

// An EventFence whose event is created once and recorded again each time the pool hands it out
// (a step creates no events). A waiter holds the fence, so it is never re-recorded under one;
// cudaStreamWaitEvent takes the event's state at the call, so re-recording later is safe.
class PooledEventFence final : public memory::Fence {
 public:
  PooledEventFence() {
    check(cudaEventCreateWithFlags(&event_, cudaEventDisableTiming), "cudaEventCreate");
  }
  ~PooledEventFence() override { cudaEventDestroy(event_); }
  PooledEventFence(const PooledEventFence&) = delete;
  PooledEventFence& operator=(const PooledEventFence&) = delete;

  void record(cudaStream_t stream) { check(cudaEventRecord(event_, stream), "cudaEventRecord"); }
  void wait() override { check(cudaEventSynchronize(event_), "cudaEventSynchronize"); }
  bool done() override {
    const cudaError_t status = cudaEventQuery(event_);
    if (status == cudaErrorNotReady) return false;
    check(status, "cudaEventQuery");
    return true;
  }
  void* device_event() const override { return event_; }

 private:
  cudaEvent_t event_ = nullptr;
};

// `stream` waits for `fence` on the device: an event when the fence has one (every fence this
// backend records), a host wait for one a CPU thread signals.
static void stream_wait(cudaStream_t stream, memory::Fence& fence) {
  if (void* event = fence.device_event()) {
    check(cudaStreamWaitEvent(stream, static_cast<cudaEvent_t>(event), 0), "cudaStreamWaitEvent");
  } else {
    fence.wait();
  }
}

std::shared_ptr<PooledEventFence> make_event_fence() {
  return std::make_shared<PooledEventFence>();
}

class EventPool {
 public:
  EventPool() : pool_(16, make_event_fence) {}
  std::shared_ptr<memory::Fence> record(cudaStream_t stream) {
    std::shared_ptr<PooledEventFence> fence = pool_.take(make_event_fence);
    fence->record(stream);
    return fence;
  }

 private:
  memory::FencePool<PooledEventFence> pool_;
};

namespace {

// cudaMemcpyAsync on a non-blocking stream of its own, beside the compute stream.
class CudaCopyQueue final : public CopyQueue {
 public:
  CudaCopyQueue() {
    check(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "cudaStreamCreate (copy)");
  }
  ~CudaCopyQueue() override {
    cudaStreamSynchronize(stream_);
    cudaStreamDestroy(stream_);
  }
  CudaCopyQueue(const CudaCopyQueue&) = delete;
  CudaCopyQueue& operator=(const CudaCopyQueue&) = delete;

  void copy_to_device(void* device_dst, const void* host_src, std::size_t bytes) override {
    if (bytes == 0) return;
    check(cudaMemcpyAsync(device_dst, host_src, bytes, cudaMemcpyHostToDevice, stream_),
          "cudaMemcpyAsync (upload)");
  }
  std::shared_ptr<memory::Fence> record() override { return events_.record(stream_); }
  // The copy stream waits for a compute event: the IO thread goes on reading meanwhile.
  void wait_for(const std::shared_ptr<memory::Fence>& fence) override {
    if (fence) stream_wait(stream_, *fence);
  }

 private:
  cudaStream_t stream_ = nullptr;
  EventPool events_;
};

}  // namespace

std::unique_ptr<CopyQueue> CudaBackend::create_copy_queue() {
  return std::make_unique<CudaCopyQueue>();
}

void CudaBackend::wait_for(memory::Fence& fence) {
  stream_wait(stream_, fence);
}

std::shared_ptr<memory::Fence> CudaBackend::record_compute() {
  return compute_events_->record(stream_);
}

CudaBackend::CudaBackend(const CudaBackendOptions& options) : options_(options) {
  std::string why;
  const auto info = query_device(&why);
  if (!info) throw Error(ErrorCode::kUnsupported, "the CUDA backend cannot start: " + why);
  info_ = *info;
  check(cudaSetDevice(info_.index), "cudaSetDevice");
  cudaStream_t stream = nullptr;
  check(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreateWithFlags");
  stream_owner_.reset(stream);
  stream_ = stream;
  workspace_.reset(device_malloc(options_.workspace_bytes, "the CUDA backend's workspace"));
  gemm_workspace_.reset(device_malloc(options_.gemm_workspace_bytes, "cuBLASLt's workspace"));
  flag_.reset(device_malloc(kWorkspaceAlignment, "the embedding id check"));
  void* host = nullptr;
  check(cudaHostAlloc(&host, 64, cudaHostAllocDefault), "cudaHostAlloc (readback)");
  readback_.reset(host);
  gemm_ = std::make_unique<LtGemm>(gemm_workspace_.get(), options_.gemm_workspace_bytes);
  compute_events_ = std::make_unique<EventPool>();
}

CudaBackend::~CudaBackend() {
  // Queued work may still read the workspace and use the cuBLASLt handle.
  if (stream_ != nullptr) cudaStreamSynchronize(stream_);
}

std::string CudaBackend::name() const {
  return "CUDA (" + info_.name + ", sm_" + std::to_string(compute_capability()) + ", " +
         mib(info_.total_bytes) + ")";
}

// ---- memory ----

std::unique_ptr<DeviceBuffer> CudaBackend::allocate(std::size_t bytes) {
  return std::make_unique<CudaBuffer>(bytes);
}

void CudaBackend::upload(const Tensor& dst, const void* host) {
  require_cuda(dst, "upload", "dst");
  if (dst.bytes() == 0) return;
  check(cudaMemcpyAsync(dst.data, host, dst.bytes(), cudaMemcpyHostToDevice, stream_), "upload");
}

void CudaBackend::download(const Tensor& src, void* host) {
  require_cuda(src, "download", "src");
  if (src.bytes() != 0) {
    check(cudaMemcpyAsync(host, src.data, src.bytes(), cudaMemcpyDeviceToHost, stream_),
          "download");
  }
  synchronize();
}

void CudaBackend::synchronize() {
  // Also reports a kernel that failed since the last synchronisation.
  check(cudaStreamSynchronize(stream_), "the CUDA compute stream");
}

// ---- normalisation ----

void CudaBackend::rms_norm(const Tensor& x, const Tensor& weight, float eps, const Tensor& y) {
  const char* op = "rms_norm";
  require_same_shape(x, y, op);
  require_input(x, op, "x");
  require_input(weight, op, "weight");
  require_output(y, op, "y");
  const std::int64_t rows = x.shape.rows();
  const std::int64_t cols = x.shape.cols();
  require(weight.numel() == cols, op, "weight is " + weight.shape.str());
  launch_rms_norm(x.data, x.dtype, weight.data, weight.dtype, eps, y.data, y.dtype, rows, cols,
                  stream_);
}

void CudaBackend::layer_norm(const Tensor& x, const Tensor* weight, const Tensor* bias, float eps,
                             const Tensor& y) {
  const char* op = "layer_norm";
  require_same_shape(x, y, op);
  require_input(x, op, "x");
  require_output(y, op, "y");
  const std::int64_t rows = x.shape.rows();
  const std::int64_t cols = x.shape.cols();
  require(weight == nullptr || weight->numel() == cols, op, "weight size");
  require(bias == nullptr || bias->numel() == cols, op, "bias size");
  if (weight != nullptr) require_input(*weight, op, "weight");
  if (bias != nullptr) require_input(*bias, op, "bias");
  launch_layer_norm(
      x.data, x.dtype, weight != nullptr ? weight->data : nullptr,
      weight != nullptr ? weight->dtype : DType::kF32, bias != nullptr ? bias->data : nullptr,
      bias != nullptr ? bias->dtype : DType::kF32, eps, y.data, y.dtype, rows, cols, stream_);
}

void CudaBackend::channel_rms_norm(const Tensor& x, const Tensor& gamma, const Tensor& y) {
  const char* op = "channel_rms_norm";
  require_same_shape(x, y, op);
  require(x.shape.rank() >= 1, op, "x needs a channel dimension");
  require_input(x, op, "x");
  require_input(gamma, op, "gamma");
  require_output(y, op, "y");
  const std::int64_t channels = x.shape[0];
  const std::int64_t positions = channels == 0 ? 0 : x.numel() / channels;
  require(gamma.numel() == channels, op, "gamma is " + gamma.shape.str());
  const float root_c = std::sqrt(static_cast<float>(channels));
  launch_channel_rms_norm(x.data, x.dtype, gamma.data, gamma.dtype, root_c, y.data, y.dtype,
                          channels, positions, stream_);
}

// ---- elementwise ----

void CudaBackend::modulate(const Tensor& x, const Tensor& scale, const Tensor& shift,
                           const Tensor& y) {
  const char* op = "modulate";
  require_same_shape(x, y, op);
  require_input(x, op, "x");
  require_output(y, op, "y");
  const std::int64_t rows = x.shape.rows();
  const std::int64_t cols = x.shape.cols();
  launch_modulate(x.data, x.dtype, row_param(scale, rows, cols, op, "scale"),
                  row_param(shift, rows, cols, op, "shift"), y.data, y.dtype, rows, cols, stream_);
}

void CudaBackend::gated_add(const Tensor& x, const Tensor& y, const Tensor* gate) {
  const char* op = "gated_add";
  require_same_shape(x, y, op);
  require_output(x, op, "x");
  require_input(y, op, "y");
  const std::int64_t rows = x.shape.rows();
  const std::int64_t cols = x.shape.cols();
  const RowParam g = gate != nullptr ? row_param(*gate, rows, cols, op, "gate") : RowParam{};
  launch_gated_add(x.data, x.dtype, y.data, y.dtype, g, rows, cols, stream_);
}

void CudaBackend::add_scaled(const Tensor& x, const Tensor& y, float alpha) {
  const char* op = "add_scaled";
  require_same_shape(x, y, op);
  require_output(x, op, "x");
  require_input(y, op, "y");
  launch_gated_add(x.data, x.dtype, y.data, y.dtype, RowParam{}, x.shape.rows(), x.shape.cols(),
                   stream_, alpha);
}

void CudaBackend::add(const Tensor& a, const Tensor& b, const Tensor& out) {
  require_same_shape(a, b, "add");
  require_same_shape(a, out, "add");
  require_input(a, "add", "a");
  require_input(b, "add", "b");
  require_output(out, "add", "out");
  launch_binary(BinaryOp::kAdd, a.data, a.dtype, b.data, b.dtype, out.data, out.dtype, a.numel(),
                stream_);
}

void CudaBackend::mul(const Tensor& a, const Tensor& b, const Tensor& out) {
  require_same_shape(a, b, "mul");
  require_same_shape(a, out, "mul");
  require_input(a, "mul", "a");
  require_input(b, "mul", "b");
  require_output(out, "mul", "out");
  launch_binary(BinaryOp::kMul, a.data, a.dtype, b.data, b.dtype, out.data, out.dtype, a.numel(),
                stream_);
}

void CudaBackend::gelu_tanh(const Tensor& x, const Tensor& y) {
  require_same_shape(x, y, "gelu_tanh");
  require_input(x, "gelu_tanh", "x");
  require_output(y, "gelu_tanh", "y");
  launch_unary(UnaryOp::kGeluTanh, x.data, x.dtype, y.data, y.dtype, x.numel(), stream_);
}

void CudaBackend::gelu_erf(const Tensor& x, const Tensor& y) {
  require_same_shape(x, y, "gelu_erf");
  require_input(x, "gelu_erf", "x");
  require_output(y, "gelu_erf", "y");
  launch_unary(UnaryOp::kGeluErf, x.data, x.dtype, y.data, y.dtype, x.numel(), stream_);
}

void CudaBackend::silu(const Tensor& x, const Tensor& y) {
  require_same_shape(x, y, "silu");
  require_input(x, "silu", "x");
  require_output(y, "silu", "y");
  launch_unary(UnaryOp::kSilu, x.data, x.dtype, y.data, y.dtype, x.numel(), stream_);
}

void CudaBackend::clamp(const Tensor& x, float lo, float hi, const Tensor& y) {
  require_same_shape(x, y, "clamp");
  require_input(x, "clamp", "x");
  require_output(y, "clamp", "y");
  launch_unary(UnaryOp::kClamp, x.data, x.dtype, y.data, y.dtype, x.numel(), stream_, lo, hi);
}

void CudaBackend::tanh_clamp(const Tensor& x, float limit, const Tensor& y) {
  require_same_shape(x, y, "tanh_clamp");
  require_input(x, "tanh_clamp", "x");
  require_output(y, "tanh_clamp", "y");
  launch_unary(UnaryOp::kTanhClamp, x.data, x.dtype, y.data, y.dtype, x.numel(), stream_, limit);
}

void CudaBackend::softmax(const Tensor& x, const Tensor& y) {
  require_same_shape(x, y, "softmax");
  require_input(x, "softmax", "x");
  require_output(y, "softmax", "y");
  launch_softmax(x.data, x.dtype, y.data, y.dtype, x.shape.rows(), x.shape.cols(), stream_);
}

void CudaBackend::convert(const Tensor& x, const Tensor& y) {
  require_same_shape(x, y, "convert");
  require_input(x, "convert", "x");
  require_output(y, "convert", "y");
  launch_convert(x.data, x.dtype, y.data, y.dtype, y.dtype, x.numel(), stream_);
}

// ---- attention ----

void CudaBackend::attention(const Tensor& q, const Tensor& k, const Tensor& v, float scale,
                            const Tensor* relative_bias, bool causal, const Tensor& o) {
  const char* op = "attention";
  const auto [len, keys, heads, dim, kv_heads] = check_attention(q, k, v, relative_bias, causal, o);
  if (relative_bias != nullptr) require_input(*relative_bias, op, "relative_bias");
  require_input(q, op, "q");
  require_input(k, op, "k");
  require_input(v, op, "v");
  require_output(o, op, "o");
  require(heads <= 65535, op, std::to_string(heads) + " heads (at most 65535)");
  require(
      dim <= kMaxTiledHeadDim, op,
      "head_dim " + std::to_string(dim) + " (at most " + std::to_string(kMaxTiledHeadDim) + ")");
  if (len == 0 || heads == 0 || dim == 0) return;
  if (keys == 0) {
    // No keys: an empty weighted sum, zeros (the CPU backend's product with K = 0).
    check(cudaMemsetAsync(o.data, 0, o.bytes(), stream_), "attention (no keys)");
    return;
  }
  AttentionArgs a;
  a.q = q.data;
  a.k = k.data;
  a.v = v.data;
  a.o = o.data;
  a.q_dtype = q.dtype;
  a.k_dtype = k.dtype;
  a.v_dtype = v.dtype;
  a.o_dtype = o.dtype;
  a.len = len;
  a.keys = keys;
  a.heads = heads;
  a.kv_heads = kv_heads;
  a.dim = dim;
  a.scale = scale;
  a.causal = causal;
  if (relative_bias != nullptr) {
    a.rel = relative_bias->data;
    a.rel_dtype = relative_bias->dtype;
  }
  a.log16 = static_cast<float>(std::log(16.0));
  if (options_.flash_attention && flash_attention_applies(a, compute_capability())) {
    launch_flash_attention(a, stream_);
  } else {
    launch_tiled_attention(a, stream_);
  }
}

void CudaBackend::rope_halves(const Tensor& x, const Tensor& cos, const Tensor& sin) {
  const char* op = "rope_halves";
  const auto [len, heads, dim, half] = check_rope_halves(x, cos, sin);
  require_output(x, op, "x");
  require_input(cos, op, "cos");
  require_input(sin, op, "sin");
  launch_rope_halves(x.data, x.dtype, cos.data, cos.dtype, sin.data, sin.dtype, len, heads, dim,
                     half, stream_);
}

void CudaBackend::rope_3d(const Tensor& x, const RopeGrid& grid) {
  const char* op = "rope_3d";
  const RopeShape shape = check_rope_3d(x, grid);
  const std::int64_t len = shape.len, heads = shape.heads, dim = shape.dim;
  require_output(x, op, "x");
  RopeAxes axes;
  axes.frames = grid.frames;
  axes.height = grid.height;
  axes.width = grid.width;
  axes.t_pairs = shape.t_pairs;
  axes.hw_pairs = shape.hw_pairs;
  axes.first = grid.first;
  axes.len = len;
  if (len == 0 || heads == 0) return;
  WorkspaceCursor ws(workspace_.get(), options_.workspace_bytes);
  auto* table = static_cast<double*>(
      ws.take(static_cast<std::size_t>(rope_table_doubles(axes)) * sizeof(double), op));
  launch_rope_3d(x.data, x.dtype, heads, dim, axes, table, stream_);
}

// ---- resampling ----

void CudaBackend::upsample_nearest_2x(const Tensor& x, const Tensor& y) {
  const char* op = "upsample_nearest_2x";
  require(x.shape.rank() == 4, op, "x must be [C, T, H, W]");
  const std::int64_t c = x.shape[0], t = x.shape[1], h = x.shape[2], w = x.shape[3];
  require_shape(y, Shape{c, t, 2 * h, 2 * w}, op, "y");
  require_input(x, op, "x");
  require_output(y, op, "y");
  launch_upsample_nearest_2x(x.data, x.dtype, y.data, y.dtype, c * t, h, w, stream_);
}

void CudaBackend::avg_down_3d(const Tensor& x, int ft, int fs, const Tensor& y) {
  const char* op = "avg_down_3d";
  require(x.shape.rank() == 4 && y.shape.rank() == 4 && ft > 0 && fs > 0, op,
          "x and y must be [C, T, H, W]");
  const std::int64_t ci = x.shape[0], t = x.shape[1], h = x.shape[2], w = x.shape[3];
  const std::int64_t co = y.shape[0];
  require(t % ft == 0 && h % fs == 0 && w % fs == 0, op,
          x.shape.str() + " is not a multiple of the factors");
  require_shape(y, Shape{co, t / ft, h / fs, w / fs}, op, "y");
  const std::int64_t expanded = ci * ft * fs * fs;
  require(co > 0 && expanded % co == 0, op, "channels do not group evenly");
  require_input(x, op, "x");
  require_output(y, op, "y");
  launch_avg_down_3d(x.data, x.dtype, y.data, y.dtype, ci, t, h, w, co, ft, fs, stream_);
}

void CudaBackend::dup_up_3d(const Tensor& x, int ft, int fs, const Tensor& y) {
  const char* op = "dup_up_3d";
  require(x.shape.rank() == 4 && y.shape.rank() == 4 && ft > 0 && fs > 0, op,
          "x and y must be [C, T, H, W]");
  const std::int64_t ci = x.shape[0], t = x.shape[1], h = x.shape[2], w = x.shape[3];
  const std::int64_t co = y.shape[0];
  require_shape(y, Shape{co, t * ft, h * fs, w * fs}, op, "y");
  const std::int64_t expanded = co * ft * fs * fs;
  require(ci > 0 && expanded % ci == 0, op, "channels do not repeat evenly");
  require_input(x, op, "x");
  require_output(y, op, "y");
  launch_dup_up_3d(x.data, x.dtype, y.data, y.dtype, ci, t, h, w, co, ft, fs, stream_);
}

// ---- data movement ----

void CudaBackend::permute(const Tensor& x, const std::vector<int>& order, const Tensor& y) {
  const char* op = "permute";
  const int rank = x.shape.rank();
  require(static_cast<int>(order.size()) == rank && y.shape.rank() == rank, op,
          "order has the wrong length");
  require_same_dtype(x, y, op);
  require_cuda(x, op, "x");
  require_cuda(y, op, "y");
  PermuteGeometry g;
  g.rank = rank;
  std::int64_t in_stride[Shape::kMaxRank] = {};
  std::int64_t s = 1;
  for (int i = rank - 1; i >= 0; --i) {
    in_stride[i] = s;
    s *= x.shape[i];
  }
  bool seen[Shape::kMaxRank] = {};
  for (int i = 0; i < rank; ++i) {
    const int from = order[static_cast<std::size_t>(i)];
    require(from >= 0 && from < rank && !seen[from], op, "order is not a permutation");
    seen[from] = true;
    require(y.shape[i] == x.shape[from], op, "y is " + y.shape.str() + " for x " + x.shape.str());
    g.out_shape[i] = y.shape[i];
    g.in_stride[i] = in_stride[from];
  }
  launch_permute(x.data, y.data, dtype_size(x.dtype), g, x.numel(), stream_);
}

void CudaBackend::concat(const Tensor& a, const Tensor& b, int dim, const Tensor& y) {
  const char* op = "concat";
  require(dim >= 0 && dim < a.shape.rank() && a.shape.rank() == b.shape.rank() &&
              a.shape.rank() == y.shape.rank(),
          op, "dimension out of range");
  require_same_dtype(a, b, op);
  require_same_dtype(a, y, op);
  require_cuda(a, op, "a");
  require_cuda(b, op, "b");
  require_cuda(y, op, "y");
  Shape joined = a.shape;
  joined[dim] = a.shape[dim] + b.shape[dim];
  Shape b_as_a = b.shape;
  b_as_a[dim] = a.shape[dim];
  require(b_as_a == a.shape, op,
          a.shape.str() + " and " + b.shape.str() + " differ outside dim " + std::to_string(dim));
  require_shape(y, joined, op, "y");
  const auto [outer, inner] = split_at(a.shape, dim);
  const std::size_t size = dtype_size(a.dtype);
  const std::size_t a_chunk = static_cast<std::size_t>(a.shape[dim] * inner) * size;
  const std::size_t b_chunk = static_cast<std::size_t>(b.shape[dim] * inner) * size;
  launch_copy_rows(y.data, a_chunk + b_chunk, a.data, a_chunk, a_chunk, outer, stream_);
  launch_copy_rows(static_cast<std::byte*>(y.data) + a_chunk, a_chunk + b_chunk, b.data, b_chunk,
                   b_chunk, outer, stream_);
}

void CudaBackend::slice(const Tensor& x, int dim, std::int64_t begin, const Tensor& y) {
  const char* op = "slice";
  require(dim >= 0 && dim < x.shape.rank() && y.shape.rank() == x.shape.rank(), op,
          "dimension out of range");
  require_same_dtype(x, y, op);
  require_cuda(x, op, "x");
  require_cuda(y, op, "y");
  Shape expect = x.shape;
  expect[dim] = y.shape[dim];
  require_shape(y, expect, op, "y");
  require(begin >= 0 && begin + y.shape[dim] <= x.shape[dim], op,
          "range " + std::to_string(begin) + "+" + std::to_string(y.shape[dim]) + " of " +
              x.shape.str());
  const auto [outer, inner] = split_at(x.shape, dim);
  const std::size_t size = dtype_size(x.dtype);
  const std::size_t in_chunk = static_cast<std::size_t>(x.shape[dim] * inner) * size;
  const std::size_t out_chunk = static_cast<std::size_t>(y.shape[dim] * inner) * size;
  const std::size_t skip = static_cast<std::size_t>(begin * inner) * size;
  launch_copy_rows(y.data, out_chunk, static_cast<const std::byte*>(x.data) + skip, in_chunk,
                   out_chunk, outer, stream_);
}

void CudaBackend::embedding(const Tensor& table, const Tensor& ids, const Tensor& y) {
  const char* op = "embedding";
  require(table.shape.rank() == 2, op, "table must be [rows, dim]");
  require(ids.dtype == DType::kI32 || ids.dtype == DType::kI64, op, "ids must be I32 or I64");
  const std::int64_t rows = table.shape[0];
  const std::int64_t dim = table.shape[1];
  const std::int64_t n = ids.numel();
  require_shape(y, Shape{n, dim}, op, "y");
  // A quantised table (umT5's token_embd in GGUF) stays compressed: only the gathered rows are
  // dequantised. bitsandbytes codes need a quant state, which embedding does not take.
  const bool quantised = dtype_is_blocked(table.dtype);
  QuantWeight qt;
  if (quantised) {
    require(table.dtype != DType::kBnb4, op,
            "a bitsandbytes 4-bit table has no quant state here: dequantise it when loading");
    qt = quant_weight(table, nullptr, op, "table");
  } else {
    require_input(table, op, "table");
  }
  require_cuda(ids, op, "ids");
  require_output(y, op, "y");
  if (n == 0) return;
  const bool ids_64 = ids.dtype == DType::kI64;
  // The ids live on the device: a kernel finds the first bad one, and its index comes back
  // through pinned memory before anything is gathered. Embedding runs once per prompt, so the
  // wait costs nothing that matters; an error thrown here names the same id as the CPU backend.
  auto* first_bad = static_cast<unsigned long long*>(flag_.get());
  auto* host = static_cast<unsigned long long*>(readback_.get());
  check(cudaMemsetAsync(first_bad, 0xFF, sizeof *first_bad, stream_), "embedding id check");
  launch_embedding_check(ids.data, ids_64, n, rows, first_bad, stream_);
  check(cudaMemcpyAsync(host, first_bad, sizeof *first_bad, cudaMemcpyDeviceToHost, stream_),
        "embedding id check");
  synchronize();
  if (host[0] != ~0ull) {
    const auto index = static_cast<std::int64_t>(host[0]);
    check(cudaMemcpyAsync(host + 1, element_ptr(ids, index), dtype_size(ids.dtype),
                          cudaMemcpyDeviceToHost, stream_),
          "embedding id check");
    synchronize();
    std::int64_t id = 0;
    if (ids_64) {
      std::memcpy(&id, host + 1, sizeof id);
    } else {
      std::int32_t id32 = 0;
      std::memcpy(&id32, host + 1, sizeof id32);
      id = id32;
    }
    throw Error(ErrorCode::kBadModelFile,
                "token id " + std::to_string(id) + " is outside the embedding table's " +
                    std::to_string(rows) +
                    " rows: the tokenizer does not belong to this text encoder");
  }
  if (quantised) {
    launch_dequantize_rows(qt, rows, dim, ids.data, ids_64, n, y.data, y.dtype, stream_);
  } else {
    launch_embedding_gather(table.data, table.dtype, rows, ids.data, ids_64, n, dim, y.data,
                            y.dtype, stream_);
  }
}

}  // namespace ferry::cuda
