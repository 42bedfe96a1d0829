// Finding a model's files in a folder: the tensor sets it holds (each sharded safetensors index
// with its shards, then every .safetensors or .gguf file no index claims), skipping hidden folders. Pickle files are listed
// apart: Ferry never loads them.
//
// Links are followed only where they lead inside the scanned root (a model folder may link its
// parts from elsewhere in it; a Hugging Face snapshot links every file to the repository's blobs/,
// so for a folder inside `models--*/snapshots/` the root is the `models--*` folder). A link that
// leads outside, or that is broken, is skipped; a folder link back into what is being scanned
// (a cycle) is not entered twice.
#pragma once

#include <filesystem>
#include <vector>

#include "core/error.h"

namespace ferry::io {

// Sorted by path, each file once. Throws Error(kIo) when the folder cannot be listed, and what
// TensorSet::open throws for a broken index.
std::vector<std::filesystem::path> find_safetensors_sets(
    const std::filesystem::path& folder, std::vector<std::filesystem::path>* pickles);

// The folder links under `folder` may lead into: `folder` itself, or the Hugging Face repository
// folder (models--org--name) when `folder` is one of its snapshots. Canonical.
std::filesystem::path scan_root(const std::filesystem::path& folder);

// .pth, .pt, .ckpt, .pkl, .bin: PyTorch's pickle formats, which can run code when loaded.
bool is_pickle_file(const std::filesystem::path& path);

// The refusal of a pickle file, Error(kBadModelFile) naming it and what to use instead.
Error pickle_refusal(const std::filesystem::path& path);

}  // namespace ferry::io
