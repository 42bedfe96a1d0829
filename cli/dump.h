// `ferry-cli inspect PATH --tensor NAME --dump OUT.safetensors` (cli/dump.cpp).
#pragma once

#include <filesystem>
#include <string>

#include "core/io/tensor_set.h"

namespace ferry::cli {

// Writes tensor `name` of `set`, dequantised to F32, as the only tensor of the safetensors file
// `out` (written under a temporary name, then renamed). Error(kMissingTensor) when `set` has no
// such tensor.
void dump_tensor(const io::TensorSet& set, const std::string& name,
                 const std::filesystem::path& out);

}  // namespace ferry::cli
