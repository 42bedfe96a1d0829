// The CPU dequantisers against gguf-py's and bitsandbytes' own arithmetic, bit for bit: the
// reference files of tools/reference/make_quant_reference.py (tests/data/quant/) hold hand-made
// edge blocks with their expected f32 bit patterns, and 1000 random blocks per type with an
// FNV-1a 64 hash of their expected bits (a full copy of the values would not fit the 2 MB the
// committed data may take; a wrong bit anywhere changes the hash).
#include "core/backend/cpu/quant_blocks.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <ostream>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "core/error.h"
#include "tests/backend/quant_test_blocks.h"
#include "tests/test_support.h"

namespace ferry::cpu {
namespace {

// Reads a reference file front to back.
class Reader {
 public:
  explicit Reader(const std::string& name)
      : bytes_(test::read_file(test::data_path("quant/" + name))) {}

  void expect_magic(const char (&magic)[9]) {
    ASSERT_GE(bytes_.size(), 8u);
    ASSERT_EQ(std::memcmp(bytes_.data(), magic, 8), 0) << "not a reference file of this kind";
    at_ = 8;
  }
  template <typename T>
  T value() {
    T v{};
    copy(&v, sizeof v);
    return v;
  }
  template <typename T>
  std::vector<T> array(std::size_t n) {
    std::vector<T> v(n);
    copy(v.data(), n * sizeof(T));
    return v;
  }
  bool at_end() const { return at_ == bytes_.size(); }

 private:
  void copy(void* dst, std::size_t n) {
    if (at_ + n > bytes_.size()) throw std::runtime_error("reference file truncated");
    std::memcpy(dst, bytes_.data() + at_, n);
    at_ += n;
  }
  std::vector<std::byte> bytes_;
  std::size_t at_ = 0;
};

std::uint32_t bits_of(float v) {
  std::uint32_t b;
  std::memcpy(&b, &v, sizeof b);
  return b;
}

std::uint64_t fnv1a64(const float* values, std::size_t n) {
  std::uint64_t h = 0xCBF29CE484222325ull;
  const auto* bytes = reinterpret_cast<const unsigned char*>(values);
  for (std::size_t i = 0; i < n * sizeof(float); ++i) {
    h ^= bytes[i];
    h *= 0x100000001B3ull;
  }
  return h;
}

struct GgmlCase {
  const char* name;
  DType dtype;
};

// gtest names the case by its type in failures and in ctest's list (not by its bytes).
void PrintTo(const GgmlCase& c, std::ostream* os) {
  *os << c.name;
}

class GgmlDequant : public ::testing::TestWithParam<GgmlCase> {};

TEST_P(GgmlDequant, equals_gguf_py_bit_for_bit) {
  const GgmlCase& c = GetParam();
  Reader file(std::string(c.name) + ".bin");
  file.expect_magic("FQUANT1\0");
  const auto elems = file.value<std::uint32_t>();
  const auto bytes = file.value<std::uint32_t>();
  const auto groups = file.value<std::uint32_t>();
  const auto full_groups = file.value<std::uint32_t>();
  const auto data = file.array<std::uint8_t>(std::size_t{groups} * bytes);
  const auto hashes = file.array<std::uint64_t>(groups);
  const auto expected = file.array<std::uint32_t>(std::size_t{full_groups} * elems);
  ASSERT_TRUE(file.at_end());
  if (dtype_is_blocked(c.dtype)) {
    ASSERT_EQ(elems, dtype_block_elems(c.dtype));
    ASSERT_EQ(bytes, dtype_block_bytes(c.dtype));
  }
  EXPECT_GE(groups - full_groups, 1000u);

  // All of them in one call (a row of many blocks), then compared group by group.
  std::vector<float> out(std::size_t{groups} * elems);
  dequantize(c.dtype, data.data(), out.data(), static_cast<std::int64_t>(out.size()));

  int reported = 0;
  for (std::size_t i = 0; i < std::size_t{full_groups} * elems; ++i) {
    if (bits_of(out[i]) != expected[i] && reported++ < 10) {
      ADD_FAILURE() << c.name << " edge block " << i / elems << " value " << i % elems << ": got 0x"
                    << std::hex << bits_of(out[i]) << " (" << out[i] << "), gguf-py 0x"
                    << expected[i];
    }
  }
  for (std::size_t g = 0; g < groups; ++g) {
    if (fnv1a64(out.data() + g * elems, elems) != hashes[g] && reported++ < 10) {
      ADD_FAILURE() << c.name << " block " << g << " differs from gguf-py's"
                    << (g < full_groups ? " (an edge block)" : " (a random block)");
    }
  }
  EXPECT_EQ(reported, 0);

  // Block by block into an unaligned input gives the same values.
  std::vector<std::uint8_t> shifted(bytes + 1);
  std::vector<float> one(elems);
  for (std::size_t g = 0; g < groups; g += 97) {
    std::memcpy(shifted.data() + 1, data.data() + g * bytes, bytes);
    dequantize(c.dtype, shifted.data() + 1, one.data(), elems);
    EXPECT_EQ(std::memcmp(one.data(), out.data() + g * elems, elems * sizeof(float)), 0)
        << c.name << " block " << g;
  }
}

// The GEMM's entry: any range of a row of blocks, cut from the whole row's values.
TEST_P(GgmlDequant, a_range_of_a_row_is_the_same_values) {
  const GgmlCase& c = GetParam();
  const std::int64_t row_blocks = 6;
  const std::int64_t elems = dtype_block_elems(c.dtype);
  const std::int64_t n = row_blocks * (elems == 1 ? 32 : elems);
  std::mt19937 rng(3);
  std::vector<std::uint8_t> row(dtype_storage_bytes(c.dtype, static_cast<std::uint64_t>(n)));
  for (auto& byte : row) byte = static_cast<std::uint8_t>(rng() & 0x3F);  // finite halves
  std::vector<float> whole(static_cast<std::size_t>(n));
  dequantize(c.dtype, row.data(), whole.data(), n);
  const std::int64_t granule = dequantize_granule(c.dtype);
  EXPECT_EQ(elems % granule, 0);
  for (int trial = 0; trial < 300; ++trial) {
    const std::int64_t first = std::uniform_int_distribution<std::int64_t>(0, n - 1)(rng);
    const std::int64_t count = std::uniform_int_distribution<std::int64_t>(0, n - first)(rng);
    std::vector<float> part(static_cast<std::size_t>(count) + 1, -7.0f);
    dequantize_range(c.dtype, row.data(), first, part.data(), count);
    ASSERT_EQ(std::memcmp(part.data(), whole.data() + first,
                          static_cast<std::size_t>(count) * sizeof(float)),
              0)
        << c.name << " values [" << first << ", " << first + count << ")";
    ASSERT_EQ(part.back(), -7.0f) << "wrote past the range";
  }
}

INSTANTIATE_TEST_SUITE_P(
    AllTypes, GgmlDequant,
    ::testing::Values(GgmlCase{"Q8_0", DType::kQ8_0}, GgmlCase{"Q4_0", DType::kQ4_0},
                      GgmlCase{"Q4_1", DType::kQ4_1}, GgmlCase{"Q5_0", DType::kQ5_0},
                      GgmlCase{"Q5_1", DType::kQ5_1}, GgmlCase{"Q2_K", DType::kQ2_K},
                      GgmlCase{"Q3_K", DType::kQ3_K}, GgmlCase{"Q4_K", DType::kQ4_K},
                      GgmlCase{"Q5_K", DType::kQ5_K}, GgmlCase{"Q6_K", DType::kQ6_K},
                      GgmlCase{"F16", DType::kF16}, GgmlCase{"BF16", DType::kBF16}),
    [](const auto& param_info) { return std::string(param_info.param.name); });

TEST(Dequantize, refuses_partial_blocks_and_other_dtypes) {
  std::vector<std::uint8_t> block(256, 0);
  std::vector<float> out(256);
  EXPECT_EQ(test::error_code_of([&] { dequantize(DType::kQ4_K, block.data(), out.data(), 128); }),
            ErrorCode::kInternal);
  EXPECT_EQ(test::error_code_of([&] { dequantize(DType::kQ8_0, block.data(), out.data(), 33); }),
            ErrorCode::kInternal);
  EXPECT_EQ(test::error_code_of([&] { dequantize(DType::kI8, block.data(), out.data(), 4); }),
            ErrorCode::kInternal);
  EXPECT_EQ(test::error_code_of([&] { dequantize(DType::kBnb4, block.data(), out.data(), 4); }),
            ErrorCode::kInternal);
}

// ---- The AVX2 decoders of the K-quants against the portable ones ----
// The reference files above check whichever path the CPU runs against gguf-py; these hold the
// AVX2 path to the portable one on many more blocks, bit for bit (skipped on a CPU or build
// without AVX2: the portable path is then the only one).

constexpr DType kKQuants[] = {DType::kQ2_K, DType::kQ3_K, DType::kQ4_K, DType::kQ5_K, DType::kQ6_K};

// Blocks of t for the unpacking: for every byte value v, a block whose every byte (scales,
// mins, codes, high bits, Q3_K's hmask) is v, and one whose byte i is v + 37 i (neighbouring
// scale and code bytes differ, so the 6-bit scales that take bits from two bytes see mixed
// pairs); their half fields walk through the edge halves, infinities and NaNs included, one
// non-finite field per block (with two NaN operands x86 keeps the first's payload, and both
// paths subtract in the same order, but the reference files keep to one too).
std::vector<std::uint8_t> sweep_blocks(DType t) {
  const std::uint16_t halves[] = {0x0000, 0x8000, 0x0001, 0x8001, 0x03FF, 0x0400, 0x3C00, 0xBC00,
                                  0x7BFF, 0xFBFF, 0x2E66, 0x7C00, 0xFC00, 0x7E00, 0xFE01, 0x7C01};
  const std::uint16_t finite = 0xA11F;  // -0.0103...
  const std::size_t size = dtype_block_bytes(t);
  const std::vector<int> fields = test::half_fields(t);
  std::vector<std::uint8_t> bytes;
  int block = 0;
  for (int v = 0; v < 256; ++v) {
    for (int pattern = 0; pattern < 2; ++pattern, ++block) {
      std::vector<std::uint8_t> b(size);
      for (std::size_t i = 0; i < size; ++i)
        b[i] = static_cast<std::uint8_t>(pattern == 0 ? v : v + 37 * static_cast<int>(i));
      const std::uint16_t edge = halves[block % std::size(halves)];
      for (std::size_t f = 0; f < fields.size(); ++f) {
        // Two fields (d, dmin): the edge half goes to one of them in turn, a finite one to the
        // other.
        const bool edge_here = fields.size() == 1 || static_cast<int>(f) == (block / 16) % 2;
        test::put_half(b.data() + fields[f], edge_here ? edge : finite);
      }
      bytes.insert(bytes.end(), b.begin(), b.end());
    }
  }
  const std::vector<std::uint8_t> random = test::random_blocks(t, 512, 11);
  const std::vector<std::uint8_t> edges = test::edge_blocks(t, 12);
  bytes.insert(bytes.end(), random.begin(), random.end());
  bytes.insert(bytes.end(), edges.begin(), edges.end());
  return bytes;
}

// The index of the first value whose bits differ, or -1.
std::int64_t first_difference(const std::vector<float>& got, const std::vector<float>& want) {
  for (std::size_t i = 0; i < got.size(); ++i) {
    if (bits_of(got[i]) != bits_of(want[i])) return static_cast<std::int64_t>(i);
  }
  return -1;
}

TEST(DequantAvx2, equals_the_portable_decoders_bit_for_bit) {
  if (!dequant_path_available(DequantPath::kAvx2)) GTEST_SKIP() << "no AVX2 decoders here";
  for (const DType t : kKQuants) {
    const std::vector<std::uint8_t> blocks = sweep_blocks(t);
    const std::int64_t n =
        static_cast<std::int64_t>(blocks.size() / dtype_block_bytes(t)) * dtype_block_elems(t);
    std::vector<float> portable(static_cast<std::size_t>(n));
    std::vector<float> avx2(static_cast<std::size_t>(n));
    dequantize_on(DequantPath::kPortable, t, blocks.data(), portable.data(), n);
    dequantize_on(DequantPath::kAvx2, t, blocks.data(), avx2.data(), n);
    const std::int64_t at = first_difference(avx2, portable);
    EXPECT_EQ(at, -1) << dtype_name(t) << " block " << at / 256 << " value " << at % 256
                      << ": AVX2 0x" << std::hex << bits_of(avx2[static_cast<std::size_t>(at)])
                      << ", portable 0x" << bits_of(portable[static_cast<std::size_t>(at)]);
    // dequantize takes the AVX2 path here.
    std::vector<float> best(static_cast<std::size_t>(n));
    dequantize(t, blocks.data(), best.data(), n);
    EXPECT_EQ(first_difference(best, portable), -1) << dtype_name(t);
  }
}

// The GEMM's ranges through the AVX2 path: ranges that start or end inside a half-block
// granule, on its edges, and one value either side, cut from the portable decode of the row.
TEST(DequantAvx2, ranges_with_tails_equal_the_portable_row) {
  if (!dequant_path_available(DequantPath::kAvx2)) GTEST_SKIP() << "no AVX2 decoders here";
  const std::int64_t row_blocks = 4;
  const std::int64_t n = row_blocks * 256;
  std::vector<std::int64_t> edges;
  for (std::int64_t g = 0; g <= n; g += 128) {
    for (std::int64_t d = -1; d <= 1; ++d) {
      if (g + d >= 0 && g + d <= n) edges.push_back(g + d);
    }
  }
  edges.push_back(37);
  edges.push_back(n - 37);
  for (const DType t : kKQuants) {
    const std::vector<std::uint8_t> row = test::random_blocks(t, row_blocks, 5);
    std::vector<float> whole(static_cast<std::size_t>(n));
    dequantize_on(DequantPath::kPortable, t, row.data(), whole.data(), n);
    for (const std::int64_t first : edges) {
      for (const std::int64_t end : edges) {
        if (end < first) continue;
        const std::int64_t count = end - first;
        std::vector<float> part(static_cast<std::size_t>(count) + 1, -7.0f);
        dequantize_range(t, row.data(), first, part.data(), count);
        ASSERT_EQ(std::memcmp(part.data(), whole.data() + first,
                              static_cast<std::size_t>(count) * sizeof(float)),
                  0)
            << dtype_name(t) << " values [" << first << ", " << end << ")";
        ASSERT_EQ(part.back(), -7.0f) << "wrote past the range";
      }
    }
  }
}

TEST(DequantAvx2, the_portable_path_is_always_there) {
  EXPECT_TRUE(dequant_path_available(DequantPath::kPortable));
  std::vector<std::uint8_t> block(dtype_block_bytes(DType::kQ6_K), 0);
  std::vector<float> out(256, 1.0f);
  dequantize_on(DequantPath::kPortable, DType::kQ6_K, block.data(), out.data(), 256);
  EXPECT_EQ(out[0], 0.0f);  // d = +0
  if (!dequant_path_available(DequantPath::kAvx2)) {
    EXPECT_EQ(test::error_code_of([&] {
                dequantize_on(DequantPath::kAvx2, DType::kQ6_K, block.data(), out.data(), 256);
              }),
              ErrorCode::kInternal);
  }
}

// ---- bitsandbytes 4-bit ----

struct Bnb4File {
  std::int64_t n = 0;
  std::vector<std::uint8_t> codes;
  std::vector<float> code_book, absmax_f32, nested_absmax, nested_code;
  std::vector<std::uint8_t> absmax_u8;
  std::vector<std::uint32_t> expected;
  Bnb4State state;

  explicit Bnb4File(const std::string& name) {
    Reader file(name);
    file.expect_magic("FBNB4v1\0");
    n = file.value<std::uint32_t>();
    const auto blocksize = file.value<std::uint32_t>();
    const bool nested = file.value<std::uint32_t>() != 0;
    const auto nested_blocksize = file.value<std::uint32_t>();
    state.nested_offset = file.value<float>();
    state.blocksize = blocksize;
    state.nested_blocksize = nested_blocksize;
    code_book = file.array<float>(16);
    codes = file.array<std::uint8_t>(static_cast<std::size_t>((n + 1) / 2));
    const std::int64_t blocks = (n + blocksize - 1) / blocksize;
    state.code = view(code_book.data(), DType::kF32, 16);
    if (nested) {
      absmax_u8 = file.array<std::uint8_t>(static_cast<std::size_t>(blocks));
      nested_absmax = file.array<float>(
          static_cast<std::size_t>((blocks + nested_blocksize - 1) / nested_blocksize));
      nested_code = file.array<float>(256);
      state.absmax = view(absmax_u8.data(), DType::kU8, blocks);
      state.nested_absmax =
          view(nested_absmax.data(), DType::kF32, static_cast<std::int64_t>(nested_absmax.size()));
      state.nested_code = view(nested_code.data(), DType::kF32, 256);
    } else {
      absmax_f32 = file.array<float>(static_cast<std::size_t>(blocks));
      state.absmax = view(absmax_f32.data(), DType::kF32, blocks);
    }
    expected = file.array<std::uint32_t>(static_cast<std::size_t>(n));
    EXPECT_TRUE(file.at_end());
  }

  static Tensor view(void* data, DType dtype, std::int64_t n) {
    Tensor t;
    t.data = data;
    t.dtype = dtype;
    t.shape = Shape{n};
    return t;
  }
};

class Bnb4Dequant : public ::testing::TestWithParam<const char*> {};

TEST_P(Bnb4Dequant, equals_bitsandbytes_bit_for_bit) {
  const Bnb4File f(std::string(GetParam()) + ".bin");
  ASSERT_NE(f.n % f.state.blocksize, 0) << "the file should end in a partial block";
  std::vector<float> out(static_cast<std::size_t>(f.n));
  dequantize_bnb4(f.state, f.codes.data(), 0, out.data(), f.n);
  int reported = 0;
  for (std::int64_t j = 0; j < f.n; ++j) {
    const auto i = static_cast<std::size_t>(j);
    if (bits_of(out[i]) != f.expected[i] && reported++ < 10) {
      ADD_FAILURE() << GetParam() << " value " << j << ": got 0x" << std::hex << bits_of(out[i])
                    << ", bitsandbytes 0x" << f.expected[i];
    }
  }
  EXPECT_EQ(reported, 0);

  // Ranges that start on a low nibble, inside a block, and cross blocks (nested ones too).
  std::mt19937 rng(7);
  for (int trial = 0; trial < 200; ++trial) {
    const std::int64_t first = std::uniform_int_distribution<std::int64_t>(0, f.n - 1)(rng);
    const std::int64_t count = std::uniform_int_distribution<std::int64_t>(
        0, std::min<std::int64_t>(f.n - first, 700))(rng);
    std::vector<float> part(static_cast<std::size_t>(count) + 1, -7.0f);
    dequantize_bnb4(f.state, f.codes.data(), first, part.data(), count);
    ASSERT_EQ(std::memcmp(part.data(), out.data() + first, static_cast<std::size_t>(count) * 4), 0)
        << GetParam() << " values [" << first << ", " << first + count << ")";
    ASSERT_EQ(part.back(), -7.0f) << "wrote past the range";
  }
}

INSTANTIATE_TEST_SUITE_P(NestedAndPlain, Bnb4Dequant,
                         ::testing::Values("nf4_nested", "nf4_plain", "fp4_nested", "fp4_plain"));

TEST(Bnb4Dequant, refuses_a_state_that_does_not_cover_the_range) {
  Bnb4File f("nf4_nested.bin");
  std::vector<float> out(static_cast<std::size_t>(f.n) + 64);
  // One value past the last block.
  const std::int64_t past = f.state.absmax.numel() * f.state.blocksize;
  EXPECT_EQ(
      test::error_code_of([&] { dequantize_bnb4(f.state, f.codes.data(), past, out.data(), 1); }),
      ErrorCode::kInternal);
  // A nested absmax too short for the last blocks.
  Bnb4State short_nested = f.state;
  short_nested.nested_absmax.shape = Shape{1};
  EXPECT_EQ(test::error_code_of(
                [&] { dequantize_bnb4(short_nested, f.codes.data(), 0, out.data(), f.n); }),
            ErrorCode::kInternal);
  Bnb4State bad_book = f.state;
  bad_book.code.dtype = DType::kBF16;
  EXPECT_EQ(
      test::error_code_of([&] { dequantize_bnb4(bad_book, f.codes.data(), 0, out.data(), 4); }),
      ErrorCode::kInternal);
}

}  // namespace
}  // namespace ferry::cpu
