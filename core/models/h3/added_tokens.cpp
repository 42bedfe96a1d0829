#include "core/models/h3/added_tokens.h"

namespace ferry::models::h3 {

namespace {

std::uint64_t edge_key(std::uint32_t node, unsigned char byte) {
  return (static_cast<std::uint64_t>(node) << 8) | byte;
}

}  // namespace

void AddedTokenMatcher::add(std::string_view content, std::int32_t id) {
  std::uint32_t node = 0;
  for (char c : content) {
    const auto byte = static_cast<unsigned char>(c);
    auto [it, inserted] = edges_.try_emplace(edge_key(node, byte), 0);
    if (inserted) {
      it->second = static_cast<std::uint32_t>(nodes_.size());
      nodes_.push_back(Node{});
    }
    node = it->second;
  }
  nodes_[node].id = id;
}

std::uint32_t AddedTokenMatcher::child(std::uint32_t node, unsigned char byte) const {
  auto it = edges_.find(edge_key(node, byte));
  return it == edges_.end() ? 0 : it->second;
}

void AddedTokenMatcher::split(std::string_view text,
                              const std::function<void(std::string_view)>& on_text,
                              const std::function<void(std::int32_t)>& on_token) const {
  std::size_t text_start = 0;
  std::size_t i = 0;
  while (i < text.size()) {
    // The longest token that starts at i.
    std::size_t match_end = 0;
    std::int32_t match_id = -1;
    std::uint32_t node = 0;
    for (std::size_t j = i; j < text.size(); ++j) {
      node = child(node, static_cast<unsigned char>(text[j]));
      if (node == 0) break;
      if (nodes_[node].id >= 0) {
        match_end = j + 1;
        match_id = nodes_[node].id;
      }
    }
    if (match_id < 0) {
      ++i;
      continue;
    }
    if (i > text_start) on_text(text.substr(text_start, i - text_start));
    on_token(match_id);
    i = text_start = match_end;
  }
  if (text_start < text.size()) on_text(text.substr(text_start));
}

}  // namespace ferry::models::h3
