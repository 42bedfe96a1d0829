#include "core/models/h3/bpe_tokenizer.h"

#include <algorithm>
#include <array>
#include <fstream>
#include <nlohmann/json.hpp>
#include <queue>
#include <system_error>
#include <unordered_map>
#include <unordered_set>
#include <utility>

#include "core/error.h"
#include "core/io/detail/os_file.h"
#include "core/models/h3/added_tokens.h"
#include "core/models/h3/byte_level.h"
#include "core/models/h3/qwen2_split.h"
#include "core/models/h3/unicode_text.h"

namespace ferry::models::h3 {

namespace {

using Json = nlohmann::json;

// Qwen2's pre-tokenizer regex, as tokenizer.json spells it (qwen2_split.h implements it).
constexpr std::string_view kQwen2Pattern =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+"
    "[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";

Error bad_file(std::string_view name, std::string_view problem) {
  return Error(ErrorCode::kBadModelFile, std::string(name) + ": " + std::string(problem));
}

// JSON with its nesting bounded, so that a crafted file cannot exhaust the stack of whatever
// walks it.
Json parse_json(TokenizerText file) {
  if (file.text.size() > kMaxTokenizerFileBytes) {
    throw bad_file(file.name, "larger than " + std::to_string(kMaxTokenizerFileBytes >> 20) +
                                  " MiB, too large for a tokenizer file");
  }
  bool too_deep = false;
  const Json::parser_callback_t limit = [&](int depth, Json::parse_event_t, Json&) {
    if (depth > kMaxJsonDepth) too_deep = true;
    return !too_deep;
  };
  Json j = Json::parse(file.text, limit, /*allow_exceptions=*/false);
  if (too_deep) throw bad_file(file.name, "JSON nested too deeply for a tokenizer file");
  if (j.is_discarded()) throw bad_file(file.name, "not valid JSON");
  if (!j.is_object()) throw bad_file(file.name, "does not hold a JSON object");
  return j;
}

const Json* member(const Json& j, std::string_view key) {
  auto it = j.find(key);
  return it == j.end() ? nullptr : &*it;
}

// A member that, when there, must be a boolean; false when absent.
bool flag(const Json& j, std::string_view key, std::string_view name) {
  const Json* v = member(j, key);
  if (v == nullptr || v->is_null()) return false;
  if (!v->is_boolean()) throw bad_file(name, "\"" + std::string(key) + "\" is not true or false");
  return v->get<bool>();
}

std::int32_t token_id_value(const Json& v, std::string_view name, std::string_view what) {
  if (!v.is_number_integer())
    throw bad_file(name, std::string(what) + ": the id is not an integer");
  const std::int64_t id = v.get<std::int64_t>();
  if (id < 0 || id >= kMaxTokenIds) {
    throw bad_file(name, std::string(what) + ": id " + std::to_string(id) +
                             " is out of range (0 to " + std::to_string(kMaxTokenIds - 1) + ")");
  }
  return static_cast<std::int32_t>(id);
}

void check_token_text(std::string_view token, std::string_view name) {
  if (token.empty()) throw bad_file(name, "has an empty token");
  if (token.size() > kMaxTokenBytes) {
    throw bad_file(name, "has a token of " + std::to_string(token.size()) + " bytes (at most " +
                             std::to_string(kMaxTokenBytes) + ")");
  }
}

// A vocabulary token (byte-level characters, UTF-8) as the bytes it stands for; characters that
// stand for no byte are kept as their UTF-8.
std::string token_bytes(std::string_view token) {
  std::string out;
  for (char32_t c : decode_utf8(token)) {
    if (const auto b = unicode_to_byte(c)) {
      out.push_back(static_cast<char>(*b));
    } else {
      append_utf8(out, c);
    }
  }
  return out;
}

std::string byte_level(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size() * 2);
  for (char c : bytes) append_utf8(out, byte_to_unicode(static_cast<std::uint8_t>(c)));
  return out;
}

struct Merge {
  std::uint32_t rank;
  std::int32_t id;
};

std::uint64_t pair_key(std::int32_t left, std::int32_t right) {
  return (static_cast<std::uint64_t>(static_cast<std::uint32_t>(left)) << 32) |
         static_cast<std::uint32_t>(right);
}

}  // namespace

struct BpeTokenizer::Impl {
  std::string source;
  // Byte-level token text -> id, and id -> the bytes (or added token text) it stands for.
  std::unordered_map<std::string, std::int32_t> vocab;
  std::vector<std::string> id_text;
  std::vector<bool> id_used;
  std::array<std::int32_t, 256> byte_ids{};
  std::unordered_map<std::uint64_t, Merge> merges;
  bool ignore_merges = false;
  // Added tokens: content -> id; those matched on the raw text and those matched after NFC.
  std::unordered_map<std::string, std::int32_t> added;
  AddedTokenMatcher raw_tokens;
  AddedTokenMatcher normalized_tokens;

  void set_vocab(const Json& vocab_json, std::string_view name);
  void add_merge(std::string_view left, std::string_view right, std::size_t line,
                 std::string_view name);
  void add_token(std::string_view content, std::int32_t id, bool normalized, std::string_view name);
  void apply_config(const Json& config, std::string_view name);
  void finish(std::string_view name);

  void encode_text(std::string_view text, std::vector<std::int32_t>& out) const;
  void encode_piece(std::string_view bytes, std::vector<std::int32_t>& out) const;
};

void BpeTokenizer::Impl::set_vocab(const Json& vocab_json, std::string_view name) {
  if (!vocab_json.is_object()) throw bad_file(name, "the vocabulary is not a JSON object");
  if (vocab_json.empty()) throw bad_file(name, "the vocabulary is empty");
  vocab.reserve(vocab_json.size());
  for (const auto& [token, value] : vocab_json.items()) {
    check_token_text(token, name);
    const std::int32_t id = token_id_value(value, name, "token \"" + token + "\"");
    if (static_cast<std::size_t>(id) >= id_text.size()) {
      id_text.resize(static_cast<std::size_t>(id) + 1);
      id_used.resize(static_cast<std::size_t>(id) + 1, false);
    }
    if (id_used[static_cast<std::size_t>(id)]) {
      throw bad_file(name, "two tokens have id " + std::to_string(id));
    }
    id_used[static_cast<std::size_t>(id)] = true;
    id_text[static_cast<std::size_t>(id)] = token_bytes(token);
    vocab.emplace(token, id);
  }
  for (unsigned b = 0; b < 256; ++b) {
    std::string symbol;
    append_utf8(symbol, byte_to_unicode(static_cast<std::uint8_t>(b)));
    auto it = vocab.find(symbol);
    if (it == vocab.end()) {
      throw bad_file(name, "not a byte-level vocabulary: no token for byte " + std::to_string(b));
    }
    byte_ids[b] = it->second;
  }
}

void BpeTokenizer::Impl::add_merge(std::string_view left, std::string_view right, std::size_t line,
                                   std::string_view name) {
  const auto where = [&] {
    return "merge " + std::to_string(line) + " (\"" + std::string(left) + " " + std::string(right) +
           "\")";
  };
  if (merges.size() >= static_cast<std::size_t>(kMaxTokenIds)) {
    throw bad_file(name, "more than " + std::to_string(kMaxTokenIds) + " merges");
  }
  auto l = vocab.find(std::string(left));
  auto r = vocab.find(std::string(right));
  auto m = vocab.find(std::string(left) + std::string(right));
  if (l == vocab.end() || r == vocab.end() || m == vocab.end()) {
    throw bad_file(name, where() + " names a token that is not in the vocabulary");
  }
  const auto [it, inserted] = merges.try_emplace(
      pair_key(l->second, r->second), Merge{static_cast<std::uint32_t>(merges.size()), m->second});
  if (!inserted) throw bad_file(name, where() + " repeats an earlier merge");
}

void BpeTokenizer::Impl::add_token(std::string_view content, std::int32_t id, bool normalized,
                                   std::string_view name) {
  check_token_text(content, name);
  if (!decode_utf8(content).empty() && encode_utf8(decode_utf8(content)) != content) {
    throw bad_file(name, "an added token is not UTF-8");
  }
  const std::string text(content);
  if (auto it = added.find(text); it != added.end()) {
    if (it->second != id) {
      throw bad_file(name, "added token \"" + text + "\" has two ids, " +
                               std::to_string(it->second) + " and " + std::to_string(id));
    }
    return;
  }
  const auto index = static_cast<std::size_t>(id);
  if (index >= id_text.size()) {
    id_text.resize(index + 1);
    id_used.resize(index + 1, false);
  }
  if (id_used[index] && id_text[index] != text) {
    throw bad_file(name, "added token \"" + text + "\" takes id " + std::to_string(id) +
                             ", which another token has");
  }
  id_used[index] = true;
  id_text[index] = text;
  added.emplace(text, id);
  (normalized ? normalized_tokens : raw_tokens).add(text, id);
}

// tokenizer_config.json: added_tokens_decoder, then the special tokens transformers adds with
// add_tokens(all_special_tokens): bos, eos, unk, pad, additional_special_tokens.
void BpeTokenizer::Impl::apply_config(const Json& config, std::string_view name) {
  if (flag(config, "add_prefix_space", name)) {
    throw bad_file(name, "add_prefix_space is true; Qwen2's tokenizer does not add one");
  }
  if (const Json* decoder = member(config, "added_tokens_decoder");
      decoder && !decoder->is_null()) {
    if (!decoder->is_object()) throw bad_file(name, "added_tokens_decoder is not an object");
    // Keys are ids as text; take them in id order, as transformers does.
    std::vector<std::pair<std::int64_t, const Json*>> entries;
    for (const auto& [key, value] : decoder->items()) {
      std::int64_t id = -1;
      if (!key.empty() && key.size() <= 9 &&
          std::all_of(key.begin(), key.end(), [](char c) { return c >= '0' && c <= '9'; })) {
        id = std::stoll(key);
      }
      if (id < 0 || id >= kMaxTokenIds) {
        throw bad_file(name,
                       "added_tokens_decoder has the key \"" + key + "\", not an id in range");
      }
      entries.emplace_back(id, &value);
    }
    std::sort(entries.begin(), entries.end(),
              [](const auto& a, const auto& b) { return a.first < b.first; });
    for (const auto& [id, value] : entries) {
      const Json* content = value->is_object() ? member(*value, "content") : nullptr;
      if (content == nullptr || !content->is_string()) {
        throw bad_file(name, "added token " + std::to_string(id) + " has no content");
      }
      if (flag(*value, "lstrip", name) || flag(*value, "rstrip", name) ||
          flag(*value, "single_word", name)) {
        throw bad_file(name, "added token " + std::to_string(id) +
                                 " strips spaces or matches single words, which Qwen2's do not");
      }
      add_token(content->get<std::string>(), static_cast<std::int32_t>(id),
                flag(*value, "normalized", name), name);
    }
  }
  std::vector<std::string> specials;
  const auto take = [&](const Json& v, std::string_view what) {
    if (v.is_null()) return;
    if (v.is_string()) {
      specials.push_back(v.get<std::string>());
    } else if (v.is_object() && member(v, "content") && member(v, "content")->is_string()) {
      specials.push_back(member(v, "content")->get<std::string>());
    } else {
      throw bad_file(name, std::string(what) + " is not a token");
    }
  };
  for (std::string_view key : {"bos_token", "eos_token", "unk_token", "pad_token"}) {
    if (const Json* v = member(config, key)) take(*v, key);
  }
  if (const Json* extra = member(config, "additional_special_tokens"); extra && !extra->is_null()) {
    if (!extra->is_array()) throw bad_file(name, "additional_special_tokens is not a list");
    for (const Json& v : *extra) take(v, "an additional special token");
  }
  for (const std::string& token : specials) {
    if (added.count(token) != 0) continue;
    if (auto it = vocab.find(token); it != vocab.end()) {
      add_token(token, it->second, false, name);
      continue;
    }
    // A new token takes the next id after the vocabulary and the added tokens.
    add_token(token, static_cast<std::int32_t>(id_text.size()), false, name);
    if (id_text.size() > static_cast<std::size_t>(kMaxTokenIds)) {
      throw bad_file(name, "too many tokens");
    }
  }
}

void BpeTokenizer::Impl::finish(std::string_view name) {
  if (id_text.size() > static_cast<std::size_t>(kMaxTokenIds))
    throw bad_file(name, "too many tokens");
}

BpeTokenizer::BpeTokenizer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
BpeTokenizer::BpeTokenizer(BpeTokenizer&&) noexcept = default;
BpeTokenizer& BpeTokenizer::operator=(BpeTokenizer&&) noexcept = default;
BpeTokenizer::~BpeTokenizer() = default;

namespace {

// tokenizer.json must describe Qwen2's pipeline (§A.1): NFC, the Split regex isolated, ByteLevel
// without prefix space or regex, BPE without dropout, prefixes, suffixes or byte fallback.
void check_qwen2_pipeline(const Json& j, std::string_view name) {
  const Json* normalizer = member(j, "normalizer");
  if (normalizer == nullptr || !normalizer->is_object() || normalizer->value("type", "") != "NFC") {
    throw bad_file(name, "the normalizer is not NFC: not a Qwen2 tokenizer");
  }
  const Json* pre = member(j, "pre_tokenizer");
  bool ok = pre != nullptr && pre->is_object() && pre->value("type", "") == "Sequence";
  const Json* steps = ok ? member(*pre, "pretokenizers") : nullptr;
  ok = ok && steps != nullptr && steps->is_array() && steps->size() == 2;
  if (ok) {
    const Json& split = (*steps)[0];
    const Json& bytes = (*steps)[1];
    const Json* pattern = split.is_object() ? member(split, "pattern") : nullptr;
    const Json* regex =
        pattern != nullptr && pattern->is_object() ? member(*pattern, "Regex") : nullptr;
    ok = split.is_object() && split.value("type", "") == "Split" && regex != nullptr &&
         regex->is_string() && regex->get<std::string>() == kQwen2Pattern &&
         split.value("behavior", "") == "Isolated" && !flag(split, "invert", name) &&
         bytes.is_object() && bytes.value("type", "") == "ByteLevel" &&
         !flag(bytes, "add_prefix_space", name) && !flag(bytes, "use_regex", name);
  }
  if (!ok) {
    throw bad_file(name,
                   "the pre-tokenizer is not Qwen2's (its Split regex, then ByteLevel "
                   "without prefix space or regex)");
  }
  const Json* model = member(j, "model");
  if (model == nullptr || !model->is_object() || model->value("type", "") != "BPE") {
    throw bad_file(name, "the model is not BPE");
  }
  const Json* dropout = member(*model, "dropout");
  const auto empty_or_null = [&](std::string_view key) {
    const Json* v = member(*model, key);
    return v == nullptr || v->is_null() || (v->is_string() && v->get<std::string>().empty());
  };
  if ((dropout != nullptr && !dropout->is_null() &&
       !(dropout->is_number() && dropout->get<double>() == 0.0)) ||
      !empty_or_null("continuing_subword_prefix") || !empty_or_null("end_of_word_suffix") ||
      flag(*model, "byte_fallback", name)) {
    throw bad_file(name,
                   "the BPE model uses dropout, subword prefixes or suffixes, or byte "
                   "fallback, which Qwen2's does not");
  }
}

std::pair<std::string_view, std::string_view> split_merge(std::string_view line) {
  const std::size_t space = line.find(' ');
  if (space == std::string_view::npos || line.find(' ', space + 1) != std::string_view::npos) {
    return {};
  }
  return {line.substr(0, space), line.substr(space + 1)};
}

}  // namespace

BpeTokenizer BpeTokenizer::from_tokenizer_json(TokenizerText tokenizer_json,
                                               std::optional<TokenizerText> config) {
  const std::string_view name = tokenizer_json.name;
  const Json j = parse_json(tokenizer_json);
  check_qwen2_pipeline(j, name);
  auto impl = std::make_unique<Impl>();
  impl->source = std::string(name);
  const Json& model = j["model"];
  const Json* vocab = member(model, "vocab");
  if (vocab == nullptr) throw bad_file(name, "the BPE model has no vocab");
  impl->set_vocab(*vocab, name);
  impl->ignore_merges = flag(model, "ignore_merges", name);
  const Json* merges = member(model, "merges");
  if (merges == nullptr || !merges->is_array())
    throw bad_file(name, "the BPE model has no merges list");
  std::size_t line = 0;
  for (const Json& m : *merges) {
    ++line;
    std::pair<std::string_view, std::string_view> pair;
    std::string text;
    if (m.is_string()) {
      text = m.get<std::string>();
      pair = split_merge(text);
    } else if (m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string()) {
      pair = {m[0].get_ref<const std::string&>(), m[1].get_ref<const std::string&>()};
    }
    if (pair.first.empty() || pair.second.empty()) {
      throw bad_file(name, "merge " + std::to_string(line) + " is not two tokens");
    }
    impl->add_merge(pair.first, pair.second, line, name);
  }
  if (const Json* added = member(j, "added_tokens"); added && !added->is_null()) {
    if (!added->is_array()) throw bad_file(name, "added_tokens is not a list");
    for (const Json& t : *added) {
      const Json* content = t.is_object() ? member(t, "content") : nullptr;
      const Json* id = t.is_object() ? member(t, "id") : nullptr;
      if (content == nullptr || !content->is_string() || id == nullptr) {
        throw bad_file(name, "an added token has no content or id");
      }
      if (flag(t, "lstrip", name) || flag(t, "rstrip", name) || flag(t, "single_word", name)) {
        throw bad_file(name, "added token \"" + content->get<std::string>() +
                                 "\" strips spaces or matches single words, which Qwen2's do not");
      }
      impl->add_token(
          content->get<std::string>(),
          token_id_value(*id, name, "added token \"" + content->get<std::string>() + "\""),
          flag(t, "normalized", name), name);
    }
  }
  if (config) impl->apply_config(parse_json(*config), config->name);
  impl->finish(name);
  return BpeTokenizer(std::move(impl));
}

BpeTokenizer BpeTokenizer::from_vocab_merges(TokenizerText vocab_json, TokenizerText merges_txt,
                                             std::optional<TokenizerText> config) {
  auto impl = std::make_unique<Impl>();
  impl->source = std::string(vocab_json.name);
  impl->set_vocab(parse_json(vocab_json), vocab_json.name);
  const std::string_view name = merges_txt.name;
  if (merges_txt.text.size() > kMaxTokenizerFileBytes) {
    throw bad_file(name, "larger than " + std::to_string(kMaxTokenizerFileBytes >> 20) +
                             " MiB, too large for a merges file");
  }
  std::string_view rest = merges_txt.text;
  std::size_t line_number = 0;
  while (!rest.empty()) {
    const std::size_t end = rest.find('\n');
    std::string_view line = rest.substr(0, end);
    rest = end == std::string_view::npos ? std::string_view() : rest.substr(end + 1);
    ++line_number;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    // The "#version: 0.2" header and blank lines are not merges (tokenizers skips them too).
    if (line.empty() || (line_number == 1 && line.starts_with("#version"))) continue;
    const auto [left, right] = split_merge(line);
    if (left.empty() || right.empty()) {
      throw bad_file(name,
                     "line " + std::to_string(line_number) + " is not two tokens and a space");
    }
    impl->add_merge(left, right, line_number, name);
  }
  if (config) {
    impl->apply_config(parse_json(*config), config->name);
  } else {
    // Qwen2Tokenizer's defaults when no tokenizer_config.json says otherwise.
    impl->apply_config(Json{{"unk_token", "<|endoftext|>"},
                            {"eos_token", "<|endoftext|>"},
                            {"pad_token", "<|endoftext|>"}},
                       vocab_json.name);
  }
  impl->finish(vocab_json.name);
  return BpeTokenizer(std::move(impl));
}

namespace {

std::string read_text(const std::filesystem::path& path) {
  const std::string name = io::detail::display(path);
  std::error_code ec;
  const std::uintmax_t size = std::filesystem::file_size(path, ec);
  if (ec) throw Error(ErrorCode::kIo, name + ": cannot read the size: " + ec.message());
  if (size > kMaxTokenizerFileBytes) {
    throw bad_file(name, "is " + std::to_string(size) + " bytes, too large for a tokenizer file");
  }
  std::ifstream in(path, std::ios::binary);
  std::string text(static_cast<std::size_t>(size), '\0');
  in.read(text.data(), static_cast<std::streamsize>(text.size()));
  if (!in || static_cast<std::uintmax_t>(in.gcount()) != size) {
    throw Error(ErrorCode::kIo, name + ": cannot read the tokenizer file");
  }
  return text;
}

}  // namespace

BpeTokenizer BpeTokenizer::from_folder(const std::filesystem::path& folder) {
  std::error_code ec;
  const auto is_file = [&](const std::filesystem::path& p) {
    return std::filesystem::is_regular_file(p, ec);
  };
  for (const auto& dir : {folder, folder / "tokenizer"}) {
    const auto config_path = dir / "tokenizer_config.json";
    std::string config_text;
    std::string config_name;
    if (is_file(config_path)) {
      config_text = read_text(config_path);
      config_name = io::detail::display(config_path);
    }
    const auto config = [&]() -> std::optional<TokenizerText> {
      if (config_name.empty()) return std::nullopt;
      return TokenizerText{config_text, config_name};
    };
    if (is_file(dir / "tokenizer.json")) {
      const std::string text = read_text(dir / "tokenizer.json");
      const std::string name = io::detail::display(dir / "tokenizer.json");
      return from_tokenizer_json({text, name}, config());
    }
    if (is_file(dir / "vocab.json") || is_file(dir / "merges.txt")) {
      for (const char* needed : {"vocab.json", "merges.txt"}) {
        if (!is_file(dir / needed)) {
          throw bad_file(io::detail::display(dir),
                         std::string("has no ") + needed + " beside the other tokenizer file");
        }
      }
      const std::string vocab = read_text(dir / "vocab.json");
      const std::string merges = read_text(dir / "merges.txt");
      const std::string vocab_name = io::detail::display(dir / "vocab.json");
      const std::string merges_name = io::detail::display(dir / "merges.txt");
      return from_vocab_merges({vocab, vocab_name}, {merges, merges_name}, config());
    }
  }
  throw bad_file(
      io::detail::display(folder),
      "no tokenizer.json, or vocab.json and merges.txt, in this folder or its tokenizer/");
}

// The tokenizers library's BPE word merge: a min-heap of (rank, position) over adjacent pairs;
// the lowest rank first, the leftmost of equal ranks; an entry whose pair has changed since it was
// pushed is dropped when it comes up.
void BpeTokenizer::Impl::encode_piece(std::string_view bytes,
                                      std::vector<std::int32_t>& out) const {
  if (ignore_merges) {
    if (auto it = vocab.find(byte_level(bytes)); it != vocab.end()) {
      out.push_back(it->second);
      return;
    }
  }
  if (bytes.size() == 1) {
    out.push_back(byte_ids[static_cast<std::uint8_t>(bytes[0])]);
    return;
  }
  struct Symbol {
    std::int32_t id;
    std::int32_t prev, next;  // -1: none
    bool removed;
  };
  std::vector<Symbol> symbols(bytes.size());
  for (std::size_t i = 0; i < bytes.size(); ++i) {
    symbols[i] = {byte_ids[static_cast<std::uint8_t>(bytes[i])], static_cast<std::int32_t>(i) - 1,
                  i + 1 < bytes.size() ? static_cast<std::int32_t>(i + 1) : -1, false};
  }
  struct Candidate {
    std::uint32_t rank;
    std::int32_t pos;
    std::int32_t id;
    bool operator>(const Candidate& o) const {
      return rank != o.rank ? rank > o.rank : pos > o.pos;
    }
  };
  std::priority_queue<Candidate, std::vector<Candidate>, std::greater<>> queue;
  const auto push_pair = [&](std::int32_t pos) {
    const std::int32_t next = symbols[static_cast<std::size_t>(pos)].next;
    if (next < 0) return;
    auto it = merges.find(pair_key(symbols[static_cast<std::size_t>(pos)].id,
                                   symbols[static_cast<std::size_t>(next)].id));
    if (it != merges.end()) queue.push({it->second.rank, pos, it->second.id});
  };
  for (std::size_t i = 0; i + 1 < symbols.size(); ++i) push_pair(static_cast<std::int32_t>(i));
  while (!queue.empty()) {
    const Candidate top = queue.top();
    queue.pop();
    Symbol& left = symbols[static_cast<std::size_t>(top.pos)];
    if (left.removed || left.next < 0) continue;
    Symbol& right = symbols[static_cast<std::size_t>(left.next)];
    auto it = merges.find(pair_key(left.id, right.id));
    if (it == merges.end() || it->second.id != top.id) continue;
    left.id = top.id;
    right.removed = true;
    left.next = right.next;
    if (right.next >= 0) symbols[static_cast<std::size_t>(right.next)].prev = top.pos;
    if (left.prev >= 0) push_pair(left.prev);
    push_pair(top.pos);
  }
  for (const Symbol& s : symbols) {
    if (!s.removed) out.push_back(s.id);
  }
}

void BpeTokenizer::Impl::encode_text(std::string_view text, std::vector<std::int32_t>& out) const {
  const std::u32string normalized = nfc(decode_utf8(text));
  const auto encode_span = [&](std::string_view span) {
    const std::u32string codes = decode_utf8(span);
    std::size_t start = 0;
    std::string piece;
    for (std::size_t end : qwen2_split(codes)) {
      piece = encode_utf8(std::u32string_view(codes).substr(start, end - start));
      encode_piece(piece, out);
      start = end;
    }
  };
  const std::string utf8 = encode_utf8(normalized);
  if (normalized_tokens.empty()) {
    encode_span(utf8);
  } else {
    normalized_tokens.split(utf8, encode_span, [&](std::int32_t id) { out.push_back(id); });
  }
}

std::vector<std::int32_t> BpeTokenizer::encode(std::string_view text) const {
  // Ill-formed UTF-8 becomes U+FFFD before anything looks at the text.
  const std::string utf8 = encode_utf8(decode_utf8(text));
  std::vector<std::int32_t> out;
  out.reserve(utf8.size() / 3 + 4);
  impl_->raw_tokens.split(
      utf8, [&](std::string_view span) { impl_->encode_text(span, out); },
      [&](std::int32_t id) { out.push_back(id); });
  return out;
}

std::string BpeTokenizer::decode(std::span<const std::int32_t> ids) const {
  std::string out;
  for (std::int32_t id : ids) {
    if (id < 0 || static_cast<std::size_t>(id) >= impl_->id_text.size()) continue;
    out += impl_->id_text[static_cast<std::size_t>(id)];
  }
  return out;
}

std::size_t BpeTokenizer::id_count() const {
  return impl_->id_text.size();
}

std::optional<std::int32_t> BpeTokenizer::token_id(std::string_view token) const {
  if (auto it = impl_->added.find(std::string(token)); it != impl_->added.end()) return it->second;
  if (auto it = impl_->vocab.find(byte_level(token)); it != impl_->vocab.end()) return it->second;
  return std::nullopt;
}

const std::string& BpeTokenizer::source() const {
  return impl_->source;
}

}  // namespace ferry::models::h3
