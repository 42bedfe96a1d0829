// Output files that appear under their name only when complete: written as "<name>.partial",
// flushed to disk, then renamed over the name. Abandoned (an error, a cancel) they are removed, so
// nothing half-written is ever left where a user or another program would take it as finished.
#pragma once

#include <cstddef>
#include <filesystem>
#include <span>

namespace ferry::io {

class PartialFile {
 public:
  explicit PartialFile(std::filesystem::path final_path);
  // Removes the partial file unless commit() succeeded.
  ~PartialFile();
  PartialFile(const PartialFile&) = delete;
  PartialFile& operator=(const PartialFile&) = delete;

  // Where to write: "<final>.partial".
  const std::filesystem::path& partial_path() const { return partial_; }
  const std::filesystem::path& final_path() const { return final_; }

  // Flushes the partial file to disk and renames it to the final name (replacing a file there).
  // Error(kIo) naming the file when either fails; the partial file is then removed.
  void commit();

 private:
  std::filesystem::path final_;
  std::filesystem::path partial_;
  bool committed_ = false;
};

// `bytes` → `path` through a PartialFile. Error(kIo) naming the file (a full disk included).
void write_file_atomically(const std::filesystem::path& path, std::span<const std::byte> bytes);

}  // namespace ferry::io
