#include "core/io/safetensors.h"

#include <algorithm>
#include <cstring>
#include <nlohmann/json.hpp>
#include <string>
#include <unordered_set>

#include "core/error.h"
#include "core/io/detail/os_file.h"

namespace ferry::io {
namespace {

Error bad_file(std::string_view source, std::string_view problem) {
  std::string message = "invalid safetensors file ";
  message += source;
  message += ": ";
  message += problem;
  return Error(ErrorCode::kBadModelFile, std::move(message));
}


// A SAX handler for the header: it accepts exactly the shape of a safetensors header and stops
// at the first deviation, so no input can make it build deep or large structures.
class HeaderHandler final : public nlohmann::json_sax<nlohmann::json> {
 public:
  std::vector<TensorInfo> tensors;
  std::vector<std::pair<std::uint64_t, std::uint64_t>> ranges;  // per tensor, relative
  std::map<std::string, std::string> metadata;
  std::string problem;

  bool null() override { return fail("unexpected null"); }
  bool boolean(bool) override { return fail("unexpected boolean"); }
  bool number_float(number_float_t, const string_t&) override {
    return number_error("a fraction or a number too large");
  }
  bool number_integer(number_integer_t value) override {
    if (value < 0) return number_error("a negative number");
    return number_unsigned(static_cast<number_unsigned_t>(value));
  }
  bool number_unsigned(number_unsigned_t value) override {
    if (depth_ != 3) return fail("unexpected number");
    if (field_ == Field::kShape) {
      if (entry_.shape.size() == kMaxTensorRank) {
        return fail("tensor " + quote_tensor_name(entry_.name) + " has more than " +
                    std::to_string(kMaxTensorRank) + " dimensions");
      }
      entry_.shape.push_back(value);
      return true;
    }
    if (offsets_seen_ == 2) {
      return fail("tensor " + quote_tensor_name(entry_.name) + ": data_offsets has more than two entries");
    }
    offsets_[offsets_seen_++] = value;
    return true;
  }
  bool string(string_t& value) override {
    if (depth_ == 2 && in_metadata_) {
      metadata.emplace(std::move(key_), std::move(value));
      return true;
    }
    if (depth_ == 2 && field_ == Field::kDType) {
      const auto dtype = dtype_from_name(value);
      if (!dtype) return fail("tensor " + quote_tensor_name(entry_.name) + " has unknown dtype " + quote_tensor_name(value));
      entry_.dtype = *dtype;
      return true;
    }
    return fail("unexpected string " + quote_tensor_name(value));
  }
  bool binary(binary_t&) override { return fail("unexpected binary value"); }

  bool start_object(std::size_t) override {
    ++depth_;
    if (depth_ == 1) return true;
    if (depth_ == 2) {
      if (in_metadata_) return true;
      entry_ = TensorInfo{};
      entry_.name = std::move(pending_name_);
      seen_dtype_ = seen_shape_ = seen_offsets_ = false;
      offsets_seen_ = 0;
      return true;
    }
    return fail(depth_ == 3 && in_metadata_ ? "__metadata__ values must be strings"
                                            : "unexpected nested object");
  }
  bool end_object() override {
    if (depth_ == 2) {
      if (in_metadata_) {
        in_metadata_ = false;
      } else if (!finish_tensor()) {
        return false;
      }
    }
    --depth_;
    return true;
  }
  bool start_array(std::size_t) override {
    ++depth_;
    if (depth_ == 3 && !in_metadata_ && (field_ == Field::kShape || field_ == Field::kOffsets)) {
      return true;
    }
    if (depth_ == 1) return fail("the header is a JSON array, not an object");
    return fail("unexpected array");
  }
  bool end_array() override {
    --depth_;
    return true;
  }
  bool key(string_t& name) override {
    if (depth_ == 1) {
      if (!names_.insert(name).second) return fail("duplicate entry " + quote_tensor_name(name));
      if (name == "__metadata__") {
        in_metadata_ = true;
        return true;
      }
      if (name.empty()) return fail("a tensor has an empty name");
      if (std::any_of(name.begin(), name.end(),
                      [](char c) { return static_cast<unsigned char>(c) < 0x20; })) {
        return fail("tensor name " + quote_tensor_name(name) + " contains a control character");
      }
      pending_name_ = std::move(name);
      return true;
    }
    if (in_metadata_) {
      key_ = std::move(name);
      return true;
    }
    if (name == "dtype") return set_field(Field::kDType, seen_dtype_);
    if (name == "shape") return set_field(Field::kShape, seen_shape_);
    if (name == "data_offsets") return set_field(Field::kOffsets, seen_offsets_);
    return fail("tensor " + quote_tensor_name(entry_.name) + " has unknown field " + quote_tensor_name(name));
  }
  bool parse_error(std::size_t position, const std::string&,
                   const nlohmann::detail::exception& ex) override {
    if (problem.empty()) {
      // nlohmann's text reads "[json.exception.parse_error.101] parse error at line 1, ...;
      // last read: '<token>'", and the token can be most of the header, in any bytes: keep its
      // end only, in ASCII.
      std::string what = ex.what();
      const std::size_t start = what.find("] ");
      if (start != std::string::npos) what.erase(0, start + 2);
      constexpr std::string_view kLastRead = "; last read: '";
      constexpr std::size_t kShownToken = 40;
      const std::size_t token = what.find(kLastRead);
      if (token != std::string::npos && what.size() - token > kLastRead.size() + kShownToken) {
        what = what.substr(0, token + kLastRead.size()) + "..." +
               what.substr(what.size() - kShownToken);
      }
      for (char& c : what) {
        if (static_cast<unsigned char>(c) >= 0x80) c = '?';
      }
      problem = "the header is not valid JSON (byte " + std::to_string(position) + "): " + what;
    }
    return false;
  }

 private:
  enum class Field { kNone, kDType, kShape, kOffsets };

  bool fail(std::string text) {
    if (problem.empty()) {
      if (depth_ == 0) text = "the header is not a JSON object";
      if (depth_ == 1 && !in_metadata_ && !pending_name_.empty()) {
        text = "entry " + quote_tensor_name(pending_name_) + " is not an object";
      }
      problem = std::move(text);
    }
    return false;
  }
  bool number_error(const char* what) {
    if (depth_ == 3) {
      return fail("tensor " + quote_tensor_name(entry_.name) + ": " +
                  (field_ == Field::kShape ? "shape" : "data_offsets") + " contains " + what);
    }
    return fail(std::string("unexpected number (") + what + ")");
  }
  bool set_field(Field field, bool& seen) {
    if (seen) return fail("tensor " + quote_tensor_name(entry_.name) + " repeats a field");
    seen = true;
    field_ = field;
    return true;
  }
  bool finish_tensor() {
    if (!seen_dtype_ || !seen_shape_ || !seen_offsets_) {
      return fail("tensor " + quote_tensor_name(entry_.name) + " lacks " +
                  (!seen_dtype_ ? "dtype" : !seen_shape_ ? "shape" : "data_offsets"));
    }
    if (offsets_seen_ != 2) {
      return fail("tensor " + quote_tensor_name(entry_.name) + ": data_offsets needs two entries");
    }
    ranges.emplace_back(offsets_[0], offsets_[1]);
    tensors.push_back(std::move(entry_));
    field_ = Field::kNone;
    return true;
  }

  int depth_ = 0;
  bool in_metadata_ = false;
  std::string pending_name_;
  std::string key_;
  std::unordered_set<std::string> names_;
  TensorInfo entry_;
  Field field_ = Field::kNone;
  bool seen_dtype_ = false;
  bool seen_shape_ = false;
  bool seen_offsets_ = false;
  std::uint64_t offsets_[2] = {0, 0};
  int offsets_seen_ = 0;
};

bool multiply_overflows(std::uint64_t a, std::uint64_t b, std::uint64_t& out) {
  if (a != 0 && b > UINT64_MAX / a) return true;
  out = a * b;
  return false;
}

}  // namespace


std::uint64_t safetensors_header_length(std::span<const std::byte> prefix, std::uint64_t file_size,
                                        std::string_view source) {
  if (file_size < 8 || prefix.size() < 8) {
    throw bad_file(source, "the file is " + std::to_string(file_size) +
                               " bytes long, too short for the 8-byte header length");
  }
  std::uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | static_cast<std::uint8_t>(prefix[i]);
  if (n > kMaxSafetensorsHeaderBytes) {
    throw bad_file(source, "the header claims " + std::to_string(n) + " bytes, more than the " +
                               std::to_string(kMaxSafetensorsHeaderBytes) + "-byte limit");
  }
  if (n > file_size - 8) {
    throw bad_file(source, "the header claims " + std::to_string(n) + " bytes but the file has " +
                               std::to_string(file_size - 8) + " after the length (truncated?)");
  }
  if (n < 2) throw bad_file(source, "the header is empty");
  return n;
}

SafetensorsHeader parse_safetensors_header(std::span<const std::byte> bytes,
                                           std::uint64_t file_size, std::string_view source) {
  const std::uint64_t n = safetensors_header_length(bytes, file_size, source);
  if (bytes.size() < 8 + n) throw Error(ErrorCode::kInternal, "header buffer too short");
  const char* json = reinterpret_cast<const char*>(bytes.data()) + 8;
  // nlohmann's lexer takes a NUL byte for the end of the input and would ignore what follows.
  if (const void* nul = std::memchr(json, 0, static_cast<std::size_t>(n))) {
    throw bad_file(source, "the header is not valid JSON (byte " +
                               std::to_string(static_cast<const char*>(nul) - json) +
                               "): it contains a NUL byte");
  }

  HeaderHandler handler;
  const bool ok = nlohmann::json::sax_parse(json, json + n, &handler,
                                            nlohmann::json::input_format_t::json, true);
  if (!ok) {
    throw bad_file(source, handler.problem.empty() ? "the header is not valid JSON"
                                                   : handler.problem);
  }

  SafetensorsHeader header;
  header.data_offset = 8 + n;
  header.metadata = std::move(handler.metadata);
  const std::uint64_t data_size = file_size - header.data_offset;

  std::vector<std::size_t> order(handler.tensors.size());
  for (std::size_t i = 0; i < handler.tensors.size(); ++i) {
    TensorInfo& t = handler.tensors[i];
    const auto [begin, end] = handler.ranges[i];
    std::uint64_t expected = dtype_size(t.dtype);
    for (std::uint64_t d : t.shape) {
      if (multiply_overflows(expected, d, expected)) {
        throw bad_file(source, "tensor " + quote_tensor_name(t.name) + " has a shape whose size overflows");
      }
    }
    if (begin > end) {
      throw bad_file(source, "tensor " + quote_tensor_name(t.name) + " has data_offsets that run backwards");
    }
    if (end > data_size) {
      throw bad_file(source, "tensor " + quote_tensor_name(t.name) + " ends at data byte " +
                                 std::to_string(end) + " but the data section has " +
                                 std::to_string(data_size) + " bytes (truncated?)");
    }
    if (end - begin != expected) {
      throw bad_file(source, "tensor " + quote_tensor_name(t.name) + " spans " + std::to_string(end - begin) +
                                 " bytes but its dtype and shape need " +
                                 std::to_string(expected));
    }
    t.offset = header.data_offset + begin;
    t.bytes = end - begin;
    order[i] = i;
  }
  std::sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
    const TensorInfo& x = handler.tensors[a];
    const TensorInfo& y = handler.tensors[b];
    return x.offset != y.offset ? x.offset < y.offset : x.bytes < y.bytes;
  });
  header.tensors.reserve(order.size());
  const TensorInfo* previous = nullptr;  // the last non-empty tensor
  for (std::size_t i : order) {
    TensorInfo& t = handler.tensors[i];
    if (t.bytes != 0) {
      if (previous != nullptr && t.offset < previous->offset + previous->bytes) {
        throw bad_file(source, "tensors " + quote_tensor_name(previous->name) + " and " + quote_tensor_name(t.name) +
                                   " overlap");
      }
    }
    header.tensors.push_back(std::move(t));
    if (header.tensors.back().bytes != 0) previous = &header.tensors.back();
  }
  return header;
}

}  // namespace ferry::io
