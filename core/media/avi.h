// Uncompressed AVI (RIFF, 24-bit RGB frames, an idx1 index, the settings in an INFO comment):
// the honest fallback video format of builds without FFmpeg (the mingw-w64 test lane). Every
// player reads it; it is large (width · height · 3 bytes a frame), so it is limited to 1 GiB.
// Written to "<name>.partial" and renamed when finished, as every Ferry output.
#pragma once

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "core/io/partial_file.h"
#include "core/media/image.h"

namespace ferry::media {

// The RIFF limit Ferry keeps to (AVI 1.0 readers stop at 1–2 GiB).
inline constexpr std::uint64_t kMaxAviBytes = 1ull << 30;

class AviWriter {
 public:
  // Error(kBadArgument) for empty sizes or a frame rate outside 1..120; kIo when the file
  // cannot be created. `comment` goes to the INFO list (ICMT), `title` to INAM.
  AviWriter(const std::filesystem::path& path, int width, int height, int fps,
            const std::string& title, const std::string& comment);
  ~AviWriter();
  AviWriter(const AviWriter&) = delete;
  AviWriter& operator=(const AviWriter&) = delete;

  // Error(kIo) when writing fails or the file would pass kMaxAviBytes.
  void write(const RgbImage& frame);
  // Writes the index, fills in the header's counts, flushes and renames.
  void finish();
  std::int64_t frames_written() const { return static_cast<std::int64_t>(index_.size()); }

 private:
  void put(const void* data, std::size_t bytes);
  void put32(std::uint32_t v);
  void patch32(std::uint64_t offset, std::uint32_t v);
  [[noreturn]] void failed(const char* what);

  io::PartialFile file_;
  std::ofstream out_;
  int width_ = 0, height_ = 0;
  std::uint32_t frame_bytes_ = 0;  // rows padded to 4 bytes
  std::uint64_t riff_size_at_ = 0, total_frames_at_ = 0, length_at_ = 0, movi_size_at_ = 0;
  std::uint64_t movi_start_ = 0;  // the offset of the 'movi' fourcc
  std::uint64_t written_ = 0;
  std::vector<std::uint32_t> index_;  // each frame chunk's offset from movi_start_
  std::vector<std::uint8_t> row_;
  bool finished_ = false;
};

struct AviInfo {
  int width = 0, height = 0, fps = 0;
  std::int64_t frames = 0;
  std::map<std::string, std::string> info;  // INFO list: "ICMT", "INAM", "ISFT"
};

// Reads an uncompressed 24-bit AVI as AviWriter writes it. Error(kBadArgument) when the file is
// anything else.
AviInfo probe_avi(const std::filesystem::path& path);
std::vector<RgbImage> read_avi_frames(const std::filesystem::path& path);

}  // namespace ferry::media
