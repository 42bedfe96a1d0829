// WAV files (core/media/audio.h): RIFF "WAVE" with a "fmt " and a "data" chunk, little-endian.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/io/detail/os_file.h"
#include "core/io/partial_file.h"
#include "core/media/audio.h"

namespace ferry::media {
namespace {

constexpr std::uint16_t kFormatPcm = 1;
constexpr std::uint16_t kFormatFloat = 3;
constexpr std::uint16_t kFormatExtensible = 0xFFFE;
// The RIFF limit (32-bit sizes).
constexpr std::uint64_t kMaxWavBytes = 0xFFFFFFF0u;

void put16(std::vector<std::byte>& out, std::uint16_t v) {
  out.push_back(static_cast<std::byte>(v));
  out.push_back(static_cast<std::byte>(v >> 8));
}
void put32(std::vector<std::byte>& out, std::uint32_t v) {
  put16(out, static_cast<std::uint16_t>(v));
  put16(out, static_cast<std::uint16_t>(v >> 16));
}
void put_id(std::vector<std::byte>& out, const char (&id)[5]) {
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<std::byte>(id[i]));
}

std::int16_t to_pcm16(float v) {
  const float clamped = std::fmax(-1.0f, std::fmin(1.0f, v));
  return static_cast<std::int16_t>(std::lround(clamped * 32767.0f));
}

}  // namespace

AudioTrack interleave(const std::vector<std::vector<float>>& planar, int sample_rate) {
  AudioTrack track;
  track.sample_rate = sample_rate;
  track.channels = static_cast<int>(planar.size());
  const std::size_t frames = planar.empty() ? 0 : planar[0].size();
  for (const auto& channel : planar) {
    if (channel.size() != frames) {
      throw Error(ErrorCode::kInternal, "interleave: channels of different lengths");
    }
  }
  track.samples.resize(frames * planar.size());
  for (std::size_t f = 0; f < frames; ++f) {
    for (std::size_t c = 0; c < planar.size(); ++c)
      track.samples[f * planar.size() + c] = planar[c][f];
  }
  return track;
}

void check_audio_track(const AudioTrack& track, const char* what) {
  const auto bad = [&](const std::string& why) {
    throw Error(ErrorCode::kBadArgument, std::string(what) + ": " + why);
  };
  if (track.channels < 1 || track.channels > 8) {
    bad("a soundtrack has 1 to 8 channels, not " + std::to_string(track.channels));
  }
  if (track.sample_rate < 8000 || track.sample_rate > 192000) {
    bad("the sample rate must be 8 to 192 kHz, not " + std::to_string(track.sample_rate) + " Hz");
  }
  if (track.samples.size() % static_cast<std::size_t>(track.channels) != 0) {
    bad("the samples are not whole frames of " + std::to_string(track.channels) + " channels");
  }
  for (float v : track.samples) {
    if (!std::isfinite(v)) bad("the soundtrack has a sample that is not a number");
  }
}

void write_wav(const std::filesystem::path& path, const AudioTrack& track) {
  check_audio_track(track, "a WAV file");
  const std::uint64_t data_bytes = track.samples.size() * 2;
  if (data_bytes + 44 > kMaxWavBytes) {
    throw Error(ErrorCode::kBadArgument, "the soundtrack is too long for a WAV file");
  }
  std::vector<std::byte> out;
  out.reserve(static_cast<std::size_t>(data_bytes) + 44);
  const auto channels = static_cast<std::uint16_t>(track.channels);
  const auto rate = static_cast<std::uint32_t>(track.sample_rate);
  put_id(out, "RIFF");
  put32(out, static_cast<std::uint32_t>(36 + data_bytes));
  put_id(out, "WAVE");
  put_id(out, "fmt ");
  put32(out, 16);
  put16(out, kFormatPcm);
  put16(out, channels);
  put32(out, rate);
  put32(out, rate * channels * 2);                       // bytes per second
  put16(out, static_cast<std::uint16_t>(channels * 2));  // block align
  put16(out, 16);                                        // bits per sample
  put_id(out, "data");
  put32(out, static_cast<std::uint32_t>(data_bytes));
  for (float v : track.samples) put16(out, static_cast<std::uint16_t>(to_pcm16(v)));
  io::write_file_atomically(path, out);
}

AudioTrack cut_to_video(const AudioTrack& track, std::int64_t video_frames, int fps) {
  AudioTrack cut = track;
  if (fps <= 0 || track.channels <= 0) return cut;
  const std::int64_t frames = std::min(track.frames(), video_frames * track.sample_rate / fps);
  cut.samples.resize(static_cast<std::size_t>(frames * track.channels));
  return cut;
}

void check_wav_export(const std::filesystem::path& wav, const AudioTrack& track) {
  if (!wav.empty() && track.empty()) {
    throw Error(ErrorCode::kBadArgument,
                "no soundtrack to write to " + io::detail::display(wav) + ": the video is silent");
  }
}

void commit_with_wavs(const std::vector<std::filesystem::path>& wavs, const AudioTrack& track,
                      const std::function<void()>& commit_video) {
  std::vector<std::filesystem::path> written;
  try {
    for (const std::filesystem::path& wav : wavs) {
      write_wav(wav, track);
      written.push_back(wav);
    }
    commit_video();
  } catch (...) {
    std::error_code ec;
    for (const std::filesystem::path& wav : written) std::filesystem::remove(wav, ec);
    throw;
  }
}

AudioTrack read_wav(const std::filesystem::path& path) {
  const std::string name = io::detail::display(path);
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(ErrorCode::kIo, "cannot open the sound file " + name);
  const std::vector<char> bytes((std::istreambuf_iterator<char>(in)),
                                std::istreambuf_iterator<char>());
  const auto bad = [&](const std::string& why) {
    return Error(ErrorCode::kBadArgument, name + " is not a WAV file Ferry can read: " + why);
  };
  const auto u16 = [&](std::size_t at) {
    if (at + 2 > bytes.size()) throw bad("it is truncated");
    return static_cast<std::uint16_t>(static_cast<unsigned char>(bytes[at]) |
                                      static_cast<unsigned char>(bytes[at + 1]) << 8);
  };
  const auto u32 = [&](std::size_t at) {
    return static_cast<std::uint32_t>(u16(at)) | static_cast<std::uint32_t>(u16(at + 2)) << 16;
  };
  if (bytes.size() < 12 || std::memcmp(bytes.data(), "RIFF", 4) != 0 ||
      std::memcmp(bytes.data() + 8, "WAVE", 4) != 0) {
    throw bad("no RIFF WAVE header");
  }
  AudioTrack track;
  std::uint16_t format = 0, bits = 0;
  bool have_format = false;
  std::size_t at = 12;
  while (at + 8 <= bytes.size()) {
    const std::uint32_t size = u32(at + 4);
    const std::size_t body = at + 8;
    if (body + size > bytes.size()) throw bad("a chunk runs past the end");
    if (std::memcmp(bytes.data() + at, "fmt ", 4) == 0) {
      if (size < 16) throw bad("its format chunk is too short");
      format = u16(body);
      track.channels = u16(body + 2);
      track.sample_rate = static_cast<int>(u32(body + 4));
      bits = u16(body + 14);
      if (format == kFormatExtensible && size >= 26) format = u16(body + 24);  // the subformat GUID
      have_format = true;
    } else if (std::memcmp(bytes.data() + at, "data", 4) == 0) {
      if (!have_format) throw bad("its data comes before its format");
      const bool pcm16 = format == kFormatPcm && bits == 16;
      const bool float32 = format == kFormatFloat && bits == 32;
      if (!pcm16 && !float32) {
        throw bad("its samples are format " + std::to_string(format) + " of " +
                  std::to_string(bits) + " bits (16-bit PCM or 32-bit float expected)");
      }
      const std::size_t count = size / (bits / 8);
      track.samples.resize(count);
      for (std::size_t i = 0; i < count; ++i) {
        if (pcm16) {
          track.samples[i] =
              static_cast<float>(static_cast<std::int16_t>(u16(body + 2 * i))) / 32767.0f;
        } else {
          const std::uint32_t raw = u32(body + 4 * i);
          std::memcpy(&track.samples[i], &raw, 4);
        }
      }
      check_audio_track(track, name.c_str());
      return track;
    }
    at = body + size + (size & 1);
  }
  throw bad("it has no data chunk");
}

}  // namespace ferry::media
