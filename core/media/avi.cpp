#include "core/media/avi.h"

#include <cerrno>
#include <cstring>
#include <span>

#include "core/error.h"
#include "core/io/detail/os_file.h"

namespace ferry::media {
namespace {

constexpr std::uint32_t kAvifHasIndex = 0x10;
constexpr std::uint32_t kAviifKeyframe = 0x10;

std::uint32_t fourcc(const char (&s)[5]) {
  return static_cast<std::uint32_t>(static_cast<unsigned char>(s[0])) |
         static_cast<std::uint32_t>(static_cast<unsigned char>(s[1])) << 8 |
         static_cast<std::uint32_t>(static_cast<unsigned char>(s[2])) << 16 |
         static_cast<std::uint32_t>(static_cast<unsigned char>(s[3])) << 24;
}

std::uint32_t row_bytes(int width) {
  return (static_cast<std::uint32_t>(width) * 3 + 3) / 4 * 4;
}

// ---- reading ----

struct Reader {
  std::vector<std::byte> data;
  std::string name;

  [[noreturn]] void bad(const std::string& why) const {
    throw Error(ErrorCode::kBadArgument, name + " is not an AVI Ferry wrote: " + why);
  }
  std::uint32_t u32(std::uint64_t at) const {
    if (at + 4 > data.size()) bad("it is truncated");
    std::uint32_t v = 0;
    for (int i = 3; i >= 0; --i) v = v << 8 | static_cast<std::uint8_t>(data[at + i]);
    return v;
  }
};

}  // namespace

AviWriter::AviWriter(const std::filesystem::path& path, int width, int height, int fps,
                     const std::string& title, const std::string& comment)
    : file_(path), width_(width), height_(height) {
  if (width <= 0 || height <= 0 || width > 8192 || height > 8192) {
    throw Error(ErrorCode::kBadArgument, "a video must be 1 to 8192 pixels on a side");
  }
  if (fps < 1 || fps > 120) throw Error(ErrorCode::kBadArgument, "the frame rate must be 1 to 120");
  frame_bytes_ = row_bytes(width) * static_cast<std::uint32_t>(height);
  row_.resize(row_bytes(width));
  out_.open(file_.partial_path(), std::ios::binary | std::ios::trunc);
  if (!out_) failed("cannot create");

  const auto info_chunk = [](const char(&id)[5], const std::string& text) {
    std::string chunk(8, '\0');
    const std::uint32_t size = static_cast<std::uint32_t>(text.size() + 1);
    const std::uint32_t cc = fourcc(id);
    std::memcpy(chunk.data(), &cc, 4);  // little-endian hosts only (x86-64, ARM64)
    std::memcpy(chunk.data() + 4, &size, 4);
    chunk += text;
    chunk.push_back('\0');
    if (chunk.size() % 2 != 0) chunk.push_back('\0');
    return chunk;
  };
  const std::string info = info_chunk("ISFT", "Ferry " FERRY_VERSION) + info_chunk("INAM", title) +
                           info_chunk("ICMT", comment);

  put32(fourcc("RIFF"));
  riff_size_at_ = written_;
  put32(0);
  put32(fourcc("AVI "));
  // hdrl: avih (56) + strl (4 + strh 8+56 + strf 8+40)
  put32(fourcc("LIST"));
  put32(4 + (8 + 56) + (8 + 4 + (8 + 56) + (8 + 40)));
  put32(fourcc("hdrl"));
  put32(fourcc("avih"));
  put32(56);
  put32(static_cast<std::uint32_t>(1000000 / fps));  // microseconds per frame
  put32(frame_bytes_ * static_cast<std::uint32_t>(fps));
  put32(0);
  put32(kAvifHasIndex);
  total_frames_at_ = written_;
  put32(0);  // total frames, patched by finish()
  put32(0);
  put32(1);  // streams
  put32(frame_bytes_);
  put32(static_cast<std::uint32_t>(width));
  put32(static_cast<std::uint32_t>(height));
  for (int i = 0; i < 4; ++i) put32(0);
  put32(fourcc("LIST"));
  put32(4 + (8 + 56) + (8 + 40));
  put32(fourcc("strl"));
  put32(fourcc("strh"));
  put32(56);
  put32(fourcc("vids"));
  put32(fourcc("DIB "));
  put32(0);                                // flags
  put32(0);                                // priority, language
  put32(0);                                // initial frames
  put32(1);                                // scale
  put32(static_cast<std::uint32_t>(fps));  // rate: fps = rate / scale
  put32(0);                                // start
  length_at_ = written_;
  put32(0);  // length in frames, patched
  put32(frame_bytes_);
  put32(0xFFFFFFFFu);  // quality: default
  put32(0);            // sample size: varies per chunk
  put32(0);            // rcFrame left, top
  put32(static_cast<std::uint32_t>(width) | static_cast<std::uint32_t>(height) << 16);
  put32(fourcc("strf"));
  put32(40);
  put32(40);  // BITMAPINFOHEADER
  put32(static_cast<std::uint32_t>(width));
  put32(static_cast<std::uint32_t>(height));  // positive: rows bottom-up
  put32(1 | 24u << 16);                       // planes, bits per pixel
  put32(0);                                   // BI_RGB
  put32(frame_bytes_);
  for (int i = 0; i < 4; ++i) put32(0);
  put32(fourcc("LIST"));
  put32(static_cast<std::uint32_t>(4 + info.size()));
  put32(fourcc("INFO"));
  put(info.data(), info.size());
  put32(fourcc("LIST"));
  movi_size_at_ = written_;
  put32(0);
  movi_start_ = written_;
  put32(fourcc("movi"));
}

AviWriter::~AviWriter() {
  if (out_.is_open()) out_.close();  // the PartialFile removes what was written
}

void AviWriter::put(const void* data, std::size_t bytes) {
  out_.write(static_cast<const char*>(data), static_cast<std::streamsize>(bytes));
  if (!out_) failed("writing");
  written_ += bytes;
}

void AviWriter::put32(std::uint32_t v) {
  const unsigned char b[4] = {static_cast<unsigned char>(v), static_cast<unsigned char>(v >> 8),
                              static_cast<unsigned char>(v >> 16),
                              static_cast<unsigned char>(v >> 24)};
  put(b, 4);
}

void AviWriter::patch32(std::uint64_t offset, std::uint32_t v) {
  out_.seekp(static_cast<std::streamoff>(offset));
  const unsigned char b[4] = {static_cast<unsigned char>(v), static_cast<unsigned char>(v >> 8),
                              static_cast<unsigned char>(v >> 16),
                              static_cast<unsigned char>(v >> 24)};
  out_.write(reinterpret_cast<const char*>(b), 4);
  if (!out_) failed("writing");
}

void AviWriter::failed(const char* what) {
  const int err = errno;
  out_.close();
  throw posix_error(ErrorCode::kIo,
                    std::string(what) + " " + io::detail::display(file_.final_path()) +
                        " failed (is the disk full?)",
                    err != 0 ? err : EIO);
}

void AviWriter::write(const RgbImage& frame) {
  if (finished_ || frame.width != width_ || frame.height != height_ ||
      frame.rgb.size() != static_cast<std::size_t>(width_) * height_ * 3) {
    throw Error(ErrorCode::kInternal,
                "AviWriter::write: a frame of the wrong size, or after finish()");
  }
  if (written_ + 8 + frame_bytes_ + 16 * (index_.size() + 1) + 8 > kMaxAviBytes) {
    throw Error(ErrorCode::kIo,
                "this build writes uncompressed AVI, which Ferry limits to 1 GiB: "
                "choose fewer frames or a smaller size");
  }
  index_.push_back(static_cast<std::uint32_t>(written_ - movi_start_));
  put32(fourcc("00db"));
  put32(frame_bytes_);
  for (int y = height_ - 1; y >= 0; --y) {  // bottom-up, BGR
    const std::uint8_t* src = frame.rgb.data() + static_cast<std::size_t>(y) * width_ * 3;
    for (int x = 0; x < width_; ++x) {
      row_[static_cast<std::size_t>(x) * 3] = src[x * 3 + 2];
      row_[static_cast<std::size_t>(x) * 3 + 1] = src[x * 3 + 1];
      row_[static_cast<std::size_t>(x) * 3 + 2] = src[x * 3];
    }
    put(row_.data(), row_.size());
  }
}

void AviWriter::finish() {
  if (finished_) throw Error(ErrorCode::kInternal, "AviWriter::finish called twice");
  const std::uint64_t movi_end = written_;
  put32(fourcc("idx1"));
  put32(static_cast<std::uint32_t>(16 * index_.size()));
  for (std::uint32_t offset : index_) {
    put32(fourcc("00db"));
    put32(kAviifKeyframe);
    put32(offset);
    put32(frame_bytes_);
  }
  const auto frames = static_cast<std::uint32_t>(index_.size());
  patch32(riff_size_at_, static_cast<std::uint32_t>(written_ - 8));
  patch32(total_frames_at_, frames);
  patch32(length_at_, frames);
  patch32(movi_size_at_, static_cast<std::uint32_t>(movi_end - movi_start_));
  out_.flush();
  if (!out_) failed("writing");
  out_.close();
  file_.commit();
  finished_ = true;
}

namespace {

// The whole file, read once (Ferry's AVIs are at most kMaxAviBytes).
Reader load_avi(const std::filesystem::path& path) {
  Reader r;
  r.name = io::detail::display(path);
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(ErrorCode::kIo, "cannot open the video " + r.name);
  in.seekg(0, std::ios::end);
  const auto size = static_cast<std::size_t>(in.tellg());
  if (size > kMaxAviBytes + (1 << 20)) r.bad("it is larger than any AVI Ferry writes");
  in.seekg(0);
  r.data.resize(size);
  in.read(reinterpret_cast<char*>(r.data.data()), static_cast<std::streamsize>(size));
  return r;
}

AviInfo parse_avi(const Reader& r) {
  const std::size_t size = r.data.size();
  if (r.u32(0) != fourcc("RIFF") || r.u32(8) != fourcc("AVI ")) r.bad("no RIFF AVI header");

  AviInfo info;
  bool have_strh = false, have_strf = false;
  // Walk the chunks; lists are entered (LIST + size + type), other chunks skipped.
  std::uint64_t at = 12;
  while (at + 8 <= size) {
    const std::uint32_t id = r.u32(at), bytes = r.u32(at + 4);
    if (at + 8 + bytes > size) r.bad("a chunk runs past the end");
    if (id == fourcc("LIST")) {
      const std::uint32_t type = r.u32(at + 8);
      if (type == fourcc("movi")) {
        std::uint64_t c = at + 12;
        while (c + 8 <= at + 8 + bytes) {
          if (r.u32(c) == fourcc("00db")) ++info.frames;
          c += 8 + ((r.u32(c + 4) + 1) & ~1u);
        }
        at += 8 + bytes;
      } else {
        at += 12;  // into the list
      }
      continue;
    }
    if (id == fourcc("avih")) {
      info.width = static_cast<int>(r.u32(at + 8 + 32));
      info.height = static_cast<int>(r.u32(at + 8 + 36));
    } else if (id == fourcc("strh")) {
      const std::uint32_t scale = r.u32(at + 8 + 20), rate = r.u32(at + 8 + 24);
      info.fps = scale != 0 ? static_cast<int>(rate / scale) : 0;
      have_strh = r.u32(at + 8) == fourcc("vids");
    } else if (id == fourcc("strf")) {
      // BITMAPINFOHEADER: bit count in the high half of the word at 12, compression at 16.
      have_strf = (r.u32(at + 8 + 12) >> 16) == 24 && r.u32(at + 8 + 16) == 0;
    } else if (id == fourcc("ICMT") || id == fourcc("INAM") || id == fourcc("ISFT")) {
      std::string text(reinterpret_cast<const char*>(r.data.data() + at + 8), bytes);
      while (!text.empty() && text.back() == '\0') text.pop_back();
      const char name[5] = {static_cast<char>(id), static_cast<char>(id >> 8),
                            static_cast<char>(id >> 16), static_cast<char>(id >> 24), '\0'};
      info.info[name] = text;
    }
    at += 8 + ((bytes + 1) & ~1u);
  }
  if (!have_strh || !have_strf || info.width <= 0 || info.height <= 0) {
    r.bad("no 24-bit video stream");
  }
  return info;
}

}  // namespace

AviInfo probe_avi(const std::filesystem::path& path) {
  return parse_avi(load_avi(path));
}

std::vector<RgbImage> read_avi_frames(const std::filesystem::path& path) {
  const Reader r = load_avi(path);
  const AviInfo info = parse_avi(r);
  std::vector<RgbImage> frames;
  const std::uint32_t stride = row_bytes(info.width);
  std::uint64_t at = 12;
  while (at + 8 <= r.data.size()) {
    const std::uint32_t id = r.u32(at), bytes = r.u32(at + 4);
    if (id == fourcc("LIST")) {
      at += 12;
      continue;
    }
    if (id == fourcc("00db")) {
      if (bytes != stride * static_cast<std::uint32_t>(info.height))
        r.bad("a frame has the wrong size");
      RgbImage& f = frames.emplace_back();
      f.width = info.width;
      f.height = info.height;
      f.rgb.resize(static_cast<std::size_t>(f.width) * f.height * 3);
      for (int y = 0; y < f.height; ++y) {
        const auto* row = reinterpret_cast<const std::uint8_t*>(
            r.data.data() + at + 8 + static_cast<std::size_t>(f.height - 1 - y) * stride);
        for (int x = 0; x < f.width; ++x) {
          std::uint8_t* p = &f.rgb[(static_cast<std::size_t>(y) * f.width + x) * 3];
          p[0] = row[x * 3 + 2];
          p[1] = row[x * 3 + 1];
          p[2] = row[x * 3];
        }
      }
    }
    at += 8 + ((bytes + 1) & ~1u);
  }
  return frames;
}

}  // namespace ferry::media
