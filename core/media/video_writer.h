// Video output: RGB frames → H.264 MP4 (or, where no H.264 encoder exists, MPEG-4 Part 2),
// yuv420p, at the model's frame rate, with Ferry's metadata in the file and, when the settings
// carry a soundtrack, an AAC track (FFmpeg's native "aac" encoder, which LGPL builds have) muxed in
// sync; in builds without FFmpeg an uncompressed AVI with the same metadata (video_extension())
// and the soundtrack as a 16-bit WAV beside it ("<name>.wav"). Written to "<name>.partial" and
// renamed by finish(); a writer destroyed without finish() (an error, a cancel) leaves nothing.
//
// The soundtrack is given whole when the writer opens (seconds of PCM: small) and encoded as the
// frames stream in, each frame followed by the audio up to its end, so the file is interleaved
// as it is written. It is cut to the video's duration (H3's latents give up to 33 ms more).
#pragma once

#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/media/audio.h"
#include "core/media/image.h"

namespace ferry::media {

struct VideoSettings {
  int width = 0;   // even
  int height = 0;  // even
  int fps = 16;
  // Constant quality: x264's CRF (lower is better; 17 is visually lossless for most content).
  int crf = 17;
  // Key/value tags stored in the MP4 (with `movflags use_metadata_tags`, so any key survives):
  // the prompt, the seed, every setting, Ferry's version. ffprobe and Ferry's own reader show
  // them.
  std::map<std::string, std::string> metadata;
  // Encoders to try, best first; empty: the built-in order (libx264, h264_nvenc, h264_mf,
  // mpeg4). A test pins one.
  std::vector<std::string> encoders;
  // The soundtrack (empty: a silent video). check_audio_track's limits; cut to frames / fps.
  AudioTrack audio;
  int audio_bit_rate = 192000;  // AAC, bits per second for all channels
  // The soundtrack exported as a 16-bit WAV here too (the decoded PCM, cut like the video's track;
  // the user's "--wav FILE"): written when the video is finished, just before its rename, and
  // removed again if that fails. Empty: none. Needs a soundtrack (kBadArgument otherwise).
  std::filesystem::path soundtrack_wav;
};

// The container this build writes: ".mp4" with FFmpeg, ".avi" (uncompressed, core/media/avi.h)
// without it (the mingw-w64 lane).
std::string_view video_extension();

class VideoWriter {
 public:
  // Opens the partial file and the first encoder of the list that starts. Error: kBadArgument for
  // odd or empty sizes, a frame rate outside 1..120 or a soundtrack check_audio_track refuses;
  // kUnsupported when no video encoder (or, with a soundtrack, no AAC encoder) starts; kIo when
  // the file cannot be created.
  VideoWriter(const std::filesystem::path& path, const VideoSettings& settings);
  ~VideoWriter();
  VideoWriter(const VideoWriter&) = delete;
  VideoWriter& operator=(const VideoWriter&) = delete;

  // Encodes one frame (width × height, as the settings say). Error(kIo) when writing fails (a full
  // disk); the writer is then unusable and its partial file is removed on destruction.
  void write(const RgbImage& frame);
  // Flushes the encoders, writes the index, writes the soundtrack's WAV when asked, and renames
  // the file into place.
  void finish();

  // The encoder in use ("libx264", "mpeg4", ...).
  const std::string& encoder() const;
  std::int64_t frames_written() const;
  // Audio frames (samples per channel) encoded so far.
  std::int64_t audio_frames_written() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace ferry::media
