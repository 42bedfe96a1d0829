// The model library's scan (issue 22): every model file under the user's roots read by its header
// alone, each recognised by the model families (ModelFamily::sketch_part), and sorted into runnable
// sets — one per diffusion model, with the nearest part that meets each of its needs, wherever it
// sits (a ComfyUI user's diffusion model, text encoder and VAE live in three folders). A set whose
// parts are all there is confirmed by its family's open(), exactly as a generation would open it:
// "ready" means Ferry can run it. LoRAs are listed with the ready sets they fit (the family's
// check_lora). Pickle files are listed apart and never opened.
//
// Engine work without Qt: the app runs it on a worker thread, the CLI directly.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "core/models/family.h"

namespace ferry::library {

// One recognised part: a safetensors or GGUF file (or shard index).
struct FoundPart {
  std::filesystem::path path;
  std::string family;  // "wan"
  models::PartSketch sketch;
  std::string precision;  // of most of its bytes: "bf16", "fp16", "fp8", "Q8_0", "nf4"
  std::uint64_t bytes = 0;
};

struct FoundSet {
  std::string family;
  std::string name;                  // "Wan 2.2 TI2V-5B (fp16)": the head's set name and precision
  std::vector<FoundPart> parts;      // the diffusion model first, then one part per need met
  std::vector<std::string> missing;  // the needs no part meets: "the low-noise expert"
  // Why a set with every part cannot run: the family's refusal from open(), or its sketch's
  // unsupported line. Empty otherwise.
  std::string refusal;
  std::vector<models::LoraReport> loras;  // ready sets only: the LoRAs that fit it

  bool ready() const { return missing.empty() && refusal.empty(); }
  std::uint64_t bytes() const;
  // "Wan 2.2 TI2V-5B (fp16) — ready", "Wan 2.2 A14B I2V (fp8) — missing the low-noise expert",
  // "… — cannot run: <refusal>".
  std::string status() const;
};

struct FoundLora {
  std::filesystem::path path;
  std::uint64_t bytes = 0;
  std::vector<std::string> fits;  // the names of the ready sets it fits
};

struct LibraryScan {
  std::vector<FoundSet> sets;  // ready ones first, then by name
  std::vector<FoundLora> loras;
  std::vector<FoundPart> spare_parts;  // recognised parts that no set uses
  std::vector<std::filesystem::path>
      unrecognised;  // model files no family and no LoRA reader knows
  std::vector<std::pair<std::filesystem::path, std::string>> unreadable;  // with why
  std::vector<std::filesystem::path> pickles;                             // never opened
  std::size_t files_read = 0;                                             // headers read
};

// Scans `roots` (library::folders_to_scan of each: a ComfyUI install, the hub cache, any folder).
// A root that does not exist or cannot be listed goes to `unreadable`, as does a file whose header
// is broken; neither stops the scan. `cancelled`, when given, is asked between files: true stops
// the scan with Error(kCancelled).
LibraryScan scan_library(const std::vector<std::filesystem::path>& roots,
                         const std::function<bool()>& cancelled = {});

}  // namespace ferry::library
