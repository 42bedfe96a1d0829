// `ferry-cli inspect PATH`: validates a safetensors file, a sharded index, a GGUF file or a model
// folder and prints what it holds: each tensor (name, dtype, shape, bytes; a bitsandbytes 4-bit
// weight's quant state), a GGUF file's format, architecture and key/values, and the totals.
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "cli/args.h"
#include "cli/commands.h"
#include "cli/dump.h"
#include "core/error.h"
#include "core/io/detail/os_file.h"
#include "core/io/model_folder.h"
#include "core/io/tensor_set.h"
#include "core/models/family.h"

namespace ferry::cli {
namespace {

namespace fs = std::filesystem;
using io::detail::display;

std::string shape_text(const std::vector<std::uint64_t>& shape) {
  std::string out = "[";
  for (std::size_t i = 0; i < shape.size(); ++i) {
    if (i != 0) out += ", ";
    out += std::to_string(shape[i]);
  }
  return out + "]";
}

// A bitsandbytes 4-bit weight's state: "  nf4, blocks of 64, nested (256)".
std::string bnb4_text(const io::TensorInfo& t) {
  if (t.bnb4 == nullptr) return "";
  const io::Bnb4Info& b = *t.bnb4;
  std::string text = "  " + b.quant_type + ", blocks of " + std::to_string(b.blocksize);
  text += b.nested ? ", nested (" + std::to_string(b.nested_blocksize) + ")" : ", plain absmax";
  return text;
}

// A string from the file, cut and with control characters replaced, for the terminal.
std::string printable(std::string text, std::size_t max_bytes) {
  if (text.size() > max_bytes) text = text.substr(0, max_bytes) + "...";
  for (char& c : text) {
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) c = '?';
  }
  return text;
}

void print_gguf(const io::GgufHeader& h) {
  const std::optional<std::string> arch = h.string("general.architecture");
  std::printf("  format GGUF v%u, alignment %llu, data from byte %llu\n", h.version,
              static_cast<unsigned long long>(h.alignment),
              static_cast<unsigned long long>(h.data_offset));
  std::printf("  architecture %s\n", arch ? printable(*arch, 60).c_str() : "(none)");
  const std::vector<std::string>* tokens = h.strings("tokenizer.ggml.tokens");
  const std::optional<std::string> tokenizer = h.string("tokenizer.ggml.model");
  std::printf("  %zu key/value%s; tokenizer: %s\n", h.metadata.size(),
              h.metadata.size() == 1 ? "" : "s",
              tokens == nullptr ? "none"
                                : (printable(tokenizer.value_or("?"), 40) + ", " +
                                   std::to_string(tokens->size()) + " tokens")
                                      .c_str());
}

struct Totals {
  std::size_t files = 0;
  std::size_t tensors = 0;
  unsigned long long bytes = 0;
  std::map<std::string, std::pair<std::size_t, unsigned long long>> by_dtype;
};

void print_set(const io::TensorSet& set, const fs::path& base, bool summary, Totals& totals) {
  // Paths inside a folder read the same on every OS: forward slashes.
  std::string shown = display(set.path());
  if (!base.empty()) {
    const std::u8string relative = set.path().lexically_relative(base).generic_u8string();
    shown.assign(relative.begin(), relative.end());
  }
  std::printf("%s  (%zu tensor%s, %s%s)\n", shown.c_str(), set.entries().size(),
              set.entries().size() == 1 ? "" : "s", human_bytes(set.tensor_bytes()).c_str(),
              set.sharded() ? (", " + std::to_string(set.files().size()) + " shards").c_str() : "");
  totals.files += set.files().size();
  std::size_t width = 0;
  for (const auto& e : set.entries()) width = std::max(width, e.tensor->name.size());
  width = std::min<std::size_t>(width, 72);
  for (const auto& e : set.entries()) {
    const io::TensorInfo& t = *e.tensor;
    const std::string dtype(dtype_name(t.dtype));
    totals.tensors += 1;
    totals.bytes += t.bytes;
    totals.by_dtype[dtype].first += 1;
    totals.by_dtype[dtype].second += t.bytes;
    if (!summary) {
      std::printf("  %-*s  %-7s  %-22s  %s%s\n", static_cast<int>(width), t.name.c_str(),
                  dtype.c_str(), shape_text(t.shape).c_str(), human_bytes(t.bytes).c_str(),
                  bnb4_text(t).c_str());
    }
  }
  for (const io::TensorFile& file : set.files()) {
    if (const io::GgufHeader* gguf = file.gguf()) print_gguf(*gguf);
  }
  for (const io::TensorFile& file : set.files()) {
    for (const auto& [key, value] : file.metadata()) {
      std::printf("  metadata %s = %.100s%s\n", key.c_str(), value.c_str(),
                  value.size() > 100 ? "..." : "");
    }
  }
}

// What the folder (or file) holds as a model set: the family that recognises it and one line per
// part (ModelParts::describe), or why it is not a whole set.
void print_model_set(const fs::path& folder) {
  try {
    const std::unique_ptr<models::ModelParts> parts = models::open_model({folder});
    std::printf("model set: %s (%s)\n", parts->name().c_str(),
                std::string(parts->family()).c_str());
    for (const std::string& line : parts->describe()) std::printf("  %s\n", line.c_str());
  } catch (const Error& e) {
    std::printf("model set: none (%s)\n", e.what());
  }
}

}  // namespace

int run_inspect(const std::vector<std::string>& argv) {
  const Args args(argv, {"tensor", "dump"}, {"summary"});
  if (args.positional().size() != 1 ||
      args.value("tensor").has_value() != args.value("dump").has_value()) {
    throw Error(ErrorCode::kBadArgument,
                "usage: ferry-cli inspect [--summary] PATH [--tensor NAME --dump OUT.safetensors]");
  }
  const fs::path path = io::detail::path_from_utf8(args.positional()[0]);
  std::error_code ec;
  const fs::file_status status = fs::status(path, ec);
  if (!fs::exists(status)) {
    throw Error(ErrorCode::kBadArgument, display(path) + " does not exist");
  }
  if (io::is_pickle_file(path)) {
    throw Error(ErrorCode::kBadModelFile,
                display(path) +
                    " is a pickle file, which Ferry never loads (it can run code): "
                    "use the .safetensors version of this model");
  }

  if (const auto tensor = args.value("tensor")) {
    if (fs::is_directory(status)) {
      throw Error(ErrorCode::kBadArgument, "--tensor needs a model file, not a folder");
    }
    dump_tensor(io::TensorSet::open(path), *tensor,
                io::detail::path_from_utf8(*args.value("dump")));
    return 0;
  }

  Totals totals;
  std::vector<fs::path> pickles;
  if (fs::is_directory(status)) {
    const std::vector<fs::path> sets = io::find_safetensors_sets(path, &pickles);
    if (sets.empty()) {
      throw Error(ErrorCode::kBadModelFile, "no .safetensors files in " + display(path));
    }
    for (const fs::path& p : sets) {
      try {
        print_set(io::TensorSet::open(p), path, args.flag("summary"), totals);
      } catch (const Error& e) {
        // A file Ferry cannot run (yet) is said, and the folder's other files still shown.
        if (e.code() != ErrorCode::kUnsupported) throw;
        std::printf("%s: cannot be opened whole: %s\n", display(p).c_str(), e.what());
      }
    }
    print_model_set(path);
  } else {
    print_set(io::TensorSet::open(path), {}, args.flag("summary"), totals);
    print_model_set(path);  // one part: the family's message names it and what else it needs
  }

  for (const fs::path& p : pickles) {
    std::printf("skipped %s: pickle files are never loaded\n", display(p).c_str());
  }
  std::printf("total: %zu file%s, %zu tensor%s, %s\n", totals.files, totals.files == 1 ? "" : "s",
              totals.tensors, totals.tensors == 1 ? "" : "s", human_bytes(totals.bytes).c_str());
  for (const auto& [dtype, count_bytes] : totals.by_dtype) {
    std::printf("  %-7s %zu tensor%s, %s\n", dtype.c_str(), count_bytes.first,
                count_bytes.first == 1 ? "" : "s", human_bytes(count_bytes.second).c_str());
  }
  return 0;
}

std::string human_bytes(unsigned long long bytes) {
  static const char* const kUnits[] = {"KiB", "MiB", "GiB", "TiB"};
  if (bytes < 1024) return std::to_string(bytes) + " B";
  double value = static_cast<double>(bytes);
  int unit = -1;
  while (value >= 1024 && unit < 3) {
    value /= 1024;
    ++unit;
  }
  char text[32];
  std::snprintf(text, sizeof text,
                value < 10    ? "%.2f %s"
                : value < 100 ? "%.1f %s"
                              : "%.0f %s",
                value, kUnits[unit]);
  return text;
}

}  // namespace ferry::cli
