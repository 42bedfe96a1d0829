// The CUDA runtime pieces of the weight store: a pinned staging ring whose slots are uploaded
// asynchronously on a copy stream and fenced with events. Skipped without a GPU.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <vector>

#include "core/memory/staging_ring.h"
#include "cuda/device_info.h"
#include "cuda/event_fence.h"
#include "cuda/pinned_host_allocator.h"

namespace ferry::cuda {
namespace {

class CudaTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string why;
    if (!query_device(&why)) GTEST_SKIP() << "no CUDA device: " << why;
  }
};

TEST_F(CudaTest, device_query_reports_a_supported_gpu) {
  const auto info = query_device();
  ASSERT_TRUE(info.has_value());
  EXPECT_GE(info->compute_major * 10 + info->compute_minor, 75);
  EXPECT_GT(info->total_bytes, 1ull << 30);
  const DeviceMemory m = sample_device_memory();
  EXPECT_EQ(m.total_bytes, info->total_bytes);
  EXPECT_LE(m.free_bytes, m.total_bytes);
}

TEST_F(CudaTest, vram_sample_moves_with_an_allocation) {
  const DeviceMemory before = sample_device_memory();
  void* p = nullptr;
  ASSERT_EQ(cudaMalloc(&p, 256u << 20), cudaSuccess);
  const DeviceMemory during = sample_device_memory();
  EXPECT_GE(during.used_bytes(), before.used_bytes() + (200u << 20));
  cudaFree(p);
}

TEST_F(CudaTest, pinned_ring_uploads_through_event_fences_without_corruption) {
  PinnedHostAllocator pinned;
  memory::StagingRing ring(2, 1 << 20, pinned);
  EXPECT_TRUE(ring.pinned());
  cudaStream_t copy = nullptr;
  ASSERT_EQ(cudaStreamCreateWithFlags(&copy, cudaStreamNonBlocking), cudaSuccess);
  const int kChunks = 16;
  const std::size_t n = ring.slot_bytes();
  void* device = nullptr;
  ASSERT_EQ(cudaMalloc(&device, n * kChunks), cudaSuccess);
  for (int i = 0; i < kChunks; ++i) {
    const std::size_t slot = ring.acquire();  // waits on the fence of the upload two chunks ago
    std::memset(ring.slot(slot).data(), i + 1, n);
    ASSERT_EQ(cudaMemcpyAsync(static_cast<char*>(device) + i * n, ring.slot(slot).data(), n,
                              cudaMemcpyHostToDevice, copy),
              cudaSuccess);
    ring.retire(slot, std::make_shared<EventFence>(copy));
  }
  ASSERT_EQ(cudaStreamSynchronize(copy), cudaSuccess);
  std::vector<unsigned char> back(n * kChunks);
  ASSERT_EQ(cudaMemcpy(back.data(), device, back.size(), cudaMemcpyDeviceToHost), cudaSuccess);
  for (int i = 0; i < kChunks; ++i) {
    EXPECT_EQ(back[i * n], i + 1);
    EXPECT_EQ(back[i * n + n - 1], i + 1);
  }
  cudaFree(device);
  cudaStreamDestroy(copy);
}

}  // namespace
}  // namespace ferry::cuda
