// The unigram model's segmentation of normalised text (unigram_normalizer.h) into piece ids, as
// SentencePiece's Encode gives them: the segmentation whose piece scores sum highest (Viterbi over
// the lattice of vocabulary pieces, walked one UTF-8 character at a time); a character that starts
// no one-character piece may be covered by the unknown piece, scored 10 below the lowest piece;
// user-defined pieces score their length times the highest score, less 0.1, so they always win.
// Then unknown pieces become their UTF-8 bytes' <0xNN> pieces when the model has byte fallback,
// and a run of them becomes one unknown id when it has not. kUnused pieces are never produced.
#pragma once

#include <array>
#include <cstdint>
#include <string_view>
#include <vector>

#include "core/models/umt5/piece_trie.h"
#include "core/models/umt5/unigram_model.h"

namespace ferry::models::umt5 {

class UnigramEncoder {
 public:
  explicit UnigramEncoder(const UnigramModel& model);

  std::vector<std::int32_t> encode(std::string_view normalized) const;

 private:
  // Pieces the lattice may use: kNormal, kUserDefined and kUnused (skipped when met).
  PieceTrie pieces_;
  std::vector<float> scores_;
  std::vector<PieceType> types_;
  float min_score_;
  float max_score_;
  std::int32_t unk_id_;
  bool byte_fallback_;
  std::array<std::int32_t, 256> byte_ids_;
};

}  // namespace ferry::models::umt5
