#!/usr/bin/env bash
# The GPU check, in one call on the device machine (one NVIDIA GPU, no network): builds for
# sm_90, runs the CUDA tests, the backend parity suite (printing its summary) and the GPU
# benchmarks, and leaves their output under $OUT (or build/gpu-out). Keep it under 8 minutes.
set -uo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$root"
out="${OUT:-$root/build/gpu-out}"
mkdir -p "$out"
build="$root/build/gpu-sm90"
export PATH="/usr/local/cuda/bin:$PATH"
start=$SECONDS

{
  echo "== machine"
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader || true
  nvcc --version | tail -n 2 || true
  for tool in cmake ninja g++; do command -v "$tool" >/dev/null || echo "missing: $tool"; done
} 2>&1 | tee "$out/machine.txt"

generator=()
command -v ninja >/dev/null && generator=(-G Ninja)
cmake -S . -B "$build" "${generator[@]}" -DCMAKE_BUILD_TYPE=Release -DFERRY_CUDA=ON \
  -DCMAKE_CUDA_ARCHITECTURES=90 -DFERRY_WERROR=ON 2>&1 | tail -n 3 | tee "$out/configure.txt"
cmake --build "$build" --parallel "$(nproc)" 2>&1 | tail -n 20 | tee "$out/build.txt"

status=0
# The whole script must end within 8 minutes (480 s): every stage gets at most what is left of a
# 470 s budget, and is skipped (and reported) when under 20 s remain.
budget() {
  local left=$((470 - (SECONDS - start)))
  ((left > $1)) && left=$1
  echo "$left"
}
run_stage() {  # run_stage NAME MAX_SECONDS COMMAND...
  local name=$1 max=$2
  shift 2
  local t
  t=$(budget "$max")
  if ((t < 20)); then
    echo "$name: skipped, the 8-minute budget is spent" | tee -a "$out/summary.txt"
    return 0
  fi
  timeout "$t" "$@"
}

# The CUDA tests except the backend parity suite, which runs once below, in one process, so that
# its summary (one line per comparison: error against threshold) comes out whole.
run_stage cuda-tests 240 ctest --test-dir "$build" -L cuda -E '^BackendParity\.' --output-on-failure --timeout 120 2>&1 |
  tee "$out/cuda-tests.txt" || status=1

# Backend parity: every op of the CUDA backend against the CPU backend (tests/backend/).
parity="$build/tests/cuda/ferry_cuda_tests"
if [[ -x "$parity" ]]; then
  run_stage parity 240 "$parity" --gtest_filter='BackendParity.*' > "$out/parity-full.txt" 2>&1
  parity_status=$?
  grep -E '^\[ *(FAILED|SKIPPED|PASSED) *\]|Failure|error' "$out/parity-full.txt" | head -n 60
  sed -n '/^== backend parity summary/,$p' "$out/parity-full.txt" | tee "$out/parity-summary.txt"
  echo "backend parity: exit $parity_status" | tee -a "$out/parity-summary.txt"
  [[ $parity_status -eq 0 ]] || status=1
else
  echo "backend parity test was not built" | tee "$out/parity-summary.txt"
  status=1
fi

# The model tests on the CUDA backend (tests/models/ built with FERRY_MODEL_TESTS_ON_CUDA): their
# measured errors against the reference, the same bounds as on the CPU.
models="$build/tests/cuda/ferry_cuda_model_tests"
if [[ -x "$models" ]]; then
  run_stage model-tests 120 "$models" > "$out/model-tests-full.txt" 2>&1 || status=1
  grep -E '^\[ *(FAILED|SKIPPED|PASSED) *\]|Failure|measured' "$out/model-tests-full.txt" |
    tee "$out/model-tests.txt" | head -n 80
else
  echo "model tests were not built" | tee "$out/model-tests.txt"
  status=1
fi

# gpu_ops: CudaBackend::linear (bf16, fp8 weights) against a plain cuBLASLt call, and attention
# at L = 8k, 27k, 75k against the best bf16 GEMM rate (bench/gpu_ops.cpp; about a minute, a
# 75k attention projected over 60 s is skipped). A missing binary is reported, not fatal.
gpu_ops="$build/bench/gpu_ops"
if [[ -x "$gpu_ops" ]]; then
  run_stage gpu_ops 180 "$gpu_ops" 2>&1 | tee "$out/bench-gpu_ops.txt" || status=1
else
  echo "benchmark gpu_ops was not built" | tee "$out/bench-gpu_ops.txt"
fi

# The weight store and the streamer on this machine's disk (CPU side; their tables are the
# same as on the CPU machines, with a faster disk). A missing one is reported, not fatal.
for bench in stream_read overlap; do
  if [[ -x "$build/bench/$bench" ]]; then
    args=()
    [[ $bench == stream_read ]] && args=(--size-gib 4 --passes 1)
    (cd "$build" && run_stage "$bench" 120 "./bench/$bench" "${args[@]}") 2>&1 |
      tee "$out/bench-$bench.txt" || status=1
  else
    echo "benchmark $bench was not built" | tee "$out/bench-$bench.txt"
  fi
done

echo "gpu check: exit $status, $((SECONDS - start)) s" | tee "$out/summary.txt"
exit "$status"
