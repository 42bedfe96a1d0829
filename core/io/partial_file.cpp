#include "core/io/partial_file.h"

#include <cerrno>
#include <fstream>
#include <string>

#include "core/error.h"
#include "core/io/detail/os_file.h"

namespace ferry::io {

PartialFile::PartialFile(std::filesystem::path final_path)
    : final_(std::move(final_path)), partial_(final_) {
  partial_ += ".partial";
}

PartialFile::~PartialFile() {
  if (committed_) return;
  std::error_code ignored;
  std::filesystem::remove(partial_, ignored);
}

void PartialFile::commit() {
  try {
    detail::flush_to_disk(partial_);
    std::error_code ec;
    std::filesystem::rename(partial_, final_, ec);
    if (ec) {
      throw Error(ErrorCode::kIo, "cannot rename the finished file to " + detail::display(final_) +
                                      ": " + ec.message());
    }
    committed_ = true;
  } catch (...) {
    std::error_code ignored;
    std::filesystem::remove(partial_, ignored);
    throw;
  }
}

void write_file_atomically(const std::filesystem::path& path, std::span<const std::byte> bytes) {
  PartialFile file(path);
  {
    std::ofstream out(file.partial_path(), std::ios::binary | std::ios::trunc);
    if (!out) {
      const int err = errno;
      throw posix_error(ErrorCode::kIo, "cannot create " + detail::display(path),
                        err != 0 ? err : EIO);
    }
    out.write(reinterpret_cast<const char*>(bytes.data()),
              static_cast<std::streamsize>(bytes.size()));
    out.flush();
    if (!out) {
      const int err = errno;
      throw posix_error(ErrorCode::kIo,
                        "writing " + detail::display(path) + " failed (is the disk full?)",
                        err != 0 ? err : EIO);
    }
  }
  file.commit();
}

}  // namespace ferry::io
