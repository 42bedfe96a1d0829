// Reading an MP4 back: what the tests check Ferry's output with, and how the app restores the
// settings of a Ferry video dropped on its window (from the metadata).
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "core/media/image.h"

namespace ferry::media {

struct VideoInfo {
  int width = 0;
  int height = 0;
  double fps = 0;
  std::int64_t frames = 0;   // counted by demuxing, not taken from the header
  std::string codec;         // "h264", "mpeg4", ...
  std::string pixel_format;  // "yuv420p"
  std::map<std::string, std::string> metadata;
};

// Error(kBadArgument) naming the file when it is not a video FFmpeg can read; kIo when it cannot
// be opened.
VideoInfo probe_video(const std::filesystem::path& path);

// Every frame, decoded to RGB. At most `max_frames` (a guard against huge files).
std::vector<RgbImage> read_video_frames(const std::filesystem::path& path,
                                        std::int64_t max_frames = 10000);

}  // namespace ferry::media
