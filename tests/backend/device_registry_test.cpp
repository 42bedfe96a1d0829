// The device registry in a build without a GPU backend linked in (ferry_tests links ferry_core
// alone): the CPU is listed first with the host's capabilities and creates the CPU backend; a
// CUDA device is not found, and the reason says the build has no CUDA backend. The registration
// of a real backend library is tested in tests/cuda/cuda_registry_test.cpp.
#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <thread>

#include "core/backend/backend.h"
#include "core/backend/cpu/cpu_copy_queue.h"
#include "core/backend/device.h"
#include "core/error.h"
#include "core/memory/fence.h"

namespace ferry {
namespace {

TEST(DeviceRegistry, the_cpu_is_listed_first_with_the_hosts_capabilities) {
  const std::vector<DeviceProperties> devices = list_devices();
  ASSERT_FALSE(devices.empty());
  const DeviceProperties& cpu = devices.front();
  EXPECT_EQ(cpu.kind, Device::kCpu);
  EXPECT_FALSE(cpu.name.empty());
  EXPECT_FALSE(cpu.architecture.empty());
  EXPECT_TRUE(cpu.capabilities.memory_is_host);
  EXPECT_TRUE(cpu.capabilities.async_copies);
  EXPECT_FALSE(cpu.capabilities.pinned_host_memory);
  EXPECT_GT(cpu.memory.total_bytes, 0u);
  EXPECT_LE(cpu.memory.free_bytes, cpu.memory.total_bytes);

  const std::unique_ptr<Backend> backend = create_backend(cpu);
  ASSERT_NE(backend, nullptr);
  EXPECT_EQ(backend->device(), Device::kCpu);
  EXPECT_TRUE(backend->capabilities().memory_is_host);
  EXPECT_GT(sample_device_memory(cpu).total_bytes, 0u);
}

TEST(DeviceRegistry, without_a_cuda_library_no_cuda_device_is_found_and_it_says_why) {
  EXPECT_TRUE(has_device_provider(Device::kCpu));
  EXPECT_FALSE(has_device_provider(Device::kCuda));
  std::string why;
  EXPECT_FALSE(find_device(Device::kCuda, &why).has_value());
  EXPECT_EQ(why, "this build of Ferry has no CUDA backend");
  for (const DeviceProperties& d : list_devices()) EXPECT_EQ(d.kind, Device::kCpu);
  DeviceProperties gpu;
  gpu.kind = Device::kCuda;
  gpu.name = "a GPU";
  EXPECT_THROW((void)create_backend(gpu), Error);
}

// CopyQueue::wait_for: copies queued after it start only once the fence has completed, and the
// caller does not wait.
TEST(CpuCopyQueue, copies_after_wait_for_start_once_the_fence_completes) {
  cpu::CpuCopyQueue queue;
  auto fence = std::make_shared<memory::CpuFence>();
  const int source = 7;
  int target = 0;
  queue.wait_for(fence);  // returns at once: the worker waits, not the caller
  queue.copy_to_device(&target, &source, sizeof source);
  const std::shared_ptr<memory::Fence> copied = queue.record();
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_FALSE(copied->done());
  fence->signal();
  copied->wait();
  EXPECT_EQ(target, 7);
  // A complete fence (the CPU's compute fences) queues nothing to wait for.
  queue.wait_for(fence);
  queue.copy_to_device(&target, &source, sizeof source);
  queue.record()->wait();
}

}  // namespace
}  // namespace ferry
