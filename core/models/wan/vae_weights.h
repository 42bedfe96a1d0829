// A Wan VAE checkpoint on a backend: every tensor under its official name (wan.md §F.3) in one
// backend allocation made at load — convolution weights in the file's 16-bit dtype when it has
// one (conv3d widens them exactly), everything else as F32 — plus the structure read from the
// names and shapes (channel widths are never assumed, so reduced-width test models load like the
// real ones).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>

#include "core/backend/backend.h"
#include "core/io/tensor_set.h"
#include "core/models/wan/vae_keys.h"

namespace ferry::models::wan {

struct VaeConfig {
  VaeKind kind = VaeKind::kWan22;
  int z_dim = 48;
  int spatial = 16;  // pixels per latent position, each axis
  int patch = 2;     // Wan 2.2 folds 2×2 pixels into channels before the encoder (1: none)
  bool has_encoder = false;
  bool has_decoder = false;
};

// Names of the tensors Ferry adds at load: the latent normalisation of wan.md §C.5 as 1×1×1
// convolutions (diagonal weights), so it runs on the backend like every other op.
inline constexpr std::string_view kNormalizeWeight = "ferry.normalize.weight";      // 1/std
inline constexpr std::string_view kNormalizeBias = "ferry.normalize.bias";          // -mean/std
inline constexpr std::string_view kDenormalizeWeight = "ferry.denormalize.weight";  // std
inline constexpr std::string_view kDenormalizeBias = "ferry.denormalize.bias";      // mean

class VaeWeights {
 public:
  // Reads every tensor of `set` (official, ComfyUI or diffusers names; F32, F16 or BF16),
  // converts it to its device dtype (above) and uploads it. Throws Error(kBadModelFile) when the
  // set is not a Wan VAE or its shapes disagree with the structure, kMissingTensor when a needed
  // tensor is absent.
  static VaeWeights load(Backend& backend, const io::TensorSet& set);
  // The same names and shapes with no data: what estimates (vae.h) need, without reading or
  // allocating anything.
  static VaeWeights shapes_only(const io::TensorSet& set);

  const VaeConfig& config() const { return config_; }
  // Looked up by a view of the name, so the decoder's per-chunk lookups allocate nothing.
  bool has(std::string_view name) const { return tensors_.find(name) != tensors_.end(); }
  // Throws Error(kMissingTensor).
  const Tensor& at(std::string_view name) const;
  // Bytes of backend memory the weights occupy.
  std::size_t bytes() const { return bytes_; }

 private:
  static VaeWeights build(Backend* backend, const io::TensorSet& set);

  // Hashes std::string and std::string_view alike (heterogeneous lookup).
  struct NameHash {
    using is_transparent = void;
    std::size_t operator()(std::string_view name) const {
      return std::hash<std::string_view>{}(name);
    }
  };

  VaeConfig config_;
  std::unique_ptr<DeviceBuffer> buffer_;
  std::unordered_map<std::string, Tensor, NameHash, std::equal_to<>> tensors_;
  std::size_t bytes_ = 0;
};

// The latent statistics of wan.md §C.5 for z_dim 16 (Wan 2.1) or 48 (Wan 2.2).
const float* vae_latent_mean(VaeKind kind);
const float* vae_latent_std(VaeKind kind);

}  // namespace ferry::models::wan
