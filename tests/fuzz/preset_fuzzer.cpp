// libFuzzer target: parse_preset on arbitrary text (a preset JSON a user adds to
// <user data>/presets/ or downloads). It must return a preset inside the ranges preset.h and the
// planner rely on, or throw Error(kBadArgument) naming the source; a crash, a sanitizer report,
// another exception (nlohmann's own type_error included) or a broken promise is a finding.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "core/error.h"
#include "core/offload/preset.h"

namespace {

void check(bool ok) {
  if (!ok) std::abort();
}

constexpr std::uint64_t kMiB = 1ull << 20;

void check_promises(const ferry::offload::Preset& p) {
  check(!p.name.empty() && p.name.size() <= 64);
  check(p.name.find_first_not_of("abcdefghijklmnopqrstuvwxyz0123456789-_.") == std::string::npos);
  check(!p.description.empty() && p.description.find('\n') == std::string::npos);
  check(p.ram_budget_bytes >= 1024 * kMiB);
  check(p.device == ferry::Device::kCpu || p.vram_budget_bytes > 0);
  check(p.max_pinned_fraction_of_ram >= 0 && p.max_pinned_fraction_of_ram <= 0.6);
  check(p.staging_slots >= 2 && p.staging_slots <= 16);
  check(p.staging_slot_bytes >= kMiB && p.staging_slot_bytes <= 1024 * kMiB);
  check(p.look_ahead >= 1 && p.look_ahead <= 4);
  check(p.chunk_tokens >= 0);
  check(p.vae_tile_px >= 0 && p.vae_tile_px <= 4096 && p.vae_tile_px % 32 == 0);
  check(p.source == "fuzz.json");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view json(reinterpret_cast<const char*>(data), size);
  try {
    check_promises(ferry::offload::parse_preset(json, "fuzz.json"));
  } catch (const ferry::Error& e) {
    check(e.code() == ferry::ErrorCode::kBadArgument);
    check(std::string_view(e.what()).find("fuzz.json") != std::string_view::npos);
  }
  return 0;
}
