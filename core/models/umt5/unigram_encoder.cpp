#include "core/models/umt5/unigram_encoder.h"

#include <algorithm>
#include <limits>
#include <utility>

namespace ferry::models::umt5 {
namespace {

constexpr float kUnknownPenalty = 10.0f;
constexpr double kUserDefinedPenalty = 0.1;

// The length of the UTF-8 character a lead byte starts, read from its high bits alone (as
// SentencePiece steps through the lattice; the normaliser has made the text valid UTF-8).
std::size_t utf8_length(unsigned char lead) {
  if (lead < 0xC0) return 1;
  if (lead < 0xE0) return 2;
  if (lead < 0xF0) return 3;
  return 4;
}

// The best segmentation of the text's first `end` bytes: its last piece and its score.
struct BestPath {
  std::int32_t id = -1;
  float score = 0.0f;
  std::int64_t start = -1;  // -1: no path ends here yet
};

}  // namespace

UnigramEncoder::UnigramEncoder(const UnigramModel& model)
    : min_score_(std::numeric_limits<float>::max()),
      max_score_(std::numeric_limits<float>::min()),
      unk_id_(model.unk_id),
      byte_fallback_(model.byte_fallback),
      byte_ids_(model.byte_ids) {
  std::vector<std::pair<std::string_view, std::int32_t>> keys;
  scores_.reserve(model.pieces.size());
  types_.reserve(model.pieces.size());
  for (std::size_t i = 0; i < model.pieces.size(); ++i) {
    const UnigramPiece& p = model.pieces[i];
    scores_.push_back(p.score);
    types_.push_back(p.type);
    if (p.type == PieceType::kNormal) {
      min_score_ = std::min(min_score_, p.score);
      max_score_ = std::max(max_score_, p.score);
    }
    if (p.type == PieceType::kNormal || p.type == PieceType::kUserDefined ||
        p.type == PieceType::kUnused) {
      keys.emplace_back(p.text, static_cast<std::int32_t>(i));
    }
  }
  pieces_ = PieceTrie(std::move(keys));
}

std::vector<std::int32_t> UnigramEncoder::encode(std::string_view normalized) const {
  std::vector<std::int32_t> ids;
  if (normalized.empty()) return ids;
  const std::size_t size = normalized.size();
  const float unknown_score = min_score_ - kUnknownPenalty;

  // best[e]: the best path over normalized[0, e). The arithmetic (float and double as below), the
  // comparisons and the order in which candidates are tried (start ascending, shorter pieces
  // first, the unknown piece last) are SentencePiece's, so that ties and rounding fall the same
  // way.
  std::vector<BestPath> best(size + 1);
  for (std::size_t start = 0; start < size;) {
    const float score_here = best[start].score;
    const std::size_t char_length =
        std::min(utf8_length(static_cast<unsigned char>(normalized[start])), size - start);
    bool has_one_char_piece = false;
    pieces_.for_each_prefix(normalized.substr(start), [&](std::size_t length, std::int32_t id) {
      const auto type = types_[static_cast<std::size_t>(id)];
      if (type == PieceType::kUnused) return;
      BestPath& target = best[start + length];
      // SentencePiece's piece score is a double (its expression mixes the user-defined bonus,
      // a double, with the float scores), so the sum is taken and compared in double and only
      // stored as float: near-ties between segmentations fall by the double sum.
      const double score =
          type == PieceType::kUserDefined
              ? static_cast<double>(static_cast<float>(length) * max_score_) - kUserDefinedPenalty
              : static_cast<double>(scores_[static_cast<std::size_t>(id)]);
      const double candidate = score + static_cast<double>(score_here);
      if (target.start < 0 || candidate > static_cast<double>(target.score)) {
        target = {id, static_cast<float>(candidate), static_cast<std::int64_t>(start)};
      }
      if (length == char_length) has_one_char_piece = true;
    });
    if (!has_one_char_piece) {
      BestPath& target = best[start + char_length];
      const float candidate = unknown_score + score_here;
      if (target.start < 0 || candidate > target.score) {
        target = {unk_id_, candidate, static_cast<std::int64_t>(start)};
      }
    }
    start += char_length;
  }

  // Back from the end: the pieces in reverse, with where each starts.
  std::vector<std::pair<std::size_t, std::int32_t>> path;
  for (std::size_t end = size; end > 0;) {
    const BestPath& node = best[end];
    if (node.start < 0) break;  // cannot happen: every character boundary is reached
    const auto start = static_cast<std::size_t>(node.start);
    path.emplace_back(start, node.id);
    end = start;
  }
  std::reverse(path.begin(), path.end());

  ids.reserve(path.size());
  bool previous_unknown = false;
  for (std::size_t k = 0; k < path.size(); ++k) {
    const auto [start, id] = path[k];
    const bool unknown = id == unk_id_;
    if (unknown && byte_fallback_) {
      const std::size_t end = k + 1 < path.size() ? path[k + 1].first : size;
      for (std::size_t i = start; i < end; ++i) {
        ids.push_back(byte_ids_[static_cast<unsigned char>(normalized[i])]);
      }
    } else if (!(unknown && previous_unknown)) {
      ids.push_back(id);
    }
    previous_unknown = unknown;
  }
  return ids;
}

}  // namespace ferry::models::umt5
