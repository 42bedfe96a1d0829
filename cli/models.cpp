// `ferry-cli models list`: what the user already has (core/library/scan.h) and what the catalogue
// offers; `models get` and `models clean` are in models_get.cpp, built where Qt Network is (the
// mingw lane's ferry-cli scans and lists, but does not download).
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "cli/args.h"
#include "cli/commands.h"
#include "core/error.h"
#include "core/io/detail/os_file.h"
#include "core/library/catalogue.h"
#include "core/library/roots.h"
#include "core/library/scan.h"

namespace ferry::cli {
namespace {

namespace fs = std::filesystem;
using io::detail::display;

constexpr const char* kModelsUsage =
    "usage: ferry-cli models list [--folder DIR]... [--no-hf-cache]\n"
    "       ferry-cli models get NAME [--precision P] [--to DIR] [--accept-licence]\n"
    "       ferry-cli models clean [--to DIR]\n"
    "       ferry-cli models login < token.txt | models logout   (Windows' credential store)\n";

// The roots a listing scans: Ferry's models folder, the Hugging Face cache, and each --folder (a
// ComfyUI install is recognised from its root or its models/ folder).
std::vector<fs::path> list_roots(const Args& args) {
  std::vector<fs::path> roots;
  std::error_code ec;
  try {
    if (fs::is_directory(library::ferry_models_dir(), ec))
      roots.push_back(library::ferry_models_dir());
  } catch (const Error&) {
    // No data folder on this machine: only the folders given.
  }
  const fs::path hub = library::hf_hub_cache_dir();
  if (!args.flag("no-hf-cache") && !hub.empty() && fs::is_directory(hub, ec)) roots.push_back(hub);
  for (const std::string& folder : args.values("folder")) {
    roots.push_back(io::detail::path_from_utf8(folder));
  }
  return roots;
}

void print_sets(const library::LibraryScan& scan) {
  std::printf("model sets:\n");
  if (scan.sets.empty()) std::printf("  none found\n");
  for (const library::FoundSet& set : scan.sets) {
    std::printf("  %s\n", set.status().c_str());
    for (const library::FoundPart& part : set.parts) {
      std::printf("      %-16s %s (%s, %s)\n", part.sketch.role.c_str(), display(part.path).c_str(),
                  part.precision.c_str(), human_bytes(part.bytes).c_str());
    }
    for (const models::LoraReport& lora : set.loras) {
      std::printf("      LoRA             %s (%zu of %zu modules)\n", display(lora.path).c_str(),
                  lora.matched, lora.modules);
    }
  }
}

void print_loose_files(const library::LibraryScan& scan) {
  if (!scan.loras.empty()) std::printf("LoRAs:\n");
  for (const library::FoundLora& lora : scan.loras) {
    std::string fits;
    for (const std::string& name : lora.fits) fits += (fits.empty() ? "" : ", ") + name;
    std::printf("  %s (%s): %s\n", display(lora.path).c_str(), human_bytes(lora.bytes).c_str(),
                fits.empty() ? "fits none of the ready sets" : ("fits " + fits).c_str());
  }
  if (!scan.spare_parts.empty()) std::printf("parts no set uses:\n");
  for (const library::FoundPart& part : scan.spare_parts) {
    std::printf("  %s: %s (%s)\n", part.sketch.description.c_str(), display(part.path).c_str(),
                part.precision.c_str());
  }
  for (const auto& [path, why] : scan.unreadable) {
    std::printf("unreadable: %s: %s\n", display(path).c_str(), why.c_str());
  }
  if (!scan.pickles.empty()) {
    std::printf("%zu pickle file(s) skipped, never loaded (e.g. %s)\n", scan.pickles.size(),
                display(scan.pickles.front()).c_str());
  }
  if (!scan.unrecognised.empty()) {
    std::printf("%zu model file(s) of no family Ferry runs\n", scan.unrecognised.size());
  }
}

void print_catalogue(const library::Catalogue& catalogue) {
  std::printf("to download (ferry-cli models get NAME [--precision P]):\n");
  for (const library::CatalogueEntry& e : catalogue.entries) {
    std::string variants;
    for (const library::CatalogueVariant& v : e.variants) {
      variants += (variants.empty() ? "" : ", ") + v.precision + " ~" + human_bytes(v.size_hint());
    }
    std::printf("  %-28s %s: %s [%s%s]\n", e.name.c_str(), e.title.c_str(), variants.c_str(),
                e.licence.id.c_str(), e.licence.confirm ? ", licence to accept" : "");
  }
}

int run_models_list(const std::vector<std::string>& rest) {
  const Args args(rest, {"folder"}, {"no-hf-cache"});
  if (!args.positional().empty()) throw Error(ErrorCode::kBadArgument, kModelsUsage);
  const std::vector<fs::path> roots = list_roots(args);
  const auto start = std::chrono::steady_clock::now();
  const library::LibraryScan scan = library::scan_library(roots);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("scanned %zu folder(s), %zu model file(s) in %.2f s:", roots.size(), scan.files_read,
              seconds);
  for (const fs::path& root : roots) std::printf(" %s", display(root).c_str());
  std::printf("\n");
  print_sets(scan);
  print_loose_files(scan);
  std::vector<std::string> problems;
  const library::Catalogue catalogue = [&] {
    try {
      return library::load_catalogue(library::user_catalogue_dir(), &problems);
    } catch (const Error&) {
      return library::builtin_catalogue();  // no data folder
    }
  }();
  for (const std::string& p : problems) std::printf("catalogue skipped: %s\n", p.c_str());
  print_catalogue(catalogue);
  return 0;
}

}  // namespace

int run_models(const std::vector<std::string>& args) {
  if (args.empty()) throw Error(ErrorCode::kBadArgument, kModelsUsage);
  const std::vector<std::string> rest(args.begin() + 1, args.end());
  if (args[0] == "list") return run_models_list(rest);
  if (args[0] == "get" || args[0] == "clean" || args[0] == "login" || args[0] == "logout") {
#ifdef FERRY_HAVE_NET
    if (args[0] == "get") return run_models_get(rest);
    if (args[0] == "login") return run_models_login(rest);
    if (args[0] == "logout") return run_models_logout(rest);
    return run_models_clean(rest);
#else
    throw Error(ErrorCode::kUnsupported,
                "this ferry-cli was built without Qt Network, so it cannot download: fetch the "
                "files listed by `ferry-cli models list` by hand, or use the Ferry app");
#endif
  }
  throw Error(ErrorCode::kBadArgument, kModelsUsage);
}

}  // namespace ferry::cli
