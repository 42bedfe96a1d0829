// A TAEHV decoder checkpoint (madebyollin/taehv: taew2_1 for the Wan 2.1 / A14B latent space,
// taew2_2 for Wan 2.2 TI2V-5B; formats_lora_moe.md §7) on a backend: the `decoder.<index>.…`
// tensors of the base decoder in one backend allocation made at load (3×3 and 1×1 convolution
// weights in the file's 16-bit dtype when it has one — conv3d widens them exactly — biases F32),
// and the structure read from their shapes (widths are never assumed, so reduced-width test
// models load like the real ones). The encoder's tensors are ignored.
#pragma once

#include <array>
#include <cstdint>
#include <memory>

#include "core/backend/backend.h"
#include "core/io/tensor_set.h"

namespace ferry::models::taehv {

// The decoder's module indices (taehv.py's nn.Sequential): a 3×3 convolution, a MemBlock (three
// 3×3 convolutions conv.0, conv.2, conv.4) or a TGrow (a 1×1 convolution, no bias). The others
// (0 Clamp, 2 and 21 ReLU, 6, 12, 18 Upsample) have no weights.
inline constexpr std::array<int, 5> kConvs = {1, 8, 14, 20, 22};
inline constexpr std::array<int, 9> kMemBlocks = {3, 4, 5, 9, 10, 11, 15, 16, 17};
inline constexpr std::array<int, 3> kTGrows = {7, 13, 19};
inline constexpr std::array<int, 3> kUpsamples = {6, 12, 18};

struct TaehvConfig {
  int latent_channels = 16;     // z: 16 (taew2_1), 48 (taew2_2)
  int patch = 1;                // pixel-shuffle factor of the output: 1 or 2
  std::array<int, 4> widths{};  // the four stages' channels (256, 128, 64, 64 published)
  std::array<std::int64_t, 3> tgrow_rows{};  // rows each TGrow's weight has in the file
  // Pixels per latent position on each axis with every upsample on: 8 · patch.
  int spatial() const { return 8 * patch; }
};

class TaehvWeights {
 public:
  // Reads the decoder's tensors of `set` (F32, F16 or BF16), converts biases to F32 and uploads
  // everything. Error(kMissingTensor) when a decoder tensor is absent, Error(kBadModelFile) when
  // the set is no base TAEHV decoder (no decoder.1, the "super" decoder, shapes that disagree
  // with each other, an unknown dtype), naming the file.
  static TaehvWeights load(Backend& backend, const io::TensorSet& set);
  // The same checks and structure with no data: what the planner needs (weights() bytes).
  static TaehvWeights shapes_only(const io::TensorSet& set);

  const TaehvConfig& config() const { return config_; }
  // decoder.<index>.weight as a [Co, Ci, 1, kh, kw] convolution (TGrow: all stored rows),
  // decoder.<index>.bias as [Co] F32, or null where the module has none.
  const Tensor& conv_weight(int index) const;
  const Tensor* conv_bias(int index) const;
  // MemBlock `index`'s convolution `which` (0, 2 or 4).
  const Tensor& memblock_weight(int index, int which) const;
  const Tensor& memblock_bias(int index, int which) const;
  // Bytes of backend memory the weights occupy.
  std::size_t bytes() const { return bytes_; }

 private:
  struct Conv {
    Tensor weight;
    Tensor bias;
    bool has_bias = false;
  };
  static TaehvWeights build(Backend* backend, const io::TensorSet& set);

  TaehvConfig config_;
  std::unique_ptr<DeviceBuffer> buffer_;
  std::array<Conv, 23> convs_{};                     // by module index: convolutions and TGrows
  std::array<std::array<Conv, 3>, 23> memblocks_{};  // by module index: conv.0, conv.2, conv.4
  std::size_t bytes_ = 0;
};

}  // namespace ferry::models::taehv
