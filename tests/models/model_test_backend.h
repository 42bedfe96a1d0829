// The backend the model tests (tests/models/*) run on. ferry_tests builds them for the CPU
// backend; tests/cuda builds the same files again, with FERRY_MODEL_TESTS_ON_CUDA, into
// ferry_cuda_model_tests, where they run on the CUDA backend and skip when there is no GPU. A model
// test derives its fixture from ModelTest and takes the backend from model_backend(); arena_peak
// measures what a run takes from its activation arena.
#pragma once

#include <gtest/gtest.h>

#include <cstddef>
#include <functional>
#include <memory>
#include <string>

#include "core/backend/backend.h"
#include "core/memory/arena.h"
#if defined(FERRY_MODEL_TESTS_ON_CUDA)
#include "cuda/cuda_backend.h"
#include "cuda/device_info.h"
#else
#include "core/backend/cpu/cpu_backend.h"
#endif

namespace ferry::test {

// One backend for the whole test program (a CUDA context is costly to create).
inline Backend& model_backend() {
#if defined(FERRY_MODEL_TESTS_ON_CUDA)
  static cuda::CudaBackend backend;
#else
  static cpu::CpuBackend backend;
#endif
  return backend;
}

// The peak that `run` takes from an arena of `bytes` of `backend`'s memory: what a model's arena
// estimate is checked against. The arena and its memory are gone on return.
inline std::size_t arena_peak(Backend& backend, std::size_t bytes,
                              const std::function<void(memory::Arena&)>& run) {
  const std::unique_ptr<DeviceBuffer> block = backend.allocate(bytes);
  memory::Arena arena(block->data(), bytes, backend.device());
  run(arena);
  return arena.peak();
}

class ModelTest : public ::testing::Test {
 protected:
  void SetUp() override {
#if defined(FERRY_MODEL_TESTS_ON_CUDA)
    std::string why;
    if (!cuda::query_device(&why)) GTEST_SKIP() << "no CUDA device: " << why;
#endif
  }
};

}  // namespace ferry::test
