// The TAEHV base decoder (formats_lora_moe.md §7.3; madebyollin/taehv `taehv.py`) on the Backend
// ops, in Ferry's [C, T, H, W] layout: a normalised latent video [z, T, h, w] → RGB frames
// [3, F, H, W]. Two evaluations of the same modules (§7.4):
// - TaehvDecoder::decode, the whole video at once (taehv.py's parallel path): each MemBlock reads
//   its input shifted by one frame. Memory O(T).
// - TaehvStream, a latent frame at a time (the sequential path, StreamingTAEHV): each MemBlock
//   keeps the last input frame it saw, a TGrow's frames are carried down the rest of the decoder
//   one after the other. Memory O(1) in T: what previews and draft decodes use.
// Every op computes a frame from that frame's data alone, in the same order in both, so the two
// give the same bits (on the CPU backend; tests/models/taehv_decoder_test.cpp).
//
// Memory: every activation comes from the caller's Arena; the *_arena_bytes functions say how
// much (measured by running the same allocation code on an arena with no memory behind it).
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "core/backend/backend.h"
#include "core/memory/arena.h"
#include "core/models/taehv/taehv_weights.h"

namespace ferry::models::taehv {

// taehv.py's constructor arguments that change the decoder: which TGrows grow time (off: stride
// 1, the last rows of the weight) and which Upsamples double the size. The defaults are the
// published decoder's (4(T−1)+1 frames at 8·patch pixels per latent position); the cheap preview
// of the README turns time upscaling off (one frame per latent frame) and may drop upsamples.
struct TaehvOptions {
  std::array<bool, 3> time_upscale = {false, true, true};
  std::array<bool, 3> space_upscale = {true, true, true};
  // Clamp the pixels to [0, 1] as decode_video does (off: the raw values, for tests).
  bool clamp = true;
};

// Output geometry for a latent of T frames, h × w positions.
struct TaehvOutput {
  std::int64_t frames = 0;  // T · t_upscale − (t_upscale − 1)
  std::int64_t height = 0;
  std::int64_t width = 0;
};

class TaehvDecoder {
 public:
  // Keeps references: both must outlive the decoder. Error(kBadModelFile) when a TGrow's weight
  // has fewer rows than the options' stride needs.
  TaehvDecoder(Backend& backend, const TaehvWeights& weights, const TaehvOptions& options = {});

  const TaehvWeights& weights() const { return weights_; }
  const TaehvOptions& options() const { return options_; }
  Backend& backend() const { return backend_; }
  TaehvOutput output(std::int64_t latent_frames, std::int64_t h, std::int64_t w) const;
  // Frames each latent frame becomes (2^(TGrows that grow)); the first t_upscale − 1 decoded
  // frames are dropped (Wan's 4(T−1)+1 frame count).
  int t_upscale() const;

  // latent [z, T, h, w] F32 on the backend → pixels [3, F, H, W] F32 (output()).
  void decode(const Tensor& latent, memory::Arena& arena, const Tensor& pixels) const;
  static std::size_t decode_arena_bytes(const TaehvWeights& weights, const TaehvOptions& options,
                                        std::int64_t latent_frames, std::int64_t h, std::int64_t w);

 private:
  friend class TaehvStream;
  struct Run;
  Backend& backend_;
  const TaehvWeights& weights_;
  TaehvOptions options_;
};

// A streaming decode of h × w latent positions in progress.
class TaehvStream {
 public:
  // Called once per output frame, in order, with its index and pixels [3, 1, H, W] (F32 on the
  // backend), valid during the call.
  using FrameSink = std::function<void(std::int64_t frame, const Tensor& pixels)>;

  // kKept: a video, each MemBlock remembering its last input frame. kNone: independent frames,
  // each decoded as a video's first frame is (the live preview: one frame, no memory buffers).
  enum class Memory { kKept, kNone };

  // Takes its buffers (the MemBlocks' memory, each stage's working frames) from `arena`; they
  // stay valid until the arena is released below them. `decoder` must outlive the stream.
  TaehvStream(const TaehvDecoder& decoder, std::int64_t h, std::int64_t w, memory::Arena& arena,
              Memory memory = Memory::kKept);
  ~TaehvStream();
  TaehvStream(TaehvStream&&) noexcept;
  TaehvStream& operator=(TaehvStream&&) noexcept;

  // Decodes the next latent frame [z, 1, h, w] (F32 on the backend): t_upscale() frames to
  // `sink`, minus those the start drops. Allocates nothing.
  void push(const Tensor& latent_frame, const FrameSink& sink);
  // Forgets every frame seen: the next push starts a new video (memory zero).
  void reset();

  static std::size_t arena_bytes(const TaehvWeights& weights, const TaehvOptions& options,
                                 std::int64_t h, std::int64_t w, Memory memory = Memory::kKept);

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace ferry::models::taehv
