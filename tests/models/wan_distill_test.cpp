// The step-distilled sampler (flow_distill.h) against tests/data/wan/distill/ (written by
// tools/reference/make_distill_reference.py, LightX2V's WanStepDistillScheduler restated in fp32
// torch): the training table, the sigmas and float timesteps at shifts 5, 8 and 16, and the
// x0-form trajectory on the sampler tests' stand-in model, all bit for bit. The trajectory on the
// tiny DiTs is in wan_denoise_test.cpp.
#include <gtest/gtest.h>

#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/io/tensor_file.h"
#include "core/models/wan/flow_distill.h"
#include "core/models/wan/sampler.h"
#include "tests/test_support.h"

namespace ferry::models::wan {
namespace {

const nlohmann::json& reference() {
  static const nlohmann::json json = [] {
    std::ifstream in(test::data_path("wan/distill/schedules.json"), std::ios::binary);
    return nlohmann::json::parse(in);
  }();
  return json;
}

std::vector<float> floats(const nlohmann::json& values) {
  // Decimal fp64 values of fp32 numbers: the casts are exact.
  std::vector<float> out;
  for (const auto& v : values) out.push_back(static_cast<float>(v.get<double>()));
  return out;
}

std::vector<float> tensor(const char* file, const std::string& name) {
  const io::TensorFile f = io::TensorFile::open(test::data_path(file));
  const io::TensorInfo& info = f.at(name);
  EXPECT_EQ(info.dtype, DType::kF32) << name;
  std::vector<float> out(info.element_count());
  const io::MappedView view = f.map(info);
  std::memcpy(out.data(), view.bytes().data(), out.size() * sizeof(float));
  return out;
}

constexpr const char* kDistillFile = "wan/distill/trajectories.safetensors";
constexpr const char* kStandInFile = "wan/sampler/trajectories.safetensors";

std::vector<float> as_vector(std::span<const float> s) {
  return {s.begin(), s.end()};
}

TEST(WanDistill, the_training_table_is_torch_linspace_bit_for_bit) {
  // At shift 1 the shifted table is the table itself: σ = 1·b / (1 + 0·b) = b.
  std::vector<int> every_entry;
  for (int t = 1000; t >= 1; --t) every_entry.push_back(t);
  const FlowSchedule s = distilled_schedule(every_entry, 1.0);
  std::vector<float> want = floats(reference()["linspace"]);
  ASSERT_EQ(want.size(), 1001u);
  want.back() = 0.0f;  // the table's entry 1000 is not used; the schedule ends with its own 0
  EXPECT_EQ(s.sigmas, want);
}

TEST(WanDistill, schedules_equal_lightx2v_bit_for_bit) {
  std::size_t n = 0;
  for (const auto& s : reference()["schedules"]) {
    const int steps = s["steps"].get<int>();
    const double shift = s["shift"].get<double>();
    const std::vector<int> list = distill_step_list(steps);
    EXPECT_EQ(list, s["step_list"].get<std::vector<int>>()) << steps << " steps";
    const FlowSchedule got = distilled_schedule(list, shift);
    EXPECT_EQ(got.sigmas, floats(s["sigmas"])) << steps << " steps, shift " << shift;
    EXPECT_EQ(got.timesteps, floats(s["timesteps"])) << steps << " steps, shift " << shift;
    ++n;
  }
  EXPECT_GE(n, 10u);
}

TEST(WanDistill, four_steps_at_shift_5_are_the_reference_document_values) {
  const Sampler sampler(4, 5.0, SamplerKind::kDistilled, 1);
  EXPECT_EQ(as_vector(sampler.timesteps()),
            (std::vector<float>{1000.0f, 937.5f, 833.33331f, 625.0f}));
  EXPECT_EQ(as_vector(sampler.sigmas()),
            (std::vector<float>{1.0f, 0.9375f, 0.8333333134651184f, 0.625f, 0.0f}));
  EXPECT_NE(sampler.timesteps()[2], 833.0f);  // not truncated to an integer
  EXPECT_EQ(distill_step_list(4), (std::vector<int>{1000, 750, 500, 250}));
  EXPECT_EQ(distill_step_list(8), (std::vector<int>{1000, 875, 750, 625, 500, 375, 250, 125}));
}

// The sampler tests' stand-in for the DiT (cond branch only): v = a·x + b·(t/1000) + c.
std::vector<std::vector<float>> stand_in_trajectory(int steps, double shift) {
  const std::vector<float> a = tensor(kStandInFile, "cond.a");
  const std::vector<float> b = tensor(kStandInFile, "cond.b");
  const std::vector<float> c = tensor(kStandInFile, "cond.c");
  std::vector<float> x = tensor(kStandInFile, "noise");
  std::vector<float> v(x.size());
  Sampler sampler(steps, shift, SamplerKind::kDistilled, x.size());
  std::vector<std::vector<float>> out;
  while (!sampler.done()) {
    const float t = sampler.timestep() / 1000.0f;
    for (std::size_t k = 0; k < x.size(); ++k) {
      const float ax = a[k] * x[k];
      const float bt = b[k] * t;
      const float sum = ax + bt;
      v[k] = sum + c[k];
    }
    sampler.step(v, x);
    out.push_back(x);
  }
  return out;
}

TEST(WanDistill, x0_euler_trajectory_equals_lightx2v_bit_for_bit) {
  const std::vector<std::vector<float>> got = stand_in_trajectory(4, 5.0);
  ASSERT_EQ(got.size(), 4u);
  for (std::size_t k = 0; k < got.size(); ++k) {
    EXPECT_EQ(got[k], tensor(kDistillFile, "standin.step" + std::to_string(k + 1)))
        << "after step " << k + 1;
  }
  EXPECT_EQ(stand_in_trajectory(8, 8.0).back(), tensor(kDistillFile, "standin8.step8"));
}

TEST(WanDistill, the_last_step_lands_on_the_x0_prediction) {
  Sampler sampler(2, 5.0, SamplerKind::kDistilled, 3);
  std::vector<float> x = {0.5f, -1.25f, 2.0f}, v = {0.25f, 0.75f, -1.5f};
  sampler.step(v, x);
  const float sigma = sampler.sigmas()[1];
  std::vector<float> x0(3);
  for (std::size_t k = 0; k < 3; ++k) {
    const float sv = sigma * v[k];
    x0[k] = x[k] - sv;
  }
  sampler.step(v, x);
  EXPECT_EQ(x, x0);
  EXPECT_TRUE(sampler.done());
}

TEST(WanDistill, refuses_bad_step_counts_lists_and_shifts) {
  EXPECT_EQ(test::error_code_of([] { distill_step_list(0); }), ErrorCode::kBadArgument);
  EXPECT_EQ(test::error_code_of([] { distill_step_list(1001); }), ErrorCode::kBadArgument);
  EXPECT_EQ(distill_step_list(1000).back(), 1);
  const std::vector<int> increasing = {500, 750};
  const std::vector<int> too_big = {1001, 500};
  const std::vector<int> zero = {500, 0};
  for (const std::vector<int>* list : {&increasing, &too_big, &zero}) {
    EXPECT_EQ(test::error_code_of([&] { distilled_schedule(*list, 5.0); }),
              ErrorCode::kBadArgument);
  }
  EXPECT_EQ(test::error_code_of([] { distilled_schedule({}, 5.0); }), ErrorCode::kBadArgument);
  const std::vector<int> four = distill_step_list(4);
  EXPECT_EQ(test::error_code_of([&] { distilled_schedule(four, 0.0); }), ErrorCode::kBadArgument);
  EXPECT_EQ(test::error_code_of([&] { distilled_schedule(four, 101.0); }), ErrorCode::kBadArgument);
  Sampler sampler(1, 5.0, SamplerKind::kDistilled, 4);
  std::vector<float> x(4, 1.0f), v(4, 0.5f), short_v(3, 0.5f);
  EXPECT_EQ(test::error_code_of([&] { sampler.step(short_v, x); }), ErrorCode::kBadArgument);
  sampler.step(v, x);
  EXPECT_EQ(test::error_code_of([&] { sampler.step(v, x); }), ErrorCode::kBadArgument);
}

TEST(WanDistill, is_named_distill4_and_a_guide_scale_of_1_turns_guidance_off) {
  EXPECT_EQ(parse_sampler_kind("distill4"), SamplerKind::kDistilled);
  EXPECT_EQ(to_string(SamplerKind::kDistilled), "distill4");
  EXPECT_EQ(Sampler(4, 5.0, SamplerKind::kDistilled, 1).kind(), SamplerKind::kDistilled);
  EXPECT_FALSE(guidance_enabled(1.0f));
  EXPECT_FALSE(guidance_enabled(1.0000005f));
  EXPECT_TRUE(guidance_enabled(1.00001f));
  EXPECT_TRUE(guidance_enabled(0.0f));
  EXPECT_TRUE(guidance_enabled(5.0f));
}

}  // namespace
}  // namespace ferry::models::wan
