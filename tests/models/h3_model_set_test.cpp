// MiniMax-H3's model sets (core/models/h3/model_set.h, family.cpp): the parts recognised by their
// names and shapes in DiffSynth's NF4 files, Comfy-Org's names and the release's diffusers root,
// Ref2VA refused, missing and mismatched parts named; Wan and H3 never take each other's files;
// the plan lists every stage, and a header-only set is refused a run; a run reads its prompt with
// the tokenizer the plans read.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "core/backend/cpu/cpu_backend.h"
#include "core/error.h"
#include "core/models/family.h"
#include "core/models/h3/bpe_tokenizer.h"
#include "core/models/h3/demo_model.h"
#include "core/models/h3/model_set.h"
#include "core/models/h3/presentation.h"
#include "core/models/h3/synthetic_set.h"
#include "core/models/h3/text_encoder.h"
#include "core/models/h3/text_encoder_weights.h"
#include "core/models/wan/demo_model.h"
#include "core/models/wan/model_set.h"
#include "core/offload/cancel.h"
#include "core/offload/planner.h"
#include "core/offload/preset.h"
#include "core/offload/telemetry.h"
#include "tests/test_support.h"

namespace ferry::models::h3 {
namespace {

namespace fs = std::filesystem;

// Small widths (every NF4 row whole blocks of 64), the real layer counts where a reader needs
// them (50 text layers, 27 vision blocks for DeepStack after 8, 16, 24).
SyntheticShapes small_shapes() {
  SyntheticShapes s;
  s.dit_hidden = 64, s.dit_heads = 1, s.dit_layers = 2, s.dit_ffn = 128, s.refiner_layers = 1;
  s.time_hidden = 64, s.time_dim = 64;
  s.vocab = 1024, s.text_dim = 128, s.text_heads = 2, s.text_kv_heads = 1, s.text_ffn = 256;
  s.vision_dim = 144, s.vision_ffn = 128, s.vision_side = 4;
  s.vae_dim = 64, s.vae_ffn = 128, s.vae_blocks = 2;
  return s;
}

std::string joined(const std::vector<std::string>& lines) {
  std::string all;
  for (const std::string& l : lines) all += l + "\n";
  return all;
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

offload::Preset preset(const offload::MachineInfo& m) {
  return offload::find_preset(offload::builtin_presets(), "laptop-8gb", m);
}

TEST(H3ModelSet, diffsynth_nf4_files_are_recognised_part_by_part) {
  const test::ScratchDir dir;
  write_header_only_set(dir.path(), small_shapes());
  const auto parts = open_model({dir.path()});
  EXPECT_EQ(parts->family(), "h3");
  EXPECT_EQ(parts->name(), "minimax-h3-fl2va");
  const std::string text = joined(parts->describe());
  EXPECT_NE(text.find("diffusion model: FL2VA (64 wide, 2 blocks, 1 heads, original names), NF4 "
                      "(double-quantised), bf16 rest in "),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("text encoder: Qwen3-VL (128 wide), 50 of its layers, NF4 "
                      "(double-quantised), bf16 rest, with its vision tower"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("tokenizer: Qwen2 byte-level BPE in "), std::string::npos) << text;
  EXPECT_NE(text.find("video VAE: MiniMax-H3 (ViT decoder), NF4 (double-quantised)"),
            std::string::npos)
      << text;
  // Its 32-wide NF4 Linears straddle blocks: opened whole all the same (core/io/bnb4.h).
  EXPECT_NE(
      text.find("audio VAE: MiniMax-H3 (DAC + BigVGAN), NF4 (double-quantised), bf16 rest in "),
      std::string::npos)
      << text;
  EXPECT_EQ(text.find("recognised from its header"), std::string::npos) << text;
  EXPECT_EQ(parts->files().size(), 4u);
}

TEST(H3ModelSet, the_pruned_model_is_named_and_described) {
  const test::ScratchDir dir;
  SyntheticShapes s = small_shapes();
  s.pruned = true;
  write_header_only_set(dir.path(), s);
  const auto parts = open_model({dir.path()});
  EXPECT_EQ(parts->name(), "minimax-h3-fl2va-pruned");
  EXPECT_NE(joined(parts->describe()).find("diffusion model: FL2VA, pruned AdaLN ("),
            std::string::npos);
}

TEST(H3ModelSet, each_missing_part_is_named) {
  struct Case {
    const char* file;
    const char* said;
  };
  for (const Case& c : {Case{SyntheticFiles::kDit, "no MiniMax-H3 diffusion model"},
                        Case{SyntheticFiles::kTextEncoder, "no H3 text encoder"},
                        Case{SyntheticFiles::kVideoVae, "no H3 video VAE"},
                        Case{SyntheticFiles::kAudioVae, "no H3 audio VAE"}}) {
    const test::ScratchDir dir;
    write_header_only_set(dir.path(), small_shapes());
    fs::remove(dir / c.file);
    const std::string message = error_of([&] { open_model({dir.path()}); });
    EXPECT_NE(message.find(c.said), std::string::npos) << message;
  }
  const test::ScratchDir dir;
  write_header_only_set(dir.path(), small_shapes());
  fs::remove_all(dir / "processor");
  EXPECT_NE(error_of([&] { open_model({dir.path()}); }).find("has no tokenizer"),
            std::string::npos);
}

TEST(H3ModelSet, a_text_encoder_of_another_width_is_not_a_part_of_this_model) {
  const test::ScratchDir dir;
  SyntheticShapes s = small_shapes();
  write_header_only_set(dir.path(), s);
  s.text_dim = 256;
  write_header_only(dir / SyntheticFiles::kTextEncoder, text_encoder_part(s, true));
  const std::string message = error_of([&] { open_model({dir.path()}); });
  EXPECT_NE(message.find("gives 256-wide states, but the diffusion model"), std::string::npos)
      << message;
}

TEST(H3ModelSet, a_ref2va_model_is_refused_alone_and_set_aside_next_to_fl2va) {
  const test::ScratchDir dir;
  write_header_only_set(dir.path(), small_shapes());
  fs::create_directories(dir / "Ref2VA" / "transformer");
  fs::rename(dir / SyntheticFiles::kDit, dir / "Ref2VA" / "transformer" / "model.safetensors");
  const std::string message = error_of([&] { open_model({dir.path()}); });
  EXPECT_NE(message.find("is MiniMax-H3's Ref2VA model"), std::string::npos) << message;
  EXPECT_NE(message.find("does not run yet"), std::string::npos) << message;

  write_header_only(dir / SyntheticFiles::kDit, dit_part(small_shapes(), true));
  const auto parts = open_model({dir.path()});
  EXPECT_NE(
      joined(parts->describe()).find("ignored (MiniMax-H3's Ref2VA model: not supported yet)"),
      std::string::npos);
}

// Comfy-Org's names (§G.3): the text encoder as model.layers.N / visual.*, its Linears int8
// ConvRot (weight_scale per row, comfy_quant JSON).
SyntheticPart comfy_text_encoder(const SyntheticShapes& s) {
  SyntheticPart bf16 = text_encoder_part(s, false);
  SyntheticPart part;
  for (io::TensorSpec t : bf16.specs) {
    if (t.name.starts_with("model.language_model.")) {
      t.name = "model." + t.name.substr(std::string("model.language_model.").size());
    } else if (t.name.starts_with("model.visual.")) {
      t.name = t.name.substr(std::string("model.").size());
    }
    const bool linear = t.name.starts_with("model.layers.") && t.shape.size() == 2;
    if (!linear) {
      part.specs.push_back(t);
      continue;
    }
    const std::string p = t.name.substr(0, t.name.size() - std::string("weight").size());
    part.specs.push_back({t.name, DType::kI8, t.shape});
    part.specs.push_back({p + "weight_scale", DType::kF32, {t.shape[0], 1}});
    part.specs.push_back({p + "comfy_quant", DType::kU8, {64}});
  }
  return part;
}

TEST(H3ModelSet, comfy_org_names_and_int8_linears_are_recognised) {
  const test::ScratchDir dir;
  write_header_only_set(dir.path(), small_shapes());
  write_header_only(dir / SyntheticFiles::kTextEncoder, comfy_text_encoder(small_shapes()));
  const auto parts = open_model({dir.path()});
  EXPECT_NE(joined(parts->describe()).find("int8 ConvRot"), std::string::npos)
      << joined(parts->describe());
}

// The release's diffusers root (§G.1): transformer/ with diffusers names, a 64-layer bf16
// text_encoder/, tokenizer/; its original FL2VA/ partition repeats the diffusion model.
TEST(H3ModelSet, the_release_root_takes_its_diffusers_parts_and_sets_the_partition_aside) {
  const test::ScratchDir dir;
  const SyntheticShapes s = small_shapes();
  write_header_only_set(dir / "ds", s);
  fs::create_directories(dir / "root" / "transformer");
  fs::create_directories(dir / "root" / "FL2VA" / "transformer");
  fs::create_directories(dir / "root" / "text_encoder");
  fs::create_directories(dir / "root" / "vae");
  fs::create_directories(dir / "root" / "audio_vae");
  const std::uint64_t h = 64;
  SyntheticPart diffusers;
  diffusers.specs = {{"proj_in.weight", DType::kF32, {h, 96}},
                     {"audio_proj_in.weight", DType::kF32, {h, 32}},
                     {"context_embedder.weight", DType::kBF16, {h, 128}},
                     {"proj_out.weight", DType::kF32, {96, h}}};
  for (int i = 0; i < 2; ++i) {
    const std::string p = "transformer_blocks." + std::to_string(i) + ".";
    diffusers.specs.push_back({p + "attn.to_q.weight", DType::kBF16, {128, h}});
    diffusers.specs.push_back({p + "ff.net.0.proj.weight", DType::kBF16, {256, h}});
  }
  write_header_only(dir / "root" / "transformer" / "model.safetensors", diffusers);
  write_header_only(dir / "root" / "FL2VA" / "transformer" / "model.safetensors",
                    dit_part(s, false));
  SyntheticShapes release = s;
  release.text_layers = 64;
  write_header_only(dir / "root" / "text_encoder" / "model.safetensors",
                    text_encoder_part(release, false));
  fs::copy_file(dir / "ds" / SyntheticFiles::kVideoVae, dir / "root" / "vae" / "model.safetensors");
  fs::copy_file(dir / "ds" / SyntheticFiles::kAudioVae,
                dir / "root" / "audio_vae" / "model.safetensors");
  fs::copy(dir / "ds" / "processor", dir / "root" / "tokenizer");

  const auto parts = open_model({dir / "root"});
  const std::string text = joined(parts->describe());
  EXPECT_NE(text.find("(64 wide, 2 blocks, 1 heads, diffusers names), bf16"), std::string::npos)
      << text;
  EXPECT_NE(text.find("50 of its layers (the file's other 14 are never read), bf16"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("ignored (the release's original partition; the diffusion model of its "
                      "diffusers root is used)"),
            std::string::npos)
      << text;
}

TEST(H3ModelSet, h3_takes_no_wan_file_and_wan_folders_keep_wans_messages) {
  const test::ScratchDir dir;
  const fs::path demo = wan::write_demo_model(dir / "wan");
  for (const fs::path& p : fs::recursive_directory_iterator(demo)) {
    if (p.extension() != ".safetensors") continue;
    EXPECT_FALSE(is_h3_part(io::TensorSet::open(p))) << p;
  }
  bool not_this_family = false;
  try {
    find_family("h3")->open({demo});
  } catch (const NotThisFamily&) {
    not_this_family = true;
  }
  EXPECT_TRUE(not_this_family);
  EXPECT_EQ(open_model({demo})->family(), "wan");
  // A Wan folder with a part missing is told about Wan.
  for (const fs::path& p : fs::recursive_directory_iterator(demo)) {
    if (p.filename().string().find("vae") != std::string::npos) fs::remove(p);
  }
  const std::string message = error_of([&] { open_model({demo}); });
  EXPECT_NE(message.find("no Wan VAE"), std::string::npos) << message;
}

TEST(H3ModelSet, wan_takes_no_h3_part) {
  const test::ScratchDir dir;
  write_header_only_set(dir / "h3", small_shapes());
  // (kBadModelFile: no Wan diffusion model; or kUnsupported: the NF4 audio VAE cannot be opened.)
  EXPECT_NE(test::error_code_of([&] { wan::find_model_set({dir / "h3"}); }), ErrorCode::kInternal);
  // H3's video VAE (a Wan-like encoder.conv_in, a ViT decoder) beside a whole Wan set is not a
  // second Wan VAE: the set opens and lists it as ignored.
  const fs::path demo = wan::write_demo_model(dir / "wan");
  fs::copy_file(dir / "h3" / SyntheticFiles::kVideoVae, demo / SyntheticFiles::kVideoVae);
  const wan::ModelSet set = wan::find_model_set({demo});
  EXPECT_EQ(set.ignored.size(), 1u);
  EXPECT_EQ(set.ignored.front().filename(), SyntheticFiles::kVideoVae);
}

TEST(H3ModelSet, the_plan_lists_every_stage_and_a_header_only_set_does_not_run) {
  const test::ScratchDir dir;
  write_header_only_set(dir.path(), small_shapes());
  const auto parts = open_model({dir.path()});
  GenerationRequest request;
  request.width = 832;
  request.height = 480;
  request.frames = 120;  // snapped up to 17n+5
  const ResolvedRequest r = parts->resolve(request, std::nullopt);
  EXPECT_EQ(r.frames, 124);
  EXPECT_EQ(r.latent_frames, 37);
  const offload::MachineInfo machine{true, 8ull << 30, 8ull << 30, 24ull << 30, 24ull << 30};
  const GenerationPlan plan = parts->plan(r, preset(machine), machine, false);
  std::vector<std::string> names;
  for (const StagePlan& s : plan.stages) names.push_back(s.stage + (s.implemented ? "" : " (no)"));
  EXPECT_EQ(names, (std::vector<std::string>{"text encoder", "diffusion model", "video decode",
                                             "audio decode"}));
  EXPECT_EQ(plan.stages[0].groups, 50u);
  // The DiT's packed sequence: 512 text rows, 37 latent frames of (480/32)(832/32) = 390 rows,
  // and 2 x round(124/24 x 40) = 414 audio rows; its groups are the embeddings, the refiner's
  // blocks and norm, the blocks and the head.
  EXPECT_NE(plan.stages[1].detail.find("15356 rows (512 text, 0 keyframe, 414 audio, 14430 video)"),
            std::string::npos)
      << plan.stages[1].detail;
  EXPECT_EQ(plan.stages[1].groups, 1u + 1u + 1u + 2u + 1u);
  EXPECT_GT(plan.predicted_ram_peak, 0u);
  // The video decode: 480 px in 3 tiles, 832 in 4, 7 chunks of 7 latent frames (16x16 each).
  EXPECT_NE(plan.stages[2].detail.find("tile 256 px, 12 tiles x 7 chunks"), std::string::npos)
      << plan.stages[2].detail;
  EXPECT_EQ(plan.stages[2].groups, 1u + 2u + 1u);
  // The audio decode: 207 latents a channel, x800 samples at 32 kHz.
  EXPECT_NE(plan.stages[3].detail.find("207 latents a channel, 2 channels, 165600 samples each"),
            std::string::npos)
      << plan.stages[3].detail;
  EXPECT_EQ(plan.predicted_ram_peak,
            std::max({plan.stages[0].predicted_ram_peak, plan.stages[1].predicted_ram_peak,
                      plan.stages[2].predicted_ram_peak, plan.stages[3].predicted_ram_peak}));

  request.image = dir / "first.png";
  request.end_image = dir / "last.png";
  const ResolvedRequest keyframes = parts->resolve(request, std::pair{832, 480});
  const GenerationPlan with = parts->plan(keyframes, preset(machine), machine, false);
  EXPECT_EQ(with.stages[0].stage, "vision tower");
  EXPECT_EQ(with.stages[1].stage, "text encoder");
  EXPECT_EQ(with.stages[2].stage, "keyframe encode");
  EXPECT_TRUE(with.stages[2].implemented);
  EXPECT_NE(with.stages[2].detail.find("2 keyframes of 832x480, 12 tiles of 256 px"),
            std::string::npos)
      << with.stages[2].detail;
  // 2 keyframes of (480/32)(832/32) = 390 tokens after the text's 512.
  EXPECT_NE(with.stages[1].detail.find("1292 tokens"), std::string::npos) << with.stages[1].detail;

  // A header-only set plans but does not run: refused before the pipeline writes anything.
  EXPECT_NE(error_of([&] { parts->noise_layout(r); }).find("header-only synthetic file"),
            std::string::npos);
  EXPECT_EQ(test::error_code_of([&] { parts->start(r, plan, {}); }), ErrorCode::kUnsupported);
}

// H3 does not truncate prompts: one longer than the 512 text tokens the conditioner is planned
// for at least is planned for its own length, in the text encoder's and the DiT's stages.
TEST(H3ModelSet, a_prompt_longer_than_512_tokens_is_planned_for_its_length) {
  const test::ScratchDir dir;
  write_header_only_set(dir.path(), small_shapes());
  const auto parts = open_model({dir.path()});
  const offload::MachineInfo machine{true, 8ull << 30, 8ull << 30, 24ull << 30, 24ull << 30};
  const auto plan_for = [&](const std::string& prompt) {
    GenerationRequest request;
    request.prompt = prompt;
    request.width = 832;
    request.height = 480;
    request.frames = 124;
    return parts->plan(parts->resolve(request, std::nullopt), preset(machine), machine, false);
  };
  const BpeTokenizer tokenizer = BpeTokenizer::from_folder(dir / "processor");
  std::string long_prompt;
  while (present_text(tokenizer, long_prompt).length() < 900) {
    long_prompt += "a ferry crosses the fjord at dawn, gulls follow it; ";
  }
  const std::size_t length = present_text(tokenizer, long_prompt).length();
  const GenerationPlan short_plan = plan_for("a ferry");
  const GenerationPlan long_plan = plan_for(long_prompt);
  EXPECT_NE(short_plan.stages[0].detail.find("512 tokens"), std::string::npos)
      << short_plan.stages[0].detail;
  EXPECT_NE(long_plan.stages[0].detail.find(std::to_string(length) + " tokens"), std::string::npos)
      << long_plan.stages[0].detail;
  EXPECT_NE(long_plan.stages[1].detail.find("(" + std::to_string(length) + " text,"),
            std::string::npos)
      << long_plan.stages[1].detail;
  EXPECT_GT(long_plan.stages[0].predicted_ram_peak + long_plan.stages[0].predicted_vram_peak,
            short_plan.stages[0].predicted_ram_peak + short_plan.stages[0].predicted_vram_peak);
  EXPECT_GT(long_plan.stages[1].predicted_vram_peak + long_plan.stages[1].predicted_ram_peak,
            short_plan.stages[1].predicted_vram_peak + short_plan.stages[1].predicted_ram_peak);
}

// Issue 21's target for the seed's laptop: at most 8 GB (8·10⁹ B) of host RAM at every stage of
// an FL2VA run of DiffSynth's real NF4 files (header-only here), 832x480x124 on an 8 GB GPU under
// laptop-8gb, whatever the laptop's RAM. The pinned cache is what grows with RAM (35 % of it), so
// the preset's RAM budget is what holds the line on the larger machines.
TEST(H3ModelSet, fl2va_at_the_real_shapes_stays_under_8_gb_of_ram_on_any_laptop) {
  const test::ScratchDir dir;
  write_header_only_set(dir.path(), SyntheticShapes{});
  const auto parts = open_model({dir.path()});
  GenerationRequest request;
  request.width = 832;
  request.height = 480;
  request.frames = 124;
  request.image = dir / "first.png";
  request.end_image = dir / "last.png";
  const ResolvedRequest r = parts->resolve(request, std::pair{832, 480});
  constexpr std::uint64_t kTarget = 8'000'000'000;
  for (const std::uint64_t ram_gib : {16, 24, 32, 64}) {
    const offload::MachineInfo machine{true, 8ull << 30, 8ull << 30, ram_gib << 30, ram_gib << 30};
    const offload::Preset laptop = preset(machine);
    const GenerationPlan plan = parts->plan(r, laptop, machine, false);
    ASSERT_EQ(plan.stages.size(), 6u);
    for (const StagePlan& s : plan.stages) {
      EXPECT_LE(s.predicted_ram_peak, laptop.ram_budget_bytes) << s.stage << ", " << ram_gib;
      EXPECT_LE(s.predicted_ram_peak, kTarget) << s.stage << " on a " << ram_gib << " GiB laptop";
    }
    std::printf("[ measured ] %2llu GiB RAM: whole-run RAM peak %.2f GiB, VRAM %.2f GiB\n",
                static_cast<unsigned long long>(ram_gib),
                static_cast<double>(plan.predicted_ram_peak) / (1ull << 30),
                static_cast<double>(plan.predicted_vram_peak) / (1ull << 30));
  }
}

TEST(H3ModelSet, the_synthetic_tokenizer_loads_with_h3s_ids) {
  const test::ScratchDir dir;
  write_header_only_set(dir.path(), small_shapes());
  const BpeTokenizer tokenizer = BpeTokenizer::from_folder(dir / "processor");
  EXPECT_EQ(tokenizer.token_id("<|image_pad|>"), 151655);
  EXPECT_EQ(tokenizer.token_id("<d>"), 151669);
  EXPECT_EQ(tokenizer.token_id("<|caption_end|>"), 151675);
  EXPECT_EQ(tokenizer.encode("ab").size(), 2u);
}

// The demo set's T2VA request at its small defaults, resolved and planned for the CPU.
struct DemoRun {
  offload::MachineInfo machine{false, 0, 0, 16ull << 30, 12ull << 30};
  offload::Preset cpu = offload::find_preset(offload::builtin_presets(), "cpu", machine);
  ResolvedRequest request;
  GenerationPlan plan;

  DemoRun(const ModelParts& parts, const std::string& prompt) {
    GenerationRequest r;
    r.prompt = prompt;
    r.steps = 2;
    request = parts.resolve(r, std::nullopt);
    plan = parts.plan(request, cpu, machine, false);
  }

  // The run's text stage: the conditioning's rows.
  std::uint64_t encode_text(ModelParts& parts) {
    const std::unique_ptr<FamilyRun> run = parts.start(request, plan, {});
    ferry::cpu::CpuBackend backend;
    offload::CancelToken cancel;
    offload::Telemetry telemetry({}, {}, nullptr);
    std::uint64_t rows = 0;
    RunContext context{backend,
                       cpu,
                       machine,
                       cancel,
                       telemetry,
                       {},
                       false,
                       {},
                       {},
                       {},
                       {},
                       {},
                       [&](const TensorBytes& t) { rows = t.shape.at(0); },
                       {},
                       {},
                       {}};
    run->run_stage(StageKind::kText, context);
    return rows;
  }
};

// The tokenizer is read once, for the plans, and the run encodes its prompt with that one: with
// the tokenizer's folder gone after the plan, the text stage still reads the prompt as planned.
TEST(H3ModelSet, a_run_reads_its_prompt_with_the_tokenizer_the_plans_read) {
  const test::ScratchDir dir;
  write_h3_demo_model(dir.path());
  const std::string prompt = "a ferry horn over a calm fjord";
  const std::size_t length =
      present_text(BpeTokenizer::from_folder(dir / "processor"), prompt).length();
  const auto parts = open_model({dir.path()});
  DemoRun demo(*parts, prompt);
  fs::remove_all(dir / "processor");
  ASSERT_FALSE(fs::exists(dir / "processor"));
  EXPECT_EQ(demo.encode_text(*parts), length);
}

// A tokenizer that cannot be read: the set still plans (for the least text), and a run that would
// encode a prompt is refused at its start with the reader's own error, before any work; a run that
// decodes saved latents needs none.
TEST(H3ModelSet, an_unreadable_tokenizer_refuses_a_prompt_run_at_its_start) {
  const test::ScratchDir dir;
  write_h3_demo_model(dir.path());
  test::write_file(dir / "processor" / "tokenizer.json", std::string_view("{ not json"));
  const ErrorCode reader_code =
      test::error_code_of([&] { BpeTokenizer::from_folder(dir / "processor"); });
  const std::string reader_message =
      error_of([&] { BpeTokenizer::from_folder(dir / "processor"); });
  ASSERT_NE(reader_message, "(no error)");
  const auto parts = open_model({dir.path()});
  DemoRun demo(*parts, "a ferry");
  EXPECT_NE(demo.plan.stages.front().detail.find("512 tokens"), std::string::npos)
      << demo.plan.stages.front().detail;
  EXPECT_EQ(test::error_code_of([&] { parts->start(demo.request, demo.plan, {}); }), reader_code);
  EXPECT_EQ(error_of([&] { parts->start(demo.request, demo.plan, {}); }), reader_message);

  ResolvedRequest decode = demo.request;
  decode.request.latents = dir / "saved.safetensors";
  const std::unique_ptr<FamilyRun> run = parts->start(decode, demo.plan, {});
  EXPECT_EQ(run->stages(), std::vector<StageKind>{StageKind::kDecode});
}

// Cuts the model file short once the encoder has acquired `at` layers (from the caller's thread,
// while the IO thread reads ahead).
struct Truncation {
  fs::path path;
  std::uint64_t size = 0;
  int at = 0, acquired = 0;
  bool shrunk = false;
  std::string refused;
  static void stage(offload::StreamStage s, void* context) {
    auto* t = static_cast<Truncation*>(context);
    if (s != offload::StreamStage::kCompute || ++t->acquired != t->at) return;
    t->shrunk = test::resize_file(t->path, t->size, &t->refused);
  }
};

// DiffSynth's NF4 text encoder (its file order: the side tensors first, the codes by name) with
// real data, streamed from disk on the CPU as the cpu preset plans it (file-aligned slots), cut
// short in the middle of the pass: Error(kIo) naming the file, read direct or mapped, not a crash.
TEST(H3ModelSet, an_nf4_text_encoder_truncated_mid_encode_is_an_io_error) {
  for (auto method : {offload::ReadMethod::kDirect, offload::ReadMethod::kMapped}) {
    SCOPED_TRACE(method == offload::ReadMethod::kMapped ? "mapped" : "direct");
    const test::ScratchDir dir;
    const fs::path path = dir / SyntheticFiles::kTextEncoder;
    write_with_data(path, text_encoder_part(small_shapes(), true),
                    [](const io::TensorSpec&) { return false; });
    const io::TensorSet set = io::TensorSet::open(path);
    const TextEncoderWeights weights = TextEncoderWeights::from(set);
    const offload::ModelLayout layout = weights.model_layout(16);
    const offload::MachineInfo machine{false, 0, 0, 16ull << 30, 16ull << 30};
    offload::Plan plan = offload::streamed_plan(
        layout, offload::find_preset(offload::builtin_presets(), "cpu", machine), machine);
    plan.read_method = method;
    Truncation truncation;
    truncation.path = path;
    truncation.size = fs::file_size(path);
    for (const auto& w : layout.groups.back().weights) {
      truncation.size = std::min(truncation.size, w.tensor->offset);
    }
    truncation.at = 10;
    TextEncodeOptions options;
    options.streamer.stage_hook = &Truncation::stage;
    options.streamer.hook_context = &truncation;
    TextEncoderInput in;
    in.ids = {5, 6, 7, 8};
    ErrorCode code = ErrorCode::kInternal;
    std::string message;
    try {
      ferry::cpu::CpuBackend backend;
      encode(backend, weights, plan, in, options);
      if (!truncation.shrunk) GTEST_SKIP() << "the OS refused to shrink: " << truncation.refused;
      ADD_FAILURE() << "an encode over a truncated file succeeded";
    } catch (const Error& e) {
      code = e.code();
      message = e.what();
    }
    if (!truncation.shrunk) GTEST_SKIP() << "the OS refused to shrink: " << truncation.refused;
    EXPECT_TRUE(truncation.shrunk);
    EXPECT_EQ(code, ErrorCode::kIo) << message;
    EXPECT_NE(message.find(SyntheticFiles::kTextEncoder), std::string::npos) << message;
  }
}

}  // namespace
}  // namespace ferry::models::h3
