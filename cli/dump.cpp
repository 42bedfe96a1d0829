// `ferry-cli inspect PATH --tensor NAME --dump OUT.safetensors`: one tensor of a model file,
// dequantised to F32 (a GGUF block type, bitsandbytes 4-bit codes with their quant state, fp8,
// 16-bit or integer values), written as a one-tensor safetensors file. Users check a file with
// it; tests compare it with other tools' dequantisation. The tensor is decoded a window at a
// time: a 10 GiB weight never needs 10 GiB of RAM.
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "cli/dump.h"
#include "core/backend/cpu/quant_blocks.h"
#include "core/error.h"
#include "core/io/detail/os_file.h"
#include "core/io/safetensors_writer.h"
#include "core/tensor/convert.h"
#include "core/tensor/quant.h"

namespace ferry::cli {
namespace {

// A whole small tensor (a bitsandbytes side tensor) copied to the host.
struct HostTensor {
  std::vector<std::byte> bytes;
  Tensor tensor;
};

HostTensor read_whole(const io::TensorSet& set, const std::string& name) {
  const io::TensorSet::Entry& e = set.at(name);
  HostTensor h;
  h.bytes.resize(static_cast<std::size_t>(e.tensor->bytes));
  e.file->map(*e.tensor).copy_to(0, h.bytes);
  h.tensor = Tensor{h.bytes.data(), e.tensor->dtype,
                    Shape{static_cast<std::int64_t>(e.tensor->element_count())}, Device::kCpu};
  return h;
}

// Values [first, first + count) of `t` as f32.
class Decoder {
 public:
  Decoder(const io::TensorSet& set, const io::TensorSet::Entry& entry) : entry_(entry) {
    const io::TensorInfo& t = *entry.tensor;
    if (t.bnb4 != nullptr) {
      const io::Bnb4Info& b = *t.bnb4;
      absmax_ = read_whole(set, b.absmax);
      code_ = read_whole(set, b.quant_map);
      state_.absmax = absmax_.tensor;
      state_.code = code_.tensor;
      if (b.nested) {
        nested_absmax_ = read_whole(set, b.nested_absmax);
        nested_code_ = read_whole(set, b.nested_quant_map);
        state_.nested_absmax = nested_absmax_.tensor;
        state_.nested_code = nested_code_.tensor;
      }
      state_.nested_offset = b.nested_offset;
      state_.blocksize = b.blocksize;
      state_.nested_blocksize = b.nested_blocksize;
    }
    row_ = t.shape.empty() ? 1 : static_cast<std::int64_t>(t.shape.back());
  }

  void decode(std::int64_t first, std::int64_t count, float* out) {
    const io::TensorInfo& t = *entry_.tensor;
    const io::MappedView view = entry_.file->map(t);
    if (t.dtype == DType::kBnb4) {
      // Two codes a byte: the bytes holding values [first, first + count).
      const std::int64_t begin = first / 2, end = (first + count + 1) / 2;
      bytes_.resize(static_cast<std::size_t>(end - begin));
      view.copy_to(static_cast<std::uint64_t>(begin), bytes_);
      cpu::dequantize_bnb4(state_, reinterpret_cast<const std::uint8_t*>(bytes_.data()) - begin,
                           first, out, count);
      return;
    }
    if (dtype_is_blocked(t.dtype)) {
      // Row by row: a row is whole blocks, and dequantize_range cuts partial blocks.
      const auto row_bytes = dtype_storage_bytes(t.dtype, static_cast<std::uint64_t>(row_));
      for (std::int64_t done = 0; done < count;) {
        const std::int64_t at = first + done;
        const std::int64_t r = at / row_, in_row = at % row_;
        const std::int64_t n = std::min(count - done, row_ - in_row);
        bytes_.resize(static_cast<std::size_t>(row_bytes));
        view.copy_to(static_cast<std::uint64_t>(r) * row_bytes, bytes_);
        cpu::dequantize_range(t.dtype, bytes_.data(), in_row, out + done, n);
        done += n;
      }
      return;
    }
    const std::size_t item = dtype_size(t.dtype);
    bytes_.resize(static_cast<std::size_t>(count) * item);
    view.copy_to(static_cast<std::uint64_t>(first) * item, bytes_);
    convert_to_f32(t.dtype, bytes_.data(), out, static_cast<std::size_t>(count));
  }

 private:
  const io::TensorSet::Entry& entry_;
  std::int64_t row_ = 1;
  Bnb4State state_;
  HostTensor absmax_, code_, nested_absmax_, nested_code_;
  std::vector<std::byte> bytes_;
};

}  // namespace

void dump_tensor(const io::TensorSet& set, const std::string& name,
                 const std::filesystem::path& out) {
  const io::TensorSet::Entry* entry = set.find(name);
  if (entry == nullptr) {
    throw Error(ErrorCode::kMissingTensor, io::detail::display(set.path()) + " has no tensor '" +
                                               name + "' (ferry-cli inspect lists them)");
  }
  if (entry->tensor->dtype == DType::kBool) {
    throw Error(ErrorCode::kUnsupported, "'" + name + "' is a BOOL tensor: nothing to dequantise");
  }
  Decoder decoder(set, *entry);
  const io::TensorSpec spec{name, DType::kF32, entry->tensor->shape};
  io::write_safetensors(
      out, {spec},
      {{"format", "pt"},
       {"ferry.dequantised_from", std::string(dtype_name(entry->tensor->dtype))}},
      [&](std::size_t, std::uint64_t offset, std::span<std::byte> chunk) {
        // The writer asks for whole f32 values; decode them straight into its buffer.
        const auto first = static_cast<std::int64_t>(offset / 4);
        const auto count = static_cast<std::int64_t>(chunk.size() / 4);
        std::vector<float> values(static_cast<std::size_t>(count));
        decoder.decode(first, count, values.data());
        std::memcpy(chunk.data(), values.data(), chunk.size());
      });
  std::printf("wrote %s: '%s' (%s%s) dequantised to F32\n", io::detail::display(out).c_str(),
              name.c_str(), std::string(dtype_name(entry->tensor->dtype)).c_str(),
              entry->tensor->bnb4 != nullptr ? (", " + entry->tensor->bnb4->quant_type).c_str()
                                             : "");
}

}  // namespace ferry::cli
