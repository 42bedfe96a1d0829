#include "core/library/hub_api.h"

#include <algorithm>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/library/json_depth.h"

namespace ferry::library {
namespace {

using json = nlohmann::json;

[[noreturn]] void bad(std::string_view source, const std::string& what) {
  throw Error(ErrorCode::kIo,
              std::string(source) + ": the hub's answer is not a file listing (" + what + ")");
}

bool is_hex(const std::string& s, std::size_t length) {
  return s.size() == length && std::all_of(s.begin(), s.end(), [](char c) {
           return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
         });
}

std::string lower(std::string s) {
  for (char& c : s) c = c >= 'A' && c <= 'F' ? static_cast<char>(c + 32) : c;
  return s;
}

std::string encode_segments(std::string_view path) {
  std::string out;
  std::size_t start = 0;
  while (start <= path.size()) {
    const std::size_t slash = std::min(path.find('/', start), path.size());
    if (!out.empty() || start > 0) out += '/';
    out += percent_encode(path.substr(start, slash - start));
    start = slash + 1;
  }
  return out;
}

}  // namespace

std::vector<HubFile> parse_tree_listing(std::string_view text, std::string_view source) {
  if (text.size() > kMaxTreeAnswerBytes) bad(source, "larger than 8 MiB");
  // An array of objects with one object inside (lfs): anything deeper is refused.
  if (json_nesting_depth(text) > 3) bad(source, "nested too deeply");
  const json root = json::parse(text.begin(), text.end(), nullptr, false);
  if (root.is_discarded() || !root.is_array()) bad(source, "not a JSON array");
  if (root.size() > kMaxTreeEntries) bad(source, "too many entries");
  std::vector<HubFile> files;
  for (const json& entry : root) {
    if (!entry.is_object()) bad(source, "an entry is not an object");
    const auto type = entry.find("type");
    if (type == entry.end() || !type->is_string()) bad(source, "an entry has no type");
    if (type->get_ref<const std::string&>() != "file") continue;  // "directory"
    const auto path = entry.find("path");
    const auto size = entry.find("size");
    if (path == entry.end() || !path->is_string() || path->get_ref<const std::string&>().empty() ||
        path->get_ref<const std::string&>().size() > 4096) {
      bad(source, "a file has no path");
    }
    if (size == entry.end() || !size->is_number_unsigned()) bad(source, "a file has no size");
    HubFile f;
    f.path = path->get<std::string>();
    f.size = size->get<std::uint64_t>();
    const auto lfs = entry.find("lfs");
    if (lfs != entry.end() && !lfs->is_null()) {
      const auto oid = lfs->is_object() ? lfs->find("oid") : lfs->end();
      if (!lfs->is_object() || oid == lfs->end() || !oid->is_string() ||
          !is_hex(lower(oid->get<std::string>()), 64)) {
        bad(source, f.path.substr(0, 200) + " has no SHA-256 in its LFS metadata");
      }
      f.sha256 = lower(oid->get<std::string>());
      const auto lfs_size = lfs->find("size");
      if (lfs_size != lfs->end()) {
        if (!lfs_size->is_number_unsigned()) bad(source, "an LFS size is not a number");
        f.size = lfs_size->get<std::uint64_t>();
      }
    } else {
      const auto oid = entry.find("oid");
      if (oid == entry.end() || !oid->is_string() || !is_hex(lower(oid->get<std::string>()), 40)) {
        bad(source, f.path.substr(0, 200) + " has neither LFS metadata nor a git blob id");
      }
      f.git_oid = lower(oid->get<std::string>());
    }
    files.push_back(std::move(f));
  }
  return files;
}

std::string percent_encode(std::string_view text) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : text) {
    const bool plain = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
                       c == '-' || c == '.' || c == '_' || c == '~';
    if (plain) {
      out += static_cast<char>(c);
    } else {
      out += '%';
      out += kHex[c >> 4];
      out += kHex[c & 15];
    }
  }
  return out;
}

// Built by appending: GCC 12 reads one long chain of + as an out-of-bounds copy at -O3 (bug
// 105651, as in the top-level CMakeLists.txt).
std::string tree_url(std::string_view endpoint, std::string_view repo, std::string_view revision,
                     std::string_view folder) {
  std::string url(endpoint);
  url.append("/api/models/").append(encode_segments(repo));
  url.append("/tree/").append(percent_encode(revision));
  if (!folder.empty()) url.append("/").append(encode_segments(folder));
  return url;
}

std::string resolve_url(std::string_view endpoint, std::string_view repo, std::string_view revision,
                        std::string_view path) {
  std::string url(endpoint);
  url.append("/").append(encode_segments(repo));
  url.append("/resolve/").append(percent_encode(revision));
  url.append("/").append(encode_segments(path));
  return url;
}

}  // namespace ferry::library
