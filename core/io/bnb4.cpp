#include "core/io/bnb4.h"

#include <cmath>
#include <memory>
#include <nlohmann/json.hpp>
#include <unordered_map>

#include "core/error.h"

namespace ferry::io {
namespace {

constexpr std::int64_t kMaxBlocksize = 4096;               // bitsandbytes' largest
constexpr std::uint64_t kMaxDim = std::uint64_t{1} << 31;  // so out * in cannot overflow

Error bad_weight(std::string_view source, std::string_view weight, std::string_view problem) {
  return Error(ErrorCode::kBadModelFile, "invalid bitsandbytes 4-bit weight " +
                                             quote_tensor_name(weight) + " in " +
                                             std::string(source) + ": " + std::string(problem));
}

bool is_block_size(const nlohmann::json& v) {
  if (!v.is_number_integer()) return false;
  const auto n = v.get<std::int64_t>();
  return n >= 2 && n <= kMaxBlocksize && (n & (n - 1)) == 0;
}

const nlohmann::json* field(const nlohmann::json& object, const char* key) {
  const auto it = object.find(key);
  return it == object.end() ? nullptr : &*it;
}

std::uint64_t ceil_div(std::uint64_t a, std::uint64_t b) {
  return (a + b - 1) / b;
}

// A side tensor `<weight>.<suffix>` must exist with this dtype and one dimension of `count`.
const TensorInfo& side_tensor(const std::unordered_map<std::string_view, TensorInfo*>& by_name,
                              const std::string& name, DType dtype, std::uint64_t count,
                              std::string_view weight, std::string_view source) {
  const auto it = by_name.find(name);
  if (it == by_name.end()) {
    throw bad_weight(source, weight, "its side tensor " + quote_tensor_name(name) + " is missing");
  }
  const TensorInfo& t = *it->second;
  if (t.dtype != dtype || t.shape.size() != 1 || t.shape[0] != count) {
    std::string shape;
    for (std::uint64_t d : t.shape) shape += (shape.empty() ? "" : ", ") + std::to_string(d);
    throw bad_weight(source, weight,
                     quote_tensor_name(name) + " is " + std::string(dtype_name(t.dtype)) + " [" +
                         shape + "], expected " + std::string(dtype_name(dtype)) + " [" +
                         std::to_string(count) + "]");
  }
  return t;
}

}  // namespace

Bnb4Info parse_bnb4_quant_state(std::string_view json, std::string_view suffix_type,
                                std::string_view weight, std::string_view source,
                                std::uint64_t& out, std::uint64_t& in) {
  auto bad = [&](std::string_view problem) {
    return bad_weight(source, weight, "its quant state " + std::string(problem));
  };
  // nlohmann's lexer would take a NUL byte for the end of the input.
  if (json.find('\0') != std::string_view::npos) throw bad("contains a NUL byte");
  const nlohmann::json state = nlohmann::json::parse(json, nullptr, false);
  if (state.is_discarded()) throw bad("is not valid JSON");
  if (!state.is_object()) throw bad("is not a JSON object");

  Bnb4Info info;
  const nlohmann::json* quant_type = field(state, "quant_type");
  if (quant_type == nullptr || !quant_type->is_string()) throw bad("has no quant_type string");
  info.quant_type = quant_type->get<std::string>();
  if (info.quant_type != "nf4" && info.quant_type != "fp4") {
    throw bad("has quant_type " + quote_tensor_name(info.quant_type) + ", not nf4 or fp4");
  }
  if (info.quant_type != suffix_type) {
    throw bad("says " + info.quant_type + " but its key ends in __" + std::string(suffix_type));
  }

  const nlohmann::json* blocksize = field(state, "blocksize");
  if (blocksize == nullptr || !is_block_size(*blocksize)) {
    throw bad("has no blocksize that is a power of two up to " + std::to_string(kMaxBlocksize));
  }
  info.blocksize = blocksize->get<std::int64_t>();

  const nlohmann::json* dtype = field(state, "dtype");
  const std::string dtype_text =
      dtype != nullptr && dtype->is_string() ? dtype->get<std::string>() : "";
  if (dtype_text == "bfloat16") {
    info.dtype = DType::kBF16;
  } else if (dtype_text == "float16") {
    info.dtype = DType::kF16;
  } else if (dtype_text == "float32") {
    info.dtype = DType::kF32;
  } else {
    throw bad("has no dtype among bfloat16, float16, float32");
  }

  const nlohmann::json* shape = field(state, "shape");
  if (shape == nullptr || !shape->is_array() || shape->size() != 2) {
    throw bad("has no shape [out, in]");
  }
  std::uint64_t dims[2] = {0, 0};
  for (std::size_t i = 0; i < 2; ++i) {
    const nlohmann::json& d = (*shape)[i];
    if (!d.is_number_integer() || d.get<std::int64_t>() <= 0 || d.get<std::uint64_t>() >= kMaxDim) {
      throw bad("has a shape entry that is not a positive size below 2^31");
    }
    dims[i] = d.get<std::uint64_t>();
  }
  out = dims[0];
  in = dims[1];

  const nlohmann::json* nested_blocksize = field(state, "nested_blocksize");
  const nlohmann::json* nested_dtype = field(state, "nested_dtype");
  const nlohmann::json* nested_offset = field(state, "nested_offset");
  info.nested = nested_blocksize != nullptr || nested_dtype != nullptr || nested_offset != nullptr;
  if (info.nested) {
    if (nested_blocksize == nullptr || !is_block_size(*nested_blocksize)) {
      throw bad("is nested but has no nested_blocksize that is a power of two up to " +
                std::to_string(kMaxBlocksize));
    }
    if (nested_dtype == nullptr || *nested_dtype != "float32") {
      throw bad("is nested but its nested_dtype is not float32");
    }
    if (nested_offset == nullptr || !nested_offset->is_number() ||
        !std::isfinite(nested_offset->get<double>())) {
      throw bad("is nested but has no finite nested_offset");
    }
    info.nested_blocksize = nested_blocksize->get<std::int64_t>();
    info.nested_offset = nested_offset->get<float>();
  }

  const std::string base(weight);
  info.absmax = base + ".absmax";
  info.quant_map = base + ".quant_map";
  if (info.nested) {
    info.nested_absmax = base + ".nested_absmax";
    info.nested_quant_map = base + ".nested_quant_map";
  }
  return info;
}

void group_bnb4_weights(std::vector<TensorInfo>& tensors, const TensorBytesReader& read,
                        std::string_view source) {
  std::unordered_map<std::string_view, TensorInfo*> by_name;
  bool any = false;
  for (TensorInfo& t : tensors) {
    by_name.emplace(t.name, &t);
    any = any || t.name.find(kBnb4QuantStateMarker) != std::string::npos;
  }
  if (!any) return;

  std::unordered_map<std::string, std::string> state_of;  // weight name → its state's name
  for (const TensorInfo& state : tensors) {
    const std::size_t at = state.name.rfind(kBnb4QuantStateMarker);
    if (at == std::string::npos) continue;
    const std::string weight = state.name.substr(0, at);
    const std::string suffix = state.name.substr(at + kBnb4QuantStateMarker.size());
    if (suffix != "nf4" && suffix != "fp4") {
      throw bad_weight(
          source, weight,
          "its quant state " + quote_tensor_name(state.name) + " is neither __nf4 nor __fp4");
    }
    if (!state_of.emplace(weight, state.name).second) {
      throw bad_weight(source, weight, "it has two quant states");
    }
    if (state.dtype != DType::kU8 || state.bytes > kMaxBnb4QuantStateBytes) {
      throw bad_weight(source, weight,
                       "its quant state is " + std::to_string(state.bytes) + " bytes of " +
                           std::string(dtype_name(state.dtype)) + ", not U8 JSON of at most " +
                           std::to_string(kMaxBnb4QuantStateBytes) + " bytes");
    }
    const auto it = by_name.find(weight);
    if (it == by_name.end()) {
      throw bad_weight(source, weight, "its quant state exists but the weight does not");
    }
    TensorInfo& w = *it->second;
    if (w.bnb4 != nullptr || dtype_is_blocked(w.dtype)) {
      throw bad_weight(source, weight, "it is not a plain tensor of packed codes");
    }
    std::uint64_t out = 0;
    std::uint64_t in = 0;
    auto info = std::make_shared<Bnb4Info>(
        parse_bnb4_quant_state(read(state), suffix, weight, source, out, in));

    const std::uint64_t n = out * in;
    if (w.bytes != ceil_div(n, 2)) {
      throw bad_weight(source, weight,
                       "it holds " + std::to_string(w.bytes) + " bytes but [" +
                           std::to_string(out) + ", " + std::to_string(in) + "] 4-bit codes need " +
                           std::to_string(ceil_div(n, 2)));
    }
    const auto blocksize = static_cast<std::uint64_t>(info->blocksize);
    if (n % 2 != 0) {
      throw Error(ErrorCode::kUnsupported,
                  "bitsandbytes 4-bit weight " + quote_tensor_name(weight) + " in " +
                      std::string(source) + " has an odd number of values (" + std::to_string(out) +
                      " x " + std::to_string(in) + "): Ferry cannot run it");
    }
    // bitsandbytes blocks the flattened weight; the last block may be partial.
    const std::uint64_t blocks = ceil_div(n, blocksize);
    side_tensor(by_name, info->quant_map, DType::kF32, 16, weight, source);
    if (info->nested) {
      side_tensor(by_name, info->absmax, DType::kU8, blocks, weight, source);
      side_tensor(by_name, info->nested_absmax, DType::kF32,
                  ceil_div(blocks, static_cast<std::uint64_t>(info->nested_blocksize)), weight,
                  source);
      side_tensor(by_name, info->nested_quant_map, DType::kF32, 256, weight, source);
    } else {
      side_tensor(by_name, info->absmax, DType::kF32, blocks, weight, source);
    }
    w.dtype = DType::kBnb4;
    // Rows of whole blocks are what the GEMMs take; a weight whose blocks straddle rows (the H3
    // audio VAE's 32-wide Linears) stays one flat row, readable whole (bnb4_logical_shape).
    if (in % blocksize == 0) {
      w.shape = {out, in};
    } else {
      w.shape = {n};
    }
    w.bytes = n / 2;
    w.bnb4 = std::move(info);
  }
}

}  // namespace ferry::io
