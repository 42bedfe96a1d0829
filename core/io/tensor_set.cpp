#include "core/io/tensor_set.h"

#include <algorithm>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <unordered_set>

#include "core/error.h"
#include "core/io/detail/os_file.h"

namespace ferry::io {
namespace {

Error bad_index(std::string_view source, std::string_view problem) {
  return Error(ErrorCode::kBadModelFile,
               "invalid shard index " + std::string(source) + ": " + std::string(problem));
}

bool ends_with(std::string_view text, std::string_view suffix) {
  return text.size() >= suffix.size() && text.substr(text.size() - suffix.size()) == suffix;
}

// Accepts {"metadata": {scalars...}, "weight_map": {name: "file", ...}} and nothing deeper.
class IndexHandler final : public nlohmann::json_sax<nlohmann::json> {
 public:
  std::vector<std::pair<std::string, std::string>> weights;
  std::string problem;
  bool saw_weight_map = false;

  bool null() override { return scalar(); }
  bool boolean(bool) override { return scalar(); }
  bool number_integer(number_integer_t) override { return scalar(); }
  bool number_unsigned(number_unsigned_t) override { return scalar(); }
  bool number_float(number_float_t, const string_t&) override { return scalar(); }
  bool string(string_t& value) override {
    if (depth_ == 2 && section_ == Section::kWeightMap) {
      weights.emplace_back(std::move(key_), std::move(value));
      return true;
    }
    return scalar();
  }
  bool binary(binary_t&) override { return fail("unexpected binary value"); }
  bool start_object(std::size_t) override {
    ++depth_;
    if (depth_ == 1) return true;
    if (depth_ == 2 && section_ != Section::kOther) {
      if (section_ == Section::kWeightMap) saw_weight_map = true;
      return true;
    }
    return fail("unexpected nested object");
  }
  bool end_object() override {
    if (--depth_ == 1) section_ = Section::kOther;
    return true;
  }
  bool start_array(std::size_t) override { return fail("unexpected array"); }
  bool end_array() override { return true; }
  bool key(string_t& name) override {
    if (depth_ == 1) {
      section_ = name == "weight_map" ? Section::kWeightMap
                 : name == "metadata" ? Section::kMetadata
                                      : Section::kOther;
      if (section_ == Section::kWeightMap && saw_weight_map) return fail("two weight_map entries");
      return true;
    }
    key_ = std::move(name);
    return true;
  }
  bool parse_error(std::size_t position, const std::string&,
                   const nlohmann::detail::exception&) override {
    return fail("not valid JSON (byte " + std::to_string(position) + ")");
  }

 private:
  enum class Section { kOther, kMetadata, kWeightMap };

  bool scalar() {
    if (depth_ == 0) return fail("the index is not a JSON object");
    if (depth_ == 2 && section_ == Section::kWeightMap) {
      return fail("weight_map values must be file names");
    }
    if (depth_ == 1 && section_ == Section::kWeightMap) return fail("weight_map is not an object");
    return true;
  }
  bool fail(std::string text) {
    if (problem.empty()) problem = std::move(text);
    return false;
  }

  int depth_ = 0;
  Section section_ = Section::kOther;
  std::string key_;
};

bool is_plain_shard_name(std::string_view name) {
  if (name.empty() || name == "." || name == "..") return false;
  if (name.find_first_of("/\\:") != std::string_view::npos) return false;
  if (std::any_of(name.begin(), name.end(),
                  [](char c) { return static_cast<unsigned char>(c) < 0x20; })) {
    return false;
  }
  return ends_with(name, ".safetensors");
}

}  // namespace

std::vector<std::pair<std::string, std::string>> parse_shard_index(std::string_view json,
                                                                   std::string_view source) {
  // nlohmann's lexer takes a NUL byte for the end of the input and would ignore what follows.
  if (const std::size_t nul = json.find('\0'); nul != std::string_view::npos) {
    throw bad_index(source, "not valid JSON (byte " + std::to_string(nul) + "): a NUL byte");
  }
  IndexHandler handler;
  if (!nlohmann::json::sax_parse(json.begin(), json.end(), &handler,
                                 nlohmann::json::input_format_t::json, true)) {
    throw bad_index(source, handler.problem.empty() ? "not valid JSON" : handler.problem);
  }
  if (!handler.saw_weight_map) throw bad_index(source, "it has no weight_map");
  std::set<std::string_view> names;
  for (const auto& [tensor, shard] : handler.weights) {
    if (!names.insert(tensor).second) throw bad_index(source, "tensor '" + tensor + "' is listed twice");
    if (!is_plain_shard_name(shard)) {
      std::size_t cut = std::min<std::size_t>(shard.size(), 200);  // on a UTF-8 boundary
      while (cut > 0 && cut < shard.size() &&
             (static_cast<unsigned char>(shard[cut]) & 0xc0) == 0x80) {
        --cut;
      }
      throw bad_index(source, "shard '" + shard.substr(0, cut) +
                                  "' is not a .safetensors file name in the index's folder");
    }
  }
  return std::move(handler.weights);
}

TensorSet TensorSet::open(const std::filesystem::path& path) {
  TensorSet set;
  set.path_ = path;
  const std::string source = detail::display(path);
  if (!ends_with(source, ".index.json")) {
    set.files_.push_back(TensorFile::open(path));
    set.index_entries();
    return set;
  }

  set.sharded_ = true;
  std::string json;
  {
    const MappedFile file = MappedFile::open(path);
    if (file.size() > kMaxShardIndexBytes) {
      throw bad_index(source, "it is " + std::to_string(file.size()) + " bytes, more than the " +
                                  std::to_string(kMaxShardIndexBytes) + "-byte limit");
    }
    json.resize(static_cast<std::size_t>(file.size()));
    const MappedView view = file.map(0, file.size());
    view.copy_to(0, std::as_writable_bytes(std::span(json)));
  }
  const auto weights = parse_shard_index(json, source);

  // Open each shard once, in the order of first mention.
  std::map<std::string, std::size_t> shard_slot;
  for (const auto& [tensor, shard] : weights) {
    if (shard_slot.count(shard) != 0) continue;
    const std::filesystem::path shard_path = path.parent_path() / detail::path_from_utf8(shard);
    std::error_code ec;
    if (!std::filesystem::exists(shard_path, ec)) {
      throw bad_index(source, "its shard " + shard + " is missing from " +
                                  detail::display(path.parent_path()));
    }
    shard_slot.emplace(shard, set.files_.size());
    set.files_.push_back(TensorFile::open(shard_path));
  }
  set.index_entries();

  // The index and the shards must agree exactly.
  for (const auto& [tensor, shard] : weights) {
    const Entry* entry = set.find(tensor);
    const TensorFile& expected = set.files_[shard_slot.at(shard)];
    if (entry == nullptr || entry->file != &expected) {
      throw bad_index(source, "tensor '" + tensor + "' is not in its shard " + shard);
    }
  }
  if (set.entries_.size() != weights.size()) {
    std::unordered_set<std::string_view> listed;
    for (const auto& w : weights) listed.insert(w.first);
    for (const Entry& entry : set.entries_) {
      if (listed.count(entry.tensor->name) == 0) {
        throw bad_index(source, "tensor '" + entry.tensor->name.substr(0, 200) + "' in " +
                                    detail::display(entry.file->path().filename()) +
                                    " is not listed in the index");
      }
    }
  }
  return set;
}

void TensorSet::index_entries() {
  for (const TensorFile& file : files_) {
    for (const TensorInfo& tensor : file.tensors()) {
      if (!by_name_.emplace(tensor.name, entries_.size()).second) {
        throw Error(ErrorCode::kBadModelFile,
                    "tensor '" + tensor.name + "' appears in two files of " +
                        detail::display(path_));
      }
      entries_.push_back(Entry{&file, &tensor});
      tensor_bytes_ += tensor.bytes;
    }
  }
}

const TensorSet::Entry* TensorSet::find(std::string_view name) const {
  const auto it = by_name_.find(name);
  return it == by_name_.end() ? nullptr : &entries_[it->second];
}

const TensorSet::Entry& TensorSet::at(std::string_view name) const {
  const Entry* entry = find(name);
  if (entry == nullptr) {
    throw Error(ErrorCode::kMissingTensor,
                "tensor '" + std::string(name) + "' is not in " + detail::display(path_));
  }
  return *entry;
}

}  // namespace ferry::io
