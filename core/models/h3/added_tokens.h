// The added and special tokens of a BPE tokenizer and where they occur in a text: the leftmost
// match first and, of the matches that start there, the longest (the tokenizers library's
// Aho-Corasick "leftmost longest"), on a byte trie of the tokens.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace ferry::models::h3 {

class AddedTokenMatcher {
 public:
  void add(std::string_view content, std::int32_t id);
  bool empty() const { return nodes_.size() <= 1; }

  // Calls `on_text` for each stretch between tokens (never empty) and `on_token` for each
  // token, in the order they come.
  void split(std::string_view text, const std::function<void(std::string_view)>& on_text,
             const std::function<void(std::int32_t)>& on_token) const;

 private:
  struct Node {
    std::int32_t id = -1;  // the token that ends here, or -1
  };
  std::uint32_t child(std::uint32_t node, unsigned char byte) const;
  std::vector<Node> nodes_{Node{}};
  std::unordered_map<std::uint64_t, std::uint32_t> edges_;  // (node << 8 | byte) -> node
};

}  // namespace ferry::models::h3
