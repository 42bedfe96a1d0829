// The hand-made plans the model tests stream their tiny models under (tests/models/*).
#pragma once

#include <algorithm>
#include <cstdint>

#include "core/offload/layer_group.h"
#include "core/offload/plan.h"

namespace ferry::test {

// Every group that must stay resident on the device, every other at `blocks`; two device slots
// and three staging slots of 4 KiB, smaller than any block, so that each tensor crosses in several
// chunks (the streamer's chunking is exercised even on tiny models).
inline offload::Plan tiny_slot_plan(const offload::ModelLayout& layout, offload::Placement blocks,
                                    offload::ReadMethod method = offload::ReadMethod::kMapped) {
  offload::Plan plan;
  plan.look_ahead = 1;
  plan.read_method = method;
  std::uint64_t largest = 0;
  for (const auto& g : layout.groups) {
    const offload::Placement p = g.always_resident ? offload::Placement::kDevice : blocks;
    plan.placement.push_back(p);
    if (p != offload::Placement::kDevice) largest = std::max(largest, g.slot_bytes());
  }
  plan.device_slots = blocks == offload::Placement::kDevice ? 0 : 2;
  plan.device_slot_bytes = largest;
  plan.staging_slots = 3;
  plan.staging_slot_bytes = 4 << 10;
  return plan;
}

}  // namespace ferry::test
