#include "core/io/safetensors_writer.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <system_error>

#include "core/error.h"
#include "core/io/detail/os_file.h"

namespace ferry::io {
namespace {

constexpr std::size_t kChunkBytes = std::size_t{8} << 20;

}  // namespace

std::uint64_t TensorSpec::bytes() const {
  std::uint64_t n = dtype_size(dtype);
  for (std::uint64_t d : shape) n *= d;
  return n;
}

std::string safetensors_header_json(const std::vector<TensorSpec>& tensors,
                                    const std::map<std::string, std::string>& metadata) {
  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  std::uint64_t offset = 0;
  for (const TensorSpec& t : tensors) {
    const std::uint64_t end = offset + t.bytes();
    header[t.name] = {{"dtype", std::string(dtype_name(t.dtype))},
                      {"shape", t.shape},
                      {"data_offsets", {offset, end}}};
    offset = end;
  }
  return header.dump();
}

void write_safetensors(const std::filesystem::path& path, const std::vector<TensorSpec>& tensors,
                       const std::map<std::string, std::string>& metadata, const TensorFiller& fill,
                       const TensorHoles& holes) {
  std::string header = safetensors_header_json(tensors, metadata);
  header.append((8 - (8 + header.size()) % 8) % 8, ' ');

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
      std::byte length[8];
      std::uint64_t n = header.size();
      for (std::byte& b : length) {
        b = static_cast<std::byte>(n & 0xff);
        n >>= 8;
      }
      out.write(reinterpret_cast<const char*>(length), 8);
      out.write(header.data(), static_cast<std::streamsize>(header.size()));
      std::vector<std::byte> chunk(kChunkBytes);
      for (std::size_t i = 0; i < tensors.size() && out; ++i) {
        const std::uint64_t bytes = tensors[i].bytes();
        if (!fill || (holes && holes(i))) {
          // Skipped: the next write (or the final size below) leaves a hole the file system
          // does not allocate.
          out.seekp(static_cast<std::streamoff>(bytes), std::ios::cur);
          continue;
        }
        for (std::uint64_t done = 0; done < bytes && out;) {
          const std::size_t n_chunk =
              static_cast<std::size_t>(std::min<std::uint64_t>(bytes - done, chunk.size()));
          fill(i, done, std::span(chunk).first(n_chunk));
          out.write(reinterpret_cast<const char*>(chunk.data()),
                    static_cast<std::streamsize>(n_chunk));
          done += n_chunk;
        }
      }
      out.flush();
      if (!out) throw write_error("writing failed (is the disk full?):");
    }
    // Holes at the end were only seeked over: the file takes its full size here.
    std::uint64_t file_bytes = 8 + header.size();
    for (const TensorSpec& t : tensors) file_bytes += t.bytes();
    std::error_code size_error;
    if (std::filesystem::file_size(partial, size_error) != file_bytes) {
      std::filesystem::resize_file(partial, file_bytes, size_error);
      if (size_error) {
        throw Error(ErrorCode::kIo, "cannot extend " + name + ": " + size_error.message());
      }
    }
    detail::flush_to_disk(partial);
    std::error_code ec;
    std::filesystem::rename(partial, path, ec);
    if (ec)
      throw Error(ErrorCode::kIo,
                  "cannot rename the finished file to " + name + ": " + ec.message());
  } catch (...) {
    // Whatever failed (the disk, the filler, the rename), nothing half-written stays behind.
    std::error_code ignored;
    std::filesystem::remove(partial, ignored);
    throw;
  }
}

}  // namespace ferry::io
