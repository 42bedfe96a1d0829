#include "core/models/umt5/tokenizer.h"

#include <algorithm>
#include <fstream>
#include <system_error>
#include <utility>

#include "core/error.h"
#include "core/io/detail/os_file.h"
#include "core/io/tensor_set.h"
#include "core/models/umt5/text_clean.h"
#include "core/models/umt5/unigram_encoder.h"
#include "core/models/umt5/unigram_model.h"
#include "core/models/umt5/unigram_normalizer.h"
#include "core/tensor/dtype.h"

namespace ferry::models::umt5 {

// Ferry's own SentencePiece unigram implementation (unigram_model.h, unigram_normalizer.h,
// unigram_encoder.h): id-exact with the library, and no library to ship.
struct Tokenizer::Impl {
  Impl(const UnigramModel& model, std::string_view source_name)
      : normalizer(model, source_name),
        encoder(model),
        vocab_size(model.pieces.size()),
        source(source_name) {}

  UnigramNormalizer normalizer;
  UnigramEncoder encoder;
  std::size_t vocab_size;
  std::string source;
};

namespace {

Error bad_model(std::string_view source, std::string_view problem) {
  return Error(ErrorCode::kBadModelFile, std::string(source) + ": " + std::string(problem));
}

}  // namespace

Tokenizer::Tokenizer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Tokenizer::Tokenizer(Tokenizer&&) noexcept = default;
Tokenizer& Tokenizer::operator=(Tokenizer&&) noexcept = default;
Tokenizer::~Tokenizer() = default;

Tokenizer Tokenizer::from_serialized(std::span<const std::byte> model, std::string_view source) {
  return from_unigram(parse_unigram_model(model, source), source);
}

Tokenizer Tokenizer::from_unigram(const UnigramModel& unigram, std::string_view source) {
  // Wan appends id 1 as EOS and pads with id 0: a model that numbers them otherwise is not
  // umT5's, and its ids would mean something else to the encoder.
  const std::int32_t eos = unigram.control_id(unigram.eos_piece);
  const std::int32_t pad = unigram.control_id(unigram.pad_piece);
  if (eos != kEosId || pad != kPadId) {
    throw bad_model(source, "not a T5 tokenizer: its EOS id is " + std::to_string(eos) +
                                " and its pad id " + std::to_string(pad) + " (umT5 uses 1 and 0)");
  }
  return Tokenizer(std::make_unique<Impl>(unigram, source));
}

Tokenizer Tokenizer::from_model_file(const std::filesystem::path& path) {
  const std::string source = io::detail::display(path);
  std::error_code ec;
  const bool exists = std::filesystem::is_regular_file(path, ec);
  if (!exists) throw bad_model(source, "no such tokenizer model file");
  const std::uintmax_t size = std::filesystem::file_size(path, ec);
  if (ec) throw Error(ErrorCode::kIo, source + ": cannot read the size: " + ec.message());
  if (size > kMaxTokenizerModelBytes) {
    throw bad_model(source,
                    "is " + std::to_string(size) + " bytes, too large for a SentencePiece model");
  }
  std::ifstream in(path, std::ios::binary);
  std::vector<std::byte> bytes(static_cast<std::size_t>(size));
  in.read(reinterpret_cast<char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  if (!in || static_cast<std::uintmax_t>(in.gcount()) != size) {
    throw Error(ErrorCode::kIo, source + ": cannot read the tokenizer model");
  }
  return from_serialized(bytes, source);
}

Tokenizer Tokenizer::from_folder(const std::filesystem::path& folder) {
  std::error_code ec;
  for (const auto& candidate :
       {folder / kSpieceModelFile, folder / "tokenizer" / kSpieceModelFile}) {
    if (std::filesystem::is_regular_file(candidate, ec)) return from_model_file(candidate);
  }
  std::string hint;
  if (std::filesystem::is_regular_file(folder / "tokenizer.json", ec)) {
    hint = " (it has tokenizer.json, but Ferry reads the SentencePiece model)";
  }
  throw bad_model(io::detail::display(folder),
                  "no spiece.model in this folder or its tokenizer/" + hint);
}

bool Tokenizer::in_checkpoint(const io::TensorSet& checkpoint) {
  if (checkpoint.find(kSpieceModelTensor) != nullptr) return true;
  const io::GgufHeader* gguf = checkpoint.files().front().gguf();
  return gguf != nullptr && gguf_has_unigram_tokenizer(*gguf);
}

Tokenizer Tokenizer::from_checkpoint(const io::TensorSet& checkpoint) {
  const io::TensorSet::Entry* entry = checkpoint.find(kSpieceModelTensor);
  const io::GgufHeader* gguf = checkpoint.files().front().gguf();
  if (entry == nullptr && gguf != nullptr && gguf_has_unigram_tokenizer(*gguf)) {
    const std::string source = io::detail::display(checkpoint.path()) + " (its tokenizer)";
    return from_unigram(unigram_model_from_gguf(*gguf, source), source);
  }
  if (entry == nullptr) {
    throw Error(ErrorCode::kMissingTensor,
                io::detail::display(checkpoint.path()) +
                    (gguf != nullptr
                         ? ": this GGUF carries no T5 tokenizer; put the model's tokenizer/ folder "
                           "(spiece.model) next to it"
                         : ": no `spiece_model` tensor, so no tokenizer inside; give the "
                           "tokenizer/ folder of the model instead"));
  }
  const io::TensorInfo& t = *entry->tensor;
  const std::string source = io::detail::display(entry->file->path()) + " tensor spiece_model";
  if (t.dtype != DType::kU8 || t.shape.size() != 1) {
    throw bad_model(source, "is " + std::string(dtype_name(t.dtype)) + " of rank " +
                                std::to_string(t.shape.size()) + ", not a U8 byte vector");
  }
  if (t.bytes > kMaxTokenizerModelBytes) {
    throw bad_model(
        source, "is " + std::to_string(t.bytes) + " bytes, too large for a SentencePiece model");
  }
  std::vector<std::byte> bytes(static_cast<std::size_t>(t.bytes));
  const io::MappedView view = entry->file->map(t);
  view.copy_to(0, bytes);
  return from_serialized(bytes, source);
}

TokenIds Tokenizer::encode(std::string_view text) const {
  const std::vector<std::int32_t> pieces = impl_->encoder.encode(impl_->normalizer.normalize(text));
  TokenIds out;
  out.text_pieces = pieces.size();
  const std::size_t kept = std::min(pieces.size(), kMaxTokens - 1);
  out.ids.assign(pieces.begin(), pieces.begin() + static_cast<std::ptrdiff_t>(kept));
  out.ids.push_back(kEosId);
  return out;
}

TokenIds Tokenizer::tokenize(std::string_view prompt) const {
  return encode(clean_prompt(prompt));
}

std::size_t Tokenizer::vocab_size() const {
  return impl_->vocab_size;
}

const std::string& Tokenizer::source() const {
  return impl_->source;
}

}  // namespace ferry::models::umt5
