#include "core/models/umt5/unigram_model.h"

#include <bit>
#include <cmath>
#include <unordered_set>

#include "core/error.h"

namespace ferry::models::umt5 {
namespace {

// Field numbers of sentencepiece_model.proto.
namespace field {
constexpr std::uint32_t kModelPieces = 1;
constexpr std::uint32_t kModelTrainerSpec = 2;
constexpr std::uint32_t kModelNormalizerSpec = 3;

constexpr std::uint32_t kPieceText = 1;
constexpr std::uint32_t kPieceScore = 2;
constexpr std::uint32_t kPieceType = 3;

constexpr std::uint32_t kTrainerModelType = 3;
constexpr std::uint32_t kTrainerTreatWhitespaceAsSuffix = 24;
constexpr std::uint32_t kTrainerByteFallback = 35;
constexpr std::uint32_t kTrainerBosPiece = 46;
constexpr std::uint32_t kTrainerEosPiece = 47;
constexpr std::uint32_t kTrainerPadPiece = 48;

constexpr std::uint32_t kNormalizerName = 1;
constexpr std::uint32_t kNormalizerCharsmap = 2;
constexpr std::uint32_t kNormalizerAddDummyPrefix = 3;
constexpr std::uint32_t kNormalizerRemoveExtraWhitespaces = 4;
constexpr std::uint32_t kNormalizerEscapeWhitespaces = 5;
}  // namespace field

constexpr std::int32_t kUnigramModelType = 1;
// umT5 has 256 000 pieces; the cap bounds what a hostile file can make us allocate.
constexpr std::size_t kMaxPieces = std::size_t{1} << 21;

enum class WireType : std::uint32_t { kVarint = 0, kFixed64 = 1, kLength = 2, kFixed32 = 5 };

Error bad_model(std::string_view source, std::string_view problem) {
  return Error(
      ErrorCode::kBadModelFile,
      std::string(source) + ": not a valid SentencePiece model (" + std::string(problem) + ")");
}

// The protobuf wire format, as far as a ModelProto needs: varints, fixed32/64 and
// length-delimited fields; groups (deprecated, never written by SentencePiece) are refused.
class WireReader {
 public:
  WireReader(std::span<const std::byte> data, std::string_view message, std::string_view source)
      : data_(data), message_(message), source_(source) {}

  bool done() const { return pos_ == data_.size(); }

  // The next field's number and wire type.
  std::pair<std::uint32_t, WireType> tag() {
    const std::uint64_t key = varint();
    const std::uint64_t number = key >> 3;
    const auto type = static_cast<std::uint32_t>(key & 7);
    if (number == 0 || number > (1u << 29) - 1) fail("field number " + std::to_string(number));
    if (type != 0 && type != 1 && type != 2 && type != 5) {
      fail("wire type " + std::to_string(type) + " in field " + std::to_string(number));
    }
    return {static_cast<std::uint32_t>(number), static_cast<WireType>(type)};
  }

  std::uint64_t varint() {
    std::uint64_t value = 0;
    for (int shift = 0; shift < 70; shift += 7) {
      if (pos_ == data_.size()) fail("truncated varint");
      const auto b = static_cast<std::uint8_t>(data_[pos_++]);
      value |= static_cast<std::uint64_t>(b & 0x7F) << shift;
      if ((b & 0x80) == 0) return value;
    }
    fail("varint longer than 10 bytes");
  }

  std::uint32_t fixed32() {
    if (data_.size() - pos_ < 4) fail("truncated fixed32");
    std::uint32_t v = 0;
    for (int i = 0; i < 4; ++i) v |= static_cast<std::uint32_t>(data_[pos_ + i]) << (8 * i);
    pos_ += 4;
    return v;
  }

  std::span<const std::byte> length_delimited() {
    const std::uint64_t n = varint();
    if (n > data_.size() - pos_) {
      fail("a field of " + std::to_string(n) + " bytes where " +
           std::to_string(data_.size() - pos_) + " are left");
    }
    const auto out = data_.subspan(pos_, static_cast<std::size_t>(n));
    pos_ += static_cast<std::size_t>(n);
    return out;
  }

  std::string string() {
    const auto b = length_delimited();
    return std::string(reinterpret_cast<const char*>(b.data()), b.size());
  }

  void skip(WireType type) {
    switch (type) {
      case WireType::kVarint:
        varint();
        return;
      case WireType::kFixed64:
        if (data_.size() - pos_ < 8) fail("truncated fixed64");
        pos_ += 8;
        return;
      case WireType::kLength:
        length_delimited();
        return;
      case WireType::kFixed32:
        fixed32();
        return;
    }
  }

  // A known field must come with the wire type its declaration gives it.
  void expect(std::uint32_t number, WireType got, WireType want) const {
    if (got != want) {
      fail("field " + std::to_string(number) + " has wire type " +
           std::to_string(static_cast<std::uint32_t>(got)) + ", expected " +
           std::to_string(static_cast<std::uint32_t>(want)));
    }
  }

  [[noreturn]] void fail(const std::string& problem) const {
    throw bad_model(source_, std::string(message_) + ": " + problem);
  }

 private:
  std::span<const std::byte> data_;
  std::size_t pos_ = 0;
  std::string_view message_;
  std::string_view source_;
};

void parse_piece(std::span<const std::byte> data, std::string_view source, UnigramPiece& piece) {
  WireReader r(data, "piece", source);
  while (!r.done()) {
    const auto [number, type] = r.tag();
    switch (number) {
      case field::kPieceText:
        r.expect(number, type, WireType::kLength);
        piece.text = r.string();
        break;
      case field::kPieceScore:
        r.expect(number, type, WireType::kFixed32);
        piece.score = std::bit_cast<float>(r.fixed32());
        break;
      case field::kPieceType: {
        r.expect(number, type, WireType::kVarint);
        const auto value = static_cast<std::int32_t>(r.varint());
        if (value < static_cast<std::int32_t>(PieceType::kNormal) ||
            value > static_cast<std::int32_t>(PieceType::kByte)) {
          r.fail("piece type " + std::to_string(value));
        }
        piece.type = static_cast<PieceType>(value);
        break;
      }
      default:
        r.skip(type);
    }
  }
}

void parse_trainer_spec(std::span<const std::byte> data, std::string_view source,
                        UnigramModel& model) {
  WireReader r(data, "trainer_spec", source);
  while (!r.done()) {
    const auto [number, type] = r.tag();
    switch (number) {
      case field::kTrainerModelType: {
        r.expect(number, type, WireType::kVarint);
        const auto value = static_cast<std::int32_t>(r.varint());
        if (value != kUnigramModelType) {
          static constexpr std::string_view kNames[] = {"BPE", "word", "char"};
          if (value < 2 || value > 4) r.fail("model type " + std::to_string(value));
          throw Error(ErrorCode::kBadModelFile,
                      std::string(source) + ": a SentencePiece " + std::string(kNames[value - 2]) +
                          " model; Ferry reads unigram models (as umT5's)");
        }
        break;
      }
      case field::kTrainerTreatWhitespaceAsSuffix:
        r.expect(number, type, WireType::kVarint);
        model.treat_whitespace_as_suffix = r.varint() != 0;
        break;
      case field::kTrainerByteFallback:
        r.expect(number, type, WireType::kVarint);
        model.byte_fallback = r.varint() != 0;
        break;
      case field::kTrainerBosPiece:
      case field::kTrainerEosPiece:
      case field::kTrainerPadPiece: {
        r.expect(number, type, WireType::kLength);
        std::string value = r.string();
        // An empty name means the default one.
        if (value.empty()) break;
        (number == field::kTrainerBosPiece   ? model.bos_piece
         : number == field::kTrainerEosPiece ? model.eos_piece
                                             : model.pad_piece) = std::move(value);
        break;
      }
      default:
        r.skip(type);
    }
  }
}

void parse_normalizer_spec(std::span<const std::byte> data, std::string_view source,
                           UnigramModel& model) {
  WireReader r(data, "normalizer_spec", source);
  while (!r.done()) {
    const auto [number, type] = r.tag();
    switch (number) {
      case field::kNormalizerName:
        r.expect(number, type, WireType::kLength);
        model.normalizer_name = r.string();
        break;
      case field::kNormalizerCharsmap:
        r.expect(number, type, WireType::kLength);
        model.precompiled_charsmap = r.string();
        break;
      case field::kNormalizerAddDummyPrefix:
        r.expect(number, type, WireType::kVarint);
        model.add_dummy_prefix = r.varint() != 0;
        break;
      case field::kNormalizerRemoveExtraWhitespaces:
        r.expect(number, type, WireType::kVarint);
        model.remove_extra_whitespaces = r.varint() != 0;
        break;
      case field::kNormalizerEscapeWhitespaces:
        r.expect(number, type, WireType::kVarint);
        model.escape_whitespaces = r.varint() != 0;
        break;
      default:
        r.skip(type);
    }
  }
}

bool is_normal_piece(PieceType type) {
  return type == PieceType::kNormal || type == PieceType::kUserDefined ||
         type == PieceType::kUnused;
}

// -1 unless `text` is exactly byte_piece(b) for some b.
int byte_of_piece(std::string_view text) {
  auto hex = [](char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  };
  if (text.size() != 6 || text.substr(0, 3) != "<0x" || text[5] != '>') return -1;
  const int hi = hex(text[3]);
  const int lo = hex(text[4]);
  return hi < 0 || lo < 0 ? -1 : hi * 16 + lo;
}

// What SentencePiece's ModelInterface::InitializePieces checks, and that scores are numbers.
void validate_pieces(UnigramModel& model, std::string_view source) {
  std::unordered_set<std::string_view> normal;
  std::unordered_set<std::string_view> reserved;
  std::array<bool, 256> byte_found{};
  for (std::size_t i = 0; i < model.pieces.size(); ++i) {
    const UnigramPiece& p = model.pieces[i];
    const auto id = static_cast<std::int32_t>(i);
    if (!std::isfinite(p.score)) {
      throw bad_model(source, "piece " + std::to_string(i) + " has a score that is not a number");
    }
    if (!(is_normal_piece(p.type) ? normal : reserved).insert(p.text).second) {
      throw bad_model(source, "piece " + std::to_string(i) + " is defined twice");
    }
    if (p.type == PieceType::kUnknown) {
      if (model.unk_id >= 0) throw bad_model(source, "two unknown pieces");
      model.unk_id = id;
    }
    if (p.type == PieceType::kByte) {
      if (!model.byte_fallback) {
        throw bad_model(source, "a byte piece in a model without byte fallback");
      }
      const int b = byte_of_piece(p.text);
      if (b < 0) throw bad_model(source, "byte piece " + std::to_string(i) + " is not <0xNN>");
      byte_found[static_cast<std::size_t>(b)] = true;
      model.byte_ids[static_cast<std::size_t>(b)] = id;
    }
  }
  if (model.unk_id < 0) throw bad_model(source, "no unknown piece");
  if (model.byte_fallback) {
    for (bool found : byte_found) {
      if (!found) throw bad_model(source, "byte fallback without all 256 byte pieces");
    }
  }
}

}  // namespace

std::string byte_piece(std::uint8_t byte) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  return std::string("<0x") + kHex[byte >> 4] + kHex[byte & 15] + ">";
}

std::int32_t UnigramModel::piece_to_id(std::string_view piece) const {
  for (int pass = 0; pass < 2; ++pass) {
    for (std::size_t i = 0; i < pieces.size(); ++i) {
      if (is_normal_piece(pieces[i].type) == (pass == 1) && pieces[i].text == piece) {
        return static_cast<std::int32_t>(i);
      }
    }
  }
  return unk_id;
}

std::int32_t UnigramModel::control_id(std::string_view piece) const {
  const std::int32_t id = piece_to_id(piece);
  return id >= 0 && pieces[static_cast<std::size_t>(id)].type == PieceType::kControl ? id : -1;
}

UnigramModel parse_unigram_model(std::span<const std::byte> serialized, std::string_view source) {
  UnigramModel model;
  WireReader r(serialized, "ModelProto", source);
  // Sub-messages that occur twice merge, as protobuf parsing does.
  while (!r.done()) {
    const auto [number, type] = r.tag();
    switch (number) {
      case field::kModelPieces: {
        r.expect(number, type, WireType::kLength);
        if (model.pieces.size() == kMaxPieces) {
          throw bad_model(source, "more than " + std::to_string(kMaxPieces) + " pieces");
        }
        UnigramPiece& piece = model.pieces.emplace_back();
        parse_piece(r.length_delimited(), source, piece);
        if (piece.text.empty()) {
          throw bad_model(source, "piece " + std::to_string(model.pieces.size() - 1) + " is empty");
        }
        break;
      }
      case field::kModelTrainerSpec:
        r.expect(number, type, WireType::kLength);
        parse_trainer_spec(r.length_delimited(), source, model);
        break;
      case field::kModelNormalizerSpec:
        r.expect(number, type, WireType::kLength);
        parse_normalizer_spec(r.length_delimited(), source, model);
        break;
      default:
        r.skip(type);
    }
  }
  validate_pieces(model, source);
  return model;
}

bool gguf_has_unigram_tokenizer(const io::GgufHeader& header) {
  return header.string("tokenizer.ggml.model") == "t5";
}

UnigramModel unigram_model_from_gguf(const io::GgufHeader& header, std::string_view source) {
  if (!gguf_has_unigram_tokenizer(header)) {
    throw bad_model(source, "no T5 SentencePiece tokenizer in its metadata (tokenizer.ggml.model)");
  }
  const std::vector<std::string>* tokens = header.strings("tokenizer.ggml.tokens");
  const std::vector<double>* scores = header.floats("tokenizer.ggml.scores");
  const std::vector<std::int64_t>* types = header.ints("tokenizer.ggml.token_type");
  if (tokens == nullptr || scores == nullptr || types == nullptr) {
    throw bad_model(source, "its tokenizer lacks tokens, scores or token types");
  }
  if (scores->size() != tokens->size() || types->size() != tokens->size()) {
    throw bad_model(source, "its tokenizer has " + std::to_string(tokens->size()) + " tokens, " +
                                std::to_string(scores->size()) + " scores and " +
                                std::to_string(types->size()) + " token types");
  }
  if (tokens->size() > kMaxPieces) {
    throw bad_model(source, "more than " + std::to_string(kMaxPieces) + " pieces");
  }
  UnigramModel model;
  model.pieces.resize(tokens->size());
  for (std::size_t i = 0; i < tokens->size(); ++i) {
    UnigramPiece& piece = model.pieces[i];
    piece.text = (*tokens)[i];
    piece.score = static_cast<float>((*scores)[i]);
    const std::int64_t type = (*types)[i];
    if (type < static_cast<std::int64_t>(PieceType::kNormal) ||
        type > static_cast<std::int64_t>(PieceType::kByte)) {
      throw bad_model(source, "piece " + std::to_string(i) + " has type " + std::to_string(type));
    }
    piece.type = static_cast<PieceType>(type);
    if (piece.text.empty()) throw bad_model(source, "piece " + std::to_string(i) + " is empty");
    if (piece.type == PieceType::kByte) model.byte_fallback = true;
  }
  // Control pieces by id, as the converter records them.
  const auto piece_at = [&](std::string_view key, std::string& out) {
    const std::optional<std::int64_t> id = header.integer(key);
    if (!id) return;
    if (*id < 0 || static_cast<std::size_t>(*id) >= tokens->size()) {
      throw bad_model(source, std::string(key) + " is " + std::to_string(*id) + ", not a piece");
    }
    out = (*tokens)[static_cast<std::size_t>(*id)];
  };
  piece_at("tokenizer.ggml.eos_token_id", model.eos_piece);
  piece_at("tokenizer.ggml.padding_token_id", model.pad_piece);
  const auto flag = [&](std::string_view key, bool fallback) {
    const std::optional<std::int64_t> v = header.integer(key);
    return v ? *v != 0 : fallback;
  };
  model.add_dummy_prefix = flag("tokenizer.ggml.add_space_prefix", true);
  model.remove_extra_whitespaces = flag("tokenizer.ggml.remove_extra_whitespaces", true);
  if (const std::vector<std::int64_t>* map = header.ints("tokenizer.ggml.precompiled_charsmap")) {
    model.precompiled_charsmap.reserve(map->size());
    for (std::int64_t byte : *map) {
      if (byte < -128 || byte > 255) {
        throw bad_model(source, "its precompiled_charsmap holds " + std::to_string(byte));
      }
      model.precompiled_charsmap.push_back(static_cast<char>(static_cast<std::uint8_t>(byte)));
    }
  }
  model.normalizer_name = model.precompiled_charsmap.empty() ? "identity" : "nmt_nfkc";
  validate_pieces(model, source);
  return model;
}

}  // namespace ferry::models::umt5
