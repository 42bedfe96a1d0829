// The weight streamer on the CPU backend: streamed = resident bit for bit, each streamed weight
// read once per step under CFG, lifetimes under random delays on every stage, I/O errors and
// cancellation reaching the caller, and the model file's leases ending as soon as copied.
#include "core/offload/streamer.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <mutex>
#include <random>
#include <thread>

#include "core/backend/cpu/cpu_backend.h"
#include "core/backend/cpu/cpu_copy_queue.h"
#include "core/error.h"
#include "core/offload/planner.h"
#include "tests/offload/synthetic_model.h"
#include "tests/test_support.h"

namespace ferry::offload {
namespace {

using synth::Activations;
using synth::SyntheticModel;
using synth::SyntheticSpec;

constexpr std::int64_t kTokens = 8;

const char* method_name(ReadMethod m) { return m == ReadMethod::kMapped ? "mapped" : "direct"; }

// Runs `passes` passes of the model on one input and returns the output of every pass.
std::vector<std::vector<float>> run_model(Backend& backend, const SyntheticModel& model,
                                          const Plan& plan, int passes,
                                          const StreamerOptions& options = {}) {
  Activations a(backend, kTokens, model.spec.dim, model.spec.hidden);
  WeightStreamer streamer(backend, model.layout, plan, options);
  const std::vector<float> input = synth::synthetic_input(kTokens, model.spec.dim, 1);
  std::vector<std::vector<float>> out;
  for (int p = 0; p < passes; ++p) {
    backend.upload(a.tx, input.data());
    synth::run_pass(backend, streamer, {&a});
    std::vector<float> y(input.size());
    backend.download(a.tx, y.data());
    out.push_back(std::move(y));
  }
  return out;
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

struct Fixture {
  ferry::test::ScratchDir dir;
  SyntheticSpec spec;
  std::unique_ptr<SyntheticModel> model;
  explicit Fixture(SyntheticSpec s = {}) : spec(s) {
    synth::write_synthetic_model(dir / "model.safetensors", spec);
    model = std::make_unique<SyntheticModel>(dir / "model.safetensors", spec);
  }
};

TEST(Streamer, streamed_equals_resident_bit_for_bit) {
  Fixture f;
  cpu::CpuBackend backend;
  const int layers = f.spec.layers;
  const std::vector<float> reference = run_model(
      backend, *f.model,
      synth::synthetic_plan(f.model->layout, synth::all_layers(layers, Placement::kDevice), 1,
                           ReadMethod::kMapped),
      1)[0];
  // The output is not trivially zero or the input: the layers did something.
  ASSERT_FALSE(same_bits(reference, synth::synthetic_input(kTokens, f.spec.dim, 1)));

  std::vector<Placement> mixed;
  for (int i = 0; i < layers; ++i) {
    mixed.push_back(i % 3 == 0 ? Placement::kDisk
                               : (i % 3 == 1 ? Placement::kPinnedCache : Placement::kDevice));
  }
  const std::vector<std::pair<const char*, std::vector<Placement>>> plans = {
      {"all disk", synth::all_layers(layers, Placement::kDisk)},
      {"all pinned cache", synth::all_layers(layers, Placement::kPinnedCache)},
      {"mixed", mixed},
  };
  for (const auto& [name, placements] : plans) {
    for (std::size_t look_ahead = 1; look_ahead <= 3; ++look_ahead) {
      for (ReadMethod method : {ReadMethod::kMapped, ReadMethod::kDirect}) {
        SCOPED_TRACE(std::string(name) + ", look-ahead " + std::to_string(look_ahead) + ", " +
                     method_name(method));
        const Plan plan = synth::synthetic_plan(f.model->layout, placements, look_ahead, method);
        const auto outputs = run_model(backend, *f.model, plan, 3);
        for (const auto& out : outputs) EXPECT_TRUE(same_bits(out, reference));
        // The same with file-aligned slots, read straight into (the CPU's memory is the host's).
        const auto straight =
            run_model(backend, *f.model, synth::file_aligned(plan, f.model->layout), 3);
        for (const auto& out : straight) EXPECT_TRUE(same_bits(out, reference));
      }
    }
  }
}

// Copies counted on the CPU copy queue's worker.
struct CopyCounter {
  std::atomic<int> copies{0};
  static void count(void* context) { static_cast<CopyCounter*>(context)->copies++; }
};

// On a device whose memory is host memory the planner gives file-aligned slots and no staging
// ring, and the streamer reads the file straight into the device slots: no staging memory, not
// one copy on the copy queue, and the same bits as the resident model.
TEST(Streamer, a_cpu_plan_reads_straight_into_the_device_slots_with_no_staging_copy) {
  Fixture f(SyntheticSpec{8, 64, 192, false});
  cpu::CpuBackend backend;
  ASSERT_TRUE(backend.capabilities().memory_is_host);
  Preset preset = find_preset(builtin_presets(), "cpu", MachineInfo{});
  const MachineInfo machine{false, 0, 0, 16ull << 30, 16ull << 30};
  // RAM for the process, two slots and three resident layers: the rest streams.
  const std::uint64_t layer = group_slot_bytes(f.model->layout.groups[1], SlotLayout::kFileAligned);
  preset.ram_budget_bytes =
      kProcessBaseBytes + minimum_device_bytes(f.model->layout, preset, machine) + 3 * layer;
  const Plan plan = make_plan(f.model->layout, preset, machine);
  EXPECT_EQ(plan.slot_layout, SlotLayout::kFileAligned);
  EXPECT_EQ(plan.read_method, ReadMethod::kDirect);
  EXPECT_EQ(plan.staging_slots, 0u);
  ASSERT_GT(plan.count(Placement::kDisk), 0u);
  ASSERT_GT(plan.count(Placement::kDevice), 2u);

  CopyCounter counter;
  cpu::CpuCopyQueue queue(16, &CopyCounter::count, &counter);
  StreamerOptions options;
  options.copy_queue = &queue;
  const int passes = 3;
  options.passes = passes;
  const Plan resident =
      synth::synthetic_plan(f.model->layout, synth::all_layers(f.spec.layers, Placement::kDevice),
                            1, ReadMethod::kDirect);
  const auto reference = run_model(backend, *f.model, resident, passes);
  std::vector<std::vector<float>> outputs;
  {
    Activations a(backend, kTokens, f.spec.dim, f.spec.hidden);
    WeightStreamer streamer(backend, f.model->layout, plan, options);
    EXPECT_EQ(streamer.host_bytes(), 0u) << "no staging ring, no cache";
    EXPECT_EQ(streamer.device_bytes() + plan.activation_bytes + kProcessBaseBytes,
              plan.predicted_ram_peak);
    const std::vector<float> input = synth::synthetic_input(kTokens, f.spec.dim, 1);
    for (int p = 0; p < passes; ++p) {
      backend.upload(a.tx, input.data());
      synth::run_pass(backend, streamer, {&a});
      std::vector<float> y(input.size());
      backend.download(a.tx, y.data());
      outputs.push_back(std::move(y));
    }
    std::uint64_t disk_bytes = 0;
    for (std::size_t g = 0; g < plan.placement.size(); ++g) {
      if (plan.placement[g] == Placement::kDisk) disk_bytes += f.model->layout.groups[g].bytes();
    }
    EXPECT_EQ(streamer.stats().bytes_read, passes * disk_bytes);
  }
  EXPECT_EQ(counter.copies.load(), 0) << "a staging copy on the copy queue";
  for (int p = 0; p < passes; ++p) EXPECT_TRUE(same_bits(outputs[p], reference[p])) << p;
}

// The planner counts the pinned cache in the bytes the streamer allocates for it: each group
// laid out as a device slot (tensors 256-byte aligned), not the tensors' bytes. Tensors here are
// not multiples of 256 bytes, so the two figures differ.
TEST(Streamer, the_pinned_cache_the_planner_counts_is_what_the_streamer_allocates) {
  Fixture f(SyntheticSpec{10, 60, 180, false});
  ASSERT_NE(f.model->layout.groups[1].bytes(), f.model->layout.groups[1].slot_bytes());
  cpu::CpuBackend backend;
  Preset preset;
  preset.name = "test";
  preset.device = Device::kCuda;
  preset.staging_slots = 3;
  preset.staging_slot_bytes = 64 << 10;
  const MachineInfo machine{true, 1ull << 30, 1ull << 30, 16ull << 30, 16ull << 30};
  // RAM for the ring and four cached layers; VRAM for the slots and two resident layers.
  preset.ram_budget_bytes =
      kProcessBaseBytes + 3 * (64 << 10) + 4 * f.model->layout.groups[1].slot_bytes();
  preset.vram_budget_bytes = minimum_device_bytes(f.model->layout, preset, machine) +
                             2 * f.model->layout.groups[1].slot_bytes();
  const Plan plan = make_plan(f.model->layout, preset, machine);
  ASSERT_GT(plan.count(Placement::kPinnedCache), 0u);
  WeightStreamer streamer(backend, f.model->layout, plan, StreamerOptions{});
  EXPECT_EQ(streamer.host_bytes(),
            plan.staging_slots * plan.staging_slot_bytes + plan.pinned_cache_bytes);
  EXPECT_LE(plan.predicted_ram_peak, preset.ram_budget_bytes);
}

TEST(Streamer, cfg_passes_share_one_acquire_so_each_weight_is_read_once_per_step) {
  Fixture f;
  cpu::CpuBackend backend;
  const int steps = 5;
  std::vector<Placement> placements = synth::all_layers(f.spec.layers, Placement::kDisk);
  placements[1] = Placement::kPinnedCache;
  placements[3] = Placement::kDevice;
  std::uint64_t disk_bytes = 0;
  std::uint64_t streamed_slot_bytes = 0;
  for (int i = 0; i < f.spec.layers; ++i) {
    const LayerGroup& g = f.model->layout.groups[static_cast<std::size_t>(i) + 1];
    if (placements[static_cast<std::size_t>(i)] == Placement::kDisk) disk_bytes += g.bytes();
    if (placements[static_cast<std::size_t>(i)] == Placement::kPinnedCache) {
      streamed_slot_bytes += g.slot_bytes();
    }
  }
  for (ReadMethod method : {ReadMethod::kMapped, ReadMethod::kDirect}) {
    SCOPED_TRACE(method_name(method));
    const Plan plan = synth::synthetic_plan(f.model->layout, placements, 2, method);
    StreamerOptions options;
    options.passes = steps;
    WeightStreamer streamer(backend, f.model->layout, plan, options);
    // (The IO thread starts reading pass 0 at once, so bytes_read is only checked at the end,
    // where the exact total also shows that loading the pinned and resident groups at
    // construction is not counted.)
    Activations cond(backend, kTokens, f.spec.dim, f.spec.hidden);
    Activations uncond(backend, kTokens, f.spec.dim, f.spec.hidden);
    const std::vector<float> in_c = synth::synthetic_input(kTokens, f.spec.dim, 1);
    const std::vector<float> in_u = synth::synthetic_input(kTokens, f.spec.dim, 2);
    for (int step = 0; step < steps; ++step) {
      backend.upload(cond.tx, in_c.data());
      backend.upload(uncond.tx, in_u.data());
      synth::run_pass(backend, streamer, {&cond, &uncond});
      EXPECT_EQ(streamer.stats().passes_completed, static_cast<std::uint64_t>(step + 1));
    }
    // Every pass has been acquired, so the IO thread has finished: the totals are exact.
    const StreamStats s = streamer.stats();
    EXPECT_EQ(s.bytes_read, steps * disk_bytes) << "each streamed weight read once per step";
    EXPECT_EQ(s.bytes_uploaded, steps * (disk_bytes + streamed_slot_bytes));
    EXPECT_EQ(s.groups_uploaded, static_cast<std::uint64_t>(steps * (f.spec.layers - 1)));
    EXPECT_EQ(ferry::test::error_code_of([&] { streamer.begin_pass(); }), ErrorCode::kInternal)
        << "a pass beyond StreamerOptions::passes";

    // Both CFG branches got the same results as separate single-branch runs.
    std::vector<float> out_c(in_c.size()), out_u(in_u.size());
    backend.download(cond.tx, out_c.data());
    backend.download(uncond.tx, out_u.data());
    Activations solo(backend, kTokens, f.spec.dim, f.spec.hidden);
    StreamerOptions one;
    one.passes = 2;
    WeightStreamer again(backend, f.model->layout, plan, one);
    std::vector<float> solo_out(in_c.size());
    backend.upload(solo.tx, in_c.data());
    synth::run_pass(backend, again, {&solo});
    backend.download(solo.tx, solo_out.data());
    EXPECT_TRUE(same_bits(solo_out, out_c));
    backend.upload(solo.tx, in_u.data());
    synth::run_pass(backend, again, {&solo});
    backend.download(solo.tx, solo_out.data());
    EXPECT_TRUE(same_bits(solo_out, out_u));
  }
}

TEST(Streamer, what_it_allocates_stays_within_the_planners_prediction) {
  // Budgets are real: the planner's plan for a budget that holds only some layers, and the
  // streamer's own accounting of what it then allocates, for every look-ahead.
  Fixture f(SyntheticSpec{12, 64, 192, false});
  cpu::CpuBackend backend;
  f.model->layout.activation_bytes = 256 << 10;
  for (std::size_t look_ahead : {1u, 2u, 3u}) {
    Preset preset;
    preset.name = "test";
    preset.device = Device::kCuda;
    preset.look_ahead = look_ahead;
    preset.staging_slots = 3;
    preset.staging_slot_bytes = 64 << 10;
    // RAM for the ring and two cached layers, no more.
    preset.ram_budget_bytes =
        kProcessBaseBytes + 3 * (64 << 10) + 2 * f.model->layout.groups[1].bytes();
    const MachineInfo machine{true, 1ull << 30, 1ull << 30, 16ull << 30, 16ull << 30};
    preset.vram_budget_bytes = minimum_device_bytes(f.model->layout, preset, machine) +
                               3 * f.model->layout.groups[1].slot_bytes();
    const Plan plan = make_plan(f.model->layout, preset, machine);
    ASSERT_GT(plan.count(Placement::kDisk), 0u);
    ASSERT_GT(plan.count(Placement::kPinnedCache), 0u);
    ASSERT_GT(plan.count(Placement::kDevice), 2u);  // some layers resident besides embed and head
    {
      WeightStreamer streamer(backend, f.model->layout, plan, StreamerOptions{});
      EXPECT_LE(streamer.device_bytes() + plan.activation_bytes, plan.predicted_vram_peak);
      EXPECT_LE(streamer.device_bytes() + plan.activation_bytes,
                usable_device_bytes(preset, machine));
      EXPECT_LE(streamer.host_bytes(),
                plan.staging_slots * plan.staging_slot_bytes + plan.pinned_cache_bytes);
    }
    const Plan resident = synth::synthetic_plan(
        f.model->layout, synth::all_layers(f.spec.layers, Placement::kDevice), 1,
        ReadMethod::kDirect);
    const auto planned = run_model(backend, *f.model, plan, 2);
    const auto reference = run_model(backend, *f.model, resident, 2);
    for (std::size_t i = 0; i < planned.size(); ++i) {
      EXPECT_TRUE(same_bits(planned[i], reference[i])) << "look-ahead " << look_ahead;
    }
  }
}

TEST(Streamer, acquire_out_of_order_is_refused) {
  Fixture f;
  cpu::CpuBackend backend;
  WeightStreamer streamer(
      backend, f.model->layout,
      synth::synthetic_plan(f.model->layout, synth::all_layers(f.spec.layers, Placement::kDisk), 1,
                           ReadMethod::kMapped));
  EXPECT_EQ(ferry::test::error_code_of([&] { (void)streamer.acquire(0); }), ErrorCode::kInternal);
  streamer.begin_pass();
  EXPECT_EQ(ferry::test::error_code_of([&] { (void)streamer.acquire(1); }), ErrorCode::kInternal);
  const LoadedGroup& embed = streamer.acquire(0);
  EXPECT_EQ(ferry::test::error_code_of([&] { (void)embed.tensor("no.such.tensor"); }),
            ErrorCode::kMissingTensor);
  EXPECT_EQ(ferry::test::error_code_of([&] { streamer.release(1); }), ErrorCode::kInternal);
  streamer.release(0);
  const LoadedGroup& layer = streamer.acquire(1);
  EXPECT_EQ(layer.tensor("layers.0.w1").shape, (Shape{f.spec.hidden, f.spec.dim}));
  EXPECT_EQ(layer.tensor("layers.0.w1").dtype, DType::kBF16);
  EXPECT_EQ(layer.tensor("layers.0.b2").dtype, DType::kF32);
  // Destroyed mid-pass, holding a group: clean.
}

// ---- lifetimes: random delays on every stage ----

struct Delays {
  std::mutex mutex;
  std::mt19937 rng{12345};
  std::atomic<int> calls[3] = {};
  int max_us = 1500;

  void sleep() {
    int us;
    {
      std::lock_guard lock(mutex);
      us = std::uniform_int_distribution<int>(0, max_us)(rng);
    }
    std::this_thread::sleep_for(std::chrono::microseconds(us));
  }
  static void stage(StreamStage s, void* context) {
    auto* d = static_cast<Delays*>(context);
    d->calls[static_cast<int>(s)]++;
    d->sleep();
  }
  static void copy(void* context) { static_cast<Delays*>(context)->sleep(); }
};

TEST(Streamer, random_delays_on_every_stage_change_nothing) {
  Fixture f(SyntheticSpec{5, 64, 128, false});
  cpu::CpuBackend backend;
  const std::vector<float> reference = run_model(
      backend, *f.model,
      synth::synthetic_plan(f.model->layout, synth::all_layers(f.spec.layers, Placement::kDevice),
                           1, ReadMethod::kMapped),
      1)[0];
  std::vector<Placement> mixed = synth::all_layers(f.spec.layers, Placement::kDisk);
  mixed[2] = Placement::kPinnedCache;
  for (std::size_t look_ahead = 1; look_ahead <= 3; ++look_ahead) {
    for (ReadMethod method : {ReadMethod::kMapped, ReadMethod::kDirect}) {
      SCOPED_TRACE("look-ahead " + std::to_string(look_ahead) + ", " + method_name(method));
      Delays delays;
      cpu::CpuCopyQueue queue(4, &Delays::copy, &delays);  // a short queue: the IO thread waits too
      StreamerOptions options;
      options.stage_hook = &Delays::stage;
      options.hook_context = &delays;
      options.copy_queue = &queue;
      // Small staging slots: tensors split over several slots, slots reused many times a pass.
      const Plan plan = synth::synthetic_plan(f.model->layout, mixed, look_ahead, method, 2, 8 << 10);
      const auto outputs = run_model(backend, *f.model, plan, 3, options);
      for (const auto& out : outputs) EXPECT_TRUE(same_bits(out, reference));
      EXPECT_GT(delays.calls[0].load(), 0);
      EXPECT_GT(delays.calls[1].load(), 0);
      EXPECT_GT(delays.calls[2].load(), 0);
    }
  }
}

TEST(Streamer, destroyed_mid_pass_with_delays_is_clean) {
  Fixture f;
  cpu::CpuBackend backend;
  for (std::size_t stop_after = 0; stop_after < 5; ++stop_after) {
    Delays delays;
    delays.max_us = 800;
    cpu::CpuCopyQueue queue(4, &Delays::copy, &delays);
    StreamerOptions options;
    options.stage_hook = &Delays::stage;
    options.hook_context = &delays;
    options.copy_queue = &queue;
    const Plan plan = synth::synthetic_plan(
        f.model->layout, synth::all_layers(f.spec.layers, Placement::kDisk), 3, ReadMethod::kMapped, 2,
        8 << 10);
    WeightStreamer streamer(backend, f.model->layout, plan, options);
    streamer.begin_pass();
    for (std::size_t g = 0; g < stop_after; ++g) {
      (void)streamer.acquire(g);
      streamer.release(g);
    }
    // The streamer dies here with reads, copies and a half-done pass in flight.
  }
}

// ---- errors and cancellation ----

// Holds the IO thread at its first read until released, so a test can change the file first.
struct Gate {
  std::thread::id owner = std::this_thread::get_id();
  std::atomic<bool> open{false};
  static void stage(StreamStage s, void* context) {
    auto* g = static_cast<Gate*>(context);
    if (s != StreamStage::kIo || std::this_thread::get_id() == g->owner) return;
    while (!g->open.load()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
};

TEST(Streamer, file_truncated_under_the_streamer_is_an_io_error_at_the_next_acquire) {
  for (int variant = 0; variant < 3; ++variant) {
    // mapped, direct through the staging ring, direct straight into file-aligned slots
    const ReadMethod method = variant == 0 ? ReadMethod::kMapped : ReadMethod::kDirect;
    SCOPED_TRACE(std::string(method_name(method)) + (variant == 2 ? ", file-aligned" : ""));
    Fixture f;
    cpu::CpuBackend backend;
    Gate gate;
    StreamerOptions options;
    options.stage_hook = &Gate::stage;
    options.hook_context = &gate;
    Plan plan = synth::synthetic_plan(
        f.model->layout, synth::all_layers(f.spec.layers, Placement::kDisk), 2, method);
    if (variant == 2) plan = synth::file_aligned(plan, f.model->layout);
    WeightStreamer streamer(backend, f.model->layout, plan, options);
    std::string refused;
    const bool shrunk =
        ferry::test::resize_file(f.dir / "model.safetensors", f.model->file->data_offset(), &refused);
    gate.open = true;
    if (!shrunk) GTEST_SKIP() << "the OS refused to shrink the open model file: " << refused;

    streamer.begin_pass();
    ErrorCode code = ErrorCode::kInternal;
    std::string message;
    try {
      for (std::size_t g = 0; g < streamer.group_count(); ++g) {
        (void)streamer.acquire(g);
        streamer.release(g);
      }
      ADD_FAILURE() << "a pass over a truncated file succeeded";
    } catch (const Error& e) {
      code = e.code();
      message = e.what();
    }
    EXPECT_EQ(code, ErrorCode::kIo) << message;
    EXPECT_NE(message.find("model.safetensors"), std::string::npos) << message;
  }
}

TEST(Streamer, cancel_makes_a_waiting_acquire_throw_promptly) {
  Fixture f;
  cpu::CpuBackend backend;
  Gate gate;  // never opened: the IO thread is stuck before its first read
  StreamerOptions options;
  options.stage_hook = &Gate::stage;
  options.hook_context = &gate;
  const Plan plan = synth::synthetic_plan(
      f.model->layout, synth::all_layers(f.spec.layers, Placement::kDisk), 1, ReadMethod::kMapped);
  WeightStreamer streamer(backend, f.model->layout, plan, options);
  streamer.begin_pass();
  (void)streamer.acquire(0);
  streamer.release(0);
  std::thread canceller([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    streamer.cancel();
    gate.open = true;
  });
  const auto start = std::chrono::steady_clock::now();
  EXPECT_EQ(ferry::test::error_code_of([&] { (void)streamer.acquire(1); }), ErrorCode::kCancelled);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  canceller.join();
  EXPECT_LT(seconds, 2.0);
  EXPECT_EQ(ferry::test::error_code_of([&] { (void)streamer.acquire(1); }), ErrorCode::kCancelled);
}

// ---- the weight store's leases ----

struct CloseProbe {
  io::MappedFile* file = nullptr;
  std::atomic<int> busy{0};
  std::atomic<int> other{0};
  std::atomic<std::size_t> max_views{0};
  static void stage(StreamStage s, void* context) {
    auto* p = static_cast<CloseProbe*>(context);
    // kCopy on the IO thread comes after a chunk was copied out of a view still leased.
    if (s != StreamStage::kCopy || p->file == nullptr) return;
    const std::size_t views = p->file->live_views();
    if (views > p->max_views.load()) p->max_views = views;
    try {
      p->file->close();
      p->other++;
    } catch (const Error& e) {
      (e.code() == ErrorCode::kBusy ? p->busy : p->other)++;
    }
  }
};

TEST(Streamer, model_file_refuses_to_close_while_leased_and_closes_after_a_pass) {
  Fixture f;
  cpu::CpuBackend backend;
  CloseProbe probe;
  StreamerOptions options;
  options.passes = 1;
  options.stage_hook = &CloseProbe::stage;
  options.hook_context = &probe;
  const Plan plan = synth::synthetic_plan(
      f.model->layout, synth::all_layers(f.spec.layers, Placement::kDisk), 2, ReadMethod::kMapped);
  // The weight store hands out the file as const; closing it is what a model unload would do.
  auto& file = const_cast<io::MappedFile&>(f.model->file->mapped_file());
  WeightStreamer streamer(backend, f.model->layout, plan, options);
  probe.file = &file;
  Activations a(backend, kTokens, f.spec.dim, f.spec.hidden);
  synth::run_pass(backend, streamer, {&a});
  probe.file = nullptr;
  EXPECT_GT(probe.busy.load(), 0) << "close() under a leased view must throw kBusy";
  EXPECT_EQ(probe.other.load(), 0) << "close() under a lease succeeded or failed otherwise";
  EXPECT_GE(probe.max_views.load(), 1u);
  // The pass is over and every view was released as soon as its bytes were copied.
  EXPECT_EQ(file.live_views(), 0u);
  file.close();
  EXPECT_FALSE(file.is_open());
}

}  // namespace
}  // namespace ferry::offload
