// Reading an MP4 back: what the tests check Ferry's output with, and how the app restores the
// settings of a Ferry video dropped on its window (from the metadata).
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "core/media/audio.h"
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
  double seconds = 0;  // the video stream's duration (frames / fps when the header says nothing)
  // The soundtrack, when there is one (audio_codec empty otherwise): "aac", "pcm_s16le", ...
  std::string audio_codec;
  int audio_sample_rate = 0;
  int audio_channels = 0;
  double audio_seconds = 0;  // its stream's duration
};

// Error(kBadArgument) naming the file when it is not a video FFmpeg can read; kIo when it cannot
// be opened.
VideoInfo probe_video(const std::filesystem::path& path);

// The soundtrack decoded to interleaved f32 (an empty track for a silent video). MP4: the first
// audio stream, its encoder delay removed as players remove it; AVI (builds without FFmpeg): the
// WAV beside it. Error(kUnsupported) for a sample format Ferry does not convert.
AudioTrack read_audio(const std::filesystem::path& path);

// Every frame, decoded to RGB. At most `max_frames` (a guard against huge files).
std::vector<RgbImage> read_video_frames(const std::filesystem::path& path,
                                        std::int64_t max_frames = 10000);

}  // namespace ferry::media
