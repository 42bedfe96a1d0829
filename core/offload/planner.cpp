#include "core/offload/planner.h"

#include <algorithm>
#include <string>

#include "core/error.h"

namespace ferry::offload {
namespace {

constexpr std::uint64_t kMiB = 1ull << 20;

std::string mib(std::uint64_t bytes) {
  return std::to_string((bytes + kMiB - 1) / kMiB) + " MiB";
}

// The largest slot a streamed group needs.
std::uint64_t largest_group_slot(const ModelLayout& layout, SlotLayout slots) {
  std::uint64_t largest = 0;
  for (const LayerGroup& g : layout.groups) {
    if (!g.always_resident) largest = std::max(largest, group_slot_bytes(g, slots));
  }
  return largest;
}

std::uint64_t always_resident_bytes(const ModelLayout& layout, SlotLayout slots) {
  std::uint64_t n = 0;
  for (const LayerGroup& g : layout.groups) {
    if (g.always_resident) n += group_slot_bytes(g, slots);
  }
  return n;
}

}  // namespace

SlotLayout slot_layout_for(const Preset& preset, const MachineInfo& machine) {
  return machine.capabilities(preset.device).memory_is_host &&
                 preset.read_method == ReadMethod::kDirect
             ? SlotLayout::kFileAligned
             : SlotLayout::kPacked;
}

std::uint64_t usable_device_bytes(const Preset& preset, const MachineInfo& machine) {
  if (machine.capabilities(preset.device).memory_is_host) {
    return preset.ram_budget_bytes > kProcessBaseBytes ? preset.ram_budget_bytes - kProcessBaseBytes
                                                       : 0;
  }
  const std::uint64_t free_after_headroom =
      machine.free_vram_bytes > preset.vram_headroom_bytes
          ? machine.free_vram_bytes - preset.vram_headroom_bytes
          : 0;
  return std::min(preset.vram_budget_bytes, free_after_headroom);
}

std::uint64_t minimum_device_bytes(const ModelLayout& layout, const Preset& preset,
                                   const MachineInfo& machine) {
  const SlotLayout slots = slot_layout_for(preset, machine);
  return always_resident_bytes(layout, slots) + layout.activation_bytes +
         (preset.look_ahead + 1) * largest_group_slot(layout, slots);
}

Plan make_plan(const ModelLayout& layout, const Preset& preset, const MachineInfo& machine) {
  if (preset.device == Device::kCuda && !machine.has_gpu) {
    throw Error(ErrorCode::kUnsupported, "preset '" + preset.name +
                                             "' needs an NVIDIA GPU and none was found: use the "
                                             "cpu preset (slow) or a machine with a GPU");
  }
  const std::size_t n = layout.groups.size();
  const DeviceCapabilities device = machine.capabilities(preset.device);
  Plan plan;
  plan.placement.assign(n, Placement::kDisk);
  plan.look_ahead = preset.look_ahead;
  plan.read_method = preset.read_method;
  plan.slot_layout = slot_layout_for(preset, machine);
  plan.activation_bytes = layout.activation_bytes;

  // A device whose memory is host RAM reads straight into its slots: no staging ring, so its
  // whole budget is the device's.
  const std::uint64_t device_budget = usable_device_bytes(preset, machine);
  const std::uint64_t always = always_resident_bytes(layout, plan.slot_layout);
  const std::uint64_t slot = largest_group_slot(layout, plan.slot_layout);
  const std::uint64_t minimum = minimum_device_bytes(layout, preset, machine);
  auto slot_bytes = [&](std::size_t i) {
    return group_slot_bytes(layout.groups[i], plan.slot_layout);
  };

  std::vector<std::size_t> streamable;
  std::uint64_t all_streamable_bytes = 0;
  for (std::size_t i = 0; i < n; ++i) {
    if (layout.groups[i].always_resident) {
      plan.placement[i] = Placement::kDevice;
    } else {
      streamable.push_back(i);
      all_streamable_bytes += slot_bytes(i);
    }
  }

  // Everything on the device, no slots, when it fits.
  if (always + all_streamable_bytes + layout.activation_bytes <= device_budget) {
    for (std::size_t i : streamable) plan.placement[i] = Placement::kDevice;
    plan.resident_bytes = always + all_streamable_bytes;
  } else {
    if (minimum > device_budget) {
      std::string fits;
      for (const Preset& p : builtin_presets()) {
        if (p.device == preset.device && p.vram_budget_bytes >= minimum) {
          fits = p.name;
          break;
        }
      }
      throw Error(
          ErrorCode::kDoesNotFit,
          layout.name + " needs at least " + mib(minimum) + " of " +
              (device.memory_is_host ? "RAM" : "VRAM") + " at this size (" +
              mib(layout.activation_bytes) + " working memory, " + mib(always) +
              " always-resident weights, " + std::to_string(preset.look_ahead + 1) + " slots of " +
              mib(slot) + "), but preset '" + preset.name + "' has " + mib(device_budget) +
              " here" +
              (fits.empty() ? ": choose a smaller size or fewer frames"
                            : ": choose a smaller size, or preset '" + fits + "' on a larger GPU"));
    }
    // Resident blocks, as many as the rest of the budget holds, spread evenly through the stack.
    plan.device_slots = preset.look_ahead + 1;
    plan.device_slot_bytes = slot;
    const std::uint64_t spare = device_budget - minimum;
    std::uint64_t average = all_streamable_bytes / std::max<std::size_t>(streamable.size(), 1);
    std::size_t resident =
        average == 0 ? 0 : static_cast<std::size_t>(spare / std::max<std::uint64_t>(average, 1));
    resident = std::min(resident, streamable.size());
    // Even spread, then trimmed from the end until the real sizes fit the spare budget.
    for (;; --resident) {
      std::vector<std::size_t> chosen;
      for (std::size_t k = 0; k < resident; ++k) {
        chosen.push_back(streamable[(2 * k + 1) * streamable.size() / (2 * resident)]);
      }
      std::uint64_t bytes = 0;
      for (std::size_t i : chosen) bytes += slot_bytes(i);
      if (bytes <= spare || resident == 0) {
        for (std::size_t i : chosen) plan.placement[i] = Placement::kDevice;
        plan.resident_bytes = always + bytes;
        break;
      }
    }
  }

  // Streamed groups: through the staging ring to a device of its own, and cached in pinned RAM
  // while the RAM budget and the pinned limit allow.
  const bool streams = std::any_of(plan.placement.begin(), plan.placement.end(),
                                   [](Placement p) { return p == Placement::kDisk; });
  if (streams && !device.memory_is_host) {
    plan.staging_slots = preset.staging_slots;
    plan.staging_slot_bytes = preset.staging_slot_bytes;
  }
  const std::uint64_t ring = plan.staging_slots * plan.staging_slot_bytes;
  const std::uint64_t device_fixed =
      plan.resident_bytes + plan.device_slots * plan.device_slot_bytes + plan.activation_bytes;
  std::uint64_t ram_fixed = kProcessBaseBytes + ring;
  if (device.memory_is_host) ram_fixed += device_fixed;
  if (ram_fixed > preset.ram_budget_bytes) {
    throw Error(ErrorCode::kDoesNotFit,
                "preset '" + preset.name + "' allows " + mib(preset.ram_budget_bytes) +
                    " of RAM but this plan needs " + mib(ram_fixed) +
                    " before any cache: choose a preset with more RAM or a smaller size");
  }
  if (device.pinned_host_memory && streams) {
    const std::uint64_t pinned_limit = std::min<std::uint64_t>(
        preset.ram_budget_bytes - ram_fixed,
        static_cast<std::uint64_t>(preset.max_pinned_fraction_of_ram *
                                   static_cast<double>(machine.total_ram_bytes)));
    const std::uint64_t available =
        machine.available_ram_bytes > ram_fixed ? machine.available_ram_bytes - ram_fixed : 0;
    const std::uint64_t cache_budget = std::min(pinned_limit, available / 10 * 8);
    for (std::size_t i = 0; i < n; ++i) {
      if (plan.placement[i] != Placement::kDisk) continue;
      // What the streamer allocates for it: the group laid out as a device slot.
      const std::uint64_t bytes = slot_bytes(i);
      if (plan.pinned_cache_bytes + bytes > cache_budget) break;  // keep the cached run contiguous
      plan.placement[i] = Placement::kPinnedCache;
      plan.pinned_cache_bytes += bytes;
    }
  }

  plan.predicted_vram_peak = device.memory_is_host ? 0 : device_fixed;
  plan.predicted_ram_peak = ram_fixed + plan.pinned_cache_bytes;
  return plan;
}

Plan streamed_plan(const ModelLayout& layout, const Preset& preset, const MachineInfo& machine) {
  const DeviceCapabilities device = machine.capabilities(preset.device);
  Plan plan;
  plan.look_ahead = preset.look_ahead;
  plan.read_method = preset.read_method;
  plan.slot_layout = slot_layout_for(preset, machine);
  plan.activation_bytes = layout.activation_bytes;
  plan.resident_bytes = always_resident_bytes(layout, plan.slot_layout);
  bool streams = false;
  for (const LayerGroup& g : layout.groups) {
    plan.placement.push_back(g.always_resident ? Placement::kDevice : Placement::kDisk);
    streams |= !g.always_resident;
  }
  if (streams) {
    plan.device_slots = preset.look_ahead + 1;
    plan.device_slot_bytes = largest_group_slot(layout, plan.slot_layout);
    if (!device.memory_is_host) {
      plan.staging_slots = preset.staging_slots;
      plan.staging_slot_bytes = preset.staging_slot_bytes;
    }
  }
  const std::uint64_t on_device =
      plan.resident_bytes + plan.device_slots * plan.device_slot_bytes + plan.activation_bytes;
  const std::uint64_t ring = plan.staging_slots * plan.staging_slot_bytes;
  plan.predicted_vram_peak = device.memory_is_host ? 0 : on_device;
  plan.predicted_ram_peak = kProcessBaseBytes + ring + (device.memory_is_host ? on_device : 0);
  return plan;
}

}  // namespace ferry::offload
