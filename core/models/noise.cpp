#include "core/models/noise.h"

#include <cmath>
#include <numbers>

namespace ferry::models {
namespace {

constexpr std::uint32_t kMul0 = 0xD2511F53u, kMul1 = 0xCD9E8D57u;
constexpr std::uint32_t kWeyl0 = 0x9E3779B9u, kWeyl1 = 0xBB67AE85u;

void mulhilo(std::uint32_t a, std::uint32_t b, std::uint32_t& hi, std::uint32_t& lo) {
  const std::uint64_t p = static_cast<std::uint64_t>(a) * b;
  hi = static_cast<std::uint32_t>(p >> 32);
  lo = static_cast<std::uint32_t>(p);
}

// A uniform in (0, 1]: never 0, so the logarithm below is finite.
double uniform(std::uint32_t bits) {
  return (static_cast<double>(bits) + 1.0) / 4294967296.0;
}

}  // namespace

void philox4x32_10(std::uint64_t counter, std::uint64_t key, std::uint32_t out[4]) {
  std::uint32_t c[4] = {static_cast<std::uint32_t>(counter),
                        static_cast<std::uint32_t>(counter >> 32), 0, 0};
  std::uint32_t k0 = static_cast<std::uint32_t>(key), k1 = static_cast<std::uint32_t>(key >> 32);
  for (int round = 0; round < 10; ++round) {
    std::uint32_t hi0, lo0, hi1, lo1;
    mulhilo(kMul0, c[0], hi0, lo0);
    mulhilo(kMul1, c[2], hi1, lo1);
    const std::uint32_t next[4] = {hi1 ^ c[1] ^ k0, lo1, hi0 ^ c[3] ^ k1, lo0};
    for (int i = 0; i < 4; ++i) c[i] = next[i];
    k0 += kWeyl0;
    k1 += kWeyl1;
  }
  for (int i = 0; i < 4; ++i) out[i] = c[i];
}

void normal_noise(std::uint64_t seed, std::uint64_t offset, std::span<float> out) {
  std::uint32_t block[4];
  std::uint64_t loaded = ~std::uint64_t{0};
  for (std::size_t i = 0; i < out.size(); ++i) {
    const std::uint64_t index = offset + i;
    // Each block of 4 words gives 4 normals: two Box–Muller pairs.
    const std::uint64_t counter = index / 4;
    if (counter != loaded) {
      philox4x32_10(counter, seed, block);
      loaded = counter;
    }
    const unsigned lane = static_cast<unsigned>(index % 4);
    const unsigned pair = lane / 2 * 2;
    const double radius = std::sqrt(-2.0 * std::log(uniform(block[pair])));
    const double angle = 2.0 * std::numbers::pi * uniform(block[pair + 1]);
    out[i] =
        static_cast<float>(lane % 2 == 0 ? radius * std::cos(angle) : radius * std::sin(angle));
  }
}

}  // namespace ferry::models
