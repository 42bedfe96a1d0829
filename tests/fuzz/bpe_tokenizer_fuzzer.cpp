// libFuzzer target: the H3 (Qwen2) byte-level BPE tokenizer. The first byte picks what the rest
// is: 'J' a tokenizer.json; 'V' vocab.json, merges.txt and tokenizer_config.json separated by NUL
// bytes; anything else text to encode with a small fixed tokenizer (256 byte tokens, a few merges,
// H3's added tokens). Loading must give a tokenizer or throw Error(kBadModelFile); encoding must
// give ids below id_count() and decode them without trouble. A crash, a sanitizer report, another
// exception or a broken promise is a finding.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <optional>
#include <string>
#include <string_view>

#include "core/error.h"
#include "core/models/h3/bpe_tokenizer.h"
#include "core/models/h3/byte_level.h"
#include "core/models/h3/unicode_text.h"

namespace {

namespace h3 = ferry::models::h3;

void check(bool ok) {
  if (!ok) std::abort();
}

void check_encode(const h3::BpeTokenizer& tok, std::string_view text) {
  const std::vector<std::int32_t> ids = tok.encode(text);
  for (std::int32_t id : ids) check(id >= 0 && static_cast<std::size_t>(id) < tok.id_count());
  check(text.empty() == ids.empty());
  (void)tok.decode(ids);
}

constexpr std::string_view kPrompts[] = {
    "A ferry crosses a misty river at dawn, it's 4K <d>[English] Hi!</d>",
    "  two   spaces\tand\r\na newline  ",
    "\xe7\x8c\xab\xe5\x9c\xa8 caf\x65\xcc\x81 \xf0\x9f\x98\x80 'LL 123",
    "\xff\xfe\xc3\x28 broken \xe2\x82 utf-8",
};

const h3::BpeTokenizer& fixed_tokenizer() {
  static const h3::BpeTokenizer tok = [] {
    std::string vocab = "{";
    for (unsigned b = 0; b < 256; ++b) {
      std::string symbol;
      h3::append_utf8(symbol, h3::byte_to_unicode(static_cast<std::uint8_t>(b)));
      if (symbol == "\"" || symbol == "\\") symbol = "\\" + symbol;
      vocab += "\"" + symbol + "\": " + std::to_string(b) + ",";
    }
    vocab +=
        "\"\xc4\xa0t\": 256, \"he\": 257, \"\xc4\xa0the\": 258, \"in\": 259, \"er\": 260, "
        "\"\xc4\xa0\xc4\xa0\": 261}";
    const std::string merges =
        "#version: 0.2\n\xc4\xa0 t\nh e\n\xc4\xa0t he\ni n\ne r\n\xc4\xa0 \xc4\xa0\n";
    const std::string config =
        R"({"added_tokens_decoder": {"262": {"content": "<|endoftext|>", "special": true},
            "263": {"content": "<|image_pad|>", "special": true},
            "264": {"content": "<|image", "normalized": true}},
            "additional_special_tokens": ["<d>", "</d>"]})";
    return h3::BpeTokenizer::from_vocab_merges({vocab, "vocab.json"}, {merges, "merges.txt"},
                                               h3::TokenizerText{config, "tokenizer_config.json"});
  }();
  return tok;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  const char mode = input[0];
  const std::string_view rest = input.substr(1);
  if (mode != 'J' && mode != 'V') {
    check_encode(fixed_tokenizer(), rest);
    return 0;
  }
  try {
    std::optional<h3::BpeTokenizer> tok;
    if (mode == 'J') {
      tok.emplace(h3::BpeTokenizer::from_tokenizer_json({rest, "tokenizer.json"}, std::nullopt));
    } else {
      const std::size_t a = rest.find('\0');
      const std::size_t b = a == std::string_view::npos ? a : rest.find('\0', a + 1);
      const std::string_view vocab = rest.substr(0, a);
      const std::string_view merges =
          a == std::string_view::npos ? std::string_view() : rest.substr(a + 1, b - a - 1);
      std::optional<h3::TokenizerText> config;
      if (b != std::string_view::npos) config = h3::TokenizerText{rest.substr(b + 1), "config"};
      tok.emplace(h3::BpeTokenizer::from_vocab_merges({vocab, "vocab.json"}, {merges, "merges.txt"},
                                                      config));
    }
    check(tok->id_count() > 0);
    for (std::string_view prompt : kPrompts) check_encode(*tok, prompt);
  } catch (const ferry::Error& e) {
    check(e.code() == ferry::ErrorCode::kBadModelFile);
  }
  return 0;
}
