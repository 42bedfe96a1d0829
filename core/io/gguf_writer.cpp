#include "core/io/gguf_writer.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <system_error>

#include "core/error.h"
#include "core/io/detail/os_file.h"

namespace ferry::io {
namespace {

constexpr std::size_t kChunkBytes = std::size_t{8} << 20;
constexpr std::string_view kAlignmentKey = "general.alignment";

std::uint64_t align_up(std::uint64_t n, std::uint64_t a) {
  return (n + a - 1) / a * a;
}

class ByteWriter {
 public:
  std::vector<std::byte> bytes;

  void uint(std::uint64_t v, std::size_t size) {
    for (std::size_t i = 0; i < size; ++i) {
      bytes.push_back(static_cast<std::byte>(v & 0xff));
      v >>= 8;
    }
  }
  void u32(std::uint32_t v) { uint(v, 4); }
  void u64(std::uint64_t v) { uint(v, 8); }
  void string(std::string_view s) {
    u64(s.size());
    for (char c : s) bytes.push_back(static_cast<std::byte>(c));
  }
  void f32(double v) {
    const auto f = static_cast<float>(v);
    std::uint32_t bits;
    std::memcpy(&bits, &f, 4);
    u32(bits);
  }
  void f64(double v) {
    std::uint64_t bits;
    std::memcpy(&bits, &v, 8);
    u64(bits);
  }
};

std::size_t integer_size(GgufType type) {
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
      return 4;
    case GgufType::kU64:
    case GgufType::kI64:
      return 8;
    default:
      return 0;
  }
}

bool is_signed(GgufType type) {
  return type == GgufType::kI8 || type == GgufType::kI16 || type == GgufType::kI32 ||
         type == GgufType::kI64;
}

void write_array(ByteWriter& out, const GgufValue& v);

void write_scalar(ByteWriter& out, const GgufValue& v) {
  if (v.type == GgufType::kString) {
    out.string(v.str);
  } else if (v.type == GgufType::kF32) {
    out.f32(v.f);
  } else if (v.type == GgufType::kF64) {
    out.f64(v.f);
  } else if (v.type == GgufType::kArray) {
    write_array(out, v);
  } else {
    out.uint(is_signed(v.type) ? static_cast<std::uint64_t>(v.i) : v.u, integer_size(v.type));
  }
}

void write_array(ByteWriter& out, const GgufValue& v) {
  out.u32(static_cast<std::uint32_t>(v.element_type));
  switch (v.element_type) {
    case GgufType::kString:
      out.u64(v.strings.size());
      for (const std::string& s : v.strings) out.string(s);
      return;
    case GgufType::kArray:
      out.u64(v.items.size());
      for (const GgufValue& item : v.items) {
        if (item.type != GgufType::kArray) {
          throw Error(ErrorCode::kBadArgument, "an item of a GGUF array of arrays is no array");
        }
        write_array(out, item);
      }
      return;
    case GgufType::kF32:
    case GgufType::kF64:
      out.u64(v.floats.size());
      for (double f : v.floats) v.element_type == GgufType::kF32 ? out.f32(f) : out.f64(f);
      return;
    default:
      out.u64(v.ints.size());
      for (std::int64_t i : v.ints) {
        out.uint(static_cast<std::uint64_t>(i), integer_size(v.element_type));
      }
      return;
  }
}

}  // namespace

GgufValue gguf_uint(GgufType type, std::uint64_t value) {
  GgufValue v;
  v.type = type;
  v.u = value;
  return v;
}

GgufValue gguf_int(GgufType type, std::int64_t value) {
  GgufValue v;
  v.type = type;
  v.i = value;
  return v;
}

GgufValue gguf_float(GgufType type, double value) {
  GgufValue v;
  v.type = type;
  v.f = value;
  return v;
}

GgufValue gguf_string(std::string value) {
  GgufValue v;
  v.type = GgufType::kString;
  v.str = std::move(value);
  return v;
}

GgufValue gguf_string_array(std::vector<std::string> values) {
  GgufValue v;
  v.type = GgufType::kArray;
  v.element_type = GgufType::kString;
  v.strings = std::move(values);
  return v;
}

GgufValue gguf_int_array(GgufType element_type, std::vector<std::int64_t> values) {
  GgufValue v;
  v.type = GgufType::kArray;
  v.element_type = element_type;
  v.ints = std::move(values);
  return v;
}

GgufValue gguf_float_array(GgufType element_type, std::vector<double> values) {
  GgufValue v;
  v.type = GgufType::kArray;
  v.element_type = element_type;
  v.floats = std::move(values);
  return v;
}

GgufValue gguf_array_array(std::vector<GgufValue> items) {
  GgufValue v;
  v.type = GgufType::kArray;
  v.element_type = GgufType::kArray;
  v.items = std::move(items);
  return v;
}

std::optional<std::uint32_t> ggml_type_from_dtype(DType dtype) {
  for (std::uint32_t type = 0; type <= 30; ++type) {
    if (dtype_from_ggml_type(type) == dtype) return type;
  }
  return std::nullopt;
}

std::uint64_t gguf_tensor_bytes(const TensorSpec& tensor) {
  if (!ggml_type_from_dtype(tensor.dtype)) {
    throw Error(ErrorCode::kBadArgument, "GGUF cannot hold tensor '" + tensor.name + "' of dtype " +
                                             std::string(dtype_name(tensor.dtype)));
  }
  const auto block = static_cast<std::uint64_t>(dtype_block_elems(tensor.dtype));
  if ((tensor.shape.empty() ? 1 : tensor.shape.back()) % block != 0) {
    throw Error(ErrorCode::kBadArgument, "tensor '" + tensor.name + "': rows of " +
                                             std::string(dtype_name(tensor.dtype)) +
                                             " must be whole blocks of " + std::to_string(block));
  }
  std::uint64_t count = 1;
  for (std::uint64_t d : tensor.shape) count *= d;
  return dtype_storage_bytes(tensor.dtype, count);
}

std::vector<std::byte> gguf_header_bytes(const std::vector<GgufKeyValue>& metadata,
                                         const std::vector<TensorSpec>& tensors,
                                         const GgufWriteOptions& options) {
  const std::uint64_t a = options.alignment;
  if (a == 0 || (a & (a - 1)) != 0) {
    throw Error(ErrorCode::kBadArgument,
                "GGUF alignment " + std::to_string(a) + " is not a power of two");
  }
  const auto given = std::find_if(metadata.begin(), metadata.end(),
                                  [](const GgufKeyValue& kv) { return kv.key == kAlignmentKey; });
  if (given != metadata.end() && (given->value.type != GgufType::kU32 || given->value.u != a)) {
    throw Error(ErrorCode::kBadArgument,
                "general.alignment disagrees with the writer's alignment " + std::to_string(a));
  }
  const bool add_alignment = given == metadata.end() && a != 32;

  ByteWriter out;
  out.u32(0x46554747);  // "GGUF"
  out.u32(3);
  out.u64(tensors.size());
  out.u64(metadata.size() + (add_alignment ? 1 : 0));
  for (const GgufKeyValue& kv : metadata) {
    out.string(kv.key);
    out.u32(static_cast<std::uint32_t>(kv.value.type));
    write_scalar(out, kv.value);
  }
  if (add_alignment) {
    out.string(kAlignmentKey);
    out.u32(static_cast<std::uint32_t>(GgufType::kU32));
    out.u32(static_cast<std::uint32_t>(a));
  }
  std::uint64_t offset = 0;
  for (const TensorSpec& t : tensors) {
    const std::uint64_t bytes = gguf_tensor_bytes(t);
    out.string(t.name);
    out.u32(static_cast<std::uint32_t>(t.shape.size()));
    for (auto d = t.shape.rbegin(); d != t.shape.rend(); ++d) out.u64(*d);  // ne[0] is the last
    out.u32(*ggml_type_from_dtype(t.dtype));
    out.u64(offset);
    offset += align_up(bytes, a);
  }
  out.bytes.resize(static_cast<std::size_t>(align_up(out.bytes.size(), a)));
  return std::move(out.bytes);
}

void write_gguf(const std::filesystem::path& path, const std::vector<GgufKeyValue>& metadata,
                const std::vector<TensorSpec>& tensors, const TensorFiller& fill,
                const GgufWriteOptions& options) {
  const std::vector<std::byte> header = gguf_header_bytes(metadata, tensors, options);
  std::uint64_t data_bytes = 0;
  for (const TensorSpec& t : tensors)
    data_bytes += align_up(gguf_tensor_bytes(t), options.alignment);

  std::filesystem::path partial = path;
  partial += ".partial";
  const std::string name = detail::display(path);
  auto write_error = [&](const char* what) {
    const int err = errno;
    return posix_error(ErrorCode::kIo, std::string(what) + " " + name, err != 0 ? err : EIO);
  };
  try {
    {
      std::ofstream out(partial, std::ios::binary | std::ios::trunc);
      if (!out) throw write_error("cannot create");
      out.write(reinterpret_cast<const char*>(header.data()),
                static_cast<std::streamsize>(header.size()));
      if (fill) {
        std::vector<std::byte> chunk(kChunkBytes);
        for (std::size_t i = 0; i < tensors.size() && out; ++i) {
          const std::uint64_t bytes = gguf_tensor_bytes(tensors[i]);
          for (std::uint64_t done = 0; done < bytes && out;) {
            const auto n =
                static_cast<std::size_t>(std::min<std::uint64_t>(bytes - done, chunk.size()));
            fill(i, done, std::span(chunk).first(n));
            out.write(reinterpret_cast<const char*>(chunk.data()), static_cast<std::streamsize>(n));
            done += n;
          }
          const std::uint64_t pad = align_up(bytes, options.alignment) - bytes;
          std::fill_n(chunk.begin(), pad, std::byte{0});
          out.write(reinterpret_cast<const char*>(chunk.data()), static_cast<std::streamsize>(pad));
        }
      }
      out.flush();
      if (!out) throw write_error("writing failed (is the disk full?):");
    }
    if (!fill) {
      // The data section as a hole: the file system allocates nothing and it reads as zeros.
      std::error_code ec;
      std::filesystem::resize_file(partial, header.size() + data_bytes, ec);
      if (ec) throw Error(ErrorCode::kIo, "cannot extend " + name + ": " + ec.message());
    }
    detail::flush_to_disk(partial);
    std::error_code ec;
    std::filesystem::rename(partial, path, ec);
    if (ec) {
      throw Error(ErrorCode::kIo,
                  "cannot rename the finished file to " + name + ": " + ec.message());
    }
  } catch (...) {
    std::error_code ignored;
    std::filesystem::remove(partial, ignored);
    throw;
  }
}

}  // namespace ferry::io
