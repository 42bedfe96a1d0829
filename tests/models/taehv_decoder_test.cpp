// The TAEHV preview decoder (core/models/taehv) against the published taehv.py: tiny random
// decoders of both Wan latent spaces (tests/data/taehv, made by
// tools/reference/make_taehv_reference.py) decode a 3-frame latent as the reference's f32 CPU
// run does, with the published options and with the cheap preview's; the streaming decode gives
// the whole-video decode's frames; the arena estimates are what runs take; files that are not a
// TAEHV decoder Ferry can run are refused with the error that says why. On the CPU backend in
// ferry_tests, on the CUDA backend in ferry_cuda_model_tests (tests/gpu/run.sh).
#include "core/models/taehv/taehv_decoder.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "core/io/safetensors_writer.h"
#include "core/io/tensor_set.h"
#include "core/memory/arena.h"
#include "core/models/taehv/taehv_draft.h"
#include "core/offload/preset.h"
#include "core/tensor/convert.h"
#include "tests/models/model_test_backend.h"
#include "tests/test_support.h"

namespace ferry::models::taehv {
namespace {

// |Ferry − reference| ≤ kFloors · floor, where floor is the largest |f32 − f64| of the same
// reference decode (the fixture's floor_* tensors: 1.4e-6 / 1.3e-6 for the full decoders, 8e-7 /
// 6.6e-7 for the preview ones, outputs O(1)). Ferry's f32 decode is another f32 evaluation of the
// same sums in another order, so it lies within about one floor of the f64 value too, and within
// two of the reference. Measured on the CPU (OpenBLAS, x86-64; the test prints it): at most 1.34
// floors on the committed fixtures, 1.37 on --seed 5's. 4 floors leaves room for the own-GEMM
// (mingw) lane and the CUDA backend (also f32 end to end, another summation order) while a wrong
// weight, tap or frame is O(0.1) (the concat halves swapped: 0.4 to 1.2).
constexpr double kFloors = 4.0;

struct Kind {
  const char* name;  // file prefix in tests/data/taehv
  int latent_channels;
  int patch;
};
constexpr Kind kTaew21{"taew2_1", 16, 1};
constexpr Kind kTaew22{"taew2_2", 48, 2};

// The fixtures' folder: tests/data/taehv, or FERRY_TAEHV_FIXTURES when set (fixtures made with
// other seeds by make_taehv_reference.py --seed --out, to check the bounds beyond these weights).
std::filesystem::path fixture(const std::string& file) {
  if (const char* other = std::getenv("FERRY_TAEHV_FIXTURES"); other != nullptr && *other != '\0')
    return std::filesystem::path(other) / file;
  return test::data_path("taehv/" + file);
}

struct HostArray {
  Shape shape;
  std::vector<float> values;
};

HostArray read_tensor(const io::TensorSet& set, const std::string& name) {
  const io::TensorSet::Entry& entry = set.at(name);
  const io::TensorInfo& info = *entry.tensor;
  std::vector<std::byte> raw(static_cast<std::size_t>(info.bytes));
  entry.file->map(info).copy_to(0, raw);
  HostArray out;
  out.values.resize(static_cast<std::size_t>(info.element_count()));
  convert_to_f32(info.dtype, raw.data(), out.values.data(), out.values.size());
  if (info.shape.size() == 4) {
    out.shape =
        Shape{static_cast<std::int64_t>(info.shape[0]), static_cast<std::int64_t>(info.shape[1]),
              static_cast<std::int64_t>(info.shape[2]), static_cast<std::int64_t>(info.shape[3])};
  } else {
    out.shape = Shape{static_cast<std::int64_t>(out.values.size())};
  }
  return out;
}

// The published decoder's options, the cheap preview's (time upscaling off, the last upsample
// off), and either without the final clamp.
TaehvOptions full_options(bool clamp) {
  TaehvOptions o;
  o.clamp = clamp;
  return o;
}
TaehvOptions preview_options() {
  TaehvOptions o;
  o.time_upscale = {false, false, false};
  o.space_upscale = {true, true, false};
  o.clamp = false;
  return o;
}

class TaehvFixture {
 public:
  TaehvFixture(const Kind& kind, const TaehvOptions& options)
      : backend_(test::model_backend()),
        set_(io::TensorSet::open(fixture(std::string(kind.name) + "_tiny.safetensors"))),
        reference_(io::TensorSet::open(fixture(std::string(kind.name) + "_reference.safetensors"))),
        weights_(TaehvWeights::load(backend_, set_)),
        decoder_(backend_, weights_, options) {}

  Backend& backend() { return backend_; }
  const TaehvWeights& weights() const { return weights_; }
  const TaehvDecoder& decoder() const { return decoder_; }
  HostArray reference(const std::string& name) const { return read_tensor(reference_, name); }

  memory::Arena arena(std::size_t bytes) {
    arena_memory_ = backend_.allocate(bytes);
    return memory::Arena(arena_memory_->data(), bytes, backend_.device());
  }
  Tensor upload(const HostArray& a) {
    owned_.push_back(backend_.allocate(a.values.size() * sizeof(float)));
    const Tensor t{owned_.back()->data(), DType::kF32, a.shape, backend_.device()};
    backend_.upload(t, a.values.data());
    return t;
  }
  Tensor allocate(const Shape& shape) {
    owned_.push_back(backend_.allocate(static_cast<std::size_t>(shape.numel()) * sizeof(float)));
    return Tensor{owned_.back()->data(), DType::kF32, shape, backend_.device()};
  }
  std::vector<float> download(const Tensor& t) {
    std::vector<float> out(static_cast<std::size_t>(t.numel()));
    backend_.download(t, out.data());
    return out;
  }

  // The whole-video decode of the fixture's latent, in an arena of exactly its estimate.
  std::vector<float> decode_whole(Shape* shape = nullptr) {
    const HostArray latent = reference("latent");
    const TaehvOutput o = decoder_.output(latent.shape[1], latent.shape[2], latent.shape[3]);
    const Tensor pixels = allocate(Shape{3, o.frames, o.height, o.width});
    memory::Arena a = arena(TaehvDecoder::decode_arena_bytes(
        weights_, decoder_.options(), latent.shape[1], latent.shape[2], latent.shape[3]));
    decoder_.decode(upload(latent), a, pixels);
    if (shape != nullptr) *shape = pixels.shape;
    return download(pixels);
  }

  // The streamed decode of the same latent, frame by frame, in [3, F, H, W] order.
  std::vector<float> decode_streamed() {
    const HostArray latent = reference("latent");
    const std::int64_t t = latent.shape[1], h = latent.shape[2], w = latent.shape[3];
    const TaehvOutput o = decoder_.output(t, h, w);
    memory::Arena a = arena(TaehvStream::arena_bytes(weights_, decoder_.options(), h, w));
    TaehvStream stream(decoder_, h, w, a);
    const std::size_t plane = static_cast<std::size_t>(o.height * o.width);
    std::vector<float> out(3 * static_cast<std::size_t>(o.frames) * plane, -1.0f);
    std::int64_t next = 0;
    const std::size_t frame_size = static_cast<std::size_t>(h * w * latent.shape[0]);
    for (std::int64_t f = 0; f < t; ++f) {
      // Frame f of the latent, [z, 1, h, w].
      HostArray one{Shape{latent.shape[0], 1, h, w}, std::vector<float>(frame_size)};
      for (std::int64_t c = 0; c < latent.shape[0]; ++c) {
        std::copy_n(latent.values.begin() + static_cast<std::ptrdiff_t>((c * t + f) * h * w), h * w,
                    one.values.begin() + static_cast<std::ptrdiff_t>(c * h * w));
      }
      stream.push(upload(one), [&](std::int64_t frame, const Tensor& pixels) {
        EXPECT_EQ(frame, next++);
        const std::vector<float> got = download(pixels);
        for (std::size_t c = 0; c < 3; ++c) {
          std::copy_n(
              got.begin() + static_cast<std::ptrdiff_t>(c * plane), plane,
              out.begin() + static_cast<std::ptrdiff_t>((c * static_cast<std::size_t>(o.frames) +
                                                         static_cast<std::size_t>(frame)) *
                                                        plane));
        }
      });
    }
    EXPECT_EQ(next, o.frames);
    return out;
  }

 private:
  Backend& backend_;
  io::TensorSet set_;
  io::TensorSet reference_;
  TaehvWeights weights_;
  TaehvDecoder decoder_;
  std::unique_ptr<DeviceBuffer> arena_memory_;
  std::vector<std::unique_ptr<DeviceBuffer>> owned_;
};

class TaehvDecoderTest : public test::ModelTest {};

void expect_parity(const Kind& kind, const TaehvOptions& options, const std::string& reference,
                   const std::string& floor_name) {
  TaehvFixture f(kind, options);
  EXPECT_EQ(f.weights().config().latent_channels, kind.latent_channels);
  EXPECT_EQ(f.weights().config().patch, kind.patch);
  Shape shape;
  const std::vector<float> got = f.decode_whole(&shape);
  const HostArray want = f.reference(reference);
  ASSERT_EQ(shape, want.shape) << kind.name << " " << reference;
  const double floor = f.reference(floor_name).values[0];
  const test::Difference d = test::difference(got, want.values);
  std::printf("%s %s: max |Ferry - reference| %.3g = %.2f floors (f32 floor %.3g), rms %.3g\n",
              kind.name, reference.c_str(), d.max, d.max / floor, floor, d.rms);
  EXPECT_LE(d.max, kFloors * floor) << kind.name << " " << reference;
}

TEST_F(TaehvDecoderTest, taew2_1_decodes_like_the_published_code) {
  expect_parity(kTaew21, full_options(false), "raw", "floor_raw");
  expect_parity(kTaew21, full_options(true), "pixels", "floor_raw");
}

TEST_F(TaehvDecoderTest, taew2_2_decodes_like_the_published_code) {
  expect_parity(kTaew22, full_options(false), "raw", "floor_raw");
  expect_parity(kTaew22, full_options(true), "pixels", "floor_raw");
}

TEST_F(TaehvDecoderTest, the_cheap_preview_options_decode_like_the_published_code) {
  expect_parity(kTaew21, preview_options(), "preview_raw", "floor_preview_raw");
  expect_parity(kTaew22, preview_options(), "preview_raw", "floor_preview_raw");
}

// Every op computes a frame from that frame's data alone in the same order in both evaluations:
// on the CPU backend the stream gives the whole video's bits. CUDA's GEMMs may pick another
// algorithm for another column count, so there the bound is the parity one.
TEST_F(TaehvDecoderTest, streaming_gives_the_whole_video_decode) {
  for (const Kind* kind : {&kTaew21, &kTaew22}) {
    for (const TaehvOptions& options : {full_options(false), preview_options()}) {
      TaehvFixture f(*kind, options);
      const std::vector<float> whole = f.decode_whole();
      const std::vector<float> streamed = f.decode_streamed();
      ASSERT_EQ(whole.size(), streamed.size());
#if defined(FERRY_MODEL_TESTS_ON_CUDA)
      const double floor = f.reference("floor_raw").values[0];
      EXPECT_LE(test::difference(streamed, whole).max, kFloors * floor) << kind->name;
#else
      EXPECT_EQ(test::difference(streamed, whole).max, 0.0) << kind->name;
      EXPECT_TRUE(std::equal(whole.begin(), whole.end(), streamed.begin())) << kind->name;
#endif
    }
  }
}

// The live preview's stream without memory: each pushed frame decodes as a one-frame video.
TEST_F(TaehvDecoderTest, a_stream_without_memory_decodes_each_frame_alone) {
  TaehvFixture f(kTaew22, preview_options());
  const HostArray latent = f.reference("latent");
  const std::int64_t z = latent.shape[0], t = latent.shape[1], h = latent.shape[2],
                     w = latent.shape[3];
  const TaehvOutput o = f.decoder().output(1, h, w);
  memory::Arena arena =
      f.arena(TaehvStream::arena_bytes(f.weights(), f.decoder().options(), h, w,
                                       TaehvStream::Memory::kNone) +
              TaehvDecoder::decode_arena_bytes(f.weights(), f.decoder().options(), 1, h, w));
  TaehvStream stream(f.decoder(), h, w, arena, TaehvStream::Memory::kNone);
  for (std::int64_t frame = 0; frame < t; ++frame) {
    HostArray one{Shape{z, 1, h, w}, std::vector<float>(static_cast<std::size_t>(z * h * w))};
    for (std::int64_t c = 0; c < z; ++c) {
      std::copy_n(latent.values.begin() + static_cast<std::ptrdiff_t>((c * t + frame) * h * w),
                  h * w, one.values.begin() + static_cast<std::ptrdiff_t>(c * h * w));
    }
    const Tensor input = f.upload(one);
    std::vector<float> streamed;
    stream.push(input, [&](std::int64_t, const Tensor& pixels) { streamed = f.download(pixels); });
    const Tensor alone = f.allocate(Shape{3, 1, o.height, o.width});
    f.decoder().decode(input, arena, alone);
    EXPECT_EQ(test::difference(streamed, f.download(alone)).max, 0.0) << "frame " << frame;
  }
}

TEST_F(TaehvDecoderTest, a_reset_stream_starts_a_new_video) {
  TaehvFixture f(kTaew21, full_options(false));
  const std::vector<float> first = f.decode_streamed();
  const std::vector<float> again = f.decode_streamed();
  EXPECT_EQ(test::difference(first, again).max, 0.0);
}

TEST_F(TaehvDecoderTest, output_geometry_follows_the_options) {
  TaehvFixture full(kTaew22, full_options(true));
  const TaehvOutput a = full.decoder().output(31, 44, 80);
  EXPECT_EQ(a.frames, 121);
  EXPECT_EQ(a.height, 704);
  EXPECT_EQ(a.width, 1280);
  TaehvFixture preview(kTaew22, preview_options());
  const TaehvOutput b = preview.decoder().output(1, 44, 80);
  EXPECT_EQ(b.frames, 1);
  EXPECT_EQ(b.height, 352);
  EXPECT_EQ(b.width, 640);
}

// ---- files Ferry refuses ----

// The tiny taew2_1 file rewritten with `edit` applied to its tensor list (names, shapes, bytes).
struct FileTensor {
  io::TensorSpec spec;
  std::vector<std::byte> bytes;
};
std::filesystem::path rewritten(const test::ScratchDir& dir, const std::string& name,
                                const std::function<void(std::vector<FileTensor>&)>& edit) {
  const io::TensorSet set = io::TensorSet::open(fixture("taew2_1_tiny.safetensors"));
  std::vector<FileTensor> tensors;
  for (const auto& e : set.entries()) {
    FileTensor t{{e.tensor->name, e.tensor->dtype, e.tensor->shape},
                 std::vector<std::byte>(static_cast<std::size_t>(e.tensor->bytes))};
    e.file->map(*e.tensor).copy_to(0, t.bytes);
    tensors.push_back(std::move(t));
  }
  edit(tensors);
  std::vector<io::TensorSpec> specs;
  for (const FileTensor& t : tensors) specs.push_back(t.spec);
  const std::filesystem::path path = dir / name;
  io::write_safetensors(
      path, specs, {}, [&](std::size_t i, std::uint64_t offset, std::span<std::byte> out) {
        std::copy_n(tensors[i].bytes.begin() + static_cast<std::ptrdiff_t>(offset), out.size(),
                    out.begin());
      });
  return path;
}

ErrorCode load_error(const std::filesystem::path& path) {
  return test::error_code_of([&] {
    const io::TensorSet set = io::TensorSet::open(path);
    TaehvWeights::load(test::model_backend(), set);
  });
}

FileTensor* find(std::vector<FileTensor>& tensors, const std::string& name) {
  for (FileTensor& t : tensors)
    if (t.spec.name == name) return &t;
  ADD_FAILURE() << name << " not in the fixture";
  return nullptr;
}

TEST_F(TaehvDecoderTest, a_missing_decoder_tensor_is_named) {
  test::ScratchDir dir;
  const auto path = rewritten(dir, "taew2_1.safetensors", [](std::vector<FileTensor>& t) {
    std::erase_if(t, [](const FileTensor& x) { return x.spec.name == "decoder.10.conv.2.bias"; });
  });
  EXPECT_EQ(load_error(path), ErrorCode::kMissingTensor);
  try {
    const io::TensorSet set = io::TensorSet::open(path);
    TaehvWeights::load(test::model_backend(), set);
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("decoder.10.conv.2.bias"), std::string::npos) << e.what();
  }
}

TEST_F(TaehvDecoderTest, a_shape_that_disagrees_is_a_bad_model_file) {
  test::ScratchDir dir;
  // A MemBlock whose first convolution reads as many channels as it writes (no memory half).
  const auto path = rewritten(dir, "taew2_1.safetensors", [](std::vector<FileTensor>& t) {
    FileTensor* x = find(t, "decoder.9.conv.0.weight");
    x->spec.shape[1] /= 2;
    x->bytes.resize(static_cast<std::size_t>(x->spec.bytes()));
  });
  EXPECT_EQ(load_error(path), ErrorCode::kBadModelFile);
}

TEST_F(TaehvDecoderTest, an_integer_tensor_is_a_bad_model_file) {
  test::ScratchDir dir;
  const auto path = rewritten(dir, "taew2_1.safetensors", [](std::vector<FileTensor>& t) {
    FileTensor* x = find(t, "decoder.22.bias");
    x->spec.dtype = DType::kI32;
    x->bytes.resize(static_cast<std::size_t>(x->spec.bytes()));
  });
  EXPECT_EQ(load_error(path), ErrorCode::kBadModelFile);
}

TEST_F(TaehvDecoderTest, the_super_decoder_is_refused_by_name) {
  test::ScratchDir dir;
  const auto path = rewritten(dir, "taew2_2_super.safetensors", [](std::vector<FileTensor>& t) {
    FileTensor w{{"decoder.0.weight", DType::kF16, {16, 16, 1, 1}}, std::vector<std::byte>(512)};
    t.push_back(std::move(w));
  });
  EXPECT_EQ(load_error(path), ErrorCode::kBadModelFile);
}

TEST_F(TaehvDecoderTest, a_tgrow_too_short_for_its_stride_is_a_bad_model_file) {
  test::ScratchDir dir;
  // decoder.13 with only the rows of a stride-1 TGrow: loads, but cannot grow time.
  const auto path = rewritten(dir, "taew2_1.safetensors", [](std::vector<FileTensor>& t) {
    FileTensor* x = find(t, "decoder.13.conv.weight");
    x->spec.shape[0] /= 2;
    x->bytes.resize(static_cast<std::size_t>(x->spec.bytes()));
  });
  const io::TensorSet set = io::TensorSet::open(path);
  const TaehvWeights weights = TaehvWeights::load(test::model_backend(), set);
  EXPECT_EQ(test::error_code_of(
                [&] { TaehvDecoder(test::model_backend(), weights, full_options(true)); }),
            ErrorCode::kBadModelFile);
  EXPECT_NO_THROW(TaehvDecoder(test::model_backend(), weights, preview_options()));
}

// The draft decode's plan (taehv_draft.h): the published decoder's geometry, its weights and
// one latent frame's working memory against the budget; refused before any work for a decoder of
// another latent space, a video of another size, a TGrow that cannot grow time, or a budget
// that cannot hold it.
TEST_F(TaehvDecoderTest, a_draft_plan_checks_the_decoder_the_video_and_the_budget) {
  const offload::MachineInfo machine{false, 0, 0, 16ull << 30, 12ull << 30};
  const offload::Preset cpu = offload::find_preset(offload::builtin_presets(), "cpu", machine);
  const io::TensorSet set = io::TensorSet::open(fixture("taew2_1_tiny.safetensors"));
  // taew2_1: z 16, 8 px per position, time × 4 less 3: a latent [16, 3, 4, 6] is 9 frames of
  // 48 × 32.
  const TaehvDraftPlan plan = make_taehv_draft_plan(set, cpu, machine, 16, 3, 4, 6, 9, 48, 32);
  const TaehvWeights weights = TaehvWeights::shapes_only(set);
  EXPECT_EQ(plan.weight_bytes, weights.bytes());
  EXPECT_EQ(plan.arena_bytes, memory::Arena::footprint(16 * 4 * 6 * sizeof(float)) +
                                  TaehvStream::arena_bytes(weights, TaehvOptions{}, 4, 6));
  EXPECT_EQ(plan.predicted_vram_peak, 0u);  // the CPU's memory is the host's
  const auto error = [&](const offload::Preset& preset, std::int64_t channels, int frames,
                         const io::TensorSet& s) {
    return test::error_code_of(
        [&] { make_taehv_draft_plan(s, preset, machine, channels, 3, 4, 6, frames, 48, 32); });
  };
  EXPECT_EQ(error(cpu, 48, 9, set), ErrorCode::kBadModelFile);  // TI2V's latents
  EXPECT_EQ(error(cpu, 16, 8, set), ErrorCode::kBadModelFile);  // not 4T - 3 frames
  offload::Preset small = cpu;
  small.ram_budget_bytes = 64ull << 20;
  EXPECT_EQ(error(small, 16, 9, set), ErrorCode::kDoesNotFit);
  test::ScratchDir dir;
  const auto path = rewritten(dir, "taew2_1.safetensors", [](std::vector<FileTensor>& t) {
    FileTensor* x = find(t, "decoder.13.conv.weight");
    x->spec.shape[0] /= 2;
    x->bytes.resize(static_cast<std::size_t>(x->spec.bytes()));
  });
  EXPECT_EQ(error(cpu, 16, 9, io::TensorSet::open(path)), ErrorCode::kBadModelFile);
}

TEST_F(TaehvDecoderTest, a_truncated_file_is_a_bad_model_file) {
  test::ScratchDir dir;
  const auto path = dir / "taew2_1.safetensors";
  std::vector<std::byte> bytes = test::read_file(fixture("taew2_1_tiny.safetensors"));
  bytes.resize(bytes.size() - 1000);
  test::write_file(path, bytes);
  EXPECT_EQ(load_error(path), ErrorCode::kBadModelFile);
}

TEST_F(TaehvDecoderTest, a_wan_vae_is_not_a_taehv_decoder) {
  const auto path = test::data_path("wan/vae/wan21_tiny.safetensors");
  EXPECT_EQ(load_error(path), ErrorCode::kMissingTensor);
}

}  // namespace
}  // namespace ferry::models::taehv
