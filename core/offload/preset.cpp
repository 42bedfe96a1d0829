#include "core/offload/preset.h"

#include <algorithm>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "core/error.h"
#include "core/io/detail/os_file.h"

namespace ferry::offload {

// Generated at build time from resources/presets/*.json (see core/CMakeLists.txt).
extern const char* const kBuiltinPresetJson[];
extern const std::size_t kBuiltinPresetCount;

namespace {

constexpr std::uint64_t kMiB = 1ull << 20;
constexpr std::size_t kMaxPresetFileBytes = 64 * 1024;

Error bad(const std::string& source, const std::string& problem) {
  return Error(ErrorCode::kBadArgument, "preset " + source + ": " + problem);
}

std::uint64_t mib_field(const nlohmann::json& j, const char* key, const std::string& source,
                        std::uint64_t max_mib, bool required = true) {
  if (!j.contains(key)) {
    if (required) throw bad(source, std::string("missing \"") + key + "\"");
    return 0;
  }
  const auto& v = j.at(key);
  if (!v.is_number_unsigned() || v.get<std::uint64_t>() > max_mib) {
    throw bad(source, std::string("\"") + key + "\" must be a whole number of MiB from 0 to " +
                          std::to_string(max_mib));
  }
  return v.get<std::uint64_t>() * kMiB;
}

std::int64_t int_field(const nlohmann::json& j, const char* key, const std::string& source,
                       std::int64_t min, std::int64_t max, std::int64_t fallback) {
  if (!j.contains(key)) return fallback;
  const auto& v = j.at(key);
  if (!v.is_number_integer() || v.get<std::int64_t>() < min || v.get<std::int64_t>() > max) {
    throw bad(source, std::string("\"") + key + "\" must be a whole number from " +
                          std::to_string(min) + " to " + std::to_string(max));
  }
  return v.get<std::int64_t>();
}

// A string field with a default; nlohmann's j.value() would throw its own type_error (not an Error,
// so no message naming the preset) for "device": 7.
std::string string_field(const nlohmann::json& j, const char* key, const std::string& source,
                         const std::string& fallback) {
  if (!j.contains(key)) return fallback;
  const auto& v = j.at(key);
  if (!v.is_string()) throw bad(source, std::string("\"") + key + "\" must be a string");
  return v.get<std::string>();
}

}  // namespace

Preset parse_preset(std::string_view json, const std::string& source) {
  if (json.size() > kMaxPresetFileBytes) throw bad(source, "the file is larger than 64 KiB");
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(json);
  } catch (const nlohmann::json::exception& e) {
    throw bad(source, std::string("not valid JSON: ") + e.what());
  }
  if (!j.is_object()) throw bad(source, "the file must hold one JSON object");
  static const std::set<std::string> kKnown = {"name",
                                               "description",
                                               "device",
                                               "vram_budget_mib",
                                               "vram_headroom_mib",
                                               "ram_budget_mib",
                                               "max_pinned_fraction_of_ram",
                                               "staging_slots",
                                               "staging_slot_mib",
                                               "look_ahead",
                                               "read_method",
                                               "chunk_tokens",
                                               "ffn_chunk_tokens",
                                               "vae_tile_px",
                                               "vae_activations"};
  for (const auto& [key, value] : j.items()) {
    if (kKnown.count(key) == 0) throw bad(source, "unknown field \"" + key + "\" (a typo?)");
  }
  Preset p;
  p.source = source;
  for (const char* key : {"name", "description"}) {
    if (!j.contains(key) || !j.at(key).is_string() || j.at(key).get<std::string>().empty()) {
      throw bad(source, std::string("\"") + key + "\" must be a non-empty string");
    }
  }
  p.name = j.at("name").get<std::string>();
  p.description = j.at("description").get<std::string>();
  if (p.name.size() > 64 ||
      p.name.find_first_not_of("abcdefghijklmnopqrstuvwxyz0123456789-_.") != std::string::npos) {
    throw bad(source, "\"name\" may use only lowercase letters, digits, '-', '_' and '.'");
  }
  if (p.description.size() > 300 || p.description.find('\n') != std::string::npos) {
    throw bad(source, "\"description\" must be one line of at most 300 characters");
  }
  const std::string device = string_field(j, "device", source, "cuda");
  if (device != "cuda" && device != "cpu")
    throw bad(source, "\"device\" must be \"cuda\" or \"cpu\"");
  p.device = device == "cpu" ? Device::kCpu : Device::kCuda;
  p.vram_budget_bytes = mib_field(j, "vram_budget_mib", source, 1 << 20);
  p.vram_headroom_bytes = mib_field(j, "vram_headroom_mib", source, 16384, false);
  p.ram_budget_bytes = mib_field(j, "ram_budget_mib", source, 1 << 22);
  if (p.device == Device::kCuda && p.vram_budget_bytes == 0) {
    throw bad(source, "a GPU preset needs a \"vram_budget_mib\" above 0");
  }
  if (p.ram_budget_bytes < 1024 * kMiB)
    throw bad(source, "\"ram_budget_mib\" must be at least 1024");
  if (j.contains("max_pinned_fraction_of_ram")) {
    const auto& v = j.at("max_pinned_fraction_of_ram");
    if (!v.is_number() || v.get<double>() < 0 || v.get<double>() > 0.6) {
      throw bad(source, "\"max_pinned_fraction_of_ram\" must be from 0 to 0.6");
    }
    p.max_pinned_fraction_of_ram = v.get<double>();
  }
  p.staging_slots = static_cast<std::size_t>(int_field(j, "staging_slots", source, 2, 16, 4));
  p.staging_slot_bytes =
      static_cast<std::uint64_t>(int_field(j, "staging_slot_mib", source, 1, 1024, 64)) * kMiB;
  p.look_ahead = static_cast<std::size_t>(int_field(j, "look_ahead", source, 1, 4, 1));
  const std::string method = string_field(j, "read_method", source, "direct");
  if (method != "direct" && method != "mapped") {
    throw bad(source, "\"read_method\" must be \"direct\" or \"mapped\"");
  }
  p.read_method = method == "mapped" ? ReadMethod::kMapped : ReadMethod::kDirect;
  // "ffn_chunk_tokens" is the name presets used when only the FFN was chunked: still read.
  if (j.contains("chunk_tokens") && j.contains("ffn_chunk_tokens")) {
    throw bad(source, "give \"chunk_tokens\" alone (\"ffn_chunk_tokens\" is its old name)");
  }
  p.chunk_tokens =
      int_field(j, j.contains("ffn_chunk_tokens") ? "ffn_chunk_tokens" : "chunk_tokens", source, 0,
                1 << 20, 0);
  p.vae_tile_px = static_cast<int>(int_field(j, "vae_tile_px", source, 0, 4096, 0));
  if (p.vae_tile_px % 32 != 0) throw bad(source, "\"vae_tile_px\" must be a multiple of 32");
  const std::string vae_activations = string_field(j, "vae_activations", source, "f32");
  if (vae_activations != "f32" && vae_activations != "bf16") {
    throw bad(source, "\"vae_activations\" must be \"f32\" or \"bf16\"");
  }
  p.vae_activations = vae_activations == "bf16" ? DType::kBF16 : DType::kF32;
  return p;
}

const std::vector<Preset>& builtin_presets() {
  static const std::vector<Preset> presets = [] {
    std::vector<Preset> out;
    for (std::size_t i = 0; i < kBuiltinPresetCount; ++i) {
      out.push_back(parse_preset(kBuiltinPresetJson[i], "built-in"));
    }
    // Smallest machine first; the CPU preset last.
    std::stable_sort(out.begin(), out.end(), [](const Preset& a, const Preset& b) {
      if ((a.device == Device::kCpu) != (b.device == Device::kCpu)) return b.device == Device::kCpu;
      return a.vram_budget_bytes < b.vram_budget_bytes;
    });
    return out;
  }();
  return presets;
}

std::vector<Preset> load_presets(const std::filesystem::path& user_dir) {
  std::vector<Preset> presets = builtin_presets();
  std::error_code ec;
  if (user_dir.empty() || !std::filesystem::is_directory(user_dir, ec)) return presets;
  std::vector<std::filesystem::path> files;
  for (const auto& entry : std::filesystem::directory_iterator(user_dir, ec)) {
    if (entry.is_regular_file() && entry.path().extension() == ".json")
      files.push_back(entry.path());
  }
  std::sort(files.begin(), files.end());
  for (const auto& file : files) {
    const std::string source = io::detail::display(file);
    std::ifstream in(file, std::ios::binary);
    std::string text(kMaxPresetFileBytes + 1, '\0');
    in.read(text.data(), static_cast<std::streamsize>(text.size()));
    text.resize(static_cast<std::size_t>(in.gcount()));
    Preset p = parse_preset(text, source);
    const bool taken =
        p.name == "auto" || std::any_of(presets.begin(), presets.end(),
                                        [&](const Preset& q) { return q.name == p.name; });
    if (taken) throw bad(source, "the name \"" + p.name + "\" is already taken");
    presets.push_back(std::move(p));
  }
  return presets;
}

Preset auto_preset(const MachineInfo& machine) {
  Preset p;
  p.name = "auto";
  p.source = "derived from this machine";
  // Take the built-in closest below this GPU as the template for ring, chunking and tiles.
  const Preset* base = nullptr;
  for (const Preset& q : builtin_presets()) {
    if (machine.has_gpu && q.device == Device::kCuda &&
        q.vram_budget_bytes + q.vram_headroom_bytes <= machine.total_vram_bytes) {
      base = &q;
    }
    if (!machine.has_gpu && q.device == Device::kCpu) base = &q;
  }
  if (base == nullptr) base = &builtin_presets().front();
  p = *base;
  p.name = "auto";
  p.source = "derived from this machine";
  const std::uint64_t headroom = machine.has_gpu ? 600 * kMiB : 0;
  p.device = machine.has_gpu ? Device::kCuda : Device::kCpu;
  p.vram_headroom_bytes = headroom;
  p.vram_budget_bytes = machine.free_vram_bytes > headroom ? machine.free_vram_bytes - headroom : 0;
  // Leave the rest of the machine room: 60 % of what is available now.
  p.ram_budget_bytes = std::max<std::uint64_t>(1024 * kMiB, machine.available_ram_bytes / 10 * 6);
  p.description = "Derived from this machine: " + std::to_string(p.vram_budget_bytes / kMiB) +
                  " MiB of VRAM and " + std::to_string(p.ram_budget_bytes / kMiB) +
                  " MiB of RAM for Ferry.";
  return p;
}

Preset find_preset(const std::vector<Preset>& presets, std::string_view name,
                   const MachineInfo& machine) {
  if (name == "auto") return auto_preset(machine);
  for (const Preset& p : presets) {
    if (p.name == name) return p;
  }
  std::string names = "auto";
  for (const Preset& p : presets) names += ", " + p.name;
  throw Error(ErrorCode::kBadArgument,
              "unknown preset '" + std::string(name) + "' (presets: " + names + ")");
}

}  // namespace ferry::offload
