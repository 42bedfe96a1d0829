#include "core/models/umt5/piece_trie.h"

#include <algorithm>

namespace ferry::models::umt5 {

PieceTrie::PieceTrie(std::vector<std::pair<std::string_view, std::int32_t>> keys) {
  std::sort(keys.begin(), keys.end());
  // Depth first over ranges of the sorted keys that share a prefix of `depth` bytes; a node's
  // children are appended together when it is visited, so they sit next to each other. An explicit
  // stack, not recursion: a hostile model may hold a piece megabytes long.
  struct Pending {
    std::uint32_t node;
    std::size_t begin, end, depth;
  };
  nodes_.emplace_back();
  std::vector<Pending> stack{{0, 0, keys.size(), 0}};
  while (!stack.empty()) {
    auto [node, begin, end, depth] = stack.back();
    stack.pop_back();
    // A repeated key keeps its smallest id.
    while (begin < end && keys[begin].first.size() == depth) {
      if (nodes_[node].id < 0) nodes_[node].id = keys[begin].second;
      ++begin;
    }
    nodes_[node].first_child = static_cast<std::uint32_t>(nodes_.size());
    std::uint16_t children = 0;
    for (std::size_t i = begin; i < end;) {
      const char label = keys[i].first[depth];
      std::size_t j = i + 1;
      while (j < end && keys[j].first[depth] == label) ++j;
      Node child;
      child.label = static_cast<std::uint8_t>(label);
      stack.push_back({static_cast<std::uint32_t>(nodes_.size()), i, j, depth + 1});
      nodes_.push_back(child);
      ++children;
      i = j;
    }
    nodes_[node].child_count = children;
  }
}

std::uint32_t PieceTrie::child(std::uint32_t node, std::uint8_t label) const {
  const Node& n = nodes_[node];
  const auto first = nodes_.begin() + n.first_child;
  const auto last = first + n.child_count;
  const auto it = std::lower_bound(first, last, label,
                                   [](const Node& c, std::uint8_t l) { return c.label < l; });
  if (it == last || it->label != label) return kNone;
  return static_cast<std::uint32_t>(it - nodes_.begin());
}

}  // namespace ferry::models::umt5
