#!/usr/bin/env bash
# The GPU check, in one call on the device machine (one NVIDIA GPU, no network): builds for
# sm_90, runs the CUDA tests and the GPU benchmarks, and leaves their output under $OUT (or
# build/gpu-out). Keep it under 8 minutes.
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
ctest --test-dir "$build" -L cuda --output-on-failure --timeout 300 2>&1 | tee "$out/cuda-tests.txt" ||
  status=1

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
