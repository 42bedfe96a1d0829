// The backend the model tests (tests/models/*) run on. ferry_tests builds them for the CPU
// backend; tests/cuda builds the same files again, with FERRY_MODEL_TESTS_ON_CUDA, into
// ferry_cuda_model_tests, where they run on the CUDA backend and skip when there is no GPU. A model
// test derives its fixture from ModelTest and takes the backend from model_backend().
#pragma once

#include <gtest/gtest.h>

#include <string>

#include "core/backend/backend.h"
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
