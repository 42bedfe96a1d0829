// A soundtrack in memory: interleaved f32 PCM in [-1, 1] (H3's 32 kHz stereo: about 1.3 MB for
// 5 s, so it is held whole, unlike video), and its WAV export.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <vector>

namespace ferry::media {

struct AudioTrack {
  int sample_rate = 0;
  int channels = 0;
  std::vector<float> samples;  // frames · channels values, frame by frame (L, R, L, R, ...)

  bool empty() const { return channels == 0 || samples.empty(); }
  std::int64_t frames() const {
    return channels == 0 ? 0 : static_cast<std::int64_t>(samples.size()) / channels;
  }
  double seconds() const {
    return sample_rate == 0 ? 0.0 : static_cast<double>(frames()) / sample_rate;
  }
};

// Planar channels [channels][frames] (a decoder's output rows) → an interleaved track.
AudioTrack interleave(const std::vector<std::vector<float>>& planar, int sample_rate);

// Error(kBadArgument) unless the track has 1 to 8 channels, a rate of 8 to 192 kHz, whole frames
// and finite samples.
void check_audio_track(const AudioTrack& track, const char* what);

// A 16-bit PCM WAV (RIFF, WAVE_FORMAT_PCM; every player reads it): samples clamped to [-1, 1] and
// rounded to the nearest of 32767 steps. Written to "<name>.partial" and renamed. Error(kIo) when
// it cannot be written, kBadArgument for a track check_audio_track refuses.
void write_wav(const std::filesystem::path& path, const AudioTrack& track);

// The part of `track` a video of `video_frames` frames at `fps` holds: its first
// video_frames / fps seconds (H3's latents give up to 33 ms more sound than frames).
AudioTrack cut_to_video(const AudioTrack& track, std::int64_t video_frames, int fps);

// Error(kBadArgument) when a WAV export is asked (`wav` not empty) of a video without sound.
void check_wav_export(const std::filesystem::path& wav, const AudioTrack& track);

// The soundtrack files that go with a video: `track` written as a WAV to each of `wavs` (each
// through a temporary name), then `commit_video` (the video's rename into place). If writing or
// the commit fails, the WAVs already written are removed, so no WAV appears without its video.
void commit_with_wavs(const std::vector<std::filesystem::path>& wavs, const AudioTrack& track,
                      const std::function<void()>& commit_video);

// Reads a PCM WAV of 16-bit integers or 32-bit floats (what write_wav and most tools write).
// Error(kBadArgument) naming the file for anything else; kIo when it cannot be opened.
AudioTrack read_wav(const std::filesystem::path& path);

}  // namespace ferry::media
