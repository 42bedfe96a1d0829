// Runs that can be replayed across tools (each tool draws its noise with its own generator, so the
// noise tensor itself is the only exact bridge): a run's initial noise read from a safetensors
// file, and the noise it used, its final latents and the text encoder's output written to one. The
// layouts are the model family's (ModelParts::noise_layout / latent_layout): Wan's is one tensor
// `noise` [C, T, h, w] f32, and its final latent `latent` of the same shape.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "core/models/family.h"

namespace ferry::pipeline {

// The noise file's tensors in `layout`'s order. Error(kBadArgument) — a bad input, before any
// work — naming the file and what is wrong: not readable or not a safetensors file (truncated),
// a tensor missing, not F32, or of another shape than the request needs.
std::vector<std::vector<float>> read_noise(const std::filesystem::path& path,
                                           const std::vector<models::TensorLayout>& layout);
// The same for any replay file: `what` names the option in the messages ("--latents": a run's
// final latents, read to be decoded again).
std::vector<std::vector<float>> read_replay_tensors(const std::filesystem::path& path,
                                                    const std::vector<models::TensorLayout>& layout,
                                                    const std::string& what);

// Error(kBadArgument) unless `path`'s folder exists and it ends in .safetensors; `what` names
// the option in the message ("--save-noise").
void check_replay_output(const std::filesystem::path& path, const std::string& what);

// Tensors collected during a run, written when it has succeeded.
class ReplayFile {
 public:
  void add(std::string name, DType dtype, std::vector<std::uint64_t> shape,
           std::span<const std::byte> bytes);
  void add(std::string_view name, std::span<const float> values,
           const std::vector<models::TensorLayout>& layout);
  bool empty() const { return tensors_.empty(); }
  // Through "<path>.partial" and a rename. Error(kIo).
  void write(const std::filesystem::path& path,
             const std::map<std::string, std::string>& metadata) const;

 private:
  struct Tensor {
    std::string name;
    DType dtype;
    std::vector<std::uint64_t> shape;
    std::vector<std::byte> bytes;
  };
  std::vector<Tensor> tensors_;
};

}  // namespace ferry::pipeline
