// Downloading a catalogue variant's files from the Hugging Face hub (issue 22), with Qt Network:
// already deployed with Qt by the MSI, TLS through Windows' schannel, the system proxy, and no new
// dependency. The engine (core/library) knows nothing of it.
//
//   HubDownloader d(HubAccess::from_environment());
//   DownloadPlan plan = d.plan(*variant, models_folder);   sizes and hashes read from the hub
//   d.check_space(plan);                                    Error(kIo) naming what is missing
//   d.download(plan, on_progress);                          blocks; cancel() from any thread
//
// Each file is written to "<to>.partial" beside a small note ("<to>.partial.json": the hash it
// must have and the server's ETag), hashed while it arrives, verified (the LFS SHA-256, or the git
// blob id of a small file) and only then renamed to its name. An interrupted file — a dropped
// connection, a killed process, a cancel — resumes from its partial with an HTTP Range request
// (re-hashing the partial first); a partial whose note disagrees with the hub, or a server that
// ignores the range, restarts from zero. Dropped connections, 5xx and 429 answers are retried a
// bounded number of times with a doubling delay; 401, 403 and 404 are said at once. A wrong hash
// removes the partial. Several files download at once.
#pragma once

#include <QString>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "core/library/catalogue.h"
#include "net/hub_access.h"

namespace ferry::net {

struct DownloadOptions {
  int parallel_files = 3;
  int max_attempts = 5;                               // per file, the first included
  std::chrono::milliseconds first_retry_delay{1000};  // doubled after each retry
  std::chrono::milliseconds stall_timeout{60000};     // no byte for this long: a dropped connection
  std::uint64_t free_space_margin = 256ull << 20;     // kept free beyond the download
  // Test hooks. free_space: the bytes available in a folder (default: the file system's).
  // write_fails: called before each write with the bytes this run has written so far; true makes
  // the write fail as on a full disk.
  std::function<std::uint64_t(const std::filesystem::path&)> free_space;
  std::function<bool(std::uint64_t written)> write_fails;
};

struct PlannedFile {
  library::CatalogueFile source;
  std::uint64_t size = 0;
  std::string sha256;   // LFS files
  std::string git_oid;  // files kept in git
  std::filesystem::path final_path, partial_path;
  std::uint64_t present = 0;  // bytes already there: a partial to resume, or the whole file
  bool complete = false;      // the final file is there with the hub's size (verified at download)
};

struct DownloadPlan {
  std::filesystem::path folder;
  std::vector<PlannedFile> files;
  std::uint64_t total_bytes() const;
  std::uint64_t bytes_to_fetch() const;
};

struct FileProgress {
  std::uint64_t done = 0, total = 0;
  bool finished = false;
};

struct DownloadProgress {
  std::vector<FileProgress> files;  // the plan's order
  std::uint64_t done = 0, total = 0;
  double bytes_per_second = 0;  // over the last few seconds
  double eta_seconds = -1;      // -1: not known yet
};

class HubDownloader {
 public:
  explicit HubDownloader(HubAccess hub, DownloadOptions options = {});

  // The files of `variant` under `folder`, with their sizes and hashes read from the hub's tree API
  // and what is already there. Error(kIo) naming the repository and what the hub answered (a file
  // the hub does not have, access refused, no connection).
  DownloadPlan plan(const library::CatalogueVariant& variant, const std::filesystem::path& folder);
  // Error(kIo) when the folder's disk lacks the space for what is left to fetch (plus the margin),
  // saying both figures.
  void check_space(const DownloadPlan& plan) const;
  // Fetches every file not complete, `progress` called on this thread (at most every 100 ms, and
  // as each file finishes). Error(kCancelled) after cancel(), leaving only resumable partials;
  // Error(kBadModelFile) for a file whose hash is wrong (its partial removed); Error(kIo) for the
  // rest (each message names the file). Other files in flight stop with it, resumable.
  void download(const DownloadPlan& plan,
                const std::function<void(const DownloadProgress&)>& progress);
  // Any thread.
  void cancel() { cancelled_.store(true); }

 private:
  HubAccess hub_;
  DownloadOptions options_;
  std::atomic<bool> cancelled_{false};
};

// Removes the plan's partial files and their notes; returns how many partial files it removed.
int remove_partials(const DownloadPlan& plan);
// The same for every "*.partial" with its note under `folder` (what `models clean` does).
int remove_partials(const std::filesystem::path& folder);

// "1.23 GiB", "512 KiB": the figures of messages and progress lines.
std::string human_bytes(std::uint64_t bytes);

}  // namespace ferry::net
