// The run's denoise loop (core/models/h3/run.h denoise_packed) against diffusers' loop on the
// tiny DiT of tests/data/h3_dit/ (tools/reference/make_h3_dit_reference.py, `trajectory`): 4 Euler
// steps of MiniMaxH3Scheduler's video (shift 12) and audio (shift 3) schedules on tiny/t2va with
// the stored inputs as noise, one forward a step (diffusers' modular pipeline loop). Also: the
// keyframe rows of I2VA / FL2VA are never changed, mismatched schedules and a cancel are errors.
#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/io/tensor_set.h"
#include "core/memory/arena.h"
#include "core/models/h3/dit_sequence.h"
#include "core/models/h3/dit_weights.h"
#include "core/models/h3/run.h"
#include "core/models/h3/scheduler.h"
#include "core/offload/streamer.h"
#include "core/tensor/convert.h"
#include "tests/models/model_test_backend.h"
#include "tests/models/model_test_tensors.h"
#include "tests/test_support.h"

namespace ferry::models::h3 {
namespace {

using dit::KeyframeAnchor;

std::vector<float> values(const io::TensorSet& set, const std::string& key) {
  const auto& e = set.at(key);
  std::vector<float> out(e.tensor->element_count());
  e.file->map(*e.tensor).copy_to(0, std::as_writable_bytes(std::span(out)));
  return out;
}

const io::TensorSet& reference() {
  static const io::TensorSet set =
      io::TensorSet::open(test::data_path("h3_dit/reference.safetensors"));
  return set;
}

// The tiny configuration's geometry and its layouts' sequences, as the script built them.
dit::PackedSequence sequence_of(const std::string& layout,
                                const std::vector<KeyframeAnchor>& anchors) {
  const auto& e = reference().at("tiny." + layout + ".text_tags");
  std::vector<std::int32_t> tags32(e.tensor->element_count());
  e.file->map(*e.tensor).copy_to(0, std::as_writable_bytes(std::span(tags32)));
  const std::vector<std::uint8_t> tags(tags32.begin(), tags32.end());
  return dit::build_packed_sequence(tags, {2, 4, 6, 5, 2}, anchors);
}

// The tiny diffusers-layout DiT, every group resident, an arena of its estimate.
struct TinyDit {
  io::TensorSet set = io::TensorSet::open(test::data_path("h3_dit/tiny/diffusers.safetensors"));
  dit::DitWeights weights = [this] {
    dit::DitWeights w = dit::DitWeights::from(set);
    w.set_rope_freq_dim(2);
    return w;
  }();
};

struct Loop {
  std::vector<float> video, audio;
};

Loop run_loop(const TinyDit& m, const std::string& layout,
              const std::vector<KeyframeAnchor>& anchors, int grid_points,
              const std::atomic<bool>* cancel = nullptr, int audio_grid_points = 0) {
  const dit::PackedSequence s = sequence_of(layout, anchors);
  const offload::ModelLayout model = m.weights.model_layout(s.length(), s.text_rows, 0);
  offload::Plan plan;
  plan.look_ahead = 1;
  plan.read_method = offload::ReadMethod::kMapped;
  plan.placement.assign(model.groups.size(), offload::Placement::kDevice);
  plan.staging_slots = 3;
  plan.staging_slot_bytes = 4 << 10;
  const H3Schedule video = h3_schedule(grid_points, kVideoShift);
  const H3Schedule audio =
      h3_schedule(audio_grid_points != 0 ? audio_grid_points : grid_points, kAudioShift);
  offload::StreamerOptions options;
  options.passes = video.steps();
  Backend& backend = test::model_backend();
  offload::WeightStreamer streamer(backend, model, plan, options);
  const auto bytes =
      static_cast<std::size_t>(m.weights.activation_bytes(s.length(), s.text_rows, 0, 3));
  const auto memory = backend.allocate(bytes);
  memory::Arena arena(memory->data(), bytes, backend.device());
  const std::string key = "tiny." + layout;
  Loop out{values(reference(), key + ".video_in"), values(reference(), key + ".audio_in")};
  const std::vector<float> text_f32 = values(reference(), key + ".text_in");
  std::vector<std::uint16_t> text(text_f32.size());
  convert_from_f32(text_f32.data(), DType::kBF16, text.data(), text.size());
  denoise_packed(backend, m.weights, streamer, arena, s, text, video, audio, out.video, out.audio,
                 0, cancel);
  return out;
}

double rel_rms(const std::vector<float>& got, const std::vector<float>& want) {
  double d = 0, w = 0;
  for (std::size_t i = 0; i < got.size(); ++i) {
    d += (static_cast<double>(got[i]) - want[i]) * (static_cast<double>(got[i]) - want[i]);
    w += static_cast<double>(want[i]) * want[i];
  }
  return std::sqrt(d / w);
}

// The bound is h3_dit_test's for one forward (0.017: 1.5x the worst measured deviation of one
// bf16 forward from the f32 and bf16 references, whose own bf16-vs-f32 floor is 0.004-0.006): the
// loop adds only f32 Euler steps, each a contraction toward the model's x0, so the trajectory's
// deviation stays that of its forwards. Measured (the [ measured ] line): within it.
constexpr double kTrajectoryBound = 0.017;

TEST(H3RunLoop, FourStepsOfT2vaMatchDiffusersLoop) {
  const TinyDit m;
  const Loop loop = run_loop(m, "t2va", {}, 5);
  for (const char* kind : {"bf16", "f32"}) {
    const double v =
        rel_rms(loop.video, values(reference(), std::string("traj.") + kind + ".video"));
    const double a =
        rel_rms(loop.audio, values(reference(), std::string("traj.") + kind + ".audio"));
    std::printf(
        "[ measured ] run loop vs diffusers' 4-step trajectory (%s): video rel rms %.5f, "
        "audio %.5f\n",
        kind, v, a);
    EXPECT_LE(v, kTrajectoryBound) << kind;
    EXPECT_LE(a, kTrajectoryBound) << kind;
  }
}

TEST(H3RunLoop, KeyframeRowsAreNeverChanged) {
  const TinyDit m;
  for (const auto& [layout, anchors] :
       std::vector<std::pair<std::string, std::vector<KeyframeAnchor>>>{
           {"i2va_first", {KeyframeAnchor::kFirst}},
           {"i2va_last", {KeyframeAnchor::kLast}},
           {"fl2va", {KeyframeAnchor::kFirst, KeyframeAnchor::kLast}}}) {
    SCOPED_TRACE(layout);
    const dit::PackedSequence s = sequence_of(layout, anchors);
    const std::vector<float> in = values(reference(), "tiny." + layout + ".video_in");
    const Loop loop = run_loop(m, layout, anchors, 5);
    const auto condition =
        static_cast<std::size_t>(s.condition_rows * m.weights.config().patch_dim);
    ASSERT_GT(condition, 0u);
    EXPECT_TRUE(
        test::same_bits(std::vector<float>(loop.video.begin(), loop.video.begin() + condition),
                        std::vector<float>(in.begin(), in.begin() + condition)));
    EXPECT_GT(rel_rms(std::vector<float>(loop.video.begin() + condition, loop.video.end()),
                      std::vector<float>(in.begin() + condition, in.end())),
              0.01)
        << "the target rows did not move";
  }
}

TEST(H3RunLoop, MismatchedSchedulesAndACancelAreErrors) {
  const TinyDit m;
  // Schedules of different lengths (diffusers' unique_consecutive could make them so; it does
  // not for 2 to 1000 grid points at shifts 12 and 3, measured with MiniMaxH3Scheduler).
  EXPECT_EQ(test::error_code_of([&] { run_loop(m, "t2va", {}, 5, nullptr, 6); }),
            ErrorCode::kBadArgument);
  const std::atomic<bool> cancelled{true};
  EXPECT_EQ(test::error_code_of([&] { run_loop(m, "t2va", {}, 5, &cancelled); }),
            ErrorCode::kCancelled);
}

}  // namespace
}  // namespace ferry::models::h3
