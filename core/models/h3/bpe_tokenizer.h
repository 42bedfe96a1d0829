// The Qwen2 byte-level BPE tokenizer H3's conditioner uses (minimax_h3.md §A.1), Ferry's own:
// added and special tokens split out of the raw text first (leftmost, longest), NFC on the rest,
// the Qwen2 pre-tokenizer regex (qwen2_split.h), GPT-2's byte-to-unicode mapping (byte_level.h),
// then BPE merges by rank and ids from the vocabulary. Id for id what transformers'
// Qwen2Tokenizer gives with add_special_tokens=False (it adds nothing: no BOS, no template).
//
// It reads a transformers/diffusers `tokenizer/` folder: tokenizer.json (the tokenizers
// library's file) or vocab.json + merges.txt, each with the tokenizer_config.json beside it,
// whose added_tokens_decoder and special tokens (bos, eos, unk, pad, then
// additional_special_tokens, in that order) are added as transformers adds them: a token not yet
// known takes the next free id. That is how H3's <d>, </d>, ... become 151669... on the real
// vocabulary. Only Qwen2's configuration is accepted; anything else is refused by name.
//
// Text that is not UTF-8 is read with each ill-formed subpart as U+FFFD (unicode_text.h), as
// Python's bytes.decode("utf-8", "replace") would before the reference saw it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace ferry::models::h3 {

// Files larger than this are refused (Qwen's tokenizer.json is 11 MB, its vocab.json 2.8 MB).
inline constexpr std::uint64_t kMaxTokenizerFileBytes = 64ull << 20;
// Ids at or above this are refused (Qwen's run to 151,675; the embedding has 151,936 rows).
inline constexpr std::int64_t kMaxTokenIds = 1 << 21;
// Longest token, in bytes, of the vocabulary or an added token.
inline constexpr std::size_t kMaxTokenBytes = 1024;
// Deepest JSON nesting the tokenizer files may have (tokenizer.json needs 5).
inline constexpr int kMaxJsonDepth = 16;

// One file's text and the name it goes by in messages.
struct TokenizerText {
  std::string_view text;
  std::string_view name;
};

class BpeTokenizer {
 public:
  // `folder` is a tokenizer/ folder or one holding it (a pipeline or text-encoder folder):
  // tokenizer.json if there is one, else vocab.json + merges.txt; tokenizer_config.json beside
  // them when present. Throws Error(kBadModelFile) naming the file when one is missing,
  // malformed or not Qwen2's configuration; Error(kIo) when one cannot be read.
  static BpeTokenizer from_folder(const std::filesystem::path& folder);
  // The texts of those files.
  static BpeTokenizer from_tokenizer_json(TokenizerText tokenizer_json,
                                          std::optional<TokenizerText> config);
  static BpeTokenizer from_vocab_merges(TokenizerText vocab_json, TokenizerText merges_txt,
                                        std::optional<TokenizerText> config);

  BpeTokenizer(BpeTokenizer&&) noexcept;
  BpeTokenizer& operator=(BpeTokenizer&&) noexcept;
  BpeTokenizer(const BpeTokenizer&) = delete;
  BpeTokenizer& operator=(const BpeTokenizer&) = delete;
  ~BpeTokenizer();

  // The ids of `text`, nothing added before or after.
  std::vector<std::int32_t> encode(std::string_view text) const;
  // The text of ids (byte-level tokens back to bytes, added tokens as written); ids out of range
  // are skipped. Bytes that do not form UTF-8 stay as they are.
  std::string decode(std::span<const std::int32_t> ids) const;

  // One past the largest id (vocabulary and added tokens): every id encode() gives is below it.
  std::size_t id_count() const;
  // The id of an added token's text, or of a vocabulary token given as the text it stands for.
  std::optional<std::int32_t> token_id(std::string_view token) const;
  // Where it was read from, for messages.
  const std::string& source() const;

 private:
  struct Impl;
  explicit BpeTokenizer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace ferry::models::h3
