#include "core/library/roots.h"

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <string>

#include "core/error.h"
#include "core/io/detail/os_file.h"
#include "core/io/safe_path.h"
#include "core/io/user_data.h"

namespace ferry::library {
namespace {

namespace fs = std::filesystem;

const char* env(const char* name) {
  const char* value = std::getenv(name);
  return value != nullptr && *value != '\0' ? value : nullptr;
}

bool is_dir(const fs::path& path) {
  std::error_code ec;
  return fs::is_directory(path, ec);
}

// ComfyUI's folders for the parts Ferry reads (folder_paths.py); unet and clip are the older
// names of diffusion_models and text_encoders, vae_approx holds the TAEHV preview decoders.
constexpr const char* kComfyFolders[] = {"diffusion_models", "unet", "text_encoders", "clip", "vae",
                                         "vae_approx",       "loras"};

bool has_comfy_folders(const fs::path& models) {
  int found = 0;
  for (const char* name : kComfyFolders) found += is_dir(models / name) ? 1 : 0;
  // Two, so that a plain folder with a vae/ inside (a diffusers pipeline) is not taken for one.
  return found >= 2;
}

bool is_repo_folder(const fs::path& folder) {
  return io::detail::display(folder.filename()).rfind("models--", 0) == 0 &&
         is_dir(folder / "snapshots");
}

// `folder` really is in `parent`, not a link (or a Windows junction) to somewhere else. A hub
// repository's snapshots/ and its snapshot folders are real folders (their files link into
// blobs/): a linked one would make its target the root of the scan, wherever that is.
bool really_in(const fs::path& folder, const fs::path& parent) {
  std::error_code ec;
  const fs::path real = fs::canonical(folder, ec);
  if (ec) return false;
  const fs::path real_parent = fs::canonical(parent, ec);
  return !ec && real.parent_path() == real_parent;
}

// The snapshot refs/main names, when it names one that is there.
fs::path main_snapshot(const fs::path& repo) {
  std::ifstream in(repo / "refs" / "main", std::ios::binary);
  if (!in) return {};
  std::string revision(64, '\0');
  in.read(revision.data(), static_cast<std::streamsize>(revision.size()));
  revision.resize(static_cast<std::size_t>(in.gcount()));
  while (!revision.empty() && (revision.back() == '\n' || revision.back() == '\r')) {
    revision.pop_back();
  }
  try {
    const fs::path snapshot = repo / "snapshots" / io::safe_file_name(revision);
    return is_dir(snapshot) && really_in(snapshot, repo / "snapshots") ? snapshot : fs::path();
  } catch (const Error&) {
    return {};  // a ref that is no plain revision name is never followed
  }
}

void add_repo_snapshots(const fs::path& repo, std::vector<fs::path>& out) {
  if (!really_in(repo / "snapshots", repo)) return;
  if (fs::path main = main_snapshot(repo); !main.empty()) {
    out.push_back(std::move(main));
    return;
  }
  std::error_code ec;
  std::vector<fs::path> snapshots;
  for (const auto& entry : fs::directory_iterator(repo / "snapshots", ec)) {
    std::error_code dir_ec;
    if (entry.is_directory(dir_ec) && !entry.is_symlink(dir_ec)) snapshots.push_back(entry.path());
  }
  std::sort(snapshots.begin(), snapshots.end());
  out.insert(out.end(), snapshots.begin(), snapshots.end());
}

}  // namespace

fs::path ferry_models_dir() {
  return io::user_data_dir() / "models";
}

fs::path user_catalogue_dir() {
  return io::user_data_dir() / "catalogues";
}

fs::path hf_hub_cache_dir() {
  if (const char* cache = env("HF_HUB_CACHE")) return io::detail::path_from_utf8(cache);
  if (const char* home = env("HF_HOME")) return io::detail::path_from_utf8(home) / "hub";
  if (const char* xdg = env("XDG_CACHE_HOME")) {
    return io::detail::path_from_utf8(xdg) / "huggingface" / "hub";
  }
#ifdef _WIN32
  const char* user_home = env("USERPROFILE");
#else
  const char* user_home = env("HOME");
#endif
  if (user_home == nullptr) return {};
  return io::detail::path_from_utf8(user_home) / ".cache" / "huggingface" / "hub";
}

std::vector<fs::path> comfyui_model_folders(const fs::path& folder) {
  fs::path models;
  if (has_comfy_folders(folder / "models")) {
    models = folder / "models";
  } else if (has_comfy_folders(folder)) {
    models = folder;
  } else {
    return {};
  }
  std::vector<fs::path> out;
  for (const char* name : kComfyFolders) {
    if (is_dir(models / name)) out.push_back(models / name);
  }
  return out;
}

std::vector<fs::path> hf_snapshot_folders(const fs::path& folder) {
  std::vector<fs::path> out;
  if (is_repo_folder(folder)) {
    add_repo_snapshots(folder, out);
    return out;
  }
  std::error_code ec;
  std::vector<fs::path> repos;
  for (const auto& entry : fs::directory_iterator(folder, ec)) {
    std::error_code dir_ec;
    if (entry.is_directory(dir_ec) && !entry.is_symlink(dir_ec) && is_repo_folder(entry.path())) {
      repos.push_back(entry.path());
    }
  }
  std::sort(repos.begin(), repos.end());
  for (const fs::path& repo : repos) add_repo_snapshots(repo, out);
  return out;
}

std::vector<fs::path> folders_to_scan(const fs::path& root) {
  if (std::vector<fs::path> comfy = comfyui_model_folders(root); !comfy.empty()) return comfy;
  if (std::vector<fs::path> snapshots = hf_snapshot_folders(root); !snapshots.empty()) {
    return snapshots;
  }
  return {root};
}

}  // namespace ferry::library
