// The umT5 tokenizer (wan.md §A.1): Wan's prompt cleaning (text_clean.h), then the SentencePiece
// unigram model with its own normalisation (umT5's nmt_nfkc charsmap, dummy prefix, whitespace
// collapsing), then EOS, truncated to 512 ids including EOS. Padding the context to 512 rows is
// the encoder's business (§A.4): this returns the real ids and their count.
//
// The model comes from a diffusers `tokenizer/` folder (its spiece.model) or from the
// `spiece_model` U8 tensor that ComfyUI's single-file umT5 checkpoints carry. The encoding is
// Ferry's own implementation of SentencePiece's unigram model (unigram_model.h,
// unigram_normalizer.h, unigram_encoder.h), id for id the library's, on every platform.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace ferry::io {
class TensorSet;
}

namespace ferry::models::umt5 {

struct UnigramModel;

inline constexpr std::int32_t kPadId = 0;
inline constexpr std::int32_t kEosId = 1;
// Wan's text_len: ids per prompt, EOS included.
inline constexpr std::size_t kMaxTokens = 512;
// Model files larger than this are refused (umT5's is 4.5 MB).
inline constexpr std::uint64_t kMaxTokenizerModelBytes = 64ull << 20;
inline constexpr std::string_view kSpieceModelFile = "spiece.model";
inline constexpr std::string_view kSpieceModelTensor = "spiece_model";

struct TokenIds {
  // The pieces' ids (at most kMaxTokens - 1 of them), then kEosId.
  std::vector<std::int32_t> ids;
  // Pieces the text gave before truncation (EOS not counted).
  std::size_t text_pieces = 0;

  // The rows of real context (seq_len in §A.1): pieces kept plus EOS.
  std::size_t length() const { return ids.size(); }
  bool truncated() const { return text_pieces > kMaxTokens - 1; }
};

class Tokenizer {
 public:
  // `folder` is a diffusers `tokenizer/` folder, or a pipeline folder holding one. Throws
  // Error(kBadModelFile) when there is no spiece.model or it is not a T5 SentencePiece model,
  // Error(kIo) when it cannot be read.
  static Tokenizer from_folder(const std::filesystem::path& folder);
  // A SentencePiece .model file. Throws as from_folder.
  static Tokenizer from_model_file(const std::filesystem::path& path);
  // The tokenizer a single-file text-encoder checkpoint carries: its `spiece_model` tensor (U8,
  // 1-D; ComfyUI's files) or, in a GGUF, the tokenizer.ggml.* keys (city96's umT5 GGUFs). Throws
  // Error(kMissingTensor) when the checkpoint has neither, Error(kBadModelFile) when what it has
  // is not a T5 SentencePiece model.
  static Tokenizer from_checkpoint(const io::TensorSet& checkpoint);
  // Whether from_checkpoint would find a tokenizer to read.
  static bool in_checkpoint(const io::TensorSet& checkpoint);
  // A serialized SentencePiece ModelProto; `source` names it in messages.
  static Tokenizer from_serialized(std::span<const std::byte> model, std::string_view source);

  Tokenizer(Tokenizer&&) noexcept;
  Tokenizer& operator=(Tokenizer&&) noexcept;
  Tokenizer(const Tokenizer&) = delete;
  Tokenizer& operator=(const Tokenizer&) = delete;
  ~Tokenizer();

  // What Wan does with a prompt: clean_prompt(), then encode().
  TokenIds tokenize(std::string_view prompt) const;
  // Encodes UTF-8 text as it is (no cleaning): pieces, truncation, EOS.
  TokenIds encode(std::string_view text) const;

  std::size_t vocab_size() const;
  // Where the model came from, for messages.
  const std::string& source() const;

 private:
  struct Impl;
  explicit Tokenizer(std::unique_ptr<Impl> impl);
  static Tokenizer from_unigram(const UnigramModel& unigram, std::string_view source);
  std::unique_ptr<Impl> impl_;
};

}  // namespace ferry::models::umt5
