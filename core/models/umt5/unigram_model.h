// A SentencePiece unigram model (a serialized sentencepiece ModelProto, the `spiece.model` of
// umT5): its pieces and the settings of the trainer and the normaliser that encoding depends on.
// Parsing reads the protobuf wire format directly, only the fields encoding needs, and refuses
// whatever the SentencePiece library would refuse to load (no unknown piece, repeated pieces, byte
// pieces without byte fallback or fewer than 256 of them, not a unigram model) plus anything
// malformed, with Error(kBadModelFile) naming `source`.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/io/gguf.h"

namespace ferry::models::umt5 {

// sentencepiece_model.proto's ModelProto.SentencePiece.Type.
enum class PieceType : std::uint8_t {
  kNormal = 1,
  kUnknown = 2,
  kControl = 3,
  kUserDefined = 4,
  kUnused = 5,
  kByte = 6,
};

struct UnigramPiece {
  std::string text;
  float score = 0.0f;
  PieceType type = PieceType::kNormal;
};

struct UnigramModel {
  // Index = id.
  std::vector<UnigramPiece> pieces;
  // The one kUnknown piece.
  std::int32_t unk_id = -1;

  // trainer_spec
  bool byte_fallback = false;
  // byte_fallback models: the id of piece <0xNN> for each byte NN (all 256 exist).
  std::array<std::int32_t, 256> byte_ids{};
  bool treat_whitespace_as_suffix = false;
  std::string bos_piece = "<s>";
  std::string eos_piece = "</s>";
  std::string pad_piece = "<pad>";

  // normalizer_spec
  std::string normalizer_name;
  // Empty: no normalisation beyond whitespace (the "identity" rule).
  std::string precompiled_charsmap;
  bool add_dummy_prefix = true;
  bool remove_extra_whitespaces = true;
  bool escape_whitespaces = true;

  // SentencePiece's PieceToId: a piece that is not kNormal, kUserDefined or kUnused first, then
  // those; unk_id when there is none.
  std::int32_t piece_to_id(std::string_view piece) const;
  // The id of a control piece named `piece` (eos_piece...), or -1, as SentencePiece's eos_id().
  std::int32_t control_id(std::string_view piece) const;
};

// "<0x4A>" for 0x4A: how byte-fallback pieces are spelled.
std::string byte_piece(std::uint8_t byte);

UnigramModel parse_unigram_model(std::span<const std::byte> serialized, std::string_view source);

// The same model from a GGUF's tokenizer keys, as llama.cpp's converter writes them for T5
// encoders (formats_lora_moe.md §1.5): tokenizer.ggml.model "t5", .tokens, .scores, .token_type
// (SentencePiece's piece types), .add_space_prefix, .remove_extra_whitespaces,
// .precompiled_charsmap, .eos_token_id, .padding_token_id. Byte fallback is on when the pieces
// include byte pieces. The same checks as parse_unigram_model; Error(kBadModelFile) naming
// `source` for a file without them or with inconsistent ones.
UnigramModel unigram_model_from_gguf(const io::GgufHeader& header, std::string_view source);

// True when a GGUF carries a T5 SentencePiece tokenizer (tokenizer.ggml.model == "t5").
bool gguf_has_unigram_tokenizer(const io::GgufHeader& header);

}  // namespace ferry::models::umt5
