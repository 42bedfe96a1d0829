// Telemetry: one JSON line per step with the figures of architecture.md §7, peaks inside a step
// caught by the ≤ 10 Hz sampler, and the callback called once per step.
#include "core/offload/telemetry.h"

#include <gtest/gtest.h>

#include <cstring>
#include <nlohmann/json.hpp>
#include <sstream>
#include <vector>

#ifdef _WIN32
#include <windows.h>
#else
#include <sys/mman.h>
#endif

namespace ferry::offload {
namespace {

constexpr std::uint64_t kMiB = 1ull << 20;

TEST(Telemetry, writes_one_json_line_per_step_and_calls_back) {
  std::ostringstream jsonl;
  std::vector<int> steps;
  std::uint64_t device_used = 100 * kMiB;
  Telemetry telemetry([&] { return DeviceMemorySample{device_used, 64 * kMiB}; },
                      [&](const StepStats& s) { steps.push_back(s.step); }, &jsonl);
  for (int i = 0; i < 3; ++i) {
    telemetry.begin_step();
    device_used += kMiB;
    const StepStats s = telemetry.end_step(0.5, 0.25, 1234);
    EXPECT_EQ(s.step, i + 1);
    EXPECT_GE(s.seconds, 0.0);
    EXPECT_GT(s.process.resident_bytes, 0u);
    EXPECT_GE(s.peak_resident_in_step, s.process.resident_bytes);
    EXPECT_EQ(s.device.used_bytes, device_used);
  }
  EXPECT_EQ(steps, (std::vector<int>{1, 2, 3}));
  std::istringstream in(jsonl.str());
  std::string line;
  int n = 0;
  while (std::getline(in, line)) {
    const auto j = nlohmann::json::parse(line);
    EXPECT_EQ(j.at("step").get<int>(), ++n);
    EXPECT_EQ(j.at("bytes_read").get<std::uint64_t>(), 1234u);
    EXPECT_DOUBLE_EQ(j.at("io_wait_seconds").get<double>(), 0.25);
    for (const char* key : {"rss_bytes", "commit_bytes", "system_available_bytes",
                            "vram_used_bytes", "vram_arena_bytes", "vram_peak_in_step",
                            "rss_peak_in_step", "commit_peak_in_step", "compute_seconds"}) {
      EXPECT_TRUE(j.contains(key)) << key;
    }
  }
  EXPECT_EQ(n, 3);
}

TEST(Telemetry, steps_carry_the_phase_set_before_them_and_say_it_in_their_line) {
  std::ostringstream jsonl;
  Telemetry telemetry({}, {}, &jsonl);
  std::vector<std::string> phases;
  for (const char* phase : {"", "high-noise expert", "low-noise expert"}) {
    telemetry.set_phase(phase);
    telemetry.begin_step();
    phases.push_back(telemetry.end_step(0, 0, 0).phase);
  }
  EXPECT_EQ(phases, (std::vector<std::string>{"", "high-noise expert", "low-noise expert"}));
  std::istringstream in(jsonl.str());
  std::vector<std::string> written;
  for (std::string line; std::getline(in, line);) {
    const auto j = nlohmann::json::parse(line);
    written.push_back(j.value("phase", std::string("(none)")));
  }
  // A step without a phase has no key: the lines of one-expert models stay as they were.
  EXPECT_EQ(written, (std::vector<std::string>{"(none)", "high-noise expert", "low-noise expert"}));
}

TEST(Telemetry, a_noted_preview_is_in_its_step_line_only) {
  std::ostringstream jsonl;
  Telemetry telemetry({}, {}, &jsonl);
  telemetry.begin_step();
  telemetry.note_preview(0.0125, false);
  EXPECT_DOUBLE_EQ(telemetry.end_step(0, 0, 0).preview_seconds, 0.0125);
  telemetry.begin_step();
  telemetry.note_preview(0, true);
  EXPECT_TRUE(telemetry.end_step(0, 0, 0).preview_skipped);
  telemetry.begin_step();
  EXPECT_FALSE(telemetry.end_step(0, 0, 0).preview_noted);
  std::istringstream in(jsonl.str());
  std::vector<nlohmann::json> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(nlohmann::json::parse(line));
  ASSERT_EQ(lines.size(), 3u);
  EXPECT_DOUBLE_EQ(lines[0].at("preview_ms").get<double>(), 12.5);
  EXPECT_FALSE(lines[0].at("preview_skipped").get<bool>());
  EXPECT_DOUBLE_EQ(lines[1].at("preview_ms").get<double>(), 0.0);
  EXPECT_TRUE(lines[1].at("preview_skipped").get<bool>());
  // A run without previews keeps the lines as they were.
  EXPECT_FALSE(lines[2].contains("preview_ms"));
}

TEST(Telemetry, a_peak_between_step_boundaries_is_caught_by_the_sampler) {
  Telemetry telemetry({}, {}, nullptr);
  telemetry.begin_step();
  const std::uint64_t before = memory::sample_process_memory().resident_bytes;
  {
    // 96 MiB touched and released inside the step, straight from the OS.
    const std::size_t n = 96 * kMiB;
#ifdef _WIN32
    void* p = VirtualAlloc(nullptr, n, MEM_RESERVE | MEM_COMMIT, PAGE_READWRITE);
#else
    void* p = mmap(nullptr, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
#endif
    ASSERT_NE(p, nullptr);
    std::memset(p, 1, n);
    std::this_thread::sleep_for(3 * Telemetry::kSampleInterval);
#ifdef _WIN32
    VirtualFree(p, 0, MEM_RELEASE);
#else
    munmap(p, n);
#endif
  }
  const StepStats s = telemetry.end_step(0, 0, 0);
  EXPECT_GE(s.peak_resident_in_step, before + 80 * kMiB);
  EXPECT_LT(s.process.resident_bytes, before + 32 * kMiB);
}

}  // namespace
}  // namespace ferry::offload
