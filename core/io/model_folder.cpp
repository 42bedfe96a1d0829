// Finding a model's files in a folder.
#include "core/io/model_folder.h"

#include <algorithm>
#include <set>

#include "core/io/detail/os_file.h"
#include "core/io/tensor_set.h"

namespace ferry::io {
namespace {

namespace fs = std::filesystem;

bool has_suffix(const std::string& text, const std::string& suffix) {
  return text.size() >= suffix.size() &&
         text.compare(text.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// `path` is `root` or below it (both canonical).
bool is_inside(const fs::path& path, const fs::path& root) {
  auto p = path.begin();
  for (auto r = root.begin(); r != root.end(); ++r, ++p) {
    if (r->empty()) continue;  // the trailing "" of "dir/"
    if (p == path.end() || *p != *r) return false;
  }
  return true;
}

}  // namespace

bool is_pickle_file(const fs::path& path) {
  std::string ext = detail::display(path.extension());
  std::transform(ext.begin(), ext.end(), ext.begin(),
                 [](char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c + 32) : c; });
  return ext == ".pth" || ext == ".pt" || ext == ".ckpt" || ext == ".pkl" || ext == ".bin";
}

Error pickle_refusal(const fs::path& path) {
  return Error(ErrorCode::kBadModelFile,
               detail::display(path) +
                   " is a PyTorch pickle file, which can run code when it is loaded: Ferry never "
                   "loads pickle. Use the model's .safetensors (or GGUF) file instead.");
}

fs::path scan_root(const fs::path& folder) {
  std::error_code ec;
  fs::path root = fs::weakly_canonical(folder, ec);
  if (ec) root = fs::absolute(folder, ec);
  // <cache>/models--org--name/snapshots/<revision>[/sub/folder]: the links point into blobs/.
  for (fs::path up = root; up.has_relative_path(); up = up.parent_path()) {
    const fs::path parent = up.parent_path();
    if (up.filename() == "snapshots" &&
        detail::display(parent.filename()).rfind("models--", 0) == 0) {
      return parent;
    }
    if (parent == up) break;
  }
  return root;
}

std::vector<fs::path> find_safetensors_sets(const fs::path& folder,
                                            std::vector<fs::path>* pickles) {
  const fs::path root = scan_root(folder);
  std::vector<fs::path> indexes;
  std::vector<fs::path> files;
  std::set<fs::path> seen_files;    // canonical: a file linked twice is listed once
  std::set<fs::path> entered_dirs;  // canonical: a folder link back into the scan is a cycle
  std::error_code ec;
  entered_dirs.insert(fs::weakly_canonical(folder, ec));
  for (auto it =
           fs::recursive_directory_iterator(folder,
                                            fs::directory_options::skip_permission_denied |
                                                fs::directory_options::follow_directory_symlink,
                                            ec);
       it != fs::recursive_directory_iterator(); it.increment(ec)) {
    if (ec) break;
    const std::string name = detail::display(it->path().filename());
    std::error_code link_ec;
    const bool is_link = it->is_symlink(link_ec);
    // Where the entry really is; a broken link or one leading outside the root is skipped.
    fs::path real = fs::canonical(it->path(), link_ec);
    const bool escapes = link_ec || (is_link && !is_inside(real, root));
    if (it->is_directory(link_ec)) {
      const bool hidden = !name.empty() && name[0] == '.';
      if (hidden || escapes || !entered_dirs.insert(real).second) it.disable_recursion_pending();
      continue;
    }
    if (escapes || !it->is_regular_file(link_ec)) continue;
    if (!seen_files.insert(real).second) continue;
    if (has_suffix(name, ".safetensors.index.json"))
      indexes.push_back(it->path());
    else if (has_suffix(name, ".safetensors") || has_suffix(name, ".gguf"))
      files.push_back(it->path());
    else if (pickles != nullptr && is_pickle_file(it->path()))
      pickles->push_back(it->path());
  }
  if (ec) {
    throw Error(ErrorCode::kIo, "cannot list " + detail::display(folder) + ": " + ec.message());
  }
  std::sort(indexes.begin(), indexes.end());
  std::sort(files.begin(), files.end());
  if (pickles != nullptr) std::sort(pickles->begin(), pickles->end());
  std::vector<fs::path> sets = indexes;
  std::set<fs::path> claimed;
  for (const fs::path& index : indexes) {
    const io::TensorSet set = io::TensorSet::open(index);
    for (const io::TensorFile& shard : set.files()) {
      // The index names plain file names, but one of them may be a link out of the root.
      std::error_code shard_ec;
      const fs::path real = fs::canonical(shard.path(), shard_ec);
      if (shard_ec || !is_inside(real, root)) {
        throw Error(ErrorCode::kBadModelFile,
                    "the shard " + detail::display(shard.path()) + " of " + detail::display(index) +
                        " links outside " + detail::display(root) +
                        ": Ferry follows links only inside the model folder");
      }
      claimed.insert(shard.path());
    }
  }
  for (const fs::path& file : files) {
    if (claimed.count(file) == 0) sets.push_back(file);
  }
  return sets;
}

}  // namespace ferry::io
