// The deepest nesting of arrays and objects in JSON text, counted without parsing: untrusted JSON
// (a catalogue, a hub's answer) is refused when it nests deeper than its format can, before
// nlohmann's recursive parser sees it.
#pragma once

#include <algorithm>
#include <string_view>

namespace ferry::library {

inline int json_nesting_depth(std::string_view text) {
  int depth = 0, deepest = 0;
  bool in_string = false, escaped = false;
  for (char c : text) {
    if (in_string) {
      if (escaped) {
        escaped = false;
      } else if (c == '\\') {
        escaped = true;
      } else if (c == '"') {
        in_string = false;
      }
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      deepest = std::max(deepest, ++depth);
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
  return deepest;
}

}  // namespace ferry::library
