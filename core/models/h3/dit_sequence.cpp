#include "core/models/h3/dit_sequence.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "core/error.h"

namespace ferry::models::h3::dit {
namespace {

// Rotary time per latent frame: 5/3 of the pixel frames it stands for (1 for the first of each
// 5-latent chunk, 4 for the others): 24 fps · 5/3 = 40 units a second, the audio latent rate.
constexpr double kFrameRescale = 5.0 / 3.0;
constexpr int kFramesPerLatent[5] = {1, 4, 4, 4, 4};
constexpr double kSpatialScale = 32.0;

double frame_span(std::int64_t frame) {
  return kFrameRescale * kFramesPerLatent[frame % 5];
}

// numpy's pairwise summation (np.sum of a float64 array, the reference's "last" anchor): blocks
// of 8 partial sums up to 128 values, halves above; it can differ from a running sum in the last
// ulp from 16 values on.
double pairwise_sum(const double* a, std::int64_t n) {
  if (n < 8) {
    double r = 0.0;
    for (std::int64_t i = 0; i < n; ++i) r += a[i];
    return r;
  }
  if (n <= 128) {
    double r[8];
    for (int j = 0; j < 8; ++j) r[j] = a[j];
    std::int64_t i = 8;
    for (; i < n - n % 8; i += 8) {
      for (int j = 0; j < 8; ++j) r[j] += a[i + j];
    }
    double res = ((r[0] + r[1]) + (r[2] + r[3])) + ((r[4] + r[5]) + (r[6] + r[7]));
    for (; i < n; ++i) res += a[i];
    return res;
  }
  std::int64_t half = n / 2;
  half -= half % 8;
  return pairwise_sum(a, half) + pairwise_sum(a + half, n - half);
}

// One aspect-normalised spatial axis of d cells (d/2 patches): numpy's
// linspace(left, left + ratio, d/2, endpoint=False) · 32 with ratio = d/√(h·w), left = (1 −
// ratio)/2, computed as numpy does (step = ((left + ratio) − left) / n; value = k·step + left).
std::vector<double> spatial_grid(std::int64_t cells, std::int64_t patch, double sqrt_area) {
  const double ratio = static_cast<double>(cells) / sqrt_area;
  const double left = (1.0 - ratio) / 2.0;
  const std::int64_t n = cells / patch;
  const double step = ((left + ratio) - left) / static_cast<double>(n);
  std::vector<double> grid(static_cast<std::size_t>(n));
  for (std::int64_t k = 0; k < n; ++k) {
    grid[static_cast<std::size_t>(k)] = (static_cast<double>(k) * step + left) * kSpatialScale;
  }
  return grid;
}

}  // namespace

std::vector<std::int64_t> PackedSequence::video_indices() const {
  std::vector<std::int64_t> out;
  out.reserve(static_cast<std::size_t>(condition_rows + video_rows));
  for (std::int64_t r = condition_start(); r < audio_start(); ++r) out.push_back(r);
  for (std::int64_t r = video_start(); r < length(); ++r) out.push_back(r);
  return out;
}

std::vector<std::int64_t> PackedSequence::audio_indices() const {
  std::vector<std::int64_t> out;
  for (std::int64_t r = audio_start(); r < video_start(); ++r) out.push_back(r);
  return out;
}

PackedSequence build_packed_sequence(std::span<const std::uint8_t> text_tags,
                                     const PackedGeometry& g,
                                     std::span<const KeyframeAnchor> anchors) {
  if (text_tags.empty()) throw Error(ErrorCode::kBadArgument, "the packed sequence has no text");
  if (g.patch <= 0 || g.latent_height <= 0 || g.latent_width <= 0 ||
      g.latent_height % g.patch != 0 || g.latent_width % g.patch != 0 || g.latent_frames <= 0 ||
      g.audio_latents <= 0) {
    throw Error(ErrorCode::kBadArgument,
                "a packed sequence of " + std::to_string(g.latent_frames) + " latent frames of " +
                    std::to_string(g.latent_height) + "x" + std::to_string(g.latent_width) +
                    " and " + std::to_string(g.audio_latents) +
                    " audio latents (sides must be multiples of the patch, counts positive)");
  }
  if (anchors.size() > 2) {
    throw Error(ErrorCode::kBadArgument,
                std::to_string(anchors.size()) + " keyframes; H3 takes a first and a last one");
  }
  PackedSequence s;
  const std::int64_t rows_per_frame = g.rows_per_frame();
  s.text_rows = static_cast<std::int64_t>(text_tags.size());
  s.condition_rows = static_cast<std::int64_t>(anchors.size()) * rows_per_frame;
  s.audio_rows = kAudioChannels * g.audio_latents;
  s.video_rows = g.latent_frames * rows_per_frame;
  const auto length = static_cast<std::size_t>(s.length());
  s.tags.assign(length, kVideoTag);
  s.positions.assign(length, {0.0, 0.0, 0.0});

  const auto text = static_cast<double>(s.text_rows);
  for (std::int64_t i = 0; i < s.text_rows; ++i) {
    s.tags[static_cast<std::size_t>(i)] = text_tags[static_cast<std::size_t>(i)];
    s.positions[static_cast<std::size_t>(i)][0] = static_cast<double>(i);
  }

  const double sqrt_area = std::sqrt(static_cast<double>(g.latent_height * g.latent_width));
  const std::vector<double> h_grid = spatial_grid(g.latent_height, g.patch, sqrt_area);
  const std::vector<double> w_grid = spatial_grid(g.latent_width, g.patch, sqrt_area);
  const auto frame_rows = [&](std::int64_t first_row, double t) {
    std::size_t r = static_cast<std::size_t>(first_row);
    for (double h : h_grid) {
      for (double w : w_grid) s.positions[r++] = {t, h, w};
    }
  };

  std::vector<double> spans(static_cast<std::size_t>(g.latent_frames));
  for (std::int64_t f = 0; f < g.latent_frames; ++f) {
    spans[static_cast<std::size_t>(f)] = frame_span(f);
  }
  for (std::size_t k = 0; k < anchors.size(); ++k) {
    const double t = anchors[k] == KeyframeAnchor::kFirst
                         ? text
                         : text + pairwise_sum(spans.data(), g.latent_frames) - kFrameRescale;
    frame_rows(s.condition_start() + static_cast<std::int64_t>(k) * rows_per_frame, t);
  }

  for (std::int64_t c = 0; c < kAudioChannels; ++c) {
    for (std::int64_t j = 0; j < g.audio_latents; ++j) {
      const auto r = static_cast<std::size_t>(s.audio_start() + c * g.audio_latents + j);
      s.tags[r] = kAudioTag;
      s.positions[r] = {text + static_cast<double>(j), 0.0,
                        c == 0 ? w_grid.front() : w_grid.back()};
    }
  }

  // Frame times: text length plus the exclusive running sum of the spans (torch.cumsum).
  double cumulative = 0.0;
  for (std::int64_t f = 0; f < g.latent_frames; ++f) {
    frame_rows(s.video_start() + f * rows_per_frame, text + cumulative);
    cumulative += spans[static_cast<std::size_t>(f)];
  }
  return s;
}

RowTimesteps row_timesteps(const PackedSequence& s, float t_video, float t_audio) {
  const float t_keyframe = std::max(t_video, kKeyframeNoiseAug);
  std::vector<float> per_row(static_cast<std::size_t>(s.length()), t_video);
  for (std::int64_t r = s.condition_start(); r < s.audio_start(); ++r) {
    per_row[static_cast<std::size_t>(r)] = t_keyframe;
  }
  for (std::int64_t r = s.audio_start(); r < s.video_start(); ++r) {
    per_row[static_cast<std::size_t>(r)] = t_audio;
  }
  RowTimesteps out;
  out.values = per_row;
  std::sort(out.values.begin(), out.values.end());
  out.values.erase(std::unique(out.values.begin(), out.values.end()), out.values.end());
  out.index.reserve(per_row.size());
  for (float t : per_row) {
    const auto at = std::lower_bound(out.values.begin(), out.values.end(), t);
    out.index.push_back(static_cast<std::int32_t>(at - out.values.begin()));
  }
  return out;
}

namespace {

void check_latent(std::size_t values, std::int64_t channels, const PackedGeometry& g,
                  const char* what) {
  const auto want =
      static_cast<std::size_t>(channels * g.latent_frames * g.latent_height * g.latent_width);
  if (g.latent_height % g.patch != 0 || g.latent_width % g.patch != 0 || values != want) {
    throw Error(ErrorCode::kBadArgument,
                std::string(what) + " holds " + std::to_string(values) + " values for " +
                    std::to_string(channels) + " channels of " + std::to_string(g.latent_frames) +
                    "x" + std::to_string(g.latent_height) + "x" + std::to_string(g.latent_width));
  }
}

// Calls f(latent offset, row offset) for every value.
template <typename F>
void for_each_patch_value(std::int64_t channels, const PackedGeometry& g, F&& f) {
  const std::int64_t p = g.patch, hp = g.latent_height / p, wp = g.latent_width / p;
  const std::int64_t width = channels * p * p;
  for (std::int64_t fr = 0; fr < g.latent_frames; ++fr) {
    for (std::int64_t y = 0; y < hp; ++y) {
      for (std::int64_t x = 0; x < wp; ++x) {
        const std::int64_t row = (fr * hp + y) * wp + x;
        for (std::int64_t c = 0; c < channels; ++c) {
          for (std::int64_t ph = 0; ph < p; ++ph) {
            for (std::int64_t pw = 0; pw < p; ++pw) {
              const std::int64_t latent =
                  ((c * g.latent_frames + fr) * g.latent_height + y * p + ph) * g.latent_width +
                  x * p + pw;
              f(static_cast<std::size_t>(latent),
                static_cast<std::size_t>(row * width + (c * p + ph) * p + pw));
            }
          }
        }
      }
    }
  }
}

}  // namespace

std::vector<float> patchify_video(std::span<const float> latent, std::int64_t channels,
                                  const PackedGeometry& g) {
  check_latent(latent.size(), channels, g, "the video latent");
  std::vector<float> rows(latent.size());
  for_each_patch_value(channels, g, [&](std::size_t l, std::size_t r) { rows[r] = latent[l]; });
  return rows;
}

std::vector<float> unpatchify_video(std::span<const float> rows, std::int64_t channels,
                                    const PackedGeometry& g) {
  check_latent(rows.size(), channels, g, "the video rows");
  std::vector<float> latent(rows.size());
  for_each_patch_value(channels, g, [&](std::size_t l, std::size_t r) { latent[l] = rows[r]; });
  return latent;
}

}  // namespace ferry::models::h3::dit
