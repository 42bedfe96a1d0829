// The CPU backend's convolutions, resampling and data movement against direct loops written
// from wan.md §C (float64 sums for the convolutions).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "core/backend/cpu/cpu_backend.h"
#include "core/error.h"
#include "core/tensor/convert.h"
#include "tests/backend/host_tensor.h"

namespace ferry::cpu {
namespace {

using test::HostTensor;
using test::random_values;

CpuBackend& backend() {
  static CpuBackend cpu;
  return cpu;
}

// ---- conv3d ----

struct ConvCase {
  const char* name;
  std::int64_t ci, t, h, w, co, kt, kh, kw;
  Conv3dParams p;
};

class CpuConv3d : public ::testing::TestWithParam<ConvCase> {};

TEST_P(CpuConv3d, equals_the_direct_sum_over_the_zero_padded_input) {
  const ConvCase& c = GetParam();
  const std::int64_t to = (c.t + c.p.pad_front + c.p.pad_back - c.kt) / c.p.stride_t + 1;
  const std::int64_t ho = (c.h + c.p.pad_top + c.p.pad_bottom - c.kh) / c.p.stride_h + 1;
  const std::int64_t wo = (c.w + c.p.pad_left + c.p.pad_right - c.kw) / c.p.stride_w + 1;
  const auto xv = random_values(static_cast<std::size_t>(c.ci * c.t * c.h * c.w), 1);
  const auto wv = random_values(static_cast<std::size_t>(c.co * c.ci * c.kt * c.kh * c.kw), 2);
  const auto bv = random_values(static_cast<std::size_t>(c.co), 3);
  HostTensor x(DType::kF32, {c.ci, c.t, c.h, c.w}, xv);
  HostTensor w(DType::kF32, {c.co, c.ci, c.kt, c.kh, c.kw}, wv);
  HostTensor b(DType::kF32, {c.co}, bv);
  HostTensor y(DType::kF32, {c.co, to, ho, wo});
  backend().conv3d(x.t, w.t, &b.t, c.p, y.t);
  const auto got = y.values();
  const auto at = [&](std::int64_t ch, std::int64_t tt, std::int64_t yy, std::int64_t xx) -> double {
    tt -= c.p.pad_front;
    yy -= c.p.pad_top;
    xx -= c.p.pad_left;
    if (tt < 0 || tt >= c.t || yy < 0 || yy >= c.h || xx < 0 || xx >= c.w) return 0.0;
    return xv[static_cast<std::size_t>(((ch * c.t + tt) * c.h + yy) * c.w + xx)];
  };
  for (std::int64_t o = 0; o < c.co; ++o) {
    for (std::int64_t ot = 0; ot < to; ++ot) {
      for (std::int64_t oy = 0; oy < ho; ++oy) {
        for (std::int64_t ox = 0; ox < wo; ++ox) {
          double acc = bv[static_cast<std::size_t>(o)];
          for (std::int64_t i = 0; i < c.ci; ++i) {
            for (std::int64_t dt = 0; dt < c.kt; ++dt) {
              for (std::int64_t dy = 0; dy < c.kh; ++dy) {
                for (std::int64_t dx = 0; dx < c.kw; ++dx) {
                  acc += wv[static_cast<std::size_t>((((o * c.ci + i) * c.kt + dt) * c.kh + dy) * c.kw + dx)] *
                         at(i, ot * c.p.stride_t + dt, oy * c.p.stride_h + dy, ox * c.p.stride_w + dx);
                }
              }
            }
          }
          const float g = got[static_cast<std::size_t>(((o * to + ot) * ho + oy) * wo + ox)];
          ASSERT_NEAR(g, acc, 1e-5 * (1 + std::fabs(acc))) << c.name << " at " << o << "," << ot << "," << oy << "," << ox;
        }
      }
    }
  }
}

Conv3dParams causal3() {  // Wan's CausalConv3d(k=3, pad=1): 2 zero frames in front, 1 pixel around
  Conv3dParams p;
  p.pad_front = 2;
  p.pad_top = p.pad_bottom = p.pad_left = p.pad_right = 1;
  return p;
}
Conv3dParams down2d() {  // downsample2d: pad right and bottom by one, stride 2
  Conv3dParams p;
  p.stride_h = p.stride_w = 2;
  p.pad_bottom = p.pad_right = 1;
  return p;
}
Conv3dParams time_down() {  // downsample3d's temporal conv: (3,1,1), stride (2,1,1)
  Conv3dParams p;
  p.stride_t = 2;
  return p;
}

INSTANTIATE_TEST_SUITE_P(
    WanShapes, CpuConv3d,
    ::testing::Values(ConvCase{"causal_3x3x3", 3, 5, 7, 9, 4, 3, 3, 3, causal3()},
                      ConvCase{"pointwise", 5, 2, 3, 4, 6, 1, 1, 1, Conv3dParams{}},
                      ConvCase{"downsample2d", 4, 2, 9, 8, 4, 1, 3, 3, down2d()},
                      ConvCase{"time_downsample", 3, 5, 4, 4, 3, 3, 1, 1, time_down()},
                      ConvCase{"wide_block", 2, 1, 40, 120, 3, 1, 3, 3, causal3()},
                      // K = 64·27: the im2col matrix splits into two column blocks.
                      ConvCase{"two_column_blocks", 64, 1, 40, 70, 2, 3, 3, 3, causal3()}),
    [](const ::testing::TestParamInfo<ConvCase>& param_info) { return std::string(param_info.param.name); });

TEST(CpuConv3dShapes, a_wrong_output_shape_is_refused) {
  HostTensor x(DType::kF32, {2, 1, 4, 4});
  HostTensor w(DType::kF32, {3, 2, 1, 3, 3});
  HostTensor y(DType::kF32, {3, 1, 4, 4});  // no padding: should be 2x2
  EXPECT_THROW(backend().conv3d(x.t, w.t, nullptr, Conv3dParams{}, y.t), Error);
}

// ---- resampling ----

TEST(CpuResample, nearest_upsampling_repeats_each_pixel_two_by_two) {
  const auto xv = random_values(2 * 3 * 4 * 5, 4);
  HostTensor x(DType::kF32, {2, 3, 4, 5}, xv);
  HostTensor y(DType::kBF16, {2, 3, 8, 10});
  backend().upsample_nearest_2x(x.t, y.t);
  const auto got = y.values();
  for (std::int64_t ct = 0; ct < 6; ++ct) {
    for (std::int64_t yy = 0; yy < 8; ++yy) {
      for (std::int64_t xx = 0; xx < 10; ++xx) {
        ASSERT_EQ(got[(ct * 8 + yy) * 10 + xx], round_to(DType::kBF16, xv[(ct * 4 + yy / 2) * 5 + xx / 2]));
      }
    }
  }
}

TEST(CpuResample, avg_down_averages_channel_groups_in_c_ft_fsh_fsw_order) {
  // Wan 2.2 D1 shortcut shape: AvgDown3D(cin, 2·cin, ft 2, fs 2): groups of g = 4.
  const std::int64_t ci = 3, co = 6, t = 4, h = 6, w = 4, ft = 2, fs = 2;
  const auto xv = random_values(static_cast<std::size_t>(ci * t * h * w), 5);
  HostTensor x(DType::kF32, {ci, t, h, w}, xv);
  HostTensor y(DType::kF32, {co, t / ft, h / fs, w / fs});
  backend().avg_down_3d(x.t, ft, fs, y.t);
  const auto got = y.values();
  const std::int64_t g = ci * ft * fs * fs / co;
  for (std::int64_t o = 0; o < co; ++o) {
    for (std::int64_t ot = 0; ot < t / ft; ++ot) {
      for (std::int64_t yy = 0; yy < h / fs; ++yy) {
        for (std::int64_t xx = 0; xx < w / fs; ++xx) {
          double sum = 0;
          for (std::int64_t e = o * g; e < (o + 1) * g; ++e) {
            const std::int64_t c = e / (ft * fs * fs), i = (e / (fs * fs)) % ft, j = (e / fs) % fs, k = e % fs;
            sum += xv[static_cast<std::size_t>(((c * t + ot * ft + i) * h + yy * fs + j) * w + xx * fs + k)];
          }
          ASSERT_NEAR(got[((o * (t / ft) + ot) * (h / fs) + yy) * (w / fs) + xx], sum / g, 1e-6);
        }
      }
    }
  }
}

TEST(CpuResample, dup_up_inverts_avg_down_on_constant_groups) {
  // DupUp3D(cin, cout, ft, fs) then AvgDown3D back: each group averages copies of one value.
  const std::int64_t ci = 4, co = 2, t = 2, h = 3, w = 2, ft = 2, fs = 2;
  const auto xv = random_values(static_cast<std::size_t>(ci * t * h * w), 6);
  HostTensor x(DType::kF32, {ci, t, h, w}, xv);
  HostTensor up(DType::kF32, {co, t * ft, h * fs, w * fs});
  HostTensor back(DType::kF32, {ci, t, h, w});
  backend().dup_up_3d(x.t, static_cast<int>(ft), static_cast<int>(fs), up.t);
  backend().avg_down_3d(up.t, static_cast<int>(ft), static_cast<int>(fs), back.t);
  const auto got = back.values();
  for (std::size_t i = 0; i < xv.size(); ++i) ASSERT_NEAR(got[i], xv[i], 1e-6) << i;
  // And one element placed by hand: expanded channel e = ((o·ft + i)·fs + j)·fs + k reads x[e / r].
  const auto u = up.values();
  const std::int64_t r = co * ft * fs * fs / ci;  // 2
  const std::int64_t o = 1, tt = 1, i = 1, j = 0, k = 1, yy = 2, xx = 1;
  const std::int64_t c = (((o * ft + i) * fs + j) * fs + k) / r;
  EXPECT_EQ(u[((o * t * ft + tt * ft + i) * h * fs + yy * fs + j) * w * fs + xx * fs + k],
            xv[((c * t + tt) * h + yy) * w + xx]);
}

// ---- data movement ----

TEST(CpuLayout, permute_is_the_patchify_of_the_wan22_vae) {
  // [C, F, H, W] as [C, F, H/2, q, W/2, r] → (c r q) f h w.
  const std::int64_t c = 3, f = 2, h = 4, w = 6;
  std::vector<float> xv(static_cast<std::size_t>(c * f * h * w));
  for (std::size_t i = 0; i < xv.size(); ++i) xv[i] = static_cast<float>(i);
  HostTensor x(DType::kF32, {c, f, h / 2, 2, w / 2, 2}, xv);
  HostTensor y(DType::kF32, {c, 2, 2, f, h / 2, w / 2});
  backend().permute(x.t, {0, 5, 3, 1, 2, 4}, y.t);
  const auto got = y.values();
  for (std::int64_t cc = 0; cc < c; ++cc) {
    for (std::int64_t r = 0; r < 2; ++r) {
      for (std::int64_t q = 0; q < 2; ++q) {
        for (std::int64_t ff = 0; ff < f; ++ff) {
          for (std::int64_t yy = 0; yy < h / 2; ++yy) {
            for (std::int64_t xx = 0; xx < w / 2; ++xx) {
              const std::int64_t channel = cc * 4 + r * 2 + q;
              ASSERT_EQ(got[((channel * f + ff) * (h / 2) + yy) * (w / 2) + xx],
                        xv[((cc * f + ff) * h + 2 * yy + q) * w + 2 * xx + r]);
            }
          }
        }
      }
    }
  }
  HostTensor wrong(DType::kF32, {c, 2, 2, f, h / 2, w / 2});
  EXPECT_THROW(backend().permute(x.t, {0, 5, 3, 1, 2, 2}, wrong.t), Error);
}

TEST(CpuLayout, concat_and_slice_along_the_time_axis) {
  const auto av = random_values(2 * 1 * 3, 7);
  const auto bv = random_values(2 * 2 * 3, 8);
  HostTensor a(DType::kBF16, {2, 1, 3}, av);
  HostTensor b(DType::kBF16, {2, 2, 3}, bv);
  HostTensor y(DType::kBF16, {2, 3, 3});
  backend().concat(a.t, b.t, 1, y.t);
  const auto got = y.values();
  for (std::int64_t c = 0; c < 2; ++c) {
    EXPECT_EQ(got[c * 9 + 0], round_to(DType::kBF16, av[c * 3]));
    EXPECT_EQ(got[c * 9 + 3 + 2], round_to(DType::kBF16, bv[c * 6 + 2]));
    EXPECT_EQ(got[c * 9 + 6 + 1], round_to(DType::kBF16, bv[c * 6 + 3 + 1]));
  }
  HostTensor last(DType::kBF16, {2, 2, 3});
  backend().slice(y.t, 1, 1, last.t);
  EXPECT_EQ(last.values(), b.values());
  EXPECT_THROW(backend().slice(y.t, 1, 2, last.t), Error);
}

TEST(CpuLayout, embedding_gathers_rows_and_names_an_id_outside_the_table) {
  const auto table_v = random_values(5 * 4, 9);
  HostTensor table(DType::kBF16, {5, 4}, table_v);
  HostTensor ids(DType::kI64, {3});
  const std::int64_t id_values[] = {4, 0, 4};
  std::memcpy(ids.t.data, id_values, sizeof id_values);
  HostTensor y(DType::kF32, {3, 4});
  backend().embedding(table.t, ids.t, y.t);
  const auto got = y.values();
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(got[i], round_to(DType::kBF16, table_v[16 + i]));
    EXPECT_EQ(got[4 + i], round_to(DType::kBF16, table_v[i]));
  }
  const std::int64_t bad = 5;
  std::memcpy(ids.t.data, &bad, sizeof bad);
  try {
    backend().embedding(table.t, ids.t, y.t);
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kBadModelFile);
  }
}

}  // namespace
}  // namespace ferry::cpu
