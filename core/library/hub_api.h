// The Hugging Face hub's HTTP API as the downloader uses it, without the transport (net/ has Qt
// Network): the addresses it asks, and the reading of its answers, which come from a server and
// are untrusted (the hub_tree fuzzer reads them).
//
//   GET {endpoint}/api/models/{repo}/tree/{revision}/{folder}   the files of a folder: size, and
//       for files stored with Git LFS (the weights) the SHA-256 of the content ("lfs": {"oid"});
//       small files kept in git carry their git blob id ("oid": SHA-1 of "blob <size>\0" + bytes)
//   GET {endpoint}/{repo}/resolve/{revision}/{path}             the file, through redirects to the
//       hub's storage, with Range and ETag
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace ferry::library {

// Bounds on an answer (a real folder listing is a few KiB; the hub pages at 1000 entries).
inline constexpr std::size_t kMaxTreeAnswerBytes = 8u << 20;
inline constexpr std::size_t kMaxTreeEntries = 10000;

struct HubFile {
  std::string path;  // in the repository, as the hub writes it
  std::uint64_t size = 0;
  std::string sha256;   // lowercase hex, for LFS files; empty otherwise
  std::string git_oid;  // lowercase hex SHA-1 of the git blob, for files kept in git
};

// The files of one tree answer (folders are skipped). Throws Error(kIo) naming `source` when it is
// not a listing: not a JSON array, an entry without a path or size, a hash that is not hex of the
// right length.
std::vector<HubFile> parse_tree_listing(std::string_view json, std::string_view source);

// `text` with every byte other than A-Z a-z 0-9 - . _ ~ written %XX (a path segment, a revision
// such as refs/pr/1 as one segment).
std::string percent_encode(std::string_view text);

// The addresses above. `endpoint` has no trailing '/'; `repo` is a catalogue's owner/name;
// `folder` and `path` are '/'-separated and encoded segment by segment.
std::string tree_url(std::string_view endpoint, std::string_view repo, std::string_view revision,
                     std::string_view folder);
std::string resolve_url(std::string_view endpoint, std::string_view repo, std::string_view revision,
                        std::string_view path);

}  // namespace ferry::library
