#include "core/pipeline/replay.h"

#include <algorithm>
#include <cstring>
#include <optional>

#include "core/error.h"
#include "core/io/detail/os_file.h"
#include "core/io/safetensors_writer.h"
#include "core/io/shape_text.h"
#include "core/io/tensor_file.h"

namespace ferry::pipeline {
namespace {

namespace fs = std::filesystem;

[[noreturn]] void bad(const std::string& option, const fs::path& path, const std::string& what) {
  throw Error(ErrorCode::kBadArgument, option + " " + io::detail::display(path) + ": " + what);
}

}  // namespace

std::vector<std::vector<float>> read_noise(const fs::path& path,
                                           const std::vector<models::TensorLayout>& layout) {
  return read_replay_tensors(path, layout, "--noise");
}

std::vector<std::vector<float>> read_replay_tensors(const fs::path& path,
                                                    const std::vector<models::TensorLayout>& layout,
                                                    const std::string& option) {
  std::optional<io::TensorFile> file;
  try {
    file.emplace(io::TensorFile::open(path));
  } catch (const Error& e) {
    bad(option, path, e.what());
  }
  std::vector<std::vector<float>> tensors;
  for (const models::TensorLayout& want : layout) {
    const io::TensorInfo* t = file->find(want.name);
    if (t == nullptr) {
      bad(option, path,
          "no tensor '" + want.name + "' (this request needs " + want.name + " " +
              io::shape_text(want.shape) + " F32)");
    }
    if (t->dtype != DType::kF32) {
      bad(option, path,
          "'" + want.name + "' is " + std::string(dtype_name(t->dtype)) + ", not F32");
    }
    if (t->shape != want.shape) {
      bad(option, path,
          "'" + want.name + "' is " + io::shape_text(t->shape) + ", but this request needs " +
              io::shape_text(want.shape) + " (its size and frames decide the shape)");
    }
    std::vector<float> values(static_cast<std::size_t>(t->element_count()));
    try {
      file->map(*t).copy_to(0, std::as_writable_bytes(std::span(values)));
    } catch (const Error& e) {
      bad(option, path, e.what());
    }
    tensors.push_back(std::move(values));
  }
  return tensors;
}

void check_replay_output(const fs::path& path, const std::string& what) {
  if (path.extension() != ".safetensors") {
    throw Error(ErrorCode::kBadArgument,
                what + " writes a .safetensors file, not " + io::detail::display(path));
  }
  const fs::path folder = path.has_parent_path() ? path.parent_path() : ".";
  std::error_code ec;
  if (!fs::is_directory(folder, ec)) {
    throw Error(ErrorCode::kBadArgument,
                what + ": the folder " + io::detail::display(folder) + " does not exist");
  }
}

void ReplayFile::add(std::string name, DType dtype, std::vector<std::uint64_t> shape,
                     std::span<const std::byte> bytes) {
  tensors_.push_back({std::move(name), dtype, std::move(shape),
                      std::vector<std::byte>(bytes.begin(), bytes.end())});
}

void ReplayFile::add(std::string_view name, std::span<const float> values,
                     const std::vector<models::TensorLayout>& layout) {
  const auto it = std::find_if(layout.begin(), layout.end(),
                               [&](const models::TensorLayout& l) { return l.name == name; });
  if (it == layout.end()) {
    throw Error(ErrorCode::kInternal,
                "the model handed out an unknown tensor " + std::string(name));
  }
  add(std::string(name), DType::kF32, it->shape, std::as_bytes(values));
}

void ReplayFile::write(const fs::path& path,
                       const std::map<std::string, std::string>& metadata) const {
  std::vector<io::TensorSpec> specs;
  for (const Tensor& t : tensors_) specs.push_back({t.name, t.dtype, t.shape});
  io::write_safetensors(path, specs, metadata,
                        [&](std::size_t index, std::uint64_t offset, std::span<std::byte> out) {
                          const std::vector<std::byte>& bytes = tensors_[index].bytes;
                          std::memcpy(out.data(), bytes.data() + offset, out.size());
                        });
}

}  // namespace ferry::pipeline
