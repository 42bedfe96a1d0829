// The key under which cuda/gemm.cpp keeps a cuBLASLt plan (descriptors and the heuristic's
// algorithm) so that a product of a shape it has seen costs no heuristic query and no descriptor
// creation, and the map that holds the plans. Everything the heuristic's answer depends on is in
// the key: shape, types, transposes, leading dimensions, the operands' address alignment and
// whether D's old contents are added (beta). Plain C++: unit-tested without a GPU.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <unordered_map>

namespace ferry::cuda {

// The largest power of two (up to 256) dividing the address: what the heuristic may assume.
inline std::uint32_t alignment_of(const void* p) {
  const auto address = reinterpret_cast<std::uintptr_t>(p);
  std::uint32_t a = 256;
  while (a > 1 && address % a != 0) a /= 2;
  return a;
}

struct GemmPlanKey {
  std::int64_t m = 0, n = 0, k = 0;
  std::int64_t lda = 0, ldb = 0, ldd = 0;
  int a_type = 0, b_type = 0, d_type = 0;  // cudaDataType_t values
  bool trans_a = false, trans_b = false;
  bool adds_d = false;  // beta != 0
  std::uint32_t align_a = 0, align_b = 0, align_d = 0;

  bool operator==(const GemmPlanKey&) const = default;
};

struct GemmPlanKeyHash {
  std::size_t operator()(const GemmPlanKey& key) const {
    std::size_t h = 0;
    const auto mix = [&h](std::uint64_t v) {
      h ^= std::hash<std::uint64_t>{}(v) + 0x9E3779B97F4A7C15ull + (h << 6) + (h >> 2);
    };
    for (const std::int64_t v : {key.m, key.n, key.k, key.lda, key.ldb, key.ldd})
      mix(static_cast<std::uint64_t>(v));
    mix(static_cast<std::uint64_t>(key.a_type) << 32 | static_cast<std::uint32_t>(key.b_type));
    mix(static_cast<std::uint64_t>(key.d_type) << 3 | (key.trans_a ? 4u : 0u) |
        (key.trans_b ? 2u : 0u) | (key.adds_d ? 1u : 0u));
    mix(static_cast<std::uint64_t>(key.align_a) << 32 | key.align_b);
    mix(key.align_d);
    return h;
  }
};

// Plans by key, each made once. A model has a few dozen distinct products (its layer shapes,
// their tail blocks), so the map stays small; plans live as long as the cache (references to
// them stay valid: the map is node-based).
template <typename Plan>
class GemmPlanCache {
 public:
  // The plan for `key`: made by make(key) the first time, found afterwards.
  template <typename Make>
  const Plan& get(const GemmPlanKey& key, Make&& make) {
    const auto found = plans_.find(key);
    if (found != plans_.end()) return found->second;
    return plans_.emplace(key, make(key)).first->second;
  }

  std::size_t size() const { return plans_.size(); }

 private:
  std::unordered_map<GemmPlanKey, Plan, GemmPlanKeyHash> plans_;
};

}  // namespace ferry::cuda
