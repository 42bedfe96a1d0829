// Draft decodes and full re-decodes (issue 27; core/models/taehv/taehv_draft.h through
// core/models/wan/run.cpp and the pipeline): the demo model with the tiny taew2_2 decoder next to
// it makes a draft video with TAEHV at the video's full size and frame count, says so in its
// settings and keeps its final latents beside it; those latents decoded by the VAE (no text
// encoder, no denoising) give the frames of a normal run of the same settings bit for bit, and a
// latent perturbed by one value does not. A draft without a TAEHV file is refused naming the file
// and the folder; the plan shows the TAEHV stage instead of the VAE's, and only the decode for
// saved latents. Needs FFmpeg (the runs write MP4s).
#if defined(FERRY_HAVE_FFMPEG)

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/models/wan/demo_model.h"
#include "core/models/wan/parts.h"
#include "core/pipeline/replay.h"
#include "core/pipeline/session.h"
#include "tests/test_support.h"

namespace ferry::pipeline {
namespace {

namespace fs = std::filesystem;

constexpr std::uint64_t kGiB = 1ull << 30;

struct Frames {
  std::vector<float> pixels;  // every decoded chunk's [3, n, H, W] in turn
  std::int64_t count = 0;
};

Session cpu_session(Frames* frames = nullptr) {
  SessionOptions o;
  o.machine = offload::MachineInfo{false, 0, 0, 16 * kGiB, 12 * kGiB};
  if (frames != nullptr) {
    o.generator.decoded_frames = [frames](std::int64_t, std::int64_t n,
                                          std::span<const float> pixels) {
      frames->pixels.insert(frames->pixels.end(), pixels.begin(), pixels.end());
      frames->count += n;
    };
  }
  return Session(std::move(o));
}

GenerationRequest request_for(const fs::path& model, const fs::path& out) {
  GenerationRequest r;
  r.model = {model};
  r.prompt = "a ferry crossing a fjord at dawn";
  r.width = 64;
  r.height = 64;
  r.frames = 9;
  r.steps = 3;
  r.seed = 11;
  r.preset = "cpu";
  r.output = out;
  return r;
}

fs::path demo_with_taehv(const fs::path& folder) {
  const fs::path demo = models::wan::write_demo_model(folder);
  fs::copy_file(test::data_path("taehv/taew2_2_tiny.safetensors"), demo / "taew2_2.safetensors");
  return demo;
}

GenerationResult run(const Session& session, const GenerationRequest& request) {
  const auto model = session.find(request.model);
  ProgressSink sink;
  CancelToken cancel;
  return session.run(*model, request, sink, cancel);
}

nlohmann::json read_json(const fs::path& path) {
  std::ifstream in(path);
  return nlohmann::json::parse(in);
}

// The latents file `from` written to `to` with one value moved by `delta`.
void write_perturbed(const fs::path& from, const fs::path& to, std::size_t index, float delta) {
  const std::vector<models::TensorLayout> layout = {{"latent", {48, 3, 4, 4}}};
  std::vector<float> latent = read_replay_tensors(from, layout, "--latents").front();
  latent.at(index) += delta;
  ReplayFile file;
  file.add("latent", latent, layout);
  file.write(to, {});
}

class DraftDecode : public ::testing::Test {
 protected:
  test::ScratchDir dir;
  fs::path demo = demo_with_taehv(dir / "demo");
};

TEST_F(DraftDecode, a_draft_is_taehv_at_full_size_labelled_and_keeps_its_latents) {
  Frames frames;
  GenerationRequest request = request_for(demo, dir / "draft.mp4");
  request.decoder = models::VideoDecoder::kTaehvDraft;
  const GenerationResult draft = run(cpu_session(&frames), request);

  // Every frame at the video's size, in the writer's [-1, 1].
  EXPECT_EQ(frames.count, 9);
  ASSERT_EQ(frames.pixels.size(), 3u * 9 * 64 * 64);
  const auto [lo, hi] = std::minmax_element(frames.pixels.begin(), frames.pixels.end());
  EXPECT_GE(*lo, -1.0f);
  EXPECT_LE(*hi, 1.0f);
  ASSERT_EQ(draft.stages.size(), 3u);  // text, denoise, the TAEHV decode
  EXPECT_EQ(draft.steps.size(), 3u);

  EXPECT_EQ(draft.latents, dir / "draft.latents.safetensors");
  EXPECT_TRUE(fs::is_regular_file(draft.latents));
  EXPECT_FALSE(fs::exists(dir / "draft.latents.safetensors.partial"));
  const nlohmann::json settings = read_json(draft.sidecar);
  EXPECT_EQ(settings.value("decode", ""), "taehv-draft");
  EXPECT_EQ(settings.value("latents_kept", ""), "draft.latents.safetensors");
}

TEST_F(DraftDecode, the_full_decode_of_a_drafts_latents_equals_a_normal_run_bit_for_bit) {
  Frames normal, full, draft_frames, perturbed;
  const GenerationResult reference = run(cpu_session(&normal), request_for(demo, dir / "a.mp4"));
  EXPECT_FALSE(read_json(reference.sidecar).contains("decode"));

  GenerationRequest draft = request_for(demo, dir / "draft.mp4");
  draft.decoder = models::VideoDecoder::kTaehvDraft;
  const GenerationResult drafted = run(cpu_session(&draft_frames), draft);
  ASSERT_EQ(draft_frames.pixels.size(), normal.pixels.size());
  EXPECT_NE(draft_frames.pixels, normal.pixels);  // TAEHV's frames are not the VAE's

  GenerationRequest redecode = request_for(demo, dir / "full.mp4");
  redecode.latents = drafted.latents;
  const GenerationResult decoded = run(cpu_session(&full), redecode);
  EXPECT_TRUE(decoded.steps.empty());  // no denoising
  ASSERT_EQ(decoded.stages.size(), 1u);
  EXPECT_EQ(decoded.stages[0].stage, "decode");
  EXPECT_EQ(full.count, normal.count);
  ASSERT_EQ(full.pixels.size(), normal.pixels.size());
  EXPECT_EQ(std::memcmp(full.pixels.data(), normal.pixels.data(), full.pixels.size() * 4), 0);
  const nlohmann::json settings = read_json(decoded.sidecar);
  EXPECT_FALSE(settings.contains("decode"));
  EXPECT_EQ(settings["latents_file"].value("name", ""), "draft.latents.safetensors");

  // The comparison sees the latent: one value moved by 0.01 changes the frames.
  write_perturbed(drafted.latents, dir / "perturbed.safetensors", 5 * 16 + 7, 0.01f);
  redecode.latents = dir / "perturbed.safetensors";
  redecode.output = dir / "perturbed.mp4";
  run(cpu_session(&perturbed), redecode);
  ASSERT_EQ(perturbed.pixels.size(), normal.pixels.size());
  EXPECT_NE(std::memcmp(perturbed.pixels.data(), normal.pixels.data(), normal.pixels.size() * 4),
            0);
}

TEST_F(DraftDecode, saved_latents_can_be_decoded_as_a_draft_too) {
  GenerationRequest request = request_for(demo, dir / "a.mp4");
  request.save_latents = dir / "a.latents.safetensors";
  run(cpu_session(), request);
  Frames frames;
  GenerationRequest draft = request_for(demo, dir / "draft.mp4");
  draft.decoder = models::VideoDecoder::kTaehvDraft;
  draft.latents = dir / "a.latents.safetensors";
  const GenerationResult result = run(cpu_session(&frames), draft);
  EXPECT_EQ(frames.count, 9);
  EXPECT_TRUE(result.latents.empty());  // they are kept already
  EXPECT_EQ(read_json(result.sidecar).value("decode", ""), "taehv-draft");
}

TEST(DraftDecodeRefusals, a_draft_without_a_taehv_file_names_the_file_and_the_folder) {
  test::ScratchDir dir;
  const fs::path demo = models::wan::write_demo_model(dir / "demo");
  GenerationRequest request = request_for(demo, dir / "draft.mp4");
  request.decoder = models::VideoDecoder::kTaehvDraft;
  const Session session = cpu_session();
  const auto model = session.find({demo});
  EXPECT_FALSE(model->rules().draft_decode);
  try {
    session.validate(*model, request);
    FAIL() << "a draft without a TAEHV file was accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kBadArgument);
    EXPECT_NE(std::string(e.what()).find("taew2_2.safetensors"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find(demo.filename().string()), std::string::npos) << e.what();
  }
  EXPECT_EQ(test::error_code_of([&] { run(session, request); }), ErrorCode::kBadArgument);
  EXPECT_FALSE(fs::exists(dir / "draft.mp4"));
}

TEST_F(DraftDecode, saved_latents_of_another_shape_or_with_noise_options_are_refused) {
  GenerationRequest request = request_for(demo, dir / "a.mp4");
  request.save_latents = dir / "a.latents.safetensors";
  run(cpu_session(), request);
  GenerationRequest redecode = request_for(demo, dir / "b.mp4");
  redecode.latents = dir / "a.latents.safetensors";
  redecode.frames = 13;  // four latent frames, not three
  try {
    run(cpu_session(), redecode);
    FAIL() << "latents of another shape were decoded";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kBadArgument);
    EXPECT_NE(std::string(e.what()).find("--latents"), std::string::npos) << e.what();
  }
  redecode.frames = 9;
  redecode.save_noise = dir / "n.safetensors";
  EXPECT_EQ(test::error_code_of([&] { run(cpu_session(), redecode); }), ErrorCode::kBadArgument);
  redecode.save_noise.clear();
  redecode.latents = dir / "missing.safetensors";
  EXPECT_EQ(test::error_code_of([&] { run(cpu_session(), redecode); }), ErrorCode::kBadArgument);
  EXPECT_FALSE(fs::exists(dir / "b.mp4"));
}

TEST_F(DraftDecode, the_plan_shows_the_taehv_stage_and_only_the_decode_for_saved_latents) {
  const Session session = cpu_session();
  const auto model = session.find({demo});
  EXPECT_TRUE(model->rules().draft_decode);
  EXPECT_TRUE(model->rules().decodes_saved_latents);
  GenerationRequest request = request_for(demo, dir / "a.mp4");
  const auto stages = [&] {
    std::vector<std::string> names;
    for (const auto& s : session.plan(*model, session.validate(*model, request)).stages) {
      names.push_back(s.stage);
    }
    return names;
  };
  using models::wan::kDecodeStage, models::wan::kDraftDecodeStage;
  EXPECT_EQ(stages().back(), kDecodeStage);
  request.decoder = models::VideoDecoder::kTaehvDraft;
  const models::GenerationPlan draft = session.plan(*model, session.validate(*model, request));
  ASSERT_EQ(draft.stages.back().stage, kDraftDecodeStage);
  EXPECT_GT(draft.stages.back().weight_bytes, 0u);
  EXPECT_GT(draft.stages.back().activation_bytes, 0u);
  EXPECT_EQ(stages().size(), 3u);
  request.latents = dir / "any.latents.safetensors";
  EXPECT_EQ(stages(), std::vector<std::string>{std::string(kDraftDecodeStage)});
  request.decoder = models::VideoDecoder::kVae;
  EXPECT_EQ(stages(), std::vector<std::string>{std::string(kDecodeStage)});
}

}  // namespace
}  // namespace ferry::pipeline

#endif  // FERRY_HAVE_FFMPEG
