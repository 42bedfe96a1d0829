// Ferry's own SentencePiece unigram implementation (unigram_model/normalizer/encoder) against the
// Python sentencepiece package, id for id: the prompts of tests/data/umt5/reference.json and the
// generated cases of tests/data/umt5/unigram_reference.json (NFKC-sensitive characters, random
// script mixes, whitespace runs, invalid UTF-8, long texts, each normaliser setting, user-defined
// pieces, a model without byte fallback, segmentations that differ by float rounding only). Then
// malformed models: refused with kBadModelFile, and under deterministic random corruption of the
// real model, never a crash.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <limits>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/models/umt5/unigram_encoder.h"
#include "core/models/umt5/unigram_model.h"
#include "core/models/umt5/unigram_normalizer.h"
#include "tests/test_support.h"

namespace ferry::models::umt5 {
namespace {

const nlohmann::json& load_json(const char* name) {
  static std::map<std::string, nlohmann::json> cache;
  auto it = cache.find(name);
  if (it == cache.end()) {
    std::ifstream in(test::data_path(std::string("umt5/") + name), std::ios::binary);
    it = cache.emplace(name, nlohmann::json::parse(in)).first;
  }
  return it->second;
}

std::vector<std::byte> real_model_bytes() {
  return test::read_file(test::data_path("umt5/tokenizer/spiece.model"));
}

std::vector<std::byte> from_hex(std::string_view hex) {
  std::vector<std::byte> out;
  for (std::size_t i = 0; i + 1 < hex.size(); i += 2) {
    out.push_back(static_cast<std::byte>(std::stoi(std::string(hex.substr(i, 2)), nullptr, 16)));
  }
  return out;
}

std::vector<std::byte> from_base64(std::string_view text) {
  std::vector<std::byte> out;
  std::uint32_t bits = 0;
  int count = 0;
  for (const char c : text) {
    int v = -1;
    if (c >= 'A' && c <= 'Z') v = c - 'A';
    if (c >= 'a' && c <= 'z') v = c - 'a' + 26;
    if (c >= '0' && c <= '9') v = c - '0' + 52;
    if (c == '+') v = 62;
    if (c == '/') v = 63;
    if (v < 0) continue;
    bits = (bits << 6) | static_cast<std::uint32_t>(v);
    count += 6;
    if (count >= 8) {
      count -= 8;
      out.push_back(static_cast<std::byte>((bits >> count) & 0xFF));
    }
  }
  return out;
}

// Model, normaliser and encoder together: what the tokenizer holds.
struct Unigram {
  UnigramModel model;
  UnigramNormalizer normalizer;
  UnigramEncoder encoder;

  explicit Unigram(std::span<const std::byte> bytes, std::string_view source = "test model")
      : model(parse_unigram_model(bytes, source)), normalizer(model, source), encoder(model) {}

  std::vector<std::int32_t> encode(std::string_view text) const {
    return encoder.encode(normalizer.normalize(text));
  }
};

const Unigram& reference_model(const std::string& name) {
  static std::map<std::string, std::unique_ptr<Unigram>> models;
  auto it = models.find(name);
  if (it != models.end()) return *it->second;
  for (const auto& m : load_json("unigram_reference.json")["models"]) {
    if (m["name"] != name) continue;
    std::vector<std::byte> bytes =
        m.contains("base64")
            ? from_base64(m["base64"].get<std::string>())
            : test::read_file(test::data_path("umt5/" + m["base"].get<std::string>()));
    const std::vector<std::byte> suffix = from_hex(m["suffix_hex"].get<std::string>());
    bytes.insert(bytes.end(), suffix.begin(), suffix.end());
    return *models.emplace(name, std::make_unique<Unigram>(bytes, name)).first->second;
  }
  throw std::runtime_error("no model " + name + " in unigram_reference.json");
}

TEST(Umt5UnigramModel, reads_the_umt5_like_model) {
  const UnigramModel m = parse_unigram_model(real_model_bytes(), "spiece.model");
  EXPECT_EQ(m.pieces.size(), 1200u);
  EXPECT_EQ(m.unk_id, 2);
  EXPECT_EQ(m.control_id(m.eos_piece), 1);
  EXPECT_EQ(m.control_id(m.pad_piece), 0);
  EXPECT_EQ(m.control_id(m.bos_piece), -1);
  EXPECT_TRUE(m.byte_fallback);
  EXPECT_EQ(m.normalizer_name, "nmt_nfkc");
  EXPECT_FALSE(m.precompiled_charsmap.empty());
  EXPECT_TRUE(m.add_dummy_prefix);
  EXPECT_TRUE(m.remove_extra_whitespaces);
  EXPECT_TRUE(m.escape_whitespaces);
  EXPECT_FALSE(m.treat_whitespace_as_suffix);
  for (int b = 0; b < 256; ++b) {
    const auto id = m.byte_ids[static_cast<std::size_t>(b)];
    EXPECT_EQ(m.pieces[static_cast<std::size_t>(id)].text,
              byte_piece(static_cast<std::uint8_t>(b)));
    EXPECT_EQ(m.pieces[static_cast<std::size_t>(id)].type, PieceType::kByte);
  }
  EXPECT_EQ(m.piece_to_id("</s>"), 1);
  EXPECT_EQ(m.piece_to_id("no such piece"), 2);
}

TEST(Umt5Unigram, gives_the_reference_ids_for_every_tokenizer_prompt) {
  const Unigram spm(real_model_bytes());
  const nlohmann::json& ref = load_json("reference.json");
  const std::size_t keep = ref["max_length"].get<std::size_t>() - 1;
  std::size_t n = 0;
  for (const auto& p : ref["prompts"]) {
    // `ids` are for Ferry's cleaning of the prompt, truncated to 511 pieces, then EOS.
    std::vector<std::int32_t> ids = spm.encode(p["ferry_clean"].get<std::string>());
    EXPECT_EQ(ids.size(), p["text_ids"].get<std::size_t>()) << p["name"];
    if (ids.size() > keep) ids.resize(keep);
    ids.push_back(ref["eos_id"].get<std::int32_t>());
    EXPECT_EQ(ids, p["ids"].get<std::vector<std::int32_t>>()) << p["name"];
    // Wan's own cleaning gives its ids the same way.
    std::vector<std::int32_t> wan = spm.encode(p["wan_clean"].get<std::string>());
    if (wan.size() > keep) wan.resize(keep);
    wan.push_back(ref["eos_id"].get<std::int32_t>());
    EXPECT_EQ(wan, p["wan_ids"].get<std::vector<std::int32_t>>()) << p["name"];
    ++n;
  }
  EXPECT_EQ(n, 21u);
}

std::string case_text(const nlohmann::json& c) {
  if (c.contains("hex")) {
    const std::vector<std::byte> b = from_hex(c["hex"].get<std::string>());
    return std::string(reinterpret_cast<const char*>(b.data()), b.size());
  }
  return c["text"].get<std::string>();
}

TEST(Umt5Unigram, normalizes_and_encodes_every_generated_case_as_sentencepiece) {
  std::size_t cases = 0;
  std::size_t normalized = 0;
  std::map<std::string, std::size_t> per_model;
  for (const auto& c : load_json("unigram_reference.json")["cases"]) {
    const std::string model = c["model"].get<std::string>();
    const Unigram& spm = reference_model(model);
    const std::string text = case_text(c);
    if (c.contains("normalized")) {
      EXPECT_EQ(spm.normalizer.normalize(text), c["normalized"].get<std::string>())
          << model << " case " << cases << ": " << c.dump();
      ++normalized;
    }
    EXPECT_EQ(spm.encode(text), c["ids"].get<std::vector<std::int32_t>>())
        << model << " case " << cases << ": " << c.dump();
    ++cases;
    ++per_model[model];
  }
  EXPECT_GE(cases, 700u);
  EXPECT_GE(normalized, 600u);
  EXPECT_EQ(per_model.size(), 11u);
}

TEST(Umt5Unigram, byte_fallback_spells_unknown_characters_as_their_utf8_bytes) {
  const Unigram spm(real_model_bytes());
  // U+1F9A9 is in no piece of the tiny model: its four bytes come out as <0xF0><0x9F><0xA6><0xA9>.
  const std::vector<std::int32_t> ids = spm.encode("\xF0\x9F\xA6\xA9");
  ASSERT_GE(ids.size(), 4u);
  const std::vector<std::int32_t> tail(ids.end() - 4, ids.end());
  EXPECT_EQ(tail, (std::vector<std::int32_t>{spm.model.byte_ids[0xF0], spm.model.byte_ids[0x9F],
                                             spm.model.byte_ids[0xA6], spm.model.byte_ids[0xA9]}));
}

TEST(Umt5Unigram, an_empty_or_blank_text_has_no_pieces) {
  const Unigram spm(real_model_bytes());
  EXPECT_TRUE(spm.encode("").empty());
  EXPECT_TRUE(spm.encode("   \t\n\xE3\x80\x80 ").empty());
  EXPECT_EQ(spm.normalizer.normalize("  a  b  "),
            "\xE2\x96\x81"
            "a\xE2\x96\x81"
            "b");
}

// ---- malformed models --------------------------------------------------------------------------

// Protocol-buffer bytes, to write small models by hand.
struct Proto {
  std::vector<std::byte> bytes;

  Proto& varint(std::uint64_t v) {
    do {
      bytes.push_back(static_cast<std::byte>((v & 0x7F) | (v >= 0x80 ? 0x80 : 0)));
      v >>= 7;
    } while (v != 0);
    return *this;
  }
  Proto& key(std::uint32_t field, std::uint32_t wire) { return varint((field << 3) | wire); }
  Proto& number(std::uint32_t field, std::uint64_t v) { return key(field, 0).varint(v); }
  Proto& string(std::uint32_t field, std::string_view s) {
    key(field, 2).varint(s.size());
    for (const char c : s) bytes.push_back(static_cast<std::byte>(c));
    return *this;
  }
  Proto& message(std::uint32_t field, const Proto& m) {
    key(field, 2).varint(m.bytes.size());
    bytes.insert(bytes.end(), m.bytes.begin(), m.bytes.end());
    return *this;
  }
  Proto& fixed32(std::uint32_t field, float f) {
    key(field, 5);
    std::uint32_t u = 0;
    std::memcpy(&u, &f, 4);
    for (int i = 0; i < 4; ++i) bytes.push_back(static_cast<std::byte>((u >> (8 * i)) & 0xFF));
    return *this;
  }
};

Proto piece(std::string_view text, float score, PieceType type) {
  Proto p;
  p.string(1, text).fixed32(2, score).number(3, static_cast<std::uint32_t>(type));
  return p;
}

// <pad> </s> <unk> a b ab ▁: a minimal valid model, identity normalisation.
Proto small_model() {
  Proto m;
  m.message(1, piece("<pad>", 0, PieceType::kControl));
  m.message(1, piece("</s>", 0, PieceType::kControl));
  m.message(1, piece("<unk>", 0, PieceType::kUnknown));
  m.message(1, piece("a", -1, PieceType::kNormal));
  m.message(1, piece("b", -2, PieceType::kNormal));
  m.message(1, piece("ab", -2.5, PieceType::kNormal));
  m.message(1, piece("\xE2\x96\x81", -1.5, PieceType::kNormal));
  m.message(2, Proto().number(3, 1));
  return m;
}

ErrorCode code_of(const Proto& m) {
  return test::error_code_of([&] { Unigram u(m.bytes); });
}

TEST(Umt5UnigramModel, a_hand_written_model_encodes_by_its_scores) {
  const Unigram u(small_model().bytes);
  // "▁ab": ▁ + ab (-1.5 - 2.5) beats ▁ + a + b (-4.5); "c" is unknown, a run of two is one <unk>.
  EXPECT_EQ(u.encode("ab"), (std::vector<std::int32_t>{6, 5}));
  EXPECT_EQ(u.encode("a ba"), (std::vector<std::int32_t>{6, 3, 6, 4, 3}));
  EXPECT_EQ(u.encode("acca"), (std::vector<std::int32_t>{6, 3, 2, 3}));
}

TEST(Umt5UnigramModel, refuses_models_sentencepiece_would_not_load) {
  EXPECT_EQ(code_of(Proto()), ErrorCode::kBadModelFile);  // no pieces, no <unk>

  Proto two_unk = small_model();
  two_unk.message(1, piece("<unk2>", 0, PieceType::kUnknown));
  EXPECT_EQ(code_of(two_unk), ErrorCode::kBadModelFile);

  Proto twice = small_model();
  twice.message(1, piece("ab", -3, PieceType::kNormal));
  EXPECT_EQ(code_of(twice), ErrorCode::kBadModelFile);

  Proto empty_piece = small_model();
  empty_piece.message(1, piece("", -3, PieceType::kNormal));
  EXPECT_EQ(code_of(empty_piece), ErrorCode::kBadModelFile);

  Proto byte_without_fallback = small_model();
  byte_without_fallback.message(1, piece("<0x41>", 0, PieceType::kByte));
  EXPECT_EQ(code_of(byte_without_fallback), ErrorCode::kBadModelFile);

  Proto missing_bytes = small_model();
  missing_bytes.message(2, Proto().number(35, 1));
  missing_bytes.message(1, piece("<0x41>", 0, PieceType::kByte));
  EXPECT_EQ(code_of(missing_bytes), ErrorCode::kBadModelFile);

  Proto bad_byte = small_model();
  bad_byte.message(2, Proto().number(35, 1));
  bad_byte.message(1, piece("<0x4g>", 0, PieceType::kByte));
  EXPECT_EQ(code_of(bad_byte), ErrorCode::kBadModelFile);

  Proto bpe = small_model();
  bpe.message(2, Proto().number(3, 2));
  EXPECT_EQ(code_of(bpe), ErrorCode::kBadModelFile);

  Proto nan = small_model();
  nan.message(1, piece("x", std::numeric_limits<float>::quiet_NaN(), PieceType::kNormal));
  EXPECT_EQ(code_of(nan), ErrorCode::kBadModelFile);

  Proto bad_type = small_model();
  bad_type.message(1, Proto().string(1, "x").number(3, 9));
  EXPECT_EQ(code_of(bad_type), ErrorCode::kBadModelFile);
}

TEST(Umt5UnigramModel, refuses_wrong_wire_types_and_absurd_sizes) {
  Proto piece_as_number = small_model();
  piece_as_number.number(1, 7);
  EXPECT_EQ(code_of(piece_as_number), ErrorCode::kBadModelFile);

  Proto score_as_string = small_model();
  score_as_string.message(1, Proto().string(1, "x").string(2, "abcd"));
  EXPECT_EQ(code_of(score_as_string), ErrorCode::kBadModelFile);

  Proto charsmap_as_number = small_model();
  charsmap_as_number.message(3, Proto().number(2, 1));
  EXPECT_EQ(code_of(charsmap_as_number), ErrorCode::kBadModelFile);

  Proto huge_length = small_model();
  huge_length.key(1, 2).varint(std::uint64_t{1} << 60);
  EXPECT_EQ(code_of(huge_length), ErrorCode::kBadModelFile);

  Proto long_varint = small_model();
  long_varint.key(9, 0);
  for (int i = 0; i < 11; ++i) long_varint.bytes.push_back(std::byte{0xFF});
  long_varint.bytes.push_back(std::byte{0x01});
  EXPECT_EQ(code_of(long_varint), ErrorCode::kBadModelFile);

  Proto group = small_model();
  group.key(9, 3);
  EXPECT_EQ(code_of(group), ErrorCode::kBadModelFile);

  Proto field_zero = small_model();
  field_zero.key(0, 0).varint(1);
  EXPECT_EQ(code_of(field_zero), ErrorCode::kBadModelFile);

  Proto truncated_fixed = small_model();
  truncated_fixed.key(9, 5).bytes.push_back(std::byte{1});
  EXPECT_EQ(code_of(truncated_fixed), ErrorCode::kBadModelFile);

  // The charsmap's header claims a trie larger than the blob; or no trie at all.
  std::string blob =
      "\xFF\xFF\xFF\x00"
      "abcd";
  EXPECT_EQ(code_of(Proto(small_model()).message(3, Proto().string(2, blob))),
            ErrorCode::kBadModelFile);
  EXPECT_EQ(
      code_of(Proto(small_model()).message(3, Proto().string(2, std::string("\0\0\0\0x", 5)))),
      ErrorCode::kBadModelFile);
  EXPECT_EQ(code_of(Proto(small_model()).message(3, Proto().string(2, "ab"))),
            ErrorCode::kBadModelFile);

  // A one-unit trie that matches nothing: fine with its texts NUL-ended, refused without.
  const std::string one_unit("\x04\0\0\0\0\0\0\0", 8);
  EXPECT_EQ(code_of(Proto(small_model()).message(3, Proto().string(2, one_unit + "ab"))),
            ErrorCode::kBadModelFile);
  EXPECT_EQ(Unigram(Proto(small_model())
                        .message(3, Proto().string(2, one_unit + std::string("ab\0", 3)))
                        .bytes)
                .encode("ab"),
            (std::vector<std::int32_t>{6, 5}));

  // Unknown fields of every wire type are skipped, as protobuf does.
  Proto unknown = small_model();
  unknown.number(99, 5).string(98, "x").fixed32(97, 1.0f);
  unknown.key(96, 1);
  for (int i = 0; i < 8; ++i) unknown.bytes.push_back(std::byte{0});
  EXPECT_EQ(Unigram(unknown.bytes).encode("ab"), (std::vector<std::int32_t>{6, 5}));
}

// Parsing and encoding either succeed or throw Error; anything else (a crash, another exception,
// a sanitizer report) is a failure.
void load_and_encode(std::span<const std::byte> bytes) {
  static const char* const kTexts[] = {
      "A cat walks across a sunny kitchen table.",
      "\xE8\x89\xB2\xE8\xB0\x83\xE8\x89\xB3\xE4\xB8\xBD\xEF\xBC\x8C ok",  // 色调艳丽，
      "\xEF\xBC\xA1\xEF\xBC\xA2 \xE2\x91\xB4 \xEF\xAC\x81 \xC2\xA8 e\xCC\x81 \xF0\x9F\x90\xB6",
      "  \t\xE3\x80\x80 x \xFF\xC3 ",
  };
  try {
    const Unigram u(bytes, "corrupt model");
    for (const char* t : kTexts) {
      for (const std::int32_t id : u.encode(t)) {
        ASSERT_GE(id, 0);
        ASSERT_LT(static_cast<std::size_t>(id), u.model.pieces.size());
      }
    }
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kBadModelFile) << e.what();
  }
}

// True when the bytes are refused as a bad model file, false when they load.
bool refused(std::span<const std::byte> bytes) {
  try {
    Unigram u(bytes);
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kBadModelFile) << e.what();
    return true;
  }
  return false;
}

TEST(Umt5UnigramModel, truncated_models_are_refused_or_read_never_crash) {
  const std::vector<std::byte> good = real_model_bytes();
  std::size_t n_refused = 0;
  std::size_t tries = 0;
  for (std::size_t n = 0; n < good.size(); n += n < 4096 ? 1 : 997) {
    const std::span<const std::byte> prefix(good.data(), n);
    // A cut between two pieces is a valid shorter model while no byte piece is in it yet.
    if (refused(prefix)) ++n_refused;
    if (n % 61 == 0) load_and_encode(prefix);
    ++tries;
  }
  EXPECT_GE(n_refused + 3, tries);
  EXPECT_TRUE(refused(std::span<const std::byte>(good.data(), good.size() / 2)));
  EXPECT_TRUE(refused(std::span<const std::byte>(good.data(), good.size() - 1)));
}

TEST(Umt5UnigramModel, randomly_corrupted_models_are_refused_or_read_never_crash) {
  const std::vector<std::byte> good = real_model_bytes();
  std::mt19937 rng(20261130);  // mt19937's sequence is fixed by the standard: same cases everywhere
  auto below = [&](std::size_t n) { return static_cast<std::size_t>(rng() % n); };
  for (int round = 0; round < 400; ++round) {
    std::vector<std::byte> bad = good;
    const int edits = 1 + static_cast<int>(below(8));
    for (int e = 0; e < edits; ++e) {
      const std::size_t at = below(bad.size());
      switch (below(5)) {
        case 0:  // flip bits
          bad[at] ^= static_cast<std::byte>(1 + below(255));
          break;
        case 1:  // a run of 0xFF: huge varints, lengths and trie units
          for (std::size_t i = at; i < std::min(bad.size(), at + 1 + below(12)); ++i) {
            bad[i] = std::byte{0xFF};
          }
          break;
        case 2:  // cut
          bad.erase(
              bad.begin() + static_cast<std::ptrdiff_t>(at),
              bad.begin() + static_cast<std::ptrdiff_t>(std::min(bad.size(), at + 1 + below(64))));
          break;
        case 3:  // insert random bytes
          for (std::size_t i = 0, n = 1 + below(16); i < n; ++i) {
            bad.insert(bad.begin() + static_cast<std::ptrdiff_t>(at),
                       static_cast<std::byte>(rng()));
          }
          break;
        default:  // random words in the charsmap region (most of the file)
          for (std::size_t i = at; i < std::min(bad.size(), at + 4 * (1 + below(8))); ++i) {
            bad[i] = static_cast<std::byte>(rng());
          }
      }
      if (bad.empty()) break;
    }
    load_and_encode(bad);
    if (testing::Test::HasFailure()) {
      ADD_FAILURE() << "round " << round;
      return;
    }
  }
}

TEST(Umt5UnigramModel, random_bytes_are_not_a_model) {
  for (std::uint32_t seed = 1; seed <= 64; ++seed) {
    const std::vector<std::byte> junk = test::pattern_bytes(64 + seed * 37, seed);
    EXPECT_EQ(test::error_code_of([&] { Unigram u(junk); }), ErrorCode::kBadModelFile) << seed;
  }
}

}  // namespace
}  // namespace ferry::models::umt5
