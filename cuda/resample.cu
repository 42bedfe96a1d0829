#include "cuda/convert.cuh"
#include "cuda/launch.cuh"
#include "cuda/resample.cuh"

namespace ferry::cuda {
namespace {

__global__ void upsample_kernel(const void* x, DType xt, void* y, DType yt, std::int64_t n,
                                std::int64_t h, std::int64_t w) {
  FERRY_GRID_STRIDE(i, n) {
    const std::int64_t ox = i % (2 * w);
    const std::int64_t oy = (i / (2 * w)) % (2 * h);
    const std::int64_t plane = i / (4 * h * w);
    store_f32(y, yt, i, load_f32(x, xt, (plane * h + oy / 2) * w + ox / 2));
  }
}

// The CPU backend's loop: expanded channels e of output channel o summed in order, then scaled
// by 1/group.
__global__ void avg_down_kernel(const void* x, DType xt, void* y, DType yt, std::int64_t n,
                                std::int64_t t, std::int64_t h, std::int64_t w, std::int64_t group,
                                int ft, int fs) {
  const std::int64_t ot_count = t / ft, oh = h / fs, ow = w / fs;
  FERRY_GRID_STRIDE(idx, n) {
    const std::int64_t xx = idx % ow;
    const std::int64_t yy = (idx / ow) % oh;
    const std::int64_t ot = (idx / (ow * oh)) % ot_count;
    const std::int64_t o = idx / (ow * oh * ot_count);
    float acc = 0.0f;
    for (std::int64_t e = o * group; e < (o + 1) * group; ++e) {
      const std::int64_t c = e / (ft * fs * fs);
      const std::int64_t i = (e / (fs * fs)) % ft;
      const std::int64_t j = (e / fs) % fs;
      const std::int64_t k = e % fs;
      acc += load_f32(x, xt, ((c * t + ot * ft + i) * h + yy * fs + j) * w + xx * fs + k);
    }
    const float inv = 1.0f / static_cast<float>(group);
    store_f32(y, yt, idx, acc * inv);
  }
}

__global__ void dup_up_kernel(const void* x, DType xt, void* y, DType yt, std::int64_t n,
                              std::int64_t t, std::int64_t h, std::int64_t w, std::int64_t repeats,
                              int ft, int fs) {
  const std::int64_t yh = h * fs, yw = w * fs, frames = t * ft;
  FERRY_GRID_STRIDE(idx, n) {
    const std::int64_t ox = idx % yw;
    const std::int64_t oy = (idx / yw) % yh;
    const std::int64_t frame = (idx / (yw * yh)) % frames;
    const std::int64_t o = idx / (yw * yh * frames);
    const std::int64_t it = frame / ft, i = frame % ft;
    const std::int64_t yy = oy / fs, j = oy % fs;
    const std::int64_t xx = ox / fs, k = ox % fs;
    const std::int64_t c = (((o * ft + i) * fs + j) * fs + k) / repeats;
    store_f32(y, yt, idx, load_f32(x, xt, ((c * t + it) * h + yy) * w + xx));
  }
}

}  // namespace

void launch_upsample_nearest_2x(const void* x, DType xt, void* y, DType yt, std::int64_t planes,
                                std::int64_t h, std::int64_t w, cudaStream_t stream) {
  const std::int64_t n = planes * 4 * h * w;
  if (n <= 0) return;
  upsample_kernel<<<grid_for(n), kThreads, 0, stream>>>(x, xt, y, yt, n, h, w);
  check_launch("upsample_nearest_2x kernel");
}

void launch_avg_down_3d(const void* x, DType xt, void* y, DType yt, std::int64_t ci, std::int64_t t,
                        std::int64_t h, std::int64_t w, std::int64_t co, int ft, int fs,
                        cudaStream_t stream) {
  const std::int64_t n = co * (t / ft) * (h / fs) * (w / fs);
  if (n <= 0) return;
  const std::int64_t group = ci * ft * fs * fs / co;
  avg_down_kernel<<<grid_for(n), kThreads, 0, stream>>>(x, xt, y, yt, n, t, h, w, group, ft, fs);
  check_launch("avg_down_3d kernel");
}

void launch_dup_up_3d(const void* x, DType xt, void* y, DType yt, std::int64_t ci, std::int64_t t,
                      std::int64_t h, std::int64_t w, std::int64_t co, int ft, int fs,
                      cudaStream_t stream) {
  const std::int64_t n = co * t * ft * h * fs * w * fs;
  if (n <= 0) return;
  const std::int64_t repeats = co * ft * fs * fs / ci;
  dup_up_kernel<<<grid_for(n), kThreads, 0, stream>>>(x, xt, y, yt, n, t, h, w, repeats, ft, fs);
  check_launch("dup_up_3d kernel");
}

}  // namespace ferry::cuda
