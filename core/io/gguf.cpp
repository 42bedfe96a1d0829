// The GGUF header reader: a bounds-checked cursor over the header bytes, the key/value section,
// the tensor infos, then the checks that need the whole header (alignment, offsets, overlaps,
// `comfy.gguf.orig_shape.*` reshapes).
#include "core/io/gguf.h"

#include <algorithm>
#include <cstring>
#include <string>
#include <unordered_map>
#include <unordered_set>

#include "core/error.h"

namespace ferry::io {
namespace {

constexpr std::string_view kAlignmentKey = "general.alignment";
constexpr std::string_view kOrigShapePrefix = "comfy.gguf.orig_shape.";
constexpr std::uint64_t kDefaultAlignment = 32;

// Thrown (and caught in try_parse_gguf_header) when the header runs past the bytes given while
// the file holds more: the caller copies a longer prefix and parses again.
struct NeedMoreBytes {};

Error bad_file(std::string_view source, std::string_view problem) {
  std::string message = "invalid GGUF file ";
  message += source;
  message += ": ";
  message += problem;
  return Error(ErrorCode::kBadModelFile, std::move(message));
}

// ggml's names for the type ids it defines (formats_lora_moe.md §1.2), so a file of a type
// Ferry does not read is told apart from a corrupt one.
std::string ggml_type_text(std::uint32_t type) {
  static constexpr std::string_view kNames[] = {
      "F32",   "F16",        "Q4_0",       "Q4_1",       "Q4_2",     "Q4_3",     "Q5_0",
      "Q5_1",  "Q8_0",       "Q8_1",       "Q2_K",       "Q3_K",     "Q4_K",     "Q5_K",
      "Q6_K",  "Q8_K",       "IQ2_XXS",    "IQ2_XS",     "IQ3_XXS",  "IQ1_S",    "IQ4_NL",
      "IQ3_S", "IQ2_S",      "IQ4_XS",     "I8",         "I16",      "I32",      "I64",
      "F64",   "IQ1_M",      "BF16",       "Q4_0_4_4",   "Q4_0_4_8", "Q4_0_8_8", "TQ1_0",
      "TQ2_0", "IQ4_NL_4_4", "IQ4_NL_4_8", "IQ4_NL_8_8", "MXFP4",    "NVFP4"};
  if (type < std::size(kNames)) {
    return std::to_string(type) + " (" + std::string(kNames[type]) + ")";
  }
  return std::to_string(type);
}

bool is_valid_utf8(std::string_view text) {
  for (std::size_t i = 0; i < text.size();) {
    const auto c = static_cast<unsigned char>(text[i]);
    std::size_t extra = 0;
    std::uint32_t cp = 0;
    if (c < 0x80) {
      ++i;
      continue;
    }
    if ((c & 0xe0) == 0xc0) {
      extra = 1;
      cp = c & 0x1f;
    } else if ((c & 0xf0) == 0xe0) {
      extra = 2;
      cp = c & 0x0f;
    } else if ((c & 0xf8) == 0xf0) {
      extra = 3;
      cp = c & 0x07;
    } else {
      return false;
    }
    if (text.size() - i <= extra) return false;
    for (std::size_t k = 1; k <= extra; ++k) {
      const auto cc = static_cast<unsigned char>(text[i + k]);
      if ((cc & 0xc0) != 0x80) return false;
      cp = (cp << 6) | (cc & 0x3f);
    }
    constexpr std::uint32_t kMinimum[] = {0, 0x80, 0x800, 0x10000};
    if (cp < kMinimum[extra] || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return false;
    i += extra + 1;
  }
  return true;
}

// Names and keys end up in messages and maps: valid UTF-8 without control characters.
bool is_printable_name(std::string_view text) {
  return is_valid_utf8(text) && std::none_of(text.begin(), text.end(), [](char c) {
           return static_cast<unsigned char>(c) < 0x20 || c == 0x7f;
         });
}

bool multiply_overflows(std::uint64_t a, std::uint64_t b, std::uint64_t& out) {
  if (a != 0 && b > UINT64_MAX / a) return true;
  out = a * b;
  return false;
}

// The smallest number of bytes one value of `type` occupies in the file (arrays and strings:
// their length fields), so a count can be checked against the bytes left before anything is
// allocated for it.
std::uint64_t min_value_bytes(GgufType type) {
  switch (type) {
    case GgufType::kU8:
    case GgufType::kI8:
    case GgufType::kBool:
      return 1;
    case GgufType::kU16:
    case GgufType::kI16:
      return 2;
    case GgufType::kU32:
    case GgufType::kI32:
    case GgufType::kF32:
      return 4;
    case GgufType::kString:
    case GgufType::kU64:
    case GgufType::kI64:
    case GgufType::kF64:
      return 8;
    case GgufType::kArray:
      return 12;  // element type and count
  }
  return 1;
}

bool is_integer(GgufType type) {
  switch (type) {
    case GgufType::kU8:
    case GgufType::kI8:
    case GgufType::kU16:
    case GgufType::kI16:
    case GgufType::kU32:
    case GgufType::kI32:
    case GgufType::kU64:
    case GgufType::kI64:
    case GgufType::kBool:
      return true;
    default:
      return false;
  }
}

class HeaderReader {
 public:
  HeaderReader(std::span<const std::byte> bytes, std::uint64_t file_size, std::string_view source)
      : bytes_(bytes), file_size_(file_size), source_(source) {}

  std::uint64_t position() const { return pos_; }
  std::uint64_t left_in_file() const { return file_size_ - pos_; }

  // Makes sure `n` more bytes exist; `what` names the field in the truncation message.
  void need(std::uint64_t n, std::string_view what) {
    if (n > file_size_ - pos_) {
      throw bad_file(source_, "the file ends inside the header (truncated?): " + std::string(what) +
                                  " needs " + std::to_string(n) + " bytes at byte " +
                                  std::to_string(pos_) + " but the file has " +
                                  std::to_string(file_size_));
    }
    if (n > bytes_.size() - pos_) throw NeedMoreBytes{};
  }

  std::uint64_t uint(std::size_t size, std::string_view what) {
    need(size, what);
    std::uint64_t v = 0;
    for (std::size_t i = size; i-- > 0;) {
      v = (v << 8) | static_cast<std::uint8_t>(bytes_[static_cast<std::size_t>(pos_) + i]);
    }
    pos_ += size;
    return v;
  }
  std::uint32_t u32(std::string_view what) { return static_cast<std::uint32_t>(uint(4, what)); }
  std::uint64_t u64(std::string_view what) { return uint(8, what); }

  std::string string(std::string_view what) {
    const std::uint64_t n = u64(what);
    if (n > kMaxGgufStringBytes) {
      throw bad_file(source_, std::string(what) + " claims " + std::to_string(n) +
                                  " bytes, more than the " + std::to_string(kMaxGgufStringBytes) +
                                  "-byte limit");
    }
    need(n, what);
    charge(n, 1, what);
    std::string out(reinterpret_cast<const char*>(bytes_.data()) + pos_,
                    static_cast<std::size_t>(n));
    pos_ += n;
    return out;
  }

  // Counts what parsed values will occupy in memory, which can be several times their size in
  // the file (an empty nested array is 12 bytes there, a GgufValue here), against
  // kMaxGgufMetadataBytes, before anything is allocated for them.
  void charge(std::uint64_t count, std::uint64_t bytes_each, std::string_view what) {
    std::uint64_t bytes = 0;
    if (multiply_overflows(count, bytes_each, bytes) || bytes > kMaxGgufMetadataBytes - charged_) {
      throw bad_file(source_, std::string(what) + " would take the parsed metadata past the " +
                                  std::to_string(kMaxGgufMetadataBytes) + "-byte limit");
    }
    charged_ += bytes;
  }

  // A count of records of at least `min_bytes` each: bounded by `limit` and by the file.
  std::uint64_t count(std::uint64_t limit, std::uint64_t min_bytes, std::string_view what) {
    const std::uint64_t n = u64(what);
    if (n > limit) {
      throw bad_file(source_, std::string(what) + " is " + std::to_string(n) + ", more than the " +
                                  "limit of " + std::to_string(limit));
    }
    fits_in_file(n, min_bytes, what);
    return n;
  }

  // `n` records of at least `min_bytes` each must fit in what is left of the file.
  void fits_in_file(std::uint64_t n, std::uint64_t min_bytes, std::string_view what) const {
    if (n > left_in_file() / min_bytes) {
      throw bad_file(source_, std::string(what) + " is " + std::to_string(n) + " but the " +
                                  std::to_string(left_in_file()) +
                                  " bytes left in the file cannot hold that many (truncated?)");
    }
  }

 private:
  std::span<const std::byte> bytes_;
  std::uint64_t file_size_;
  std::string_view source_;
  std::uint64_t pos_ = 0;
  std::uint64_t charged_ = 0;
};

GgufType value_type(HeaderReader& in, std::string_view source, std::string_view key,
                    std::string_view what) {
  const std::uint32_t t = in.u32(what);
  if (t > static_cast<std::uint32_t>(GgufType::kF64)) {
    throw bad_file(
        source, "key " + quote_tensor_name(key) + " has unknown value type " + std::to_string(t));
  }
  return static_cast<GgufType>(t);
}

// One scalar of `type` (not an array) into `out`.
void read_scalar(HeaderReader& in, GgufType type, GgufValue& out) {
  switch (type) {
    case GgufType::kU8:
    case GgufType::kBool:
      out.u = in.uint(1, "a value");
      return;
    case GgufType::kU16:
      out.u = in.uint(2, "a value");
      return;
    case GgufType::kU32:
      out.u = in.uint(4, "a value");
      return;
    case GgufType::kU64:
      out.u = in.uint(8, "a value");
      return;
    case GgufType::kI8:
      out.i = static_cast<std::int8_t>(in.uint(1, "a value"));
      return;
    case GgufType::kI16:
      out.i = static_cast<std::int16_t>(in.uint(2, "a value"));
      return;
    case GgufType::kI32:
      out.i = static_cast<std::int32_t>(in.uint(4, "a value"));
      return;
    case GgufType::kI64:
      out.i = static_cast<std::int64_t>(in.uint(8, "a value"));
      return;
    case GgufType::kF32: {
      const auto bits = static_cast<std::uint32_t>(in.uint(4, "a value"));
      float f;
      std::memcpy(&f, &bits, 4);
      out.f = f;
      return;
    }
    case GgufType::kF64: {
      const std::uint64_t bits = in.uint(8, "a value");
      std::memcpy(&out.f, &bits, 8);
      return;
    }
    case GgufType::kString:
      out.str = in.string("a string value");
      return;
    case GgufType::kArray:
      break;
  }
  throw Error(ErrorCode::kInternal, "read_scalar of an array");
}

// An array's body (element type, count, elements); `depth` is 1 for a key's own array.
void read_array(HeaderReader& in, std::string_view source, std::string_view key,
                std::uint32_t depth, GgufValue& out) {
  if (depth > kMaxGgufArrayDepth) {
    throw bad_file(source, "key " + quote_tensor_name(key) + " nests arrays deeper than " +
                               std::to_string(kMaxGgufArrayDepth) + " levels");
  }
  out.type = GgufType::kArray;
  out.element_type = value_type(in, source, key, "an array's element type");
  const std::uint64_t n = in.count(kMaxGgufArrayElements, min_value_bytes(out.element_type),
                                   "the length of array " + quote_tensor_name(key));
  const auto count = static_cast<std::size_t>(n);
  const std::string what = "array " + quote_tensor_name(key);
  switch (out.element_type) {
    case GgufType::kString:
      in.charge(n, sizeof(std::string), what);
      break;
    case GgufType::kArray:
      in.charge(n, sizeof(GgufValue), what);
      break;
    default:
      in.charge(n, 8, what);
      break;
  }
  GgufValue element;
  switch (out.element_type) {
    case GgufType::kString:
      out.strings.reserve(count);
      for (std::size_t i = 0; i < count; ++i) {
        out.strings.push_back(in.string("a string in array " + quote_tensor_name(key)));
      }
      return;
    case GgufType::kArray:
      out.items.reserve(count);
      for (std::size_t i = 0; i < count; ++i) {
        out.items.emplace_back();
        read_array(in, source, key, depth + 1, out.items.back());
      }
      return;
    case GgufType::kF32:
    case GgufType::kF64:
      out.floats.reserve(count);
      for (std::size_t i = 0; i < count; ++i) {
        read_scalar(in, out.element_type, element);
        out.floats.push_back(element.f);
      }
      return;
    case GgufType::kI8:
    case GgufType::kI16:
    case GgufType::kI32:
    case GgufType::kI64:
      out.ints.reserve(count);
      for (std::size_t i = 0; i < count; ++i) {
        read_scalar(in, out.element_type, element);
        out.ints.push_back(element.i);
      }
      return;
    default:  // unsigned and bool
      out.ints.reserve(count);
      for (std::size_t i = 0; i < count; ++i) {
        read_scalar(in, out.element_type, element);
        out.ints.push_back(static_cast<std::int64_t>(element.u));
      }
      return;
  }
}

std::uint64_t read_alignment(const std::vector<GgufKeyValue>& metadata, std::string_view source) {
  for (const GgufKeyValue& kv : metadata) {
    if (kv.key != kAlignmentKey) continue;
    if (kv.value.type != GgufType::kU32) {
      throw bad_file(source, "general.alignment is not a u32 (value type " +
                                 std::to_string(static_cast<std::uint32_t>(kv.value.type)) + ")");
    }
    const std::uint64_t a = kv.value.u;
    if (a == 0 || (a & (a - 1)) != 0 || a > kMaxGgufAlignment) {
      throw bad_file(source, "general.alignment is " + std::to_string(a) +
                                 ", not a power of two up to " + std::to_string(kMaxGgufAlignment));
    }
    return a;
  }
  return kDefaultAlignment;
}

// One tensor info; `offset` is left relative to the data section.
TensorInfo read_tensor_info(HeaderReader& in, std::string_view source, std::uint64_t index) {
  TensorInfo t;
  t.name = in.string("the name of tensor " + std::to_string(index));
  if (t.name.empty()) throw bad_file(source, "tensor " + std::to_string(index) + " has no name");
  if (!is_printable_name(t.name)) {
    throw bad_file(source,
                   "the name of tensor " + std::to_string(index) + " is not printable UTF-8");
  }
  const std::string quoted = quote_tensor_name(t.name);
  const std::uint32_t n_dims = in.u32("the dimension count of tensor " + quoted);
  if (n_dims > kMaxGgufDims) {
    throw bad_file(source, "tensor " + quoted + " has " + std::to_string(n_dims) +
                               " dimensions, more than " + std::to_string(kMaxGgufDims));
  }
  std::uint64_t ne[kMaxGgufDims] = {};
  for (std::uint32_t d = 0; d < n_dims; ++d) {
    ne[d] = in.u64("ne[" + std::to_string(d) + "] of tensor " + quoted);
    if (ne[d] == 0 || ne[d] > static_cast<std::uint64_t>(INT64_MAX)) {
      throw bad_file(source, "tensor " + quoted + " has ne[" + std::to_string(d) +
                                 "] = " + std::to_string(static_cast<std::int64_t>(ne[d])) +
                                 ", not a positive size");
    }
  }
  const std::uint32_t type = in.u32("the type of tensor " + quoted);
  const std::optional<DType> dtype = dtype_from_ggml_type(type);
  if (!dtype) {
    throw bad_file(source, "tensor " + quoted + " has ggml type " + ggml_type_text(type) +
                               ", which Ferry does not read");
  }
  const std::uint64_t offset = in.u64("the offset of tensor " + quoted);

  t.dtype = *dtype;
  const auto block = static_cast<std::uint64_t>(dtype_block_elems(t.dtype));
  const std::uint64_t row = n_dims == 0 ? 1 : ne[0];
  if (row % block != 0) {
    throw bad_file(source, "tensor " + quoted + " has rows of " + std::to_string(row) + " " +
                               std::string(dtype_name(t.dtype)) + " values, not whole blocks of " +
                               std::to_string(block));
  }
  std::uint64_t elements = 1;
  std::uint64_t bytes = row / block * dtype_block_bytes(t.dtype);
  for (std::uint32_t d = 0; d < n_dims; ++d) {
    if (multiply_overflows(elements, ne[d], elements) || elements > INT64_MAX ||
        (d > 0 && multiply_overflows(bytes, ne[d], bytes))) {
      throw bad_file(source, "tensor " + quoted + " has a shape whose size overflows");
    }
  }
  t.shape.assign(std::make_reverse_iterator(ne + n_dims), std::make_reverse_iterator(ne));
  t.offset = offset;
  t.bytes = bytes;
  return t;
}

// `comfy.gguf.orig_shape.<name>`: the shape ComfyUI's converter flattened a tensor from.
void apply_orig_shapes(const std::vector<GgufKeyValue>& metadata, std::vector<TensorInfo>& tensors,
                       std::string_view source) {
  std::unordered_map<std::string_view, TensorInfo*> by_name;
  for (TensorInfo& t : tensors) by_name.emplace(t.name, &t);
  for (const GgufKeyValue& kv : metadata) {
    if (kv.key.rfind(kOrigShapePrefix, 0) != 0) continue;
    const std::string_view name = std::string_view(kv.key).substr(kOrigShapePrefix.size());
    const auto it = by_name.find(name);
    if (it == by_name.end()) continue;  // ComfyUI ignores a shape for a tensor the file lacks
    TensorInfo& t = *it->second;
    const GgufValue& v = kv.value;
    if (v.type != GgufType::kArray || !is_integer(v.element_type) || v.ints.size() > kMaxGgufDims) {
      throw bad_file(source, quote_tensor_name(kv.key) + " is not an integer array of at most " +
                                 std::to_string(kMaxGgufDims) + " sizes");
    }
    std::vector<std::uint64_t> shape;
    std::uint64_t elements = 1;
    for (std::int64_t d : v.ints) {
      if (d <= 0 || multiply_overflows(elements, static_cast<std::uint64_t>(d), elements)) {
        throw bad_file(source, quote_tensor_name(kv.key) +
                                   " holds a size that is not positive "
                                   "or overflows");
      }
      shape.push_back(static_cast<std::uint64_t>(d));
    }
    if (elements != t.element_count()) {
      throw bad_file(source, quote_tensor_name(kv.key) + " has " + std::to_string(elements) +
                                 " elements but tensor " + quote_tensor_name(t.name) + " has " +
                                 std::to_string(t.element_count()));
    }
    const auto block = static_cast<std::uint64_t>(dtype_block_elems(t.dtype));
    if ((shape.empty() ? 1 : shape.back()) % block != 0) {
      // The backends dequantise whole rows of blocks; a row that splits a block cannot be read.
      throw Error(ErrorCode::kUnsupported,
                  "GGUF file " + std::string(source) + ": " + quote_tensor_name(kv.key) +
                      " gives tensor " + quote_tensor_name(t.name) + " rows that split its " +
                      std::string(dtype_name(t.dtype)) + " blocks, which Ferry cannot read");
    }
    t.shape = std::move(shape);
  }
}

GgufHeader parse_header(HeaderReader& in, std::uint64_t file_size, std::string_view source) {
  in.need(4, "the magic");
  const std::uint64_t magic = in.uint(4, "the magic");
  if (magic != 0x46554747) throw bad_file(source, "it does not start with the magic \"GGUF\"");
  GgufHeader header;
  header.version = in.u32("the version");
  if (header.version != 2 && header.version != 3) {
    throw bad_file(source, "it is GGUF version " + std::to_string(header.version) +
                               "; Ferry reads versions 2 and 3");
  }
  // Checked against the file where the tensor infos start, so a file cut inside its key/values
  // is reported there.
  const std::uint64_t n_tensors = in.count(kMaxGgufTensors, 1, "the tensor count");
  // The smallest key/value: an empty key, a type and a one-byte value.
  const std::uint64_t n_kv = in.count(kMaxGgufKeyValues, 8 + 4 + 1, "the key/value count");

  std::unordered_set<std::string> keys;
  header.metadata.reserve(static_cast<std::size_t>(n_kv));
  for (std::uint64_t i = 0; i < n_kv; ++i) {
    GgufKeyValue kv;
    kv.key = in.string("key " + std::to_string(i));
    if (kv.key.empty()) throw bad_file(source, "key " + std::to_string(i) + " is empty");
    if (!is_printable_name(kv.key)) {
      throw bad_file(source, "key " + std::to_string(i) + " is not printable UTF-8");
    }
    if (!keys.insert(kv.key).second) {
      throw bad_file(source, "key " + quote_tensor_name(kv.key) + " appears twice");
    }
    const GgufType type =
        value_type(in, source, kv.key, "the type of key " + quote_tensor_name(kv.key));
    if (type == GgufType::kArray) {
      read_array(in, source, kv.key, 1, kv.value);
    } else {
      kv.value.type = type;
      read_scalar(in, type, kv.value);
    }
    header.metadata.push_back(std::move(kv));
  }
  header.alignment = read_alignment(header.metadata, source);

  // The smallest tensor info: an empty name, no dimensions, a type and an offset.
  in.fits_in_file(n_tensors, 8 + 4 + 4 + 8, "the tensor count");
  std::unordered_set<std::string> names;
  header.tensors.reserve(static_cast<std::size_t>(n_tensors));
  for (std::uint64_t i = 0; i < n_tensors; ++i) {
    TensorInfo t = read_tensor_info(in, source, i);
    if (!names.insert(t.name).second) {
      throw bad_file(source, "tensor " + quote_tensor_name(t.name) + " appears twice");
    }
    header.tensors.push_back(std::move(t));
  }

  const std::uint64_t a = header.alignment;
  header.data_offset = (in.position() + a - 1) / a * a;  // no overflow: position <= file size
  const std::uint64_t data_size =
      file_size > header.data_offset ? file_size - header.data_offset : 0;
  for (TensorInfo& t : header.tensors) {
    if (t.offset % a != 0) {
      throw bad_file(source, "tensor " + quote_tensor_name(t.name) + " starts at data offset " +
                                 std::to_string(t.offset) + ", not a multiple of the alignment " +
                                 std::to_string(a));
    }
    if (t.offset > data_size || t.bytes > data_size - t.offset) {
      throw bad_file(source, "tensor " + quote_tensor_name(t.name) + " needs data bytes [" +
                                 std::to_string(t.offset) + ", " + std::to_string(t.offset) +
                                 " + " + std::to_string(t.bytes) + ") but the data section has " +
                                 std::to_string(data_size) + " bytes (truncated?)");
    }
    t.offset += header.data_offset;
  }
  // Names are unique, so the order (and which pair an overlap names) is the same everywhere.
  std::sort(header.tensors.begin(), header.tensors.end(),
            [](const TensorInfo& x, const TensorInfo& y) {
              return x.offset != y.offset ? x.offset < y.offset
                     : x.bytes != y.bytes ? x.bytes < y.bytes
                                          : x.name < y.name;
            });
  for (std::size_t i = 1; i < header.tensors.size(); ++i) {
    const TensorInfo& previous = header.tensors[i - 1];
    if (header.tensors[i].offset < previous.offset + previous.bytes) {
      throw bad_file(source, "tensors " + quote_tensor_name(previous.name) + " and " +
                                 quote_tensor_name(header.tensors[i].name) + " overlap");
    }
  }
  apply_orig_shapes(header.metadata, header.tensors, source);
  return header;
}

}  // namespace

bool is_gguf(std::span<const std::byte> prefix) {
  return prefix.size() >= 4 && std::memcmp(prefix.data(), "GGUF", 4) == 0;
}

std::optional<DType> dtype_from_ggml_type(std::uint32_t type) {
  switch (type) {
    case 0:
      return DType::kF32;
    case 1:
      return DType::kF16;
    case 2:
      return DType::kQ4_0;
    case 3:
      return DType::kQ4_1;
    case 6:
      return DType::kQ5_0;
    case 7:
      return DType::kQ5_1;
    case 8:
      return DType::kQ8_0;
    case 10:
      return DType::kQ2_K;
    case 11:
      return DType::kQ3_K;
    case 12:
      return DType::kQ4_K;
    case 13:
      return DType::kQ5_K;
    case 14:
      return DType::kQ6_K;
    case 30:
      return DType::kBF16;
    default:
      return std::nullopt;
  }
}

std::optional<GgufHeader> try_parse_gguf_header(std::span<const std::byte> bytes,
                                                std::uint64_t file_size, std::string_view source) {
  if (bytes.size() > file_size) throw Error(ErrorCode::kInternal, "header bytes past the file");
  HeaderReader in(bytes, file_size, source);
  try {
    return parse_header(in, file_size, source);
  } catch (const NeedMoreBytes&) {
    return std::nullopt;
  }
}

GgufHeader parse_gguf_header(std::span<const std::byte> bytes, std::uint64_t file_size,
                             std::string_view source) {
  std::optional<GgufHeader> header = try_parse_gguf_header(bytes, file_size, source);
  if (!header) {
    throw bad_file(source, "the header runs past the first " + std::to_string(bytes.size()) +
                               " bytes (truncated?)");
  }
  return std::move(*header);
}

const GgufValue* GgufHeader::find(std::string_view key) const {
  for (const GgufKeyValue& kv : metadata) {
    if (kv.key == key) return &kv.value;
  }
  return nullptr;
}

std::optional<std::string> GgufHeader::string(std::string_view key) const {
  const GgufValue* v = find(key);
  if (v == nullptr || v->type != GgufType::kString) return std::nullopt;
  return v->str;
}

std::optional<std::int64_t> GgufHeader::integer(std::string_view key) const {
  const GgufValue* v = find(key);
  if (v == nullptr || !is_integer(v->type)) return std::nullopt;
  switch (v->type) {
    case GgufType::kI8:
    case GgufType::kI16:
    case GgufType::kI32:
    case GgufType::kI64:
      return v->i;
    default:
      return static_cast<std::int64_t>(v->u);
  }
}

const std::vector<std::string>* GgufHeader::strings(std::string_view key) const {
  const GgufValue* v = find(key);
  if (v == nullptr || v->type != GgufType::kArray || v->element_type != GgufType::kString) {
    return nullptr;
  }
  return &v->strings;
}

const std::vector<std::int64_t>* GgufHeader::ints(std::string_view key) const {
  const GgufValue* v = find(key);
  if (v == nullptr || v->type != GgufType::kArray || !is_integer(v->element_type)) return nullptr;
  return &v->ints;
}

const std::vector<double>* GgufHeader::floats(std::string_view key) const {
  const GgufValue* v = find(key);
  if (v == nullptr || v->type != GgufType::kArray ||
      (v->element_type != GgufType::kF32 && v->element_type != GgufType::kF64)) {
    return nullptr;
  }
  return &v->floats;
}

}  // namespace ferry::io
