#include "core/models/taehv/taehv_weights.h"

#include <array>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/io/shape_text.h"
#include "core/memory/arena.h"
#include "core/tensor/convert.h"

namespace ferry::models::taehv {
namespace {

// One tensor the decoder needs: its file entry and where it goes in the backend allocation.
struct Planned {
  const io::TensorSet::Entry* entry = nullptr;
  Tensor* target = nullptr;
  Shape shape;
  DType dtype = DType::kF32;
  std::size_t offset = 0;
};

class Reader {
 public:
  explicit Reader(const io::TensorSet& set) : set_(set) {}

  [[noreturn]] void bad(const std::string& what) const {
    throw Error(ErrorCode::kBadModelFile,
                set_.path().filename().string() + " is not a TAEHV decoder Ferry can run: " + what);
  }

  const io::TensorSet::Entry& entry(const std::string& name) const {
    const io::TensorSet::Entry* e = set_.find(name);
    if (e == nullptr) {
      throw Error(ErrorCode::kMissingTensor,
                  "the TAEHV file " + set_.path().filename().string() + " has no " + name +
                      " (a preview decoder is taew2_1.safetensors or taew2_2.safetensors from "
                      "madebyollin/taehv)");
    }
    const DType d = e->tensor->dtype;
    if (d != DType::kF32 && d != DType::kF16 && d != DType::kBF16) {
      bad(name + " has dtype " + std::string(dtype_name(d)) + " (expected F32, F16 or BF16)");
    }
    return *e;
  }

  // The file shape of `name`, which must have `rank` dimensions.
  std::vector<std::int64_t> dims(const std::string& name, std::size_t rank) const {
    const auto& shape = entry(name).tensor->shape;
    if (shape.size() != rank) {
      bad(name + " has " + std::to_string(shape.size()) + " dimensions, expected " +
          std::to_string(rank));
    }
    return {shape.begin(), shape.end()};
  }

  // Checks `name` is [co, ci, k, k] and plans it as a [co, ci, 1, k, k] convolution weight.
  void weight(const std::string& name, std::int64_t co, std::int64_t ci, std::int64_t k,
              Tensor& target) {
    const auto d = dims(name, 4);
    if (d[0] != co || d[1] != ci || d[2] != k || d[3] != k) {
      bad(name + " is " + io::shape_text(d) + ", expected " +
          io::shape_text(std::array{co, ci, k, k}));
    }
    place(name, Shape{co, ci, 1, k, k}, target, false);
  }

  void bias(const std::string& name, std::int64_t co, Tensor& target) {
    const auto d = dims(name, 1);
    if (d[0] != co)
      bad(name + " is " + io::shape_text(d) + ", expected " + io::shape_text(std::array{co}));
    place(name, Shape{co}, target, true);
  }

  std::size_t bytes() const { return offset_; }
  const std::vector<Planned>& plan() const { return plan_; }

 private:
  // Weights stay in their 16-bit dtype (conv3d widens them exactly); biases are F32.
  void place(const std::string& name, const Shape& shape, Tensor& target, bool to_f32) {
    const io::TensorSet::Entry& e = entry(name);
    const DType dtype = to_f32 ? DType::kF32 : e.tensor->dtype;
    plan_.push_back({&e, &target, shape, dtype, offset_});
    offset_ +=
        memory::Arena::footprint(static_cast<std::size_t>(shape.numel()) * dtype_size(dtype));
  }

  const io::TensorSet& set_;
  std::vector<Planned> plan_;
  std::size_t offset_ = 0;
};

std::string key(int index, const char* rest) {
  return "decoder." + std::to_string(index) + rest;
}

}  // namespace

TaehvWeights TaehvWeights::load(Backend& backend, const io::TensorSet& set) {
  return build(&backend, set);
}

TaehvWeights TaehvWeights::shapes_only(const io::TensorSet& set) {
  return build(nullptr, set);
}

const Tensor& TaehvWeights::conv_weight(int index) const {
  return convs_[static_cast<std::size_t>(index)].weight;
}

const Tensor* TaehvWeights::conv_bias(int index) const {
  const Conv& c = convs_[static_cast<std::size_t>(index)];
  return c.has_bias ? &c.bias : nullptr;
}

const Tensor& TaehvWeights::memblock_weight(int index, int which) const {
  return memblocks_[static_cast<std::size_t>(index)][static_cast<std::size_t>(which / 2)].weight;
}

const Tensor& TaehvWeights::memblock_bias(int index, int which) const {
  return memblocks_[static_cast<std::size_t>(index)][static_cast<std::size_t>(which / 2)].bias;
}

TaehvWeights TaehvWeights::build(Backend* backend, const io::TensorSet& set) {
  TaehvWeights out;
  Reader reader(set);
  if (set.find("decoder.0.weight") != nullptr) {
    reader.bad("it is a TAEHV \"super\" decoder (taew2_2_super); use taew2_2.safetensors");
  }
  TaehvConfig& config = out.config_;
  // The widths and z from the first convolution of each stage, then everything checked
  // against them.
  const auto first = reader.dims(key(1, ".weight"), 4);
  config.latent_channels = static_cast<int>(first[1]);
  const std::array<int, 4> stage_convs = {1, 8, 14, 20};
  for (std::size_t s = 0; s < 4; ++s) {
    config.widths[s] = static_cast<int>(reader.dims(key(stage_convs[s], ".weight"), 4)[0]);
  }
  const std::int64_t pixels = reader.dims(key(22, ".weight"), 4)[0];
  config.patch = pixels == 3 ? 1 : pixels == 12 ? 2 : 0;
  if (config.patch == 0) {
    reader.bad("decoder.22 gives " + std::to_string(pixels) + " channels (expected 3 or 12)");
  }
  const auto& n = config.widths;
  std::array<Conv, 23>& convs = out.convs_;
  reader.weight(key(1, ".weight"), n[0], config.latent_channels, 3, convs[1].weight);
  reader.bias(key(1, ".bias"), n[0], convs[1].bias);
  convs[1].has_bias = true;
  for (std::size_t s = 1; s < 4; ++s) {
    reader.weight(key(stage_convs[s], ".weight"), n[s], n[s - 1], 3, convs[stage_convs[s]].weight);
  }
  reader.weight(key(22, ".weight"), pixels, n[3], 3, convs[22].weight);
  reader.bias(key(22, ".bias"), pixels, convs[22].bias);
  convs[22].has_bias = true;
  for (std::size_t b = 0; b < kMemBlocks.size(); ++b) {
    const int index = kMemBlocks[b];
    const std::int64_t width = n[b / 3];
    for (int which : {0, 2, 4}) {
      Conv& c =
          out.memblocks_[static_cast<std::size_t>(index)][static_cast<std::size_t>(which / 2)];
      const std::string prefix = key(index, ".conv.") + std::to_string(which);
      reader.weight(prefix + ".weight", width, which == 0 ? 2 * width : width, 3, c.weight);
      reader.bias(prefix + ".bias", width, c.bias);
      c.has_bias = true;
    }
  }
  for (std::size_t g = 0; g < kTGrows.size(); ++g) {
    const std::string name = key(kTGrows[g], ".conv.weight");
    const auto d = reader.dims(name, 4);
    const std::int64_t width = n[g];
    // A TGrow's file weight may hold more rows than its stride needs (taehv.py's
    // patch_tgrow_layers takes the last ones): any whole number of width-row groups.
    if (d[0] < width || d[0] % width != 0) {
      reader.bad(name + " has " + std::to_string(d[0]) + " rows, not a multiple of " +
                 std::to_string(width));
    }
    config.tgrow_rows[g] = d[0];
    reader.weight(name, d[0], width, 1, convs[static_cast<std::size_t>(kTGrows[g])].weight);
  }
  out.bytes_ = reader.bytes();

  std::byte* base = nullptr;
  if (backend != nullptr) {
    out.buffer_ = backend->allocate(out.bytes_);
    base = static_cast<std::byte*>(out.buffer_->data());
  }
  for (const Planned& p : reader.plan()) {
    *p.target = Tensor{base == nullptr ? nullptr : base + p.offset, p.dtype, p.shape,
                       backend == nullptr ? Device::kCpu : backend->device()};
  }
  if (backend == nullptr) return out;

  std::vector<std::byte> raw;
  std::vector<float> f32;
  for (const Planned& p : reader.plan()) {
    const io::TensorInfo& info = *p.entry->tensor;
    raw.resize(static_cast<std::size_t>(info.bytes));
    p.entry->file->map(info).copy_to(0, raw);
    if (p.dtype == info.dtype) {
      backend->upload(*p.target, raw.data());
    } else {
      f32.resize(static_cast<std::size_t>(p.shape.numel()));
      convert_to_f32(info.dtype, raw.data(), f32.data(), f32.size());
      backend->upload(*p.target, f32.data());
    }
    backend->synchronize();  // `raw` and `f32` are refilled by the next tensor
  }
  return out;
}

}  // namespace ferry::models::taehv
