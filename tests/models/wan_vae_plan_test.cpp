// The VAE decode stage's plan: untiled when the whole decode fits and the preset allows it, else
// the largest tile that fits the device budget (never above the preset's tile), predictions that
// are the VAE's own arena estimates, determinism, and impossible budgets refused with what would
// fit. Real shapes come from header-only checkpoints (the data a sparse hole), so the tests read
// and allocate no weights.
#include <gtest/gtest.h>

#include <string>

#include "core/error.h"
#include "core/io/tensor_set.h"
#include "core/models/wan/vae.h"
#include "core/models/wan/vae_plan.h"
#include "core/models/wan/vae_synth.h"
#include "core/offload/planner.h"
#include "tests/test_support.h"

namespace ferry::models::wan {
namespace {

using offload::builtin_presets;
using offload::find_preset;
using offload::kProcessBaseBytes;
using offload::MachineInfo;
using offload::Preset;
using offload::usable_device_bytes;

constexpr std::uint64_t kMiB = 1ull << 20;
constexpr std::uint64_t kGiB = 1ull << 30;

VaeWeights real_vae(VaeKind kind, DType dtype = DType::kF16) {
  test::ScratchDir dir;
  const auto path = dir / "vae.safetensors";
  write_header_only_safetensors(path, wan_vae_tensor_specs(kind, dtype));
  return VaeWeights::shapes_only(io::TensorSet::open(path));
}

VaeWeights tiny_vae(const char* name) {
  return VaeWeights::shapes_only(
      io::TensorSet::open(test::data_path(std::string("wan/vae/") + name)));
}

MachineInfo laptop(std::uint64_t vram_mib, std::uint64_t ram_gib = 32) {
  return MachineInfo{true, vram_mib * kMiB, vram_mib * kMiB, ram_gib * kGiB, ram_gib * kGiB};
}

Preset preset(std::string_view name) {
  return find_preset(builtin_presets(), name, laptop(8192));
}

// The synthetic checkpoints have the official files' parameter counts (wan.md §E: 704.7 M and
// 126.9 M), so estimates made from them are the real ones. In F16 files the convolution weights
// stay F16 on the device (1.41 GB and 0.25 GB, the rest F32).
TEST(VaePlan, header_only_checkpoints_have_the_real_shapes) {
  const VaeWeights v22 = real_vae(VaeKind::kWan22), v21 = real_vae(VaeKind::kWan21);
  EXPECT_EQ(v22.config().kind, VaeKind::kWan22);
  EXPECT_EQ(v21.config().kind, VaeKind::kWan21);
  EXPECT_EQ(v22.at("decoder.conv1.weight").shape, (Shape{1024, 48, 3, 3, 3}));
  EXPECT_EQ(v21.at("decoder.upsamples.4.shortcut.weight").shape, (Shape{384, 192, 1, 1, 1}));
  EXPECT_NEAR(static_cast<double>(v22.bytes()), 704.7e6 * 2, 15e6);
  EXPECT_NEAR(static_cast<double>(v21.bytes()), 126.9e6 * 2, 3e6);
  const VaeWeights f32 = real_vae(VaeKind::kWan22, DType::kF32);
  EXPECT_NEAR(static_cast<double>(f32.bytes()), 704.7e6 * 4, 1e6);
}

// laptop-8gb at 1280×704×121 (Wan 2.2, the largest TI2V size): tiled at the preset's 256 px,
// a quarter of the tile overlapping, and the predicted VRAM within the usable budget. The whole
// video on the host (1.2 GiB) beats parking 28 tiles' caches there (12 GiB): frames do not
// stream at this size.
TEST(VaePlan, laptop_8gb_tiles_the_720p_decode_within_its_budget) {
  const VaeWeights vae = real_vae(VaeKind::kWan22);
  const Preset p = preset("laptop-8gb");
  const MachineInfo m = laptop(8192);
  const VaePlan plan = make_vae_plan(vae, p, m, 1280, 704, 121);
  EXPECT_EQ(plan.mode, VaeDecodeMode::kTiledWhole);
  EXPECT_EQ(plan.tile_px, 256);
  EXPECT_EQ(plan.tiling.tile, 16);
  EXPECT_EQ(plan.tiling.overlap, 4);
  EXPECT_EQ(plan.tiles, 4 * 7);  // rows start at 0, 12, 24, 28; columns at 0, 12, ..., 60, 64
  EXPECT_LE(plan.predicted_vram_peak, usable_device_bytes(p, m));
  EXPECT_EQ(plan.predicted_vram_peak, plan.weight_bytes + plan.latent_bytes + plan.arena_bytes);
  EXPECT_LE(plan.predicted_ram_peak, p.ram_budget_bytes);
  EXPECT_EQ(plan.weight_bytes, vae.bytes());
  // The arena is the VAE's own estimate; the RAM holds the whole video in F32.
  EXPECT_EQ(plan.arena_bytes, tiled_decode_arena_bytes(vae, plan.tiling, 31, 44, 80));
  EXPECT_GE(plan.host_bytes, 3ull * 121 * 704 * 1280 * sizeof(float));
  EXPECT_FALSE(plan.streams_frames());
}

// A short clip on a machine with VRAM to spare: every tile's caches stay on the device and the
// frames stream out chunk by chunk.
TEST(VaePlan, tile_caches_stay_on_the_device_when_they_fit) {
  const VaeWeights vae = real_vae(VaeKind::kWan22);
  const Preset p = preset("desktop-12gb");
  const VaePlan plan = make_vae_plan(vae, p, laptop(12288), 832, 480, 81);
  EXPECT_EQ(plan.mode, VaeDecodeMode::kTiledStreamed);
  EXPECT_EQ(plan.caches, VaeTileCaches::kDevice);
  EXPECT_TRUE(plan.streams_frames());
  EXPECT_LE(plan.predicted_vram_peak, usable_device_bytes(p, laptop(12288)));
  EXPECT_LT(plan.host_bytes, 3ull * 81 * 480 * 832 * sizeof(float));
}

// Without a preset tile and with room for it, the decode is not tiled (tiles only cost quality).
TEST(VaePlan, untiled_when_the_whole_decode_fits_and_the_preset_has_no_tile) {
  const VaeWeights vae = real_vae(VaeKind::kWan22);
  const Preset p = preset("desktop-24gb");
  ASSERT_EQ(p.vae_tile_px, 0);
  const VaePlan plan = make_vae_plan(vae, p, laptop(24576), 832, 480, 81);
  EXPECT_EQ(plan.mode, VaeDecodeMode::kUntiled);
  EXPECT_EQ(plan.tiling.tile, 0);
  EXPECT_EQ(plan.arena_bytes, WanVae::decode_arena_bytes(vae, 30, 52));
  EXPECT_TRUE(plan.streams_frames());
}

// The tile is the largest that fits: a smaller budget gives a smaller tile, each plan fits its
// budget, and one position more would not have fitted.
TEST(VaePlan, the_tile_shrinks_with_the_budget_and_is_the_largest_that_fits) {
  const VaeWeights vae = real_vae(VaeKind::kWan22);
  Preset p = preset("desktop-24gb");  // no tile of its own and RAM to spare: VRAM alone decides
  std::int64_t previous = 1 << 20;
  for (std::uint64_t vram_mib : {12288, 4096, 2560, 2048, 1800}) {
    p.vram_budget_bytes = vram_mib * kMiB;
    const MachineInfo m = laptop(vram_mib + 600);
    const VaePlan plan = make_vae_plan(vae, p, m, 1280, 704, 121);
    ASSERT_NE(plan.mode, VaeDecodeMode::kUntiled) << vram_mib;
    EXPECT_LE(plan.tiling.tile, previous) << vram_mib;
    EXPECT_LE(plan.predicted_vram_peak, usable_device_bytes(p, m)) << vram_mib;
    // The leanest way to run one position more (caches parked) would not have fitted.
    const std::int64_t bigger = plan.tiling.tile + 1;
    const std::size_t arena = tiled_chunks_decode_arena_bytes(
        vae, {bigger, std::max<std::int64_t>(2, bigger / 4)}, 44, 80, VaeTileCaches::kHost);
    EXPECT_GT(plan.weight_bytes + plan.latent_bytes + arena, usable_device_bytes(p, m)) << vram_mib;
    previous = plan.tiling.tile;
  }
  EXPECT_LT(previous, 16);
}

// A preset with bf16 VAE activations: every estimate is the bf16 one (half the f32 arena, so
// on the same budget the tile is at least as large), and the plan says so.
TEST(VaePlan, bf16_activations_plan_with_the_bf16_estimates_and_fit_larger_tiles) {
  const VaeWeights vae = real_vae(VaeKind::kWan22);
  Preset f32 = preset("desktop-24gb");
  Preset bf16 = f32;
  bf16.vae_activations = DType::kBF16;
  const VaeOptions bf16_options{DType::kBF16};

  const VaePlan untiled = make_vae_plan(vae, bf16, laptop(24576), 832, 480, 81);
  ASSERT_EQ(untiled.mode, VaeDecodeMode::kUntiled);
  EXPECT_EQ(untiled.activations, DType::kBF16);
  EXPECT_EQ(untiled.arena_bytes, WanVae::decode_arena_bytes(vae, 30, 52, bf16_options));
  EXPECT_LT(untiled.arena_bytes, make_vae_plan(vae, f32, laptop(24576), 832, 480, 81).arena_bytes);

  for (std::uint64_t vram_mib : {4096, 2560, 2048}) {
    f32.vram_budget_bytes = bf16.vram_budget_bytes = vram_mib * kMiB;
    const MachineInfo m = laptop(vram_mib + 600);
    const VaePlan a = make_vae_plan(vae, f32, m, 1280, 704, 121);
    const VaePlan b = make_vae_plan(vae, bf16, m, 1280, 704, 121);
    EXPECT_EQ(a.activations, DType::kF32);
    EXPECT_GE(b.tiling.tile, a.tiling.tile) << vram_mib;
    EXPECT_LE(b.predicted_vram_peak, usable_device_bytes(bf16, m)) << vram_mib;
    if (b.mode == VaeDecodeMode::kTiledStreamed) {
      EXPECT_EQ(b.arena_bytes,
                tiled_chunks_decode_arena_bytes(vae, b.tiling, 44, 80, b.caches, bf16_options));
    } else if (b.mode == VaeDecodeMode::kTiledWhole) {
      EXPECT_EQ(b.arena_bytes, tiled_decode_arena_bytes(vae, b.tiling, 31, 44, 80, bf16_options));
    }
  }
}

TEST(VaePlan, is_deterministic) {
  const VaeWeights vae = real_vae(VaeKind::kWan21);
  const Preset p = preset("laptop-6gb");
  const VaePlan a = make_vae_plan(vae, p, laptop(6144), 832, 480, 81);
  const VaePlan b = make_vae_plan(vae, p, laptop(6144), 832, 480, 81);
  EXPECT_EQ(a.mode, b.mode);
  EXPECT_EQ(a.tiling.tile, b.tiling.tile);
  EXPECT_EQ(a.tiling.overlap, b.tiling.overlap);
  EXPECT_EQ(a.caches, b.caches);
  EXPECT_EQ(a.predicted_vram_peak, b.predicted_vram_peak);
  EXPECT_EQ(a.predicted_ram_peak, b.predicted_ram_peak);
  EXPECT_LE(a.tile_px, 192);
}

// Below the weights plus the smallest tile's decode the plan is refused, saying what it needs.
TEST(VaePlan, too_small_a_budget_is_refused_with_what_would_fit) {
  const VaeWeights vae = real_vae(VaeKind::kWan22);
  Preset p = preset("laptop-6gb");
  p.vram_budget_bytes = 1434 * kMiB;  // 1.32 GiB of weights leave too little for any tile
  try {
    (void)make_vae_plan(vae, p, laptop(8192), 1280, 704, 121);
    ADD_FAILURE() << "a 1.4 GiB budget was accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kDoesNotFit);
    EXPECT_NE(std::string(e.what()).find("needs at least"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("laptop-6gb"), std::string::npos) << e.what();
  }
  EXPECT_EQ(test::error_code_of([&] { make_vae_plan(vae, p, laptop(8192), 1280, 700, 121); }),
            ErrorCode::kBadArgument);
  EXPECT_EQ(test::error_code_of([&] { make_vae_plan(vae, p, laptop(8192), 1280, 704, 120); }),
            ErrorCode::kBadArgument);
}

// The CPU preset budgets host memory only: no VRAM, the weights and arena count as RAM.
TEST(VaePlan, the_cpu_preset_puts_everything_in_ram) {
  const VaeWeights vae = tiny_vae("wan22_tiny.safetensors");
  const Preset p = preset("cpu");
  const VaePlan plan =
      make_vae_plan(vae, p, MachineInfo{false, 0, 0, 32 * kGiB, 32 * kGiB}, 512, 512, 9);
  EXPECT_EQ(plan.predicted_vram_peak, 0u);
  EXPECT_EQ(plan.predicted_ram_peak, kProcessBaseBytes + plan.weight_bytes + plan.latent_bytes +
                                         plan.arena_bytes + plan.host_bytes);
  EXPECT_EQ(plan.tile_px, 256);
}

}  // namespace
}  // namespace ferry::models::wan
