// The seeded noise (core/models/noise.h).
#include "core/models/noise.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

namespace ferry::models {
namespace {

// Philox4x32-10's known-answer vector (Random123's kat_vectors) for counter and key all zeros.
TEST(Noise, PhiloxMatchesItsKnownAnswers) {
  std::uint32_t out[4];
  philox4x32_10(0, 0, out);
  EXPECT_EQ(out[0], 0x6627e8d5u);
  EXPECT_EQ(out[1], 0xe169c58du);
  EXPECT_EQ(out[2], 0xbc57ac4cu);
  EXPECT_EQ(out[3], 0x9b00dbd8u);
}

TEST(Noise, TheSameSeedGivesTheSameSamplesFromAnyOffset) {
  std::vector<float> all(1000), tail(600);
  normal_noise(42, 0, all);
  normal_noise(42, 400, tail);
  for (std::size_t i = 0; i < tail.size(); ++i) EXPECT_EQ(tail[i], all[400 + i]);
  std::vector<float> other(1000);
  normal_noise(43, 0, other);
  int equal = 0;
  for (std::size_t i = 0; i < all.size(); ++i) equal += all[i] == other[i];
  EXPECT_LT(equal, 5);
}

TEST(Noise, SamplesAreStandardNormal) {
  std::vector<float> x(400000);
  normal_noise(7, 0, x);
  double sum = 0, sq = 0, tail = 0;
  for (float v : x) {
    ASSERT_TRUE(std::isfinite(v));
    sum += v;
    sq += static_cast<double>(v) * v;
    tail += std::abs(v) > 1.96;
  }
  const double n = static_cast<double>(x.size());
  EXPECT_NEAR(sum / n, 0.0, 0.01);
  EXPECT_NEAR(sq / n, 1.0, 0.01);
  EXPECT_NEAR(tail / n, 0.05, 0.003);  // the two-sided 5 % tail
}

}  // namespace
}  // namespace ferry::models
