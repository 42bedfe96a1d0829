// Step-distillation LoRAs told by their file names (core/models/lora/distill_name.h), on names
// as published (formats_lora_moe.md §5.3) and names that only look alike.
#include <gtest/gtest.h>

#include "core/models/lora/distill_name.h"

namespace ferry::models::lora {
namespace {

TEST(LoraDistillName, published_lightx2v_and_lightning_files_are_four_step) {
  for (const char* name : {
           "wan2.2_t2v_A14b_high_noise_lora_rank64_lightx2v_4step_1217.safetensors",
           "wan2.2_i2v_A14b_low_noise_lora_rank64_lightx2v_4step_1022.safetensors",
           "wan2.2_i2v_lightx2v_4steps_lora_v1_low_noise.safetensors",
           "wan2.2_t2v_lightx2v_4steps_lora_v1.1_high_noise.safetensors",
           "Wan21_T2V_14B_lightx2v_cfg_step_distill_lora_rank32.safetensors",
           "Wan21_I2V_14B_lightx2v_cam2v_step_distill_lora_rank64.safetensors",
           "Wan2.1-Lightning-T2V-14B-4step-lora.safetensors",
           "Wan2.2-T2V-A14B-4steps-lora-rank64-Seko-V1.1.safetensors",
           "Wan21_CausVid_14B_T2V_lora_rank32.safetensors",
           "WAN21_LIGHTX2V_LORA.SAFETENSORS",
       }) {
    EXPECT_EQ(distilled_steps(name), 4) << name;
  }
}

TEST(LoraDistillName, the_written_step_count_wins) {
  EXPECT_EQ(distilled_steps("Wan2.2-Lightning_T2V-A14B-8steps-lora.safetensors"), 8);
  EXPECT_EQ(distilled_steps("turbo_8step.safetensors"), 8);
  EXPECT_EQ(distilled_steps("some_distill_8-step.safetensors"), 8);
  EXPECT_EQ(distilled_steps("wan_4_step.safetensors"), 4);
  // A digit that ends a longer number is not a step count.
  EXPECT_EQ(distilled_steps("style_24steps.safetensors"), 0);
  EXPECT_EQ(distilled_steps("lightx2v_48steps.safetensors"), 4);
}

TEST(LoraDistillName, the_folder_does_not_count_and_other_loras_are_not_distilled) {
  EXPECT_EQ(distilled_steps("loras/lightx2v/watercolor_style_rank16.safetensors"), 0);
  for (const char* name :
       {"watercolor_style_rank16.safetensors", "wan22_motion_v2.safetensors",
        "Wan2.1-Fun-Reward-LoRAs-HPS2.1.safetensors", "step_by_step.safetensors", ""}) {
    EXPECT_EQ(distilled_steps(name), 0) << name;
  }
}

}  // namespace
}  // namespace ferry::models::lora
