// A read-only byte trie from strings to ids, for the two prefix searches of SentencePiece
// encoding: the vocabulary pieces that start at a position of the normalised text (Viterbi), and
// the user-defined symbols that the normaliser leaves as written. Built once per model; walking it
// visits the matches shortest first, the order SentencePiece's double-array trie gives them.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>
#include <utility>
#include <vector>

namespace ferry::models::umt5 {

class PieceTrie {
 public:
  PieceTrie() = default;
  // `keys`: non-empty strings (a repeated one keeps its smallest id); the views need not outlive
  // the trie.
  explicit PieceTrie(std::vector<std::pair<std::string_view, std::int32_t>> keys);

  // Calls on_match(length, id) for every key that is a prefix of `text`, shortest first.
  template <typename OnMatch>
  void for_each_prefix(std::string_view text, OnMatch&& on_match) const {
    std::uint32_t node = 0;
    for (std::size_t i = 0; i < text.size() && !nodes_.empty(); ++i) {
      node = child(node, static_cast<std::uint8_t>(text[i]));
      if (node == kNone) return;
      if (nodes_[node].id >= 0) on_match(i + 1, nodes_[node].id);
    }
  }

 private:
  static constexpr std::uint32_t kNone = 0xFFFFFFFFu;
  // Children of a node are consecutive and sorted by label.
  struct Node {
    std::int32_t id = -1;
    std::uint32_t first_child = 0;
    std::uint16_t child_count = 0;
    std::uint8_t label = 0;
  };

  std::uint32_t child(std::uint32_t node, std::uint8_t label) const;

  std::vector<Node> nodes_;
};

}  // namespace ferry::models::umt5
