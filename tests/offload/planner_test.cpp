// Presets and the planner: validation, determinism, even spread of resident blocks, budgets
// never exceeded, and impossible budgets refused with what would fit.
#include "core/offload/planner.h"

#include <gtest/gtest.h>

#include <deque>
#include <functional>

#include "core/error.h"
#include "tests/test_support.h"

namespace ferry::offload {
namespace {

constexpr std::uint64_t kMiB = 1ull << 20;
constexpr std::uint64_t kGiB = 1ull << 30;

// A model of `blocks` groups of `block_mib` each plus two small always-resident groups, with
// TensorInfos owned here (the planner only reads sizes).
struct FakeModel {
  std::deque<io::TensorInfo> tensors;
  ModelLayout layout;

  FakeModel(int blocks, std::uint64_t block_mib, std::uint64_t activation_mib) {
    layout.name = "fake model";
    layout.activation_bytes = activation_mib * kMiB;
    add_group("embeddings", 20 * kMiB, true);
    for (int i = 0; i < blocks; ++i)
      add_group("blocks." + std::to_string(i), block_mib * kMiB, false);
    add_group("head", kMiB, true);
  }
  void add_group(std::string name, std::uint64_t bytes, bool always) {
    tensors.push_back(
        io::TensorInfo{name + ".weight", DType::kBF16, {bytes / 2}, 0, bytes, nullptr});
    layout.groups.push_back(
        LayerGroup{std::move(name), {WeightRef{nullptr, &tensors.back()}}, always});
  }
};

MachineInfo laptop(std::uint64_t vram_gib, std::uint64_t ram_gib) {
  return MachineInfo{true, vram_gib * kGiB, vram_gib * kGiB, ram_gib * kGiB, ram_gib * kGiB};
}

Preset preset(std::string_view name) {
  return find_preset(builtin_presets(), name, laptop(8, 24));
}

TEST(Presets, every_built_in_preset_loads_and_has_a_description) {
  const auto& presets = builtin_presets();
  std::vector<std::string> names;
  for (const Preset& p : presets) {
    names.push_back(p.name);
    EXPECT_FALSE(p.description.empty()) << p.name;
    EXPECT_GE(p.ram_budget_bytes, 1024 * kMiB) << p.name;
  }
  EXPECT_EQ(names, (std::vector<std::string>{"laptop-6gb", "laptop-8gb", "desktop-12gb",
                                             "desktop-16gb", "desktop-24gb", "cpu"}));
}

TEST(Presets, invalid_presets_are_refused_naming_the_field) {
  const std::string base =
      R"({"name": "mine", "description": "My laptop.", "vram_budget_mib": 4000, "ram_budget_mib": 8000)";
  EXPECT_NO_THROW(parse_preset(base + "}", "mine.json"));
  EXPECT_EQ(parse_preset(base + "}", "mine.json").vae_activations, DType::kF32);
  EXPECT_EQ(parse_preset(base + R"(, "vae_activations": "bf16"})", "mine.json").vae_activations,
            DType::kBF16);
  // The chunk was "ffn_chunk_tokens" when only the FFN was chunked: users' presets keep it.
  EXPECT_EQ(parse_preset(base + R"(, "chunk_tokens": 4096})", "mine.json").chunk_tokens, 4096);
  EXPECT_EQ(parse_preset(base + R"(, "ffn_chunk_tokens": 2048})", "mine.json").chunk_tokens, 2048);
  const std::pair<std::string, std::string> broken[] = {
      {base + R"(, "chunk_tokens": 1, "ffn_chunk_tokens": 2})", "old name"},
      {base + R"(, "chunk_tokens": -1})", "chunk_tokens"},
      {base + R"(, "look_ahead": 0})", "look_ahead"},
      {base + R"(, "read_method": "fast"})", "read_method"},
      {base + R"(, "vram_budget": 4000})", "unknown field"},
      {base + R"(, "max_pinned_fraction_of_ram": 0.9})", "max_pinned_fraction_of_ram"},
      {base + R"(, "vae_tile_px": 100})", "vae_tile_px"},
      {base + R"(, "vae_activations": "fp16"})", "vae_activations"},
      {R"({"name": "Mine!", "description": "x", "vram_budget_mib": 1, "ram_budget_mib": 2000})",
       "name"},
      {R"({"name": "x", "description": "x", "vram_budget_mib": -5, "ram_budget_mib": 2000})",
       "vram_budget_mib"},
      // Found by preset_fuzzer: a field of another type escaped as nlohmann's type_error.
      {base + R"(, "device": 7})", "device"},
      {base + R"(, "read_method": []})", "read_method"},
      {base + R"(, "vae_activations": {}})", "vae_activations"},
      {"[1, 2]", "one JSON object"},
      {"{\"name\": ", "not valid JSON"},
  };
  for (const auto& [json, field] : broken) {
    try {
      (void)parse_preset(json, "mine.json");
      ADD_FAILURE() << "accepted: " << json;
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::kBadArgument);
      EXPECT_NE(std::string(e.what()).find(field), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("mine.json"), std::string::npos) << e.what();
    }
  }
}

// A preset shared by a stranger is bounded: over 64 KiB it is refused (a user folder's file is
// read no further than that), and nesting that fits in 64 KiB is nlohmann's iterative parser's and
// destructor's to take, ending in a refusal naming the field.
TEST(Presets, a_preset_over_64_KiB_or_deeply_nested_is_refused_naming_the_file) {
  const std::string preset =
      R"({"name": "mine", "description": "My laptop.", "vram_budget_mib": 4000, "ram_budget_mib": 8000})";
  const std::string padded = preset + std::string(64 * 1024, ' ');
  const auto refusal = [](const std::function<void()>& run) -> std::string {
    try {
      run();
      ADD_FAILURE() << "accepted";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::kBadArgument);
      return e.what();
    }
    return {};
  };
  EXPECT_NE(refusal([&] { parse_preset(padded, "big.json"); }).find("larger than 64 KiB"),
            std::string::npos);
  const std::string deep = std::string(30000, '[') + std::string(30000, ']');
  EXPECT_NE(refusal([&] { parse_preset(deep, "deep.json"); }).find("one JSON object"),
            std::string::npos);
  EXPECT_NE(
      refusal([&] { parse_preset(std::string(60000, '['), "deep.json"); }).find("not valid JSON"),
      std::string::npos);
  EXPECT_NE(refusal([&] {
              parse_preset(R"({"name": )" + deep + "}", "deep.json");
            }).find("\"name\" must be a non-empty string"),
            std::string::npos);
  test::ScratchDir dir;
  test::write_file(dir / "big.json", std::string_view(padded + std::string(1 << 20, ' ')));
  const std::string message = refusal([&] { load_presets(dir.path()); });
  EXPECT_NE(message.find("big.json"), std::string::npos) << message;
  EXPECT_NE(message.find("larger than 64 KiB"), std::string::npos) << message;
}

TEST(Presets, user_presets_join_the_built_ins_and_may_not_take_their_names) {
  test::ScratchDir dir;
  test::write_file(
      dir / "studio.json",
      std::string_view(
          R"({"name": "studio", "description": "The studio box.", "vram_budget_mib": 40000, "ram_budget_mib": 60000})"));
  const auto presets = load_presets(dir.path());
  EXPECT_EQ(presets.size(), builtin_presets().size() + 1);
  EXPECT_EQ(find_preset(presets, "studio", laptop(8, 24)).vram_budget_bytes, 40000 * kMiB);
  test::write_file(
      dir / "clash.json",
      std::string_view(
          R"({"name": "laptop-8gb", "description": "x", "vram_budget_mib": 1, "ram_budget_mib": 2000})"));
  EXPECT_THROW(load_presets(dir.path()), Error);
  EXPECT_THROW(find_preset(builtin_presets(), "nope", laptop(8, 24)), Error);
}

TEST(Presets, auto_takes_this_machines_free_memory_less_headroom) {
  const Preset p = auto_preset(MachineInfo{true, 8 * kGiB, 7 * kGiB, 32 * kGiB, 20 * kGiB});
  EXPECT_EQ(p.name, "auto");
  EXPECT_EQ(p.vram_budget_bytes, 7 * kGiB - 600 * kMiB);
  EXPECT_EQ(p.ram_budget_bytes, 20 * kGiB / 10 * 6);
  EXPECT_EQ(auto_preset(MachineInfo{false, 0, 0, 16 * kGiB, 12 * kGiB}).device, Device::kCpu);
}

TEST(Planner, everything_stays_on_the_device_when_it_fits) {
  const FakeModel m(30, 88, 1400);  // the 1.3B DiT: 30 × 88.6 MiB
  const Plan plan = make_plan(m.layout, preset("desktop-24gb"), laptop(24, 64));
  EXPECT_EQ(plan.count(Placement::kDevice), m.layout.groups.size());
  EXPECT_EQ(plan.device_slots, 0u);
  EXPECT_EQ(plan.staging_slots, 0u);
  EXPECT_LE(plan.predicted_vram_peak, usable_device_bytes(preset("desktop-24gb"), laptop(24, 64)));
}

TEST(Planner, the_streamed_plan_reads_every_block_from_disk_whatever_the_budget) {
  const FakeModel m(4, 10, 50);
  const Preset p = preset("desktop-24gb");
  const Plan plan = streamed_plan(m.layout, p);
  ASSERT_EQ(plan.placement.size(), 6u);
  EXPECT_EQ(plan.placement.front(), Placement::kDevice);  // embeddings
  EXPECT_EQ(plan.placement.back(), Placement::kDevice);   // head
  EXPECT_EQ(plan.count(Placement::kDisk), 4u);
  EXPECT_EQ(plan.device_slots, p.look_ahead + 1);
  EXPECT_EQ(plan.device_slot_bytes, m.layout.groups[1].slot_bytes());
  EXPECT_EQ(plan.staging_slots, p.staging_slots);
  EXPECT_EQ(plan.resident_bytes, m.layout.groups[0].slot_bytes() + m.layout.groups[5].slot_bytes());
  EXPECT_EQ(plan.predicted_vram_peak,
            plan.resident_bytes + plan.device_slots * plan.device_slot_bytes + 50 * kMiB);
}

TEST(Planner, resident_blocks_spread_evenly_and_the_plan_fits_its_budgets) {
  const FakeModel m(30, 312, 2100);  // the 5B DiT at 720p: 30 × 312 MiB
  for (const char* name : {"laptop-6gb", "laptop-8gb", "desktop-12gb", "desktop-16gb"}) {
    const Preset p = preset(name);
    const MachineInfo machine = laptop(p.vram_budget_bytes / kGiB + 1, 32);
    const Plan plan = make_plan(m.layout, p, machine);
    EXPECT_LE(plan.predicted_vram_peak, usable_device_bytes(p, machine)) << name;
    EXPECT_LE(plan.predicted_ram_peak, p.ram_budget_bytes) << name;
    EXPECT_LE(plan.pinned_cache_bytes,
              static_cast<std::uint64_t>(p.max_pinned_fraction_of_ram * 32.0 * kGiB))
        << name;
    if (plan.count(Placement::kDevice) == m.layout.groups.size()) {
      EXPECT_EQ(std::string(name), "desktop-16gb")
          << "only the 16 GB preset holds the whole 5B model";
      continue;
    }
    EXPECT_EQ(plan.device_slots, p.look_ahead + 1);
    EXPECT_GE(plan.device_slot_bytes, 312 * kMiB);
    // No two resident blocks are further apart than the even spread allows.
    std::vector<std::size_t> resident;
    for (std::size_t i = 1; i + 1 < m.layout.groups.size(); ++i) {
      if (plan.placement[i] == Placement::kDevice) resident.push_back(i);
    }
    ASSERT_FALSE(resident.empty()) << name;
    const double spacing = 30.0 / static_cast<double>(resident.size());
    for (std::size_t k = 1; k < resident.size(); ++k) {
      EXPECT_LE(static_cast<double>(resident[k] - resident[k - 1]), spacing + 1.0) << name;
    }
    // Deterministic.
    const Plan again = make_plan(m.layout, p, machine);
    EXPECT_EQ(again.placement, plan.placement) << name;
  }
}

TEST(Planner, streamed_blocks_come_from_disk_once_the_pinned_cache_is_full) {
  const FakeModel m(40, 670, 3600);  // the 14B DiT: 40 × 670 MiB
  const Plan plan = make_plan(m.layout, preset("laptop-8gb"), laptop(8, 16));
  EXPECT_GT(plan.count(Placement::kDisk), 0u);
  EXPECT_GT(plan.staging_slots, 0u);
  EXPECT_LE(plan.pinned_cache_bytes, static_cast<std::uint64_t>(0.35 * 16 * kGiB));
}

// On the CPU the blocks, the slots, the staging ring and the process itself all share the RAM
// budget: a model larger than the budget streams, and the whole plan fits the budget. (The
// umT5-XXL under a 4 GB cpu preset was refused before the ring and the process base were taken
// out of what the blocks may use.)
TEST(Planner, a_cpu_plan_for_a_model_larger_than_the_ram_budget_streams_within_it) {
  const FakeModel m(24, 368, 36);                        // umT5-XXL's blocks in F16
  for (std::uint64_t budget_mib : {4096, 6144, 8192}) {  // the blocks alone: 8832 MiB
    Preset p = preset("cpu");
    p.ram_budget_bytes = budget_mib * kMiB;
    const Plan plan = make_plan(m.layout, p, MachineInfo{false, 0, 0, 24 * kGiB, 20 * kGiB});
    EXPECT_GT(plan.count(Placement::kDisk), 0u) << budget_mib;
    EXPECT_GT(plan.count(Placement::kDevice), 2u) << budget_mib;  // blocks besides the small groups
    EXPECT_LE(plan.predicted_ram_peak, p.ram_budget_bytes) << budget_mib;
    // And not far below it: what does not fit is one block more.
    EXPECT_GT(plan.predicted_ram_peak + 368 * kMiB + 4096, p.ram_budget_bytes) << budget_mib;
  }
}

TEST(Planner, an_impossible_budget_is_refused_with_what_would_fit) {
  const FakeModel m(30, 312, 6000);  // 1080p-sized working memory
  try {
    (void)make_plan(m.layout, preset("laptop-6gb"), laptop(6, 16));
    FAIL() << "planned what cannot fit";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kDoesNotFit);
    EXPECT_EQ(exit_code(e.code()), 3);
    const std::string text = e.what();
    EXPECT_NE(text.find("needs at least " +
                        std::to_string(
                            (minimum_device_bytes(m.layout, preset("laptop-6gb"), laptop(6, 16)) +
                             kMiB - 1) /
                            kMiB) +
                        " MiB"),
              std::string::npos)
        << text;
    EXPECT_NE(text.find("laptop-8gb"), std::string::npos) << text;
  }
  EXPECT_THROW(
      make_plan(m.layout, preset("laptop-8gb"), MachineInfo{false, 0, 0, 16 * kGiB, 16 * kGiB}),
      Error);
}

// Unbuffered reads lay a slot out as the file is (kFileAligned): a block-quantised tensor (the
// codes of a bitsandbytes NF4 weight, a GGUF block type) is placed by its storage alignment, not
// by an element size it does not have (this threw Error(kInternal) for every NF4 plan on the CPU).
TEST(Planner, file_aligned_slots_place_block_quantised_tensors) {
  const io::TensorInfo nf4{"w", DType::kBnb4, {128, 64}, 4097, 128 * 64 / 2, nullptr};
  const io::TensorInfo q8{"q", DType::kQ8_0, {4, 32}, 8194, 4 * 34, nullptr};
  EXPECT_EQ(tensor_slot_offset(0, nf4, SlotLayout::kFileAligned), 4097u % kFileAlignment);
  EXPECT_EQ(tensor_slot_offset(0, q8, SlotLayout::kFileAligned), 8194u % kFileAlignment);
  // An odd offset does not suit Q8_0's f16 scales: packed alignment, read through a bounce.
  const io::TensorInfo q8_odd{"q", DType::kQ8_0, {4, 32}, 8195, 4 * 34, nullptr};
  EXPECT_EQ(tensor_slot_offset(1, q8_odd, SlotLayout::kFileAligned), 256u);
  const LayerGroup group{"layers.0", {WeightRef{nullptr, &nf4}, WeightRef{nullptr, &q8}}, false};
  EXPECT_GE(group_slot_bytes(group, SlotLayout::kFileAligned), nf4.bytes + q8.bytes);
}

}  // namespace
}  // namespace ferry::offload
