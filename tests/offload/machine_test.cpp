// The machine and the backend a preset runs on, in a build without a GPU backend: a cpu preset
// runs on the CPU; a GPU preset falls back to the CPU and says why, whether the machine has no
// GPU or this build cannot drive one. Plans read the capabilities of the preset's device.
#include "core/offload/machine.h"

#include <gtest/gtest.h>

#include "core/offload/planner.h"

namespace ferry::offload {
namespace {

constexpr std::uint64_t kGiB = 1ull << 30;

TEST(Machine, a_cpu_preset_runs_on_the_cpu_backend) {
  const MachineInfo machine = probe_machine();
  const BackendChoice chosen =
      choose_backend(find_preset(builtin_presets(), "cpu", machine), machine);
  ASSERT_NE(chosen.backend, nullptr);
  EXPECT_EQ(chosen.backend->device(), Device::kCpu);
  EXPECT_EQ(chosen.device.kind, Device::kCpu);
  EXPECT_FALSE(chosen.fell_back_to_cpu);
  EXPECT_FALSE(chosen.device_memory) << "no device memory of its own to sample";
}

TEST(Machine, a_gpu_preset_falls_back_to_the_cpu_with_the_reason) {
  const Preset gpu_preset = find_preset(builtin_presets(), "laptop-8gb", MachineInfo{});
  // A machine with no GPU.
  BackendChoice chosen = choose_backend(gpu_preset, MachineInfo{false, 0, 0, 16 * kGiB, 8 * kGiB});
  EXPECT_TRUE(chosen.fell_back_to_cpu);
  EXPECT_EQ(chosen.backend->device(), Device::kCpu);
  EXPECT_NE(chosen.reason.find("no GPU"), std::string::npos) << chosen.reason;
  // A machine described with one, but a build that has no CUDA backend.
  chosen = choose_backend(gpu_preset, MachineInfo{true, 8 * kGiB, 8 * kGiB, 16 * kGiB, 8 * kGiB});
  EXPECT_TRUE(chosen.fell_back_to_cpu);
  EXPECT_EQ(chosen.backend->device(), Device::kCpu);
  EXPECT_EQ(chosen.reason, "this build of Ferry has no CUDA backend");
}

TEST(Machine, this_machine_without_a_gpu_backend_has_ram_and_no_gpu) {
  const MachineInfo m = probe_machine();
  EXPECT_FALSE(m.has_gpu);
  EXPECT_GT(m.total_ram_bytes, 0u);
  EXPECT_TRUE(m.capabilities(Device::kCpu).memory_is_host);
  EXPECT_FALSE(m.capabilities(Device::kCuda).memory_is_host);
}

TEST(Machine, plans_follow_the_capabilities_of_the_presets_device) {
  const MachineInfo m{true, 8 * kGiB, 8 * kGiB, 16 * kGiB, 16 * kGiB};
  const Preset cpu = find_preset(builtin_presets(), "cpu", m);
  const Preset gpu = find_preset(builtin_presets(), "laptop-8gb", m);
  EXPECT_EQ(slot_layout_for(cpu, m), SlotLayout::kFileAligned);
  EXPECT_EQ(slot_layout_for(gpu, m), SlotLayout::kPacked);
  Preset mapped = cpu;
  mapped.read_method = ReadMethod::kMapped;
  EXPECT_EQ(slot_layout_for(mapped, m), SlotLayout::kPacked);
  // The RAM budget is the device budget where device memory is host memory.
  EXPECT_EQ(usable_device_bytes(cpu, m), cpu.ram_budget_bytes - kProcessBaseBytes);
}

}  // namespace
}  // namespace ferry::offload
