// The planner: from a preset, the machine and a model's layout, decide where every layer group
// lives — resident on the device (spread evenly through the stack, so each streamed block has a
// resident neighbour's compute to hide behind), cached in pinned RAM, or streamed from disk — and
// size the fixed buffers. Deterministic: the same inputs give the same plan. When nothing fits it
// throws Error(kDoesNotFit) before any work starts, saying what would fit.
#pragma once

#include "core/offload/layer_group.h"
#include "core/offload/plan.h"
#include "core/offload/preset.h"

namespace ferry::offload {

// Host memory Ferry itself needs besides the plan's buffers (code, tokenizer, bookkeeping).
inline constexpr std::uint64_t kProcessBaseBytes = 400ull << 20;

Plan make_plan(const ModelLayout& layout, const Preset& preset, const MachineInfo& machine);

// The plan that streams every group but the always-resident ones from disk on every pass, with
// the preset's look-ahead, staging ring and read method: what the demo runs (to show the disk
// path on any machine) and what benchmarks compare against. No budget check. `machine` says
// what its GPU can do (a discrete GPU's by default).
Plan streamed_plan(const ModelLayout& layout, const Preset& preset,
                   const MachineInfo& machine = {});

// How the preset's device holds its slots: file-aligned where device memory is host memory and
// reads are unbuffered (the streamer reads straight into the slots), packed otherwise.
SlotLayout slot_layout_for(const Preset& preset, const MachineInfo& machine);

// The device memory a preset may use on this machine: its budget, less headroom below what the
// driver reports free. Where device memory is host memory (the cpu preset), the RAM budget less
// the process's own base.
std::uint64_t usable_device_bytes(const Preset& preset, const MachineInfo& machine);

// The smallest device budget that runs `layout` with everything streamed.
std::uint64_t minimum_device_bytes(const ModelLayout& layout, const Preset& preset,
                                   const MachineInfo& machine);

}  // namespace ferry::offload
