#include "core/library/scan.h"

#include <algorithm>
#include <map>
#include <set>

#include "core/error.h"
#include "core/io/detail/os_file.h"
#include "core/io/model_folder.h"
#include "core/io/tensor_set.h"
#include "core/library/roots.h"
#include "core/models/lora/lora_file.h"

namespace ferry::library {
namespace {

namespace fs = std::filesystem;
using io::detail::display;

// The dtype of most of a set's bytes, as model pages name it.
std::string precision_of(const io::TensorSet& set) {
  std::map<DType, std::uint64_t> bytes;
  for (const io::TensorSet::Entry& e : set.entries()) bytes[e.tensor->dtype] += e.tensor->bytes;
  if (bytes.empty()) return "?";
  const auto most = std::max_element(
      bytes.begin(), bytes.end(), [](const auto& a, const auto& b) { return a.second < b.second; });
  switch (most->first) {
    case DType::kF32:
      return "fp32";
    case DType::kF16:
      return "fp16";
    case DType::kBF16:
      return "bf16";
    case DType::kF8E4M3:
      return "fp8";
    case DType::kF8E5M2:
      return "fp8 e5m2";
    case DType::kBnb4:
      return "nf4";
    default:
      return std::string(dtype_name(most->first));  // GGUF's own names: Q8_0, Q4_K
  }
}

// Components `a` and `b` share from the start: how close two parts sit.
std::size_t shared_depth(const fs::path& a, const fs::path& b) {
  std::size_t n = 0;
  for (auto i = a.begin(), j = b.begin(); i != a.end() && j != b.end() && *i == *j; ++i, ++j) ++n;
  return n;
}

struct Collected {
  std::vector<FoundPart> parts;
  std::vector<fs::path> lora_files;
};

void throw_if(const std::function<bool()>& cancelled) {
  if (cancelled && cancelled()) throw Error(ErrorCode::kCancelled, "the scan was cancelled");
}

// A file io cannot open as a whole, recognised from its header by a family that reads it so
// (family.h: sketch_unopenable_part). False when none does.
bool sketch_unopenable(const fs::path& path, Collected& out) {
  for (const models::ModelFamily* family : models::model_families()) {
    if (std::optional<models::PartSketch> sketch = family->sketch_unopenable_part(path)) {
      std::error_code ec;
      const std::uint64_t bytes = fs::file_size(path, ec);
      out.parts.push_back(
          {path, std::string(family->name()), std::move(*sketch), "?", ec ? 0 : bytes});
      return true;
    }
  }
  return false;
}

// Every model file under the roots, each once (a file reached through two roots or two links is
// read once), recognised or set aside.
Collected collect(const std::vector<fs::path>& roots, LibraryScan& scan,
                  const std::function<bool()>& cancelled) {
  Collected out;
  std::set<fs::path> seen;
  for (const fs::path& root : roots) {
    std::error_code ec;
    if (!fs::is_directory(root, ec)) {
      scan.unreadable.emplace_back(root, "not a folder that can be read");
      continue;
    }
    for (const fs::path& folder : folders_to_scan(root)) {
      std::vector<fs::path> sets;
      try {
        sets = io::find_safetensors_sets(folder, &scan.pickles);
      } catch (const Error& e) {
        scan.unreadable.emplace_back(folder, e.what());
        continue;
      }
      for (const fs::path& path : sets) {
        throw_if(cancelled);
        std::error_code canonical_ec;
        const fs::path real = fs::weakly_canonical(path, canonical_ec);
        if (!seen.insert(canonical_ec ? path : real).second) continue;
        io::TensorSet set;
        try {
          set = io::TensorSet::open(path);
        } catch (const Error& e) {
          if (e.code() != ErrorCode::kUnsupported || !sketch_unopenable(path, out)) {
            scan.unreadable.emplace_back(path, e.what());
          }
          continue;
        }
        ++scan.files_read;
        bool recognised = false;
        for (const models::ModelFamily* family : models::model_families()) {
          if (std::optional<models::PartSketch> sketch = family->sketch_part(set)) {
            out.parts.push_back({path, std::string(family->name()), std::move(*sketch),
                                 precision_of(set), set.tensor_bytes()});
            recognised = true;
            break;
          }
        }
        if (!recognised) out.lora_files.push_back(path);
      }
    }
  }
  std::sort(scan.pickles.begin(), scan.pickles.end());
  scan.pickles.erase(std::unique(scan.pickles.begin(), scan.pickles.end()), scan.pickles.end());
  return out;
}

// The part that meets `need` for `head`: of the family's parts that provide it, the one sitting
// nearest the head (the same folder, then the same parent...), then the first by path.
const FoundPart* nearest_provider(const std::vector<FoundPart>& parts, const FoundPart& head,
                                  const models::PartNeed& need) {
  const FoundPart* best = nullptr;
  std::size_t best_depth = 0;
  for (const FoundPart& part : parts) {
    if (&part == &head || part.family != head.family) continue;
    const auto& provides = part.sketch.provides;
    if (std::find(provides.begin(), provides.end(), need.key) == provides.end()) continue;
    const std::size_t depth = shared_depth(part.path.parent_path(), head.path.parent_path());
    if (best == nullptr || depth > best_depth) {
      best = &part;
      best_depth = depth;
    }
  }
  return best;
}

FoundSet propose_set(const std::vector<FoundPart>& parts, const FoundPart& head) {
  FoundSet set;
  set.family = head.family;
  set.name = head.sketch.set_name + " (" + head.precision + ")";
  set.parts.push_back(head);
  for (const models::PartNeed& need : head.sketch.needs) {
    if (const FoundPart* part = nearest_provider(parts, head, need)) {
      set.parts.push_back(*part);
    } else {
      set.missing.push_back(need.description);
    }
  }
  set.refusal = head.sketch.unsupported;
  return set;
}

std::vector<fs::path> part_paths(const FoundSet& set) {
  std::vector<fs::path> paths;
  for (const FoundPart& part : set.parts) paths.push_back(part.path);
  return paths;
}

// Two heads of one set (A14B's experts each head the set of both) propose the same files: kept
// once, the first by path.
void drop_duplicate_sets(std::vector<FoundSet>& sets) {
  std::set<std::vector<fs::path>> seen;
  std::vector<FoundSet> kept;
  for (FoundSet& set : sets) {
    std::vector<fs::path> key = part_paths(set);
    std::sort(key.begin(), key.end());
    if (seen.insert(std::move(key)).second) kept.push_back(std::move(set));
  }
  sets = std::move(kept);
}

// A complete set opened by its family, as a generation would; its refusal said when it fails. The
// LoRAs that fit it are found with the opened parts.
void confirm_set(FoundSet& set, const std::vector<fs::path>& lora_files,
                 std::vector<FoundLora>& loras) {
  if (!set.ready()) return;
  const models::ModelFamily* family = models::find_family(set.family);
  std::unique_ptr<models::ModelParts> opened;
  try {
    opened = family->open(part_paths(set));
  } catch (const Error& e) {
    set.refusal = e.what();
    return;
  }
  for (std::size_t i = 0; i < lora_files.size(); ++i) {
    try {
      models::LoraReport report = opened->check_lora(lora_files[i]);
      if (report.matched == 0) continue;
      loras[i].fits.push_back(set.name);
      set.loras.push_back(std::move(report));
    } catch (const Error&) {
      // Not a LoRA of this model: it is listed with the sets it fits, not with this one.
    }
  }
}

// The files no family recognised that are LoRAs (their header holds LoRA terms).
std::vector<fs::path> keep_loras(const std::vector<fs::path>& files, LibraryScan& scan) {
  std::vector<fs::path> loras;
  for (const fs::path& path : files) {
    try {
      const models::lora::LoraFile lora = models::lora::open_lora(path);
      loras.push_back(path);
      std::error_code ec;
      const std::uint64_t bytes = fs::file_size(path, ec);
      scan.loras.push_back({path, ec ? 0 : bytes, {}});
    } catch (const Error&) {
      scan.unrecognised.push_back(path);
    }
  }
  return loras;
}

}  // namespace

std::uint64_t FoundSet::bytes() const {
  std::uint64_t total = 0;
  for (const FoundPart& part : parts) total += part.bytes;
  return total;
}

std::string FoundSet::status() const {
  if (!refusal.empty()) return name + " — cannot run: " + refusal;
  if (missing.empty()) return name + " — ready";
  std::string line = name + " — missing ";
  for (std::size_t i = 0; i < missing.size(); ++i) {
    if (i > 0) line += i + 1 == missing.size() ? " and " : ", ";
    line += missing[i];
  }
  return line;
}

LibraryScan scan_library(const std::vector<fs::path>& roots,
                         const std::function<bool()>& cancelled) {
  LibraryScan scan;
  Collected collected = collect(roots, scan, cancelled);
  const std::vector<fs::path> lora_files = keep_loras(collected.lora_files, scan);

  for (const FoundPart& part : collected.parts) {
    if (part.sketch.heads_a_set()) scan.sets.push_back(propose_set(collected.parts, part));
  }
  drop_duplicate_sets(scan.sets);
  for (FoundSet& set : scan.sets) {
    throw_if(cancelled);
    confirm_set(set, lora_files, scan.loras);
  }
  std::sort(scan.sets.begin(), scan.sets.end(), [](const FoundSet& a, const FoundSet& b) {
    if (a.ready() != b.ready()) return a.ready();
    if (a.name != b.name) return a.name < b.name;
    return a.parts.front().path < b.parts.front().path;
  });

  std::set<fs::path> used;
  for (const FoundSet& set : scan.sets) {
    for (const FoundPart& part : set.parts) used.insert(part.path);
  }
  for (FoundPart& part : collected.parts) {
    if (used.count(part.path) == 0) scan.spare_parts.push_back(std::move(part));
  }
  return scan;
}

}  // namespace ferry::library
