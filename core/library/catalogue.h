// The model catalogue (issue 22): the model sets Ferry can download, each with the hub files it
// needs by precision, where they go in the models folder, size hints and its licence. Built-in
// catalogues are resources/catalogue/*.json, compiled in (the CLI of the mingw lane has no Qt
// resource system, and a catalogue must never go missing); users add their own as
// <user data>/catalogues/*.json (an entry of the same name replaces the built-in one, so a user
// can pin a revision or point at a mirror repository).
//
// Everything in a catalogue is untrusted text (a user may paste one from anywhere): sizes and
// nesting are bounded, every file path passes io::safe_relative_path (nothing is written outside
// the target folder), repositories and revisions are plain names, and a pickle file
// (.bin/.pt/.pth/.ckpt/.pkl) is refused whatever the catalogue says. Sizes are hints only: the
// downloader reads each file's size and SHA-256 from the hub at download time.
//
//   {"ferry_catalogue": 1,
//    "models": [{"name": "wan2.2-ti2v-5b", "title": "Wan 2.2 TI2V-5B", "family": "wan",
//                "description": "...",
//                "licence": {"id": "apache-2.0", "url": "https://...", "confirm": false},
//                "variants": [{"precision": "fp16", "files": [
//                   {"repo": "org/name", "revision": "main", "path": "in/the/repo.safetensors",
//                    "to": "diffusion_models/repo.safetensors", "size_hint": 10000000000}]}]}]}
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

namespace ferry::library {

// Bounds on a catalogue (real ones are a few KiB).
inline constexpr std::size_t kMaxCatalogueBytes = 4u << 20;
inline constexpr int kMaxCatalogueDepth = 12;

struct CatalogueFile {
  std::string repo;      // "Comfy-Org/Wan_2.2_ComfyUI_Repackaged"
  std::string revision;  // "main", a tag or a commit
  std::string path;      // in the repository: "split_files/vae/wan2.2_vae.safetensors"
  std::filesystem::path
      to;  // in the models folder (safe_relative_path): "vae/wan2.2_vae.safetensors"
  std::uint64_t size_hint = 0;  // bytes; 0 when the catalogue gives none
};

struct CatalogueVariant {
  std::string precision;  // "fp16", "fp8", "Q8_0"
  std::vector<CatalogueFile> files;
  std::uint64_t size_hint() const;
};

struct Licence {
  std::string id;   // "apache-2.0"
  std::string url;  // https://
  // The licence notice must be shown and confirmed before the download starts (MiniMax-H3).
  bool confirm = false;
  std::string notice;  // what is shown; required when confirm is set
};

struct CatalogueEntry {
  std::string name;    // what `ferry-cli models get NAME` takes: [a-z0-9._-], at most 64
  std::string title;   // "Wan 2.2 TI2V-5B"
  std::string family;  // the family folder that runs it ("wan"); "lora" for a LoRA
  std::string description;
  Licence licence;
  std::vector<CatalogueVariant> variants;  // the first is the default
  std::string source;  // the catalogue it came from ("built-in wan.json", a user file's path)

  // nullptr when it has no such precision; the first variant for an empty one.
  const CatalogueVariant* variant(std::string_view precision) const;
};

struct Catalogue {
  std::vector<CatalogueEntry> entries;
  const CatalogueEntry* find(std::string_view name) const;
};

// Parses one catalogue. Throws Error(kBadArgument) naming `source` and what is wrong (the field
// and the entry) for anything outside the rules above.
Catalogue parse_catalogue(std::string_view json, std::string_view source);

// `added` merged into `base`: an entry of the same name replaces base's.
void merge_catalogue(Catalogue& base, Catalogue added);

// The built-in catalogues (resources/catalogue/*.json, compiled in).
Catalogue builtin_catalogue();

// The built-in catalogues, then every <user_folder>/*.json in name order. A user file that fails
// to parse is skipped with its message in `problems` (one broken file never hides the others).
Catalogue load_catalogue(const std::filesystem::path& user_folder,
                         std::vector<std::string>* problems);

}  // namespace ferry::library
