// Finding a model's files in a folder: the tensor sets it holds (each sharded safetensors index
// with its shards, then every .safetensors or .gguf file no index claims), skipping hidden folders. Pickle files are listed
// apart: Ferry never loads them.
#pragma once

#include <filesystem>
#include <vector>

namespace ferry::io {

// Sorted by path. Throws Error(kIo) when the folder cannot be listed, and what
// TensorSet::open throws for a broken index.
std::vector<std::filesystem::path> find_safetensors_sets(const std::filesystem::path& folder,
                                                         std::vector<std::filesystem::path>* pickles);

// .pth, .pt, .ckpt, .pkl: formats that can run code when loaded.
bool is_pickle_file(const std::filesystem::path& path);

}  // namespace ferry::io
