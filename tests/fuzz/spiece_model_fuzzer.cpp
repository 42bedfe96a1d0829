// libFuzzer target: the umT5 tokenizer built from arbitrary bytes taken as a serialized
// SentencePiece model (what a spiece.model file or a checkpoint's spiece_model tensor holds), then
// used on a few prompts. Loading must give a tokenizer or throw Error(kBadModelFile); encoding a
// loaded one must give ids inside its vocabulary, at most kMaxTokens of them, ending with EOS. A
// crash, a sanitizer report, another exception or a broken promise is a finding.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <span>
#include <string_view>

#include "core/error.h"
#include "core/models/umt5/tokenizer.h"

namespace {

namespace umt5 = ferry::models::umt5;

void check(bool ok) {
  if (!ok) std::abort();
}

void check_ids(const umt5::Tokenizer& tokenizer, const umt5::TokenIds& tokens) {
  check(!tokens.ids.empty() && tokens.ids.size() <= umt5::kMaxTokens);
  check(tokens.ids.back() == umt5::kEosId);
  for (std::int32_t id : tokens.ids) {
    check(id >= 0 && static_cast<std::size_t>(id) < tokenizer.vocab_size());
  }
}

// Prompts that reach the normaliser's and encoder's corners: spaces to collapse, CJK, accents
// that NFKC folds, bytes that are not UTF-8, text no piece covers.
constexpr std::string_view kPrompts[] = {
    "A ferry crosses a misty river at dawn, cinematic, 4K",
    "  two   spaces\tand\na newline  ",
    "\xe7\x8c\xab\xe5\x9c\xa8\xe8\x8d\x89\xe5\x9c\xb0\xe4\xb8\x8a \xef\xbc\xa1\xe2\x85\xa0 "
    "caf\x65\xcc\x81",
    "\xff\xfe\xc3\x28 broken \xe2\x82 utf-8 \xf0\x9f\x98\x80",
    "",
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::span<const std::byte> bytes(reinterpret_cast<const std::byte*>(data), size);
  try {
    const umt5::Tokenizer tokenizer = umt5::Tokenizer::from_serialized(bytes, "fuzz.model");
    check(tokenizer.vocab_size() > 0);
    for (std::string_view prompt : kPrompts) {
      check_ids(tokenizer, tokenizer.encode(prompt));
      check_ids(tokenizer, tokenizer.tokenize(prompt));
    }
  } catch (const ferry::Error& e) {
    check(e.code() == ferry::ErrorCode::kBadModelFile);
  }
  return 0;
}
