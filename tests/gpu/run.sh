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
# The CUDA tests except the backend parity suite, which runs once below, in one process, so that
# its summary (one line per comparison: error against threshold) comes out whole.
ctest --test-dir "$build" -L cuda -E '^BackendParity\.' --output-on-failure --timeout 300 2>&1 |
  tee "$out/cuda-tests.txt" || status=1

# Backend parity: every op of the CUDA backend against the CPU backend (tests/backend/).
parity="$build/tests/cuda/ferry_cuda_tests"
if [[ -x "$parity" ]]; then
  timeout 300 "$parity" --gtest_filter='BackendParity.*' > "$out/parity-full.txt" 2>&1
  parity_status=$?
  grep -E '^\[ *(FAILED|SKIPPED|PASSED) *\]|Failure|error' "$out/parity-full.txt" | head -n 60
  sed -n '/^== backend parity summary/,$p' "$out/parity-full.txt" | tee "$out/parity-summary.txt"
  echo "backend parity: exit $parity_status" | tee -a "$out/parity-summary.txt"
  [[ $parity_status -eq 0 ]] || status=1
else
  echo "backend parity test was not built" | tee "$out/parity-summary.txt"
  status=1
fi

# GPU benchmarks: each prints its own table; a missing one is reported, not fatal.
for bench in "$build/bench/stream_read"; do
  name="$(basename "$bench")"
  if [[ -x "$bench" ]]; then
    (cd "$build" && timeout 240 "$bench" --size-gib 8 --passes 2) 2>&1 | tee "$out/bench-$name.txt" ||
      status=1
  else
    echo "benchmark $name was not built" | tee "$out/bench-$name.txt"
  fi
done

echo "gpu check: exit $status, $((SECONDS - start)) s" | tee "$out/summary.txt"
exit "$status"
