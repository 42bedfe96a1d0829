// The live previews' time budget (core/models/taehv/taehv_preview.h): previews cheaper than 5% of
// a step come every step; dearer ones are spaced so that their time stays within 5% of the
// steps' (plus the first, which measures the cost).
#include <gtest/gtest.h>

#include "core/models/taehv/taehv_preview.h"

namespace ferry::models::taehv {
namespace {

// Steps of `step` seconds, previews costing `cost`: how many were made in `steps` steps.
int previews_made(double step, double cost, int steps, double* spent) {
  PreviewBudget budget;
  int made = 0;
  *spent = 0;
  for (int i = 0; i < steps; ++i) {
    if (budget.due(step)) {
      budget.spent(cost);
      *spent += cost;
      ++made;
    }
  }
  return made;
}

TEST(PreviewBudget, previews_under_the_share_come_every_step) {
  double spent = 0;
  EXPECT_EQ(previews_made(1.0, 0.04, 50, &spent), 50);
}

TEST(PreviewBudget, dearer_previews_are_spaced_to_stay_within_the_share) {
  double spent = 0;
  const int made = previews_made(1.0, 0.2, 100, &spent);
  // 5% of 100 s is 5 s: 25 previews of 0.2 s, the first one's excess paid back.
  EXPECT_LE(spent, PreviewBudget::kShare * 100 + 0.2);
  EXPECT_GE(made, 24);
  EXPECT_LE(made, 26);
}

TEST(PreviewBudget, the_first_preview_is_always_made) {
  PreviewBudget budget;
  EXPECT_TRUE(budget.due(0.001));
  budget.spent(10.0);
  EXPECT_FALSE(budget.due(1.0));
}

}  // namespace
}  // namespace ferry::models::taehv
