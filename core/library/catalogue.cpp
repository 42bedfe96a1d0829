#include "core/library/catalogue.h"

#include <algorithm>
#include <nlohmann/json.hpp>
#include <set>

#include "core/error.h"
#include "core/io/detail/os_file.h"
#include "core/io/model_folder.h"
#include "core/io/safe_path.h"
#include "core/library/json_depth.h"

namespace ferry::library {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

constexpr std::size_t kMaxTextBytes = 4096;  // a title, a description, a notice
constexpr std::size_t kMaxEntries = 1000;

// Where a field sits, for messages: "wan.json: models[2] (wan2.2-ti2v-5b): variants[0]: ...".
class Where {
 public:
  explicit Where(std::string text) : text_(std::move(text)) {}
  Where operator/(const std::string& part) const { return Where(text_ + ": " + part); }
  [[noreturn]] void fail(const std::string& what) const {
    throw Error(ErrorCode::kBadArgument, text_ + ": " + what);
  }

 private:
  std::string text_;
};

void refuse_unknown_keys(const json& object, std::initializer_list<const char*> known,
                         const Where& where) {
  for (auto it = object.begin(); it != object.end(); ++it) {
    if (std::none_of(known.begin(), known.end(), [&](const char* k) { return it.key() == k; })) {
      where.fail("unknown field \"" + it.key().substr(0, 64) + "\"");
    }
  }
}

const json& member(const json& object, const char* key, const Where& where) {
  const auto it = object.find(key);
  if (it == object.end()) where.fail(std::string("no \"") + key + "\"");
  return *it;
}

std::string text(const json& value, const Where& where, std::size_t max_bytes = kMaxTextBytes) {
  if (!value.is_string()) where.fail("not a string");
  const std::string& s = value.get_ref<const std::string&>();
  if (s.size() > max_bytes) where.fail("longer than " + std::to_string(max_bytes) + " bytes");
  return s;
}

std::string optional_text(const json& object, const char* key, const Where& where) {
  const auto it = object.find(key);
  return it == object.end() ? std::string() : text(*it, where / key);
}

bool only_chars(std::string_view s, std::string_view allowed_punctuation) {
  return std::all_of(s.begin(), s.end(), [&](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
           allowed_punctuation.find(c) != std::string_view::npos;
  });
}

std::string entry_name(const json& value, const Where& where) {
  std::string name = text(value, where, 64);
  const bool lower =
      std::none_of(name.begin(), name.end(), [](char c) { return c >= 'A' && c <= 'Z'; });
  if (name.empty() || !lower || !only_chars(name, "._-") || name[0] == '.' || name[0] == '-') {
    where.fail("\"" + name + "\" is not a name of lowercase letters, digits, '.', '_' and '-'");
  }
  return name;
}

// "owner/name" as the hub spells repositories: no other '/', no "..", nothing that could turn the
// URL it goes into into another one.
std::string repo_name(const json& value, const Where& where) {
  std::string repo = text(value, where, 200);
  const std::size_t slash = repo.find('/');
  const auto part_ok = [](std::string_view p) {
    return !p.empty() && p.size() <= 96 && only_chars(p, "._-") && p[0] != '.' && p[0] != '-' &&
           p.find("..") == std::string_view::npos;
  };
  if (slash == std::string::npos || !part_ok(std::string_view(repo).substr(0, slash)) ||
      !part_ok(std::string_view(repo).substr(slash + 1))) {
    where.fail("\"" + repo + "\" is not a hub repository (owner/name)");
  }
  return repo;
}

std::string revision_name(const json& value, const Where& where) {
  std::string revision = text(value, where, 128);
  if (revision.empty() || !only_chars(revision, "._-/") || revision[0] == '/' ||
      revision[0] == '.' || revision.back() == '/' || revision.find("..") != std::string::npos ||
      revision.find("//") != std::string::npos) {
    where.fail("\"" + revision + "\" is not a revision (a branch, tag or commit)");
  }
  return revision;
}

// What the downloader may fetch: model files and the small tokenizer and configuration files a
// set needs. Never a pickle.
void check_file_kind(const std::string& path, const Where& where) {
  const fs::path p = io::detail::path_from_utf8(path);
  if (io::is_pickle_file(p)) {
    where.fail("\"" + path +
               "\" is a PyTorch pickle file, which can run code when it is loaded: Ferry never "
               "downloads or loads pickle");
  }
  std::string ext = io::detail::display(p.extension());
  std::transform(ext.begin(), ext.end(), ext.begin(),
                 [](char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c + 32) : c; });
  for (const char* allowed : {".safetensors", ".gguf", ".json", ".model", ".txt"}) {
    if (ext == allowed) return;
  }
  where.fail("\"" + path +
             "\" is not a file Ferry reads (.safetensors, .gguf, or a tokenizer's "
             ".json, .model or .txt)");
}

fs::path safe_path(const std::string& name, const Where& where) {
  try {
    return io::safe_relative_path(name);
  } catch (const Error& e) {
    where.fail(e.what());
  }
}

std::uint64_t size_hint(const json& object, const Where& where) {
  const auto it = object.find("size_hint");
  if (it == object.end()) return 0;
  if (!it->is_number_unsigned()) where.fail("size_hint is not a whole number of bytes");
  return it->get<std::uint64_t>();
}

CatalogueFile parse_file(const json& value, const Where& where) {
  if (!value.is_object()) where.fail("not an object");
  refuse_unknown_keys(value, {"repo", "revision", "path", "to", "size_hint"}, where);
  CatalogueFile f;
  f.repo = repo_name(member(value, "repo", where), where / "repo");
  const auto revision = value.find("revision");
  f.revision = revision == value.end() ? "main" : revision_name(*revision, where / "revision");
  f.path = text(member(value, "path", where), where / "path", io::kMaxRemotePathBytes);
  safe_path(f.path, where / "path");
  check_file_kind(f.path, where / "path");
  const auto to = value.find("to");
  const std::string to_text =
      to == value.end() ? f.path : text(*to, where / "to", io::kMaxRemotePathBytes);
  f.to = safe_path(to_text, where / "to");
  check_file_kind(to_text, where / "to");
  f.size_hint = size_hint(value, where);
  return f;
}

CatalogueVariant parse_variant(const json& value, const Where& where) {
  if (!value.is_object()) where.fail("not an object");
  refuse_unknown_keys(value, {"precision", "files"}, where);
  CatalogueVariant v;
  v.precision = text(member(value, "precision", where), where / "precision", 32);
  if (v.precision.empty() || !only_chars(v.precision, "._- ")) {
    (where / "precision").fail("\"" + v.precision + "\" is not a precision name");
  }
  const json& files = member(value, "files", where);
  if (!files.is_array() || files.empty()) (where / "files").fail("not a list of files");
  std::set<fs::path> targets;
  for (std::size_t i = 0; i < files.size(); ++i) {
    CatalogueFile f = parse_file(files[i], where / ("files[" + std::to_string(i) + "]"));
    if (!targets.insert(f.to).second) {
      (where / ("files[" + std::to_string(i) + "]"))
          .fail("two files go to " + io::detail::display(f.to));
    }
    v.files.push_back(std::move(f));
  }
  return v;
}

Licence parse_licence(const json& value, const Where& where) {
  if (!value.is_object()) where.fail("not an object");
  refuse_unknown_keys(value, {"id", "url", "confirm", "notice"}, where);
  Licence l;
  l.id = text(member(value, "id", where), where / "id", 64);
  if (l.id.empty()) (where / "id").fail("empty");
  l.url = text(member(value, "url", where), where / "url", 512);
  if (l.url.rfind("https://", 0) != 0) (where / "url").fail("not an https:// address");
  const auto confirm = value.find("confirm");
  if (confirm != value.end()) {
    if (!confirm->is_boolean()) (where / "confirm").fail("not true or false");
    l.confirm = confirm->get<bool>();
  }
  l.notice = optional_text(value, "notice", where);
  if (l.confirm && l.notice.empty()) where.fail("a licence to confirm needs its notice");
  return l;
}

CatalogueEntry parse_entry(const json& value, const Where& at) {
  if (!value.is_object()) at.fail("not an object");
  CatalogueEntry e;
  e.name = entry_name(member(value, "name", at), at / "name");
  const Where where = at / e.name;
  refuse_unknown_keys(value, {"name", "title", "family", "description", "licence", "variants"},
                      where);
  e.title = text(member(value, "title", where), where / "title", 200);
  e.family = text(member(value, "family", where), where / "family", 32);
  if (e.family.empty() || !only_chars(e.family, "_")) {
    (where / "family").fail("\"" + e.family + "\" is not a family name");
  }
  e.description = optional_text(value, "description", where);
  e.licence = parse_licence(member(value, "licence", where), where / "licence");
  const json& variants = member(value, "variants", where);
  if (!variants.is_array() || variants.empty()) (where / "variants").fail("not a list of variants");
  for (std::size_t i = 0; i < variants.size(); ++i) {
    CatalogueVariant v =
        parse_variant(variants[i], where / ("variants[" + std::to_string(i) + "]"));
    if (e.variant(v.precision) != nullptr) {
      (where / "variants").fail("two variants are \"" + v.precision + "\"");
    }
    e.variants.push_back(std::move(v));
  }
  return e;
}

}  // namespace

std::uint64_t CatalogueVariant::size_hint() const {
  std::uint64_t total = 0;
  for (const CatalogueFile& f : files) total += f.size_hint;
  return total;
}

const CatalogueVariant* CatalogueEntry::variant(std::string_view precision) const {
  if (precision.empty()) return variants.empty() ? nullptr : &variants.front();
  for (const CatalogueVariant& v : variants) {
    if (v.precision == precision) return &v;
  }
  return nullptr;
}

const CatalogueEntry* Catalogue::find(std::string_view name) const {
  for (const CatalogueEntry& e : entries) {
    if (e.name == name) return &e;
  }
  return nullptr;
}

Catalogue parse_catalogue(std::string_view text_in, std::string_view source) {
  const Where where{std::string(source)};
  if (text_in.size() > kMaxCatalogueBytes) {
    where.fail("larger than " + std::to_string(kMaxCatalogueBytes >> 20) + " MiB");
  }
  if (json_nesting_depth(text_in) > kMaxCatalogueDepth) where.fail("nested too deeply");
  const json root = json::parse(text_in.begin(), text_in.end(), nullptr, false);
  if (root.is_discarded() || !root.is_object()) where.fail("not a JSON object");
  refuse_unknown_keys(root, {"ferry_catalogue", "models"}, where);
  const json& format = member(root, "ferry_catalogue", where);
  if (!format.is_number_unsigned() || format.get<std::uint64_t>() != 1) {
    where.fail("ferry_catalogue is not 1 (a catalogue for another version of Ferry)");
  }
  const json& models = member(root, "models", where);
  if (!models.is_array()) (where / "models").fail("not a list");
  if (models.size() > kMaxEntries)
    where.fail("more than " + std::to_string(kMaxEntries) + " models");
  Catalogue catalogue;
  for (std::size_t i = 0; i < models.size(); ++i) {
    CatalogueEntry e = parse_entry(models[i], where / ("models[" + std::to_string(i) + "]"));
    if (catalogue.find(e.name) != nullptr) where.fail("two models are named \"" + e.name + "\"");
    e.source = std::string(source);
    catalogue.entries.push_back(std::move(e));
  }
  return catalogue;
}

void merge_catalogue(Catalogue& base, Catalogue added) {
  for (CatalogueEntry& e : added.entries) {
    const auto same = std::find_if(base.entries.begin(), base.entries.end(),
                                   [&](const CatalogueEntry& b) { return b.name == e.name; });
    if (same != base.entries.end()) {
      *same = std::move(e);
    } else {
      base.entries.push_back(std::move(e));
    }
  }
}

}  // namespace ferry::library
