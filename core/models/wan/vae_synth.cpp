#include "core/models/wan/vae_synth.h"

#include <fstream>
#include <string>

#include "core/error.h"

namespace ferry::models::wan {
namespace {

using Dims = std::vector<std::uint64_t>;

class Specs {
 public:
  explicit Specs(DType dtype) : dtype_(dtype) {}

  void add(const std::string& name, Dims shape) {
    out_.push_back(io::TensorSpec{name, dtype_, std::move(shape)});
  }
  void conv(const std::string& p, std::uint64_t co, std::uint64_t ci, Dims kernel) {
    Dims shape{co, ci};
    shape.insert(shape.end(), kernel.begin(), kernel.end());
    add(p + ".weight", shape);
    add(p + ".bias", {co});
  }
  // ResidualBlock(ci → co), wan.md §C.1.
  void residual(const std::string& p, std::uint64_t ci, std::uint64_t co) {
    add(p + "residual.0.gamma", {ci, 1, 1, 1});
    conv(p + "residual.2", co, ci, {3, 3, 3});
    add(p + "residual.3.gamma", {co, 1, 1, 1});
    conv(p + "residual.6", co, co, {3, 3, 3});
    if (ci != co) conv(p + "shortcut", co, ci, {1, 1, 1});
  }
  void attention(const std::string& p, std::uint64_t c) {
    add(p + "norm.gamma", {c, 1, 1});
    conv(p + "to_qkv", 3 * c, c, {1, 1});
    conv(p + "proj", c, c, {1, 1});
  }
  // Resample: the per-frame 3×3 conv (c → co) and, when temporal, the time conv.
  void resample(const std::string& p, std::uint64_t c, std::uint64_t co, bool temporal, bool up) {
    conv(p + "resample.1", co, c, {3, 3});
    if (temporal) conv(p + "time_conv", up ? 2 * c : c, c, {3, 1, 1});
  }
  void middle_and_head(const std::string& side, std::uint64_t c, std::uint64_t out) {
    residual(side + "middle.0.", c, c);
    attention(side + "middle.1.", c);
    residual(side + "middle.2.", c, c);
    add(side + "head.0.gamma", {c, 1, 1, 1});
    conv(side + "head.2", out, c, {3, 3, 3});
  }
  std::vector<io::TensorSpec> take() { return std::move(out_); }

 private:
  DType dtype_;
  std::vector<io::TensorSpec> out_;
};

std::string idx(std::uint64_t i) {
  return std::to_string(i) + ".";
}

// dim_mult [1, 2, 4, 4], two blocks per encoder stage, three per decoder stage, temporal
// resampling in stages 1 and 2 (encoder) / 0 and 1 (decoder).
void wan21(Specs& s) {
  const std::uint64_t z = 16;
  const Dims enc{96, 96, 192, 384, 384};
  s.conv("encoder.conv1", enc[0], 3, {3, 3, 3});
  std::uint64_t i = 0;
  for (std::uint64_t stage = 0; stage < 4; ++stage) {
    std::uint64_t in = enc[stage];
    for (int k = 0; k < 2; ++k, in = enc[stage + 1])
      s.residual("encoder.downsamples." + idx(i++), in, enc[stage + 1]);
    if (stage != 3) {
      s.resample("encoder.downsamples." + idx(i++), enc[stage + 1], enc[stage + 1], stage > 0,
                 false);
    }
  }
  s.middle_and_head("encoder.", 384, 2 * z);
  s.conv("conv1", 2 * z, 2 * z, {1, 1, 1});
  s.conv("conv2", z, z, {1, 1, 1});
  const Dims dec{384, 384, 384, 192, 96};
  s.conv("decoder.conv1", dec[0], z, {3, 3, 3});
  s.residual("decoder.middle.0.", 384, 384);
  s.attention("decoder.middle.1.", 384);
  s.residual("decoder.middle.2.", 384, 384);
  i = 0;
  for (std::uint64_t stage = 0; stage < 4; ++stage) {
    std::uint64_t in = stage == 0 ? dec[0] : dec[stage] / 2;
    for (int k = 0; k < 3; ++k, in = dec[stage + 1])
      s.residual("decoder.upsamples." + idx(i++), in, dec[stage + 1]);
    if (stage != 3) {
      s.resample("decoder.upsamples." + idx(i++), dec[stage + 1], dec[stage + 1] / 2, stage < 2,
                 true);
    }
  }
  s.add("decoder.head.0.gamma", {96, 1, 1, 1});
  s.conv("decoder.head.2", 3, 96, {3, 3, 3});
}

void wan22(Specs& s, std::uint64_t dim, std::uint64_t dec_dim) {
  const std::uint64_t z = 48;
  const Dims enc{dim, dim, 2 * dim, 4 * dim, 4 * dim};
  s.conv("encoder.conv1", enc[0], 12, {3, 3, 3});
  for (std::uint64_t stage = 0; stage < 4; ++stage) {
    const std::string p = "encoder.downsamples." + idx(stage) + "downsamples.";
    std::uint64_t in = enc[stage];
    for (std::uint64_t k = 0; k < 2; ++k, in = enc[stage + 1])
      s.residual(p + idx(k), in, enc[stage + 1]);
    if (stage != 3) s.resample(p + idx(2), enc[stage + 1], enc[stage + 1], stage > 0, false);
  }
  s.middle_and_head("encoder.", enc[4], 2 * z);
  s.conv("conv1", 2 * z, 2 * z, {1, 1, 1});
  s.conv("conv2", z, z, {1, 1, 1});
  const Dims dec{4 * dec_dim, 4 * dec_dim, 4 * dec_dim, 2 * dec_dim, dec_dim};
  s.conv("decoder.conv1", dec[0], z, {3, 3, 3});
  s.residual("decoder.middle.0.", dec[0], dec[0]);
  s.attention("decoder.middle.1.", dec[0]);
  s.residual("decoder.middle.2.", dec[0], dec[0]);
  for (std::uint64_t stage = 0; stage < 4; ++stage) {
    const std::string p = "decoder.upsamples." + idx(stage) + "upsamples.";
    std::uint64_t in = dec[stage];
    for (std::uint64_t k = 0; k < 3; ++k, in = dec[stage + 1])
      s.residual(p + idx(k), in, dec[stage + 1]);
    if (stage != 3) s.resample(p + idx(3), dec[stage + 1], dec[stage + 1], stage < 2, true);
  }
  s.add("decoder.head.0.gamma", {dec_dim, 1, 1, 1});
  s.conv("decoder.head.2", 12, dec_dim, {3, 3, 3});
}

}  // namespace

std::vector<io::TensorSpec> wan_vae_tensor_specs(VaeKind kind, DType dtype) {
  Specs s(dtype);
  if (kind == VaeKind::kWan21) {
    wan21(s);
  } else {
    wan22(s, 160, 256);
  }
  return s.take();
}

std::vector<io::TensorSpec> wan22_vae_tensor_specs(std::uint64_t dim, std::uint64_t dec_dim,
                                                   DType dtype) {
  Specs s(dtype);
  wan22(s, dim, dec_dim);
  return s.take();
}

void write_header_only_safetensors(const std::filesystem::path& path,
                                   const std::vector<io::TensorSpec>& tensors) {
  std::string header = io::safetensors_header_json(tensors, {});
  header.append((8 - (8 + header.size()) % 8) % 8, ' ');
  std::uint64_t data = 0;
  for (const io::TensorSpec& t : tensors) data += t.bytes();
  {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    std::uint64_t n = header.size();
    char length[8];
    for (char& b : length) {
      b = static_cast<char>(n & 0xff);
      n >>= 8;
    }
    out.write(length, 8);
    out.write(header.data(), static_cast<std::streamsize>(header.size()));
    if (!out) throw Error(ErrorCode::kIo, "cannot write " + path.string());
  }
  std::error_code ec;
  std::filesystem::resize_file(path, 8 + header.size() + data, ec);
  if (ec) throw Error(ErrorCode::kIo, "cannot extend " + path.string() + ": " + ec.message());
}

}  // namespace ferry::models::wan
