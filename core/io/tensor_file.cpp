#include "core/io/tensor_file.h"

#include <algorithm>
#include <cctype>
#include <cstring>
#include <string>

#include "core/error.h"
#include "core/io/bnb4.h"
#include "core/io/detail/os_file.h"
#include "core/io/model_folder.h"

namespace ferry::io {

namespace {

constexpr std::uint64_t kFirstGgufChunk = 1ull << 20;

// The header is copied out of the mapping (copy_to turns a file truncated under us into an
// Error) in a chunk that doubles until the header fits: most headers are a few KiB, a umT5
// tokenizer several MiB.
GgufHeader read_gguf_header(const MappedFile& file, const std::string& source) {
  const std::uint64_t file_size = file.size();
  std::vector<std::byte> bytes;
  for (std::uint64_t chunk = std::min(kFirstGgufChunk, file_size);;
       chunk = std::min(chunk * 2, file_size)) {
    const std::size_t have = bytes.size();
    bytes.resize(static_cast<std::size_t>(chunk));
    {
      const MappedView view = file.map(have, chunk - have);
      view.copy_to(0, std::span(bytes).subspan(have));
    }
    if (std::optional<GgufHeader> header = try_parse_gguf_header(bytes, file_size, source)) {
      return std::move(*header);
    }
  }
}

}  // namespace

std::uint64_t TensorInfo::element_count() const {
  std::uint64_t n = 1;
  for (std::uint64_t d : shape) n *= d;
  return n;
}

std::string quote_tensor_name(std::string_view name) {
  constexpr std::size_t kShown = 120;
  std::string out = "'";
  if (name.size() > kShown) {
    std::size_t cut = kShown;  // on a character boundary, so the message stays valid UTF-8
    while (cut > 0 && (static_cast<unsigned char>(name[cut]) & 0xc0) == 0x80) --cut;
    out += name.substr(0, cut);
    out += "...";
  } else {
    out += name;
  }
  out += "'";
  return out;
}

namespace {

// torch.save's formats: a zip archive ("PK\3\4"), or (before PyTorch 1.6, and pickle.dump) a
// pickle stream, which opens with PROTO 2-5.
bool looks_like_pickle(std::span<const std::byte> first) {
  const auto at = [&](std::size_t i) { return std::to_integer<unsigned>(first[i]); };
  if (first.size() >= 4 && at(0) == 'P' && at(1) == 'K' && at(2) == 3 && at(3) == 4) return true;
  return first.size() >= 2 && at(0) == 0x80 && at(1) >= 2 && at(1) <= 5;
}

}  // namespace

TensorFile TensorFile::open(const std::filesystem::path& path) {
  TensorFile result;
  result.file_ = MappedFile::open(path);
  const std::string source = detail::display(path);
  const std::uint64_t file_size = result.file_.size();

  std::byte prefix[8] = {};
  {
    const MappedView view = result.file_.map(0, std::min<std::uint64_t>(8, file_size));
    view.copy_to(0, std::span<std::byte>(prefix, view.size()));
  }
  const std::span<const std::byte> first(prefix, std::min<std::uint64_t>(8, file_size));
  // A file named .gguf is read as GGUF even without the magic, so its error says what is wrong.
  std::string extension = detail::display(path.extension());
  std::transform(extension.begin(), extension.end(), extension.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  if (is_gguf(first) || extension == ".gguf") {
    GgufHeader header = read_gguf_header(result.file_, source);
    result.format_ = TensorFileFormat::kGguf;
    result.data_offset_ = header.data_offset;
    result.tensors_ = header.tensors;
    result.gguf_ = std::move(header);
    result.index_tensors();
    return result;
  }
  std::uint64_t n = 0;
  try {
    n = safetensors_header_length(first, file_size, source);
  } catch (const Error&) {
    // Named as what it is: a PyTorch checkpoint (a zip, or a bare pickle stream).
    if (looks_like_pickle(first)) throw pickle_refusal(path);
    throw;
  }
  // n ≤ the file size and ≤ kMaxSafetensorsHeaderBytes: the bytes exist, the buffer is bounded.
  std::vector<std::byte> bytes(static_cast<std::size_t>(8 + n));
  {
    const MappedView view = result.file_.map(0, 8 + n);
    view.copy_to(0, bytes);
  }
  SafetensorsHeader header = parse_safetensors_header(bytes, file_size, source);
  result.format_ = TensorFileFormat::kSafetensors;
  result.data_offset_ = header.data_offset;
  result.tensors_ = std::move(header.tensors);
  result.metadata_ = std::move(header.metadata);
  // The quant state's size was checked (≤ kMaxBnb4QuantStateBytes) before it is read.
  group_bnb4_weights(
      result.tensors_,
      [&](const TensorInfo& t) {
        std::string text(static_cast<std::size_t>(t.bytes), '\0');
        const MappedView view = result.file_.map(t.offset, t.bytes);
        view.copy_to(0, std::as_writable_bytes(std::span(text)));
        return text;
      },
      source);
  result.index_tensors();
  return result;
}

void TensorFile::index_tensors() {
  index_.clear();
  index_.reserve(tensors_.size());
  for (std::size_t i = 0; i < tensors_.size(); ++i) index_.emplace(tensors_[i].name, i);
}

const TensorInfo* TensorFile::find(std::string_view name) const {
  const auto it = index_.find(name);
  return it == index_.end() ? nullptr : &tensors_[it->second];
}

const TensorInfo& TensorFile::at(std::string_view name) const {
  const TensorInfo* t = find(name);
  if (t == nullptr) {
    throw Error(ErrorCode::kMissingTensor,
                "tensor " + quote_tensor_name(name) + " is not in " + detail::display(path()));
  }
  return *t;
}

}  // namespace ferry::io
