#include "bench/bench_support.h"

#include <algorithm>
#include <cstdio>
#include <random>
#include <string>
#include <system_error>

#include "core/tensor/convert.h"

namespace ferry::bench {

void write_random_checkpoint(const std::filesystem::path& path,
                             const std::vector<io::TensorSpec>& specs,
                             const std::function<RandomRange(const io::TensorSpec&)>& range) {
  std::vector<float> table(65521);
  std::mt19937 rng(20261130);
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  for (float& v : table) v = uniform(rng);
  create_parent_directories(path);
  std::vector<float> values;
  io::write_safetensors(
      path, specs, {{"format", "pt"}},
      [&](std::size_t index, std::uint64_t offset, std::span<std::byte> out) {
        const io::TensorSpec& spec = specs[index];
        const std::size_t item = dtype_size(spec.dtype);
        if (item != 2 && item != 4) {
          throw Error(ErrorCode::kInternal, "write_random_checkpoint: " + spec.name +
                                                " is not a 16- or 32-bit float tensor");
        }
        const RandomRange r = range(spec);
        const std::size_t n = out.size() / item, first = static_cast<std::size_t>(offset / item);
        values.resize(n);
        for (std::size_t i = 0; i < n; ++i) {
          values[i] = r.bias + r.scale * table[(first + i + 7919 * index) % table.size()];
        }
        convert_from_f32(values.data(), spec.dtype, out.data(), n);
      });
}

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  const std::size_t mid = values.size() / 2;
  return values.size() % 2 != 0 ? values[mid] : 0.5 * (values[mid - 1] + values[mid]);
}

bool Args::next() {
  if (++i_ >= argc_) return false;
  if (option() == "--help" || option() == "-h") {
    print_usage_();
    help_asked_ = true;
    return false;
  }
  return true;
}

const char* Args::value() {
  if (i_ + 1 >= argc_) {
    throw Error(ErrorCode::kBadArgument, std::string(option()) + " needs a value");
  }
  return argv_[++i_];
}

void Args::unknown() const {
  throw Error(ErrorCode::kBadArgument, "unknown option " + std::string(option()));
}

void create_parent_directories(const std::filesystem::path& path) {
  if (path.has_parent_path()) std::filesystem::create_directories(path.parent_path());
}

ScratchFile::~ScratchFile() {
  if (keep_) return;
  std::error_code ec;
  std::filesystem::remove(path_, ec);
  if (report_ == Report::kPrinted) {
    std::printf("removed %s%s\n", path_.string().c_str(), ec ? " (FAILED)" : "");
  }
}

int report_errors(const char* name, const std::function<int()>& body) {
  try {
    return body();
  } catch (const Error& e) {
    std::fprintf(stderr, "%s: %s\n", name, e.what());
    return exit_code(e.code());
  }
}

}  // namespace ferry::bench
