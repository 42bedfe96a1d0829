// Must-show 2 of issue 4: a model several times the streamer's RAM budget streamed from disk for
// many steps keeps RSS and commit flat, and nothing allocates after the first step — counted by
// the replaced global operator new/delete of tests/memory/counting, on every thread (the IO
// thread and the copy worker too). They replace the process's allocator, which is why this is an
// executable of its own.
//
// Sizes from the environment, so a bigger run can be made by hand:
//   FERRY_FLAT_MODEL_MIB  model size (default 320; the streamer's budget is 64 MiB)
//   FERRY_FLAT_STEPS      steps (default 200 for mapped reads, which the page cache serves; 30
//                         for unbuffered reads, which go to the disk each step: 200 of those
//                         take about a minute here, too long for CI)
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <thread>

#include "core/backend/cpu/cpu_backend.h"
#include "core/memory/process_memory.h"
#include "core/offload/streamer.h"
#include "tests/memory/counting/counting_allocator.h"
#include "tests/offload/synthetic_model.h"
#include "tests/test_support.h"

namespace ferry::offload {
namespace {

constexpr std::uint64_t kMiB = 1ull << 20;

std::uint64_t env_number(const char* name, std::uint64_t fallback) {
  const char* text = std::getenv(name);
  if (text == nullptr || *text == '\0') return fallback;
  return std::strtoull(text, nullptr, 10);
}

TEST(StreamerFlatMemory, counting_allocator_counts) {
  test::start_counting_allocations();
  auto* p = new int(3);
  std::thread([] { delete new long(4); }).join();
  const std::uint64_t counted = test::stop_counting_allocations();
  delete p;
  EXPECT_GE(counted, 2u);
}

// One step: every group acquired, its weights read (a byte per 4 KiB: the compute touches the
// device slot), released.
std::uint64_t step(WeightStreamer& streamer) {
  std::uint64_t sum = 0;
  streamer.begin_pass();
  for (std::size_t g = 0; g < streamer.group_count(); ++g) {
    const LoadedGroup& w = streamer.acquire(g);
    for (std::size_t t = 0; t < w.size(); ++t) {
      const Tensor& tensor = w.tensor(t);
      const auto* bytes = static_cast<const unsigned char*>(tensor.data);
      for (std::size_t i = 0; i < tensor.bytes(); i += 4096) sum += bytes[i];
    }
    streamer.release(g);
  }
  return sum;
}

double mib(std::uint64_t bytes) { return static_cast<double>(bytes) / kMiB; }
double delta_percent(std::uint64_t later, std::uint64_t earlier) {
  return 100.0 * (static_cast<double>(later) - static_cast<double>(earlier)) /
         static_cast<double>(earlier);
}

void run_flat(ReadMethod method, SlotLayout layout = SlotLayout::kPacked) {
  const std::uint64_t model_mib = env_number("FERRY_FLAT_MODEL_MIB", 320);
  const std::uint64_t steps = std::max<std::uint64_t>(
      env_number("FERRY_FLAT_STEPS", method == ReadMethod::kMapped ? 200 : 30), 3);
  // 16 MiB a layer (w1 and w2 of 1024 × 4096 bf16) through 2 device slots of 16 MiB and a ring
  // of 4 × 8 MiB: a 64 MiB budget.
  synth::SyntheticSpec spec{static_cast<int>(std::max<std::uint64_t>(model_mib / 16, 1)), 1024,
                           4096, true};
  ferry::test::ScratchDir dir;
  synth::write_synthetic_model(dir / "big.safetensors", spec);
  synth::SyntheticModel model(dir / "big.safetensors", spec);
  std::vector<Placement> placements = synth::all_layers(spec.layers, Placement::kDisk);
  Plan plan = synth::synthetic_plan(model.layout, placements, 1, method, 4, 8 * kMiB);
  if (layout == SlotLayout::kFileAligned) plan = synth::file_aligned(plan, model.layout);
  const std::uint64_t budget =
      plan.device_slots * plan.device_slot_bytes + plan.staging_slots * plan.staging_slot_bytes;
  const std::uint64_t model_bytes = model.layout.weight_bytes();
  ASSERT_GE(model_bytes, 4 * budget) << "the model must be at least 4x the streamer's budget";

  cpu::CpuBackend backend;
  StreamerOptions options;
  options.passes = steps;
  options.evict_window_bytes = 4 * kMiB;
  WeightStreamer streamer(backend, model.layout, plan, options);
  const std::uint64_t streamed_groups = static_cast<std::uint64_t>(spec.layers);

  // With look-ahead 1 the IO thread is idle once the group after the last released one is
  // uploaded (or the last pass is): sample then, so no view's pages are in flight.
  auto settle = [&](std::uint64_t done_steps) {
    const std::uint64_t target = std::min(done_steps * streamed_groups + 1, steps * streamed_groups);
    while (streamer.stats().groups_uploaded < target) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    return memory::sample_process_memory();
  };

  const auto t0 = std::chrono::steady_clock::now();
  std::uint64_t first_sum = step(streamer);
  (void)settle(1);
  test::start_counting_allocations();  // from here on, every thread
  EXPECT_EQ(step(streamer), first_sum);
  std::uint64_t allocations = test::stop_counting_allocations();
  const memory::ProcessMemory at2 = settle(2);
  test::start_counting_allocations();
  for (std::uint64_t s = 3; s <= steps; ++s) {
    if (step(streamer) != first_sum) ADD_FAILURE() << "step " << s << " read other bytes";
  }
  allocations += test::stop_counting_allocations();
  const memory::ProcessMemory atN = settle(steps);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const StreamStats stats = streamer.stats();

  std::printf(
      "[flat memory, %s] model %.0f MiB = %.1f x the streamer budget of %.0f MiB, %llu steps in "
      "%.1f s (%.2f GB/s read)\n"
      "  RSS    step 2 %.1f MiB, step %llu %.1f MiB: %+.3f %%  (file pages %.1f -> %.1f MiB)\n"
      "  commit step 2 %.1f MiB, step %llu %.1f MiB: %+.3f %%\n"
      "  heap allocations after step 1: %llu (last size %zu)\n",
      method == ReadMethod::kMapped        ? "mapped"
      : layout == SlotLayout::kFileAligned ? "direct, straight into the slots"
                                           : "direct, staged",
      mib(model_bytes), static_cast<double>(model_bytes) / static_cast<double>(budget), mib(budget),
      static_cast<unsigned long long>(steps), seconds,
      static_cast<double>(stats.bytes_read) / seconds / 1e9, mib(at2.resident_bytes),
      static_cast<unsigned long long>(steps), mib(atN.resident_bytes),
      delta_percent(atN.resident_bytes, at2.resident_bytes), mib(at2.resident_file_bytes),
      mib(atN.resident_file_bytes), mib(at2.commit_bytes), static_cast<unsigned long long>(steps),
      mib(atN.commit_bytes), delta_percent(atN.commit_bytes, at2.commit_bytes),
      static_cast<unsigned long long>(allocations), test::last_counted_allocation_size());
  EXPECT_EQ(allocations, 0u) << "a step allocated (last size "
                             << test::last_counted_allocation_size() << ")";
  std::uint64_t streamed_bytes = 0;
  for (std::size_t g = 0; g < model.layout.groups.size(); ++g) {
    if (plan.placement[g] == Placement::kDisk) streamed_bytes += model.layout.groups[g].bytes();
  }
  EXPECT_EQ(stats.bytes_read, steps * streamed_bytes);
  // Step N minus step 2 at most 1 % of step 2. Memory that shrinks is no leak: Wine's heap
  // gives back a few MiB after the first steps (-1.2 % RSS, -3.6 % commit there).
  EXPECT_LE(delta_percent(atN.resident_bytes, at2.resident_bytes), 1.0);
  EXPECT_LE(delta_percent(atN.commit_bytes, at2.commit_bytes), 1.0);
}

TEST(StreamerFlatMemory, mapped_reads_keep_rss_and_commit_flat_and_allocate_nothing) {
  run_flat(ReadMethod::kMapped);
}

TEST(StreamerFlatMemory, direct_reads_keep_rss_and_commit_flat_and_allocate_nothing) {
  run_flat(ReadMethod::kDirect);
}

TEST(StreamerFlatMemory, direct_reads_straight_into_the_slots_keep_flat_and_allocate_nothing) {
  run_flat(ReadMethod::kDirect, SlotLayout::kFileAligned);
}

}  // namespace
}  // namespace ferry::offload
