// The CUDA library registers itself: a program that links ferry_cuda and includes nothing from
// cuda/ finds CUDA devices through core/backend/device.h. Runs on every machine that builds the
// CUDA backend: without a GPU (or a driver) the registry lists no CUDA device and says why;
// with one, the device is listed with its capabilities and creates a working backend.
#include <gtest/gtest.h>

#include "core/backend/backend.h"
#include "core/backend/device.h"
#include "core/offload/machine.h"

namespace ferry {
namespace {

TEST(CudaRegistry, linking_the_cuda_library_registers_its_devices) {
  EXPECT_TRUE(has_device_provider(Device::kCuda));
  std::string why;
  const std::optional<DeviceProperties> gpu = find_device(Device::kCuda, &why);
  if (!gpu) {
    // No GPU here: the CUDA library's own reason, not "no CUDA backend".
    EXPECT_FALSE(why.empty());
    EXPECT_EQ(why.find("no CUDA backend"), std::string::npos) << why;
    for (const DeviceProperties& d : list_devices()) EXPECT_NE(d.kind, Device::kCuda);
    std::printf("no CUDA device: %s\n", why.c_str());
    return;
  }
  EXPECT_EQ(gpu->kind, Device::kCuda);
  EXPECT_FALSE(gpu->name.empty());
  EXPECT_EQ(gpu->architecture.rfind("sm_", 0), 0u) << gpu->architecture;
  EXPECT_FALSE(gpu->capabilities.memory_is_host);
  EXPECT_TRUE(gpu->capabilities.pinned_host_memory);
  EXPECT_GT(gpu->memory.total_bytes, 1ull << 30);
  const std::vector<DeviceProperties> devices = list_devices();
  ASSERT_GE(devices.size(), 2u);
  EXPECT_EQ(devices.front().kind, Device::kCpu);
  EXPECT_EQ(devices[1].kind, Device::kCuda);

  const std::unique_ptr<Backend> backend = create_backend(*gpu);
  EXPECT_EQ(backend->device(), Device::kCuda);
  EXPECT_FALSE(backend->capabilities().memory_is_host);
  EXPECT_LE(sample_device_memory(*gpu).free_bytes, gpu->memory.total_bytes);
}

TEST(CudaRegistry, a_gpu_preset_runs_on_cuda_or_falls_back_with_the_cuda_reason) {
  const offload::MachineInfo machine = offload::probe_machine();
  const offload::Preset preset =
      offload::find_preset(offload::builtin_presets(), "laptop-8gb", machine);
  const offload::BackendChoice chosen = offload::choose_backend(preset, machine);
  ASSERT_NE(chosen.backend, nullptr);
  std::string why;
  if (find_device(Device::kCuda, &why)) {
    EXPECT_TRUE(machine.has_gpu);
    EXPECT_FALSE(chosen.fell_back_to_cpu);
    EXPECT_EQ(chosen.backend->device(), Device::kCuda);
    ASSERT_TRUE(chosen.device_memory);
    EXPECT_GT(chosen.device_memory().used_bytes, 0u);
  } else {
    EXPECT_FALSE(machine.has_gpu);
    EXPECT_TRUE(chosen.fell_back_to_cpu);
    EXPECT_EQ(chosen.backend->device(), Device::kCpu);
    EXPECT_FALSE(chosen.reason.empty());
  }
}

}  // namespace
}  // namespace ferry
