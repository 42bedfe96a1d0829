#!/usr/bin/env bash
# The GPU check, in one call on the device machine (one NVIDIA GPU, no network, no package
# registry): a pre-flight of the machine, a build for sm_90 of only what the stages run, then the
# stages, most informative first, each under its own time cap inside one budget. It ends with a
# table (each stage ok / FAILED / timed out / not run, and its key figures), also in
# $OUT/summary.txt. tests/gpu/README.md gives the device call.
#
# It passes (exit 0) only when nvidia-smi shows a GPU and every stage ran on it and passed. Where
# a GPU is shown, a skipped test, a "no CUDA device" or a CPU fallback is a failure, printed with
# the reason the device query gave. Without a GPU every CUDA stage is reported skipped and the
# exit is 3: nothing was checked. A failure is rerun with CUDA_LAUNCH_BLOCKING=1 (only the failed
# tests of a test binary) so that a faulting kernel is named at its launch.
#
# Stages, in order (STAGES selects; default: the first call's):
#   first call   build, parity, quant, cuda-tests, model-tests, video-size, sanitizer, gpu_ops,
#                dit_step
#   second call  build, h3_dit_step, vae_decode, taehv_preview, demo, h3_seed  (the build is
#                done: seconds)
#   on request   stream_read, overlap     (CPU-side benchmarks of this machine's disk)
# Expected seconds on the H200 (16 cores), estimates until a run measures them: pre-flight 10 |
# build 90 (the 7 targets from scratch; 2 cores: see README) | parity 45 | quant 15 |
# cuda-tests 10 | model-tests 30 | video-size 40 | sanitizer 90 | gpu_ops 60 | dit_step 130 (the
# LoRA run included) = about
# 520 s: the last stage may be cut (rerun it alone: STAGES=build,dit_step); then
# h3_dit_step 90 | vae_decode 130 | taehv_preview 20 | demo 15 | h3_seed 60.
#
# Environment: OUT (where the output goes; default build/gpu-out), STAGES (comma-separated names,
# or "all" for every stage), BUDGET_S (seconds for the whole script, default 470), BUILD_MAX_S
# (the build's cap, default 300), BUILD_DIR (default build/gpu-sm90), GPU_DEPS (the carried
# dependencies, default .gpu-deps).
# FERRY_CUDA_LOG=1 is set for every stage: the CUDA backend logs which attention kernel ran
# (and, always, every cuBLASLt fallback); those lines are gathered in cuda-log.txt.
#
# Files under $OUT (the device tool returns at most 8): summary.txt, preflight.txt,
# failures.txt (the failing lines of each failed stage and its CUDA_LAUNCH_BLOCKING rerun),
# cuda-log.txt, logs.tar.gz (every stage's whole log), h3-seed-stats.jsonl (issue 21's seed run).
set -uo pipefail

# Helpers the stages run through `timeout` (which runs programs, not shell functions).
case "${1:-}" in
  --build)  # --build DIR GENERATOR CMAKE_ARGS_FILE TARGET...: configure for sm_90, build targets
    dir=$2 gen=$3 args_file=$4
    shift 4
    mapfile -t extra <"$args_file"
    gen_args=() keep_going=(-k)
    [[ $gen == Ninja ]] && gen_args=(-G Ninja) keep_going=(-k 0)
    # No warnings-as-errors here: one new warning from this image's compiler must not take every
    # CUDA stage down (CI keeps them errors). No GUI, no fuzzers.
    cmake -S . -B "$dir" "${gen_args[@]}" -DCMAKE_BUILD_TYPE=Release -DFERRY_CUDA=ON \
      -DCMAKE_CUDA_ARCHITECTURES=90 -DFERRY_GUI=OFF -DFERRY_BUILD_TESTS=ON \
      -DFERRY_BUILD_BENCH=ON -DFERRY_WERROR=OFF "${extra[@]}" || exit 1
    # Every target that compiles is built even when one does not (-k): its stage alone fails.
    cmake --build "$dir" --parallel "$(nproc)" --target "$@" -- "${keep_going[@]}"
    exit $?
    ;;
  --in-dir)  # --in-dir DIR COMMAND...
    cd "$2" || exit 1
    shift 2
    exec "$@"
    ;;
  --sanitize)  # --sanitize SANITIZER TESTS FILTER: memcheck, racecheck, initcheck, 50 s each
    sanitizer=$2 tests=$3 filter=$4 rc=0
    for tool in memcheck racecheck initcheck; do
      echo "== compute-sanitizer --tool $tool"
      timeout -k 5 50 "$sanitizer" --tool "$tool" --error-exitcode 99 \
        --print-limit 20 "$tests" --gtest_filter="$filter"
      r=$?
      echo "== $tool: exit $r$( ((r == 124)) && echo ' (timed out after 50 s)')"
      ((r != 0)) && rc=1
    done
    exit $rc
    ;;
esac

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
self="$root/tests/gpu/run.sh"
cd "$root" || exit 1
out="${OUT:-$root/build/gpu-out}"
mkdir -p "$out"
build="${BUILD_DIR:-$root/build/gpu-sm90}"
[[ $build == /* ]] || build="$root/$build"
deps="${GPU_DEPS:-$root/.gpu-deps}"
[[ $deps == /* ]] || deps="$root/$deps"
logs="$build/gpu-logs"  # every stage's whole log; packed into $out/logs.tar.gz at the end
rm -rf "$logs"
mkdir -p "$logs"
rm -f "$out/summary.txt" "$out/failures.txt" "$out/cuda-log.txt" "$out/logs.tar.gz"
export PATH="/usr/local/cuda/bin:$PATH"
export FERRY_CUDA_LOG=1
first_call=build,parity,quant,cuda-tests,model-tests,video-size,sanitizer,gpu_ops,dit_step
stages="${STAGES:-$first_call}"
budget_s="${BUDGET_S:-470}"
start=$SECONDS

# ==== pre-flight: what the machine has, before anything is built ====
stop=""       # why the check cannot go on (a missing piece); empty when it can
gpu=0         # whether nvidia-smi shows a GPU
cmake_args=() # what the configure needs on this machine (carried dependencies, compiler)
note() { printf '%-18s %s\n' "$1" "$2"; }
version_of() { "$@" 2>&1 | grep -m1 -oE '[0-9]+\.[0-9]+(\.[0-9]+)?'; }
major() { echo "${1%%.*}"; }

# The first host compiler that builds C++20 (what Ferry needs: concepts, ranges, <span>, a
# defaulted operator==) and that nvcc accepts as its host compiler.
cxx20_test() {  # cxx20_test COMPILER: 0 when both work
  local dir
  dir=$(mktemp -d)
  cat >"$dir/t.cpp" <<'EOF'
#include <concepts>
#include <ranges>
#include <span>
struct K { int a = 0; bool operator==(const K&) const = default; };
template <std::integral T> T twice(T v) { return 2 * v; }
int main() { int v[3] = {1, 2, 3}; std::span<int> s(v); return twice(static_cast<int>(std::ranges::size(s))) == 6 && K{} == K{} ? 0 : 1; }
EOF
  printf '__global__ void k(int* p) { *p = 1; }\nint main() { return 0; }\n' >"$dir/t.cu"
  "$1" -std=c++20 -o "$dir/t" "$dir/t.cpp" >"$dir/log" 2>&1 && "$dir/t" &&
    { ! command -v nvcc >/dev/null ||
      nvcc -std=c++20 -ccbin "$1" -arch=sm_90 -c "$dir/t.cu" -o "$dir/t.o" >>"$dir/log" 2>&1; }
  local rc=$?
  rm -rf "$dir"
  return $rc
}

preflight() {
  echo "== pre-flight ($(date -u +%Y-%m-%dT%H:%M:%SZ), $(uname -srm))"
  # The GPU and its driver.
  if ! command -v nvidia-smi >/dev/null; then
    note "GPU" "none: nvidia-smi not found (no NVIDIA driver); every CUDA stage will skip"
  else
    local query driver
    query=$(nvidia-smi --query-gpu=name,driver_version,memory.total,compute_cap \
      --format=csv,noheader 2>&1)
    if [[ $? -ne 0 || -z $query || $query == *"No devices"* ]]; then
      note "GPU" "none: nvidia-smi: ${query:-no output}"
    else
      gpu=1
      note "GPU" "$query"
      driver=$(echo "$query" | head -n1 | awk -F', ' '{print $2}')
      note "driver" "$driver"
      if [[ ! $driver =~ ^[0-9]+ ]] || (($(major "$driver") < 580)); then
        stop="driver $driver is older than 580, the oldest that runs the CUDA 13 runtime this \
build links statically: no CUDA call would succeed. A machine with driver 580 or newer is needed."
      fi
      nvidia-smi 2>&1 | sed 's/^/  | /'
    fi
  fi
  # The toolkit: nvcc, and cuBLASLt beside it.
  if command -v nvcc >/dev/null; then
    note "nvcc" "$(command -v nvcc): $(nvcc --version | grep -m1 -o 'release [0-9.]*, V[0-9.]*')"
    local cuda_home lt_lib lt_h
    cuda_home="$(cd "$(dirname "$(command -v nvcc)")/.." && pwd)"
    lt_lib=$(find "$cuda_home/lib64/" "$cuda_home/targets/x86_64-linux/lib/" -maxdepth 1 \
      -name 'libcublasLt.so*' 2>/dev/null | head -n1)
    lt_h=$(find "$cuda_home/include/" "$cuda_home/targets/x86_64-linux/include/" -maxdepth 1 \
      -name cublasLt.h 2>/dev/null | head -n1)
    local cudart
    cudart=$(find "$cuda_home/lib64/" "$cuda_home/targets/x86_64-linux/lib/" -maxdepth 1 \
      -name libcudart_static.a 2>/dev/null | head -n1)
    if [[ -n $cudart ]]; then
      note "CUDA runtime" "$cudart (linked statically)"
    else
      note "CUDA runtime" "MISSING: no libcudart_static.a in $cuda_home"
      stop="${stop:+$stop; }the CUDA toolkit at $cuda_home has no static runtime (libcudart_static.a)"
    fi
    if [[ -n $lt_lib && -n $lt_h ]]; then
      note "cuBLASLt" "$lt_lib"
    else
      note "cuBLASLt" "MISSING in $cuda_home (library: ${lt_lib:-none}, header: ${lt_h:-none})"
      stop="${stop:+$stop; }the CUDA toolkit at $cuda_home has no cuBLASLt (libcublasLt, \
cublasLt.h): the CUDA backend cannot be built"
    fi
  else
    note "nvcc" "MISSING (not on PATH, nor in /usr/local/cuda/bin)"
    stop="${stop:+$stop; }no nvcc: the CUDA backend cannot be built"
  fi
  # The host compiler: the first that builds C++20 and that nvcc takes.
  local cxx="" tried=()
  for c in "${CXX:-}" c++ g++ g++-14 g++-13 g++-12 g++-11 g++-10 clang++; do
    [[ -z $c ]] || ! command -v "$c" >/dev/null && continue
    tried+=("$c $(version_of "$c" --version)")
    if cxx20_test "$c"; then
      cxx=$(command -v "$c")
      break
    fi
  done
  if [[ -n $cxx ]]; then
    note "host compiler" "$cxx: $("$cxx" --version | head -n1); C++20 ok, nvcc takes it"
    cmake_args+=("-DCMAKE_CXX_COMPILER=$cxx" "-DCMAKE_CUDA_HOST_COMPILER=$cxx")
    local cc=${cxx/%clang++/clang}
    cc=${cc/%g++/gcc}
    [[ $cc != "$cxx" && -x $cc ]] && cmake_args+=("-DCMAKE_C_COMPILER=$cc")
  else
    note "host compiler" "NONE builds C++20 for nvcc (tried: ${tried[*]:-nothing found})"
    stop="${stop:+$stop; }no host compiler builds C++20 and is accepted by nvcc 13: GCC 10-15 or \
Clang 14+ would. A compiler cannot be carried: GCC 12 alone is 240 MiB, over the device tool's \
64 MiB"
  fi
  # CMake (3.25 or newer: the presets' and the CMakeLists' minimum) and ninja.
  if command -v cmake >/dev/null; then
    local cv
    cv=$(version_of cmake --version)
    note "cmake" "$(command -v cmake): $cv"
    if [[ $(printf '%s\n' 3.25 "$cv" | sort -V | head -n1) != 3.25 ]]; then
      stop="${stop:+$stop; }CMake $cv is older than 3.25"
    fi
  else
    note "cmake" "MISSING"
    stop="${stop:+$stop; }no cmake"
  fi
  if command -v ninja >/dev/null; then
    note "ninja" "$(command -v ninja): $(ninja --version)"
  else
    note "ninja" "missing: make builds instead"
  fi
  note "cores" "$(nproc)"
  note "memory" "$(awk '/MemTotal/ {printf "%.1f GiB", $2 / 1048576}' /proc/meminfo)"
  note "disk free" "$(df -h "$root" | awk 'NR == 2 {print $4}') at $root"
  # The dependencies: found on the system, or carried in $deps (scripts/stage-gpu-deps.sh).
  if [[ -f /usr/include/nlohmann/json.hpp || -f /usr/local/include/nlohmann/json.hpp ]]; then
    note "nlohmann-json" "system"
  elif [[ -f $deps/include/nlohmann/json.hpp ]]; then
    note "nlohmann-json" "carried: $deps"
    cmake_args+=("-DCMAKE_PREFIX_PATH=$deps")
  else
    note "nlohmann-json" "MISSING (no system copy, nothing carried in $deps)"
    stop="${stop:+$stop; }nlohmann-json is missing: run scripts/stage-gpu-deps.sh before the call \
and carry .gpu-deps"
  fi
  if [[ -f /usr/src/googletest/CMakeLists.txt ]]; then
    note "GoogleTest" "system: /usr/src/googletest"
  elif [[ -f $deps/googletest/CMakeLists.txt ]]; then
    note "GoogleTest" "carried: $deps/googletest"
    cmake_args+=("-DFERRY_GTEST_SOURCE_DIR=$deps/googletest")
  else
    note "GoogleTest" "MISSING (no /usr/src/googletest, nothing carried in $deps)"
    stop="${stop:+$stop; }GoogleTest's sources are missing: run scripts/stage-gpu-deps.sh before \
the call and carry .gpu-deps"
  fi
  if compgen -G '/usr/lib/*/cmake/openblas/*onfig.cmake' >/dev/null ||
    compgen -G '/usr/lib*/cmake/OpenBLAS/*onfig.cmake' >/dev/null; then
    note "OpenBLAS" "system (optional)"
  else
    note "OpenBLAS" "absent (optional: the CPU backend uses its own GEMM)"
  fi
  if command -v pkg-config >/dev/null && pkg-config --exists libavformat libavcodec libswscale \
    libavutil 2>/dev/null; then
    note "FFmpeg" "system (optional)"
  else
    note "FFmpeg" "absent (optional: the demo writes its AVI fallback)"
  fi
  sanitizer=$(command -v compute-sanitizer ||
    find /usr/local/cuda/ /opt/nvidia/ -maxdepth 4 -name compute-sanitizer -type f 2>/dev/null |
    head -n1)
  note "compute-sanitizer" "${sanitizer:-absent}"
}
sanitizer=""
preflight >"$out/preflight.txt" 2>&1  # in this shell: it sets gpu, stop, cmake_args, sanitizer
cat "$out/preflight.txt"

if [[ -n $stop ]]; then
  {
    echo
    echo "pre-flight: STOP: $stop"
    echo "gpu check: exit 2 (nothing built or run)"
  } | tee -a "$out/preflight.txt" | tee "$out/summary.txt"
  exit 2
fi
echo "pre-flight: ok ($((SECONDS - start)) s); GPU: $([[ $gpu == 1 ]] && echo yes || echo NO)"

# ==== the summary: one row per stage ====
rows=()
failed=0    # a stage failed (or could not run where a GPU is shown)
skipped=0   # a stage skipped for lack of a GPU (only without one)
stage_why=""  # why a stage that a GPU should have run did not (judge sets it; row prints it)
row() {  # row NAME STATUS SECONDS FIGURES
  local figures=$4
  [[ -n $stage_why ]] && figures="${figures:+$figures; }why: $stage_why"
  stage_why=""
  rows+=("$(printf '%-12s %-24s %5s s  %s' "$1" "$2" "$3" "$figures")")
  case $2 in
    ok | "not wanted") ;;
    "skipped (no GPU)") skipped=1 ;;
    *) failed=1 ;;
  esac
}
wanted() { [[ $stages == all || ",$stages," == *",$1,"* ]]; }
left() { echo $((budget_s - (SECONDS - start))); }

# run_stage NAME MAX_SECONDS LOG COMMAND...: runs COMMAND (stdout line-buffered, so that a stage
# cut short keeps what it printed) into LOG under the stage's cap and what is left of the
# budget. Sets stage_rc (the exit status; 124 after a timeout, -1 when not run), stage_secs and
# stage_status (ok, failed (exit N), timed out, not run ...); the caller refines it and adds
# the row.
stage_rc=0
stage_secs=0
stage_status=""
run_stage() {
  local name=$1 max=$2 log=$3
  shift 3
  stage_rc=-1
  stage_secs=0
  local t
  t=$(left)
  ((t > max)) && t=$max
  if ((t < 15)); then
    stage_status="not run (budget spent)"
    echo "$name: not run, the ${budget_s} s budget is spent" >"$log"
    echo "== $name: not run, the budget is spent"
    return 0
  fi
  echo "== $name (at most $t s)"
  local s0=$SECONDS
  timeout -k 5 "$t" stdbuf -oL -eL "$@" >"$log" 2>&1
  stage_rc=$?
  stage_secs=$((SECONDS - s0))
  case $stage_rc in
    0) stage_status=ok ;;
    124 | 137) stage_status="timed out (${t} s)" ;;
    *) stage_status="FAILED (exit $stage_rc)" ;;
  esac
  echo "   $stage_status, $stage_secs s"
}

# What a failed stage printed that says why, for failures.txt.
record_failure() {  # record_failure NAME LOG WHY
  {
    echo "==== $1: $3"
    grep -E -B2 -A8 'Failure|FAILED|error|Error|MISMATCH|DIFFER|no CUDA device|Skipped|ERROR SUMMARY: [1-9]|Invalid|Race|Uninitialized|terminate|Aborted|fault' \
      "$2" | head -n 80
    echo
  } >>"$out/failures.txt"
}

# The reason the device query gave, from a test's skip message or a bench's "no CUDA device".
no_device_reason() {  # no_device_reason LOG
  grep -m1 -E 'no CUDA device|needs [0-9]+ GiB|no usable NVIDIA GPU' "$1" | sed 's/^ *//' |
    cut -c1-160
}

# A failed stage again, with CUDA_LAUNCH_BLOCKING=1 (every launch synchronous, so an error is
# reported by the kernel that caused it): only the failed tests of a GoogleTest binary, else the
# whole command; at most 90 s of what is left.
rerun_blocking() {  # rerun_blocking NAME LOG GTEST(0|1) COMMAND...
  local name=$1 log=$2 is_gtest=$3
  shift 3
  local t
  t=$(left)
  ((t > 90)) && t=90
  if ((t < 15)); then
    echo "(no time left for a CUDA_LAUNCH_BLOCKING=1 rerun)" >>"$out/failures.txt"
    return
  fi
  local args=()
  if ((is_gtest)); then
    local failed_tests
    failed_tests=$(grep -oE '^\[  FAILED  \] [A-Za-z_0-9/]+\.[A-Za-z_0-9/]+' "$log" |
      awk '{print $4}' | sort -u | paste -sd: -)
    [[ -n $failed_tests ]] && args=(--gtest_filter="$failed_tests")
  fi
  local blocking_log="${log%.txt}-blocking.txt"
  echo "   rerun with CUDA_LAUNCH_BLOCKING=1 (at most $t s): ${args[*]:-the whole command}"
  CUDA_LAUNCH_BLOCKING=1 timeout -k 5 "$t" stdbuf -oL -eL "$@" "${args[@]}" >"$blocking_log" 2>&1
  {
    echo "---- $name rerun with CUDA_LAUNCH_BLOCKING=1 ${args[*]}: exit $?"
    grep -E -B2 -A8 'Failure|FAILED|error|Error|MISMATCH|DIFFER|terminate|fault' "$blocking_log" |
      head -n 60
    echo
  } >>"$out/failures.txt"
}

# GoogleTest counts: "12 passed, 0 failed, 3 skipped".
gtest_counts() {  # gtest_counts LOG
  local p f k
  p=$(grep -c '^\[       OK \]' "$1")
  f=$(grep -c '^\[  FAILED  \] [A-Za-z_0-9/]*\.[A-Za-z_0-9/]* (' "$1")
  k=$(grep -c '^\[  SKIPPED \] [A-Za-z_0-9/]*\.[A-Za-z_0-9/]* (' "$1")
  echo "$p passed, $f failed, $k skipped"
}

# The verdict of a stage from its exit status and what it printed. A skip or "no CUDA device"
# fails where a GPU is shown; without one it is "skipped (no GPU)", and only that. Sets
# stage_status; adds to failures.txt; reruns a failure with CUDA_LAUNCH_BLOCKING=1.
judge() {  # judge NAME LOG GTEST(0|1) COMMAND...
  local name=$1 log=$2 is_gtest=$3
  shift 3
  [[ $stage_status == "not run"* ]] && return
  local no_device skips=0
  no_device=$(no_device_reason "$log")
  ((is_gtest)) && skips=$(grep -c '^\[  SKIPPED \] [A-Za-z_0-9/]*\.[A-Za-z_0-9/]* (' "$log")
  if [[ $stage_status == ok && ($skips -gt 0 || -n $no_device) ]]; then
    if ((gpu)); then
      stage_status="FAILED (did not run)"
      stage_why=${no_device:-"$skips test(s) skipped"}
      {
        echo "==== $name: a GPU is shown, but ${skips} test(s) skipped / the GPU was not used"
        grep -m3 -B1 -E 'Skipped|no CUDA device|needs [0-9]+ GiB' "$log"
        echo
      } >>"$out/failures.txt"
      return
    fi
    # Without a GPU: clean only when everything skipped for that reason.
    if ((is_gtest)) && [[ $(grep -c '^\[       OK \]' "$log") -gt 0 ]]; then
      stage_status="FAILED (partly skipped)"
      record_failure "$name" "$log" "some tests ran, others skipped: ${no_device:-see log}"
      return
    fi
    stage_status="skipped (no GPU)"
    return
  fi
  if [[ $stage_status != ok ]]; then
    record_failure "$name" "$log" "$stage_status"
    if [[ $stage_status != "timed out"* ]] && ((gpu && $# > 0)); then
      rerun_blocking "$name" "$log" "$is_gtest" "$@"
    fi
  fi
}

# ==== build: only what the stages run ====
targets=()
wanted parity || wanted quant || wanted cuda-tests || wanted sanitizer &&
  targets+=(ferry_cuda_tests)
wanted cuda-tests && targets+=(ferry_cuda_registry_tests)
wanted model-tests && targets+=(ferry_cuda_model_tests)
wanted video-size && targets+=(ferry_cuda_video_tests)
for bench in gpu_ops dit_step h3_dit_step vae_decode taehv_preview stream_read overlap; do
  wanted "$bench" && targets+=("$bench")
done
{ wanted demo || wanted h3_seed; } && targets+=(ferry-cli)
generator=Make
command -v ninja >/dev/null && generator=Ninja
printf '%s\n' "${cmake_args[@]}" >"$logs/cmake-args.txt"
if wanted build && ((${#targets[@]} > 0)); then
  run_stage build "${BUILD_MAX_S:-300}" "$logs/build.txt" "$self" --build "$build" "$generator" \
    "$logs/cmake-args.txt" "${targets[@]}"
  [[ $stage_status != ok ]] && record_failure build "$logs/build.txt" "$stage_status"
else
  stage_status="not wanted"
fi

bin() {  # the path of a built target, or nothing
  local path
  case $1 in
    ferry_cuda*) path="$build/tests/cuda/$1" ;;
    ferry-cli) path="$build/cli/$1" ;;
    *) path="$build/bench/$1" ;;
  esac
  [[ -x $path ]] && echo "$path"
}
built=0
for t in "${targets[@]}"; do [[ -n $(bin "$t") ]] && built=$((built + 1)); done
row build "$stage_status" "$stage_secs" "$built of ${#targets[@]} targets built: ${targets[*]}"

# A stage whose binary is missing: reported, not fatal to the others.
missing() {  # missing NAME
  echo "== $1: not built"
  row "$1" "FAILED (not built)" 0 "see the build log"
}

# ==== backend parity: every op of the CUDA backend against the CPU backend (tests/backend/),
# one process, so that its summary (one line per comparison: error against threshold) is whole.
cuda_tests=$(bin ferry_cuda_tests)
if wanted parity; then
  if [[ -n $cuda_tests ]]; then
    run_stage parity 120 "$logs/parity.txt" "$cuda_tests" --gtest_filter='BackendParity.*'
    judge parity "$logs/parity.txt" 1 "$cuda_tests" --gtest_filter='BackendParity.*'
    comparisons=$(grep -m1 -o '[0-9]* comparisons, [0-9]* failed' "$logs/parity.txt")
    row parity "$stage_status" "$stage_secs" \
      "$(gtest_counts "$logs/parity.txt")${comparisons:+; $comparisons}"
  else
    missing parity
  fi
fi

# ==== quantised weights (tests/gpu/quant_parity_test.cpp): the dequantisation kernels bit for
# bit against the CPU's dequantisers for every ggml type and bitsandbytes NF4/FP4, linear with
# each quantised type against the CPU's linear on the same weights, embedding of a quantised
# table, Comfy-Org's int8 ConvRot (dequant bit for bit, linear, refusals). Its summary (one line per comparison: error against bound) is kept like parity's.
if wanted quant; then
  if [[ -n $cuda_tests ]]; then
    run_stage quant 60 "$logs/quant.txt" "$cuda_tests" --gtest_filter='QuantParity.*'
    judge quant "$logs/quant.txt" 1 "$cuda_tests" --gtest_filter='QuantParity.*'
    comparisons=$(grep -m1 -o '[0-9]* comparisons, [0-9]* failed' "$logs/quant.txt")
    row quant "$stage_status" "$stage_secs" \
      "$(gtest_counts "$logs/quant.txt")${comparisons:+; $comparisons}"
  else
    missing quant
  fi
fi

# ==== the CUDA runtime tests (device query, VRAM sampling, pinned ring uploads).
if wanted cuda-tests; then
  if [[ -n $cuda_tests ]]; then
    run_stage cuda-tests 60 "$logs/cuda-tests.txt" "$cuda_tests" \
      --gtest_filter='-BackendParity.*:QuantParity.*'
    judge cuda-tests "$logs/cuda-tests.txt" 1 "$cuda_tests" \
      --gtest_filter='-BackendParity.*:QuantParity.*'
    row cuda-tests "$stage_status" "$stage_secs" "$(gtest_counts "$logs/cuda-tests.txt")"
  else
    missing cuda-tests
  fi
fi

# ==== the device registry: linking ferry_cuda registers the GPU (name, sm_XX, capabilities), it
# creates a working backend, and a GPU preset runs on it rather than falling back to the CPU.
if wanted cuda-tests; then
  registry=$(bin ferry_cuda_registry_tests)
  if [[ -n $registry ]]; then
    run_stage registry 30 "$logs/registry.txt" "$registry"
    judge registry "$logs/registry.txt" 0 "$registry"
    row registry "$stage_status" "$stage_secs" "$(gtest_counts "$logs/registry.txt")"
  else
    missing registry
  fi
fi

# ==== the model tests on the CUDA backend (tests/models/ built with FERRY_MODEL_TESTS_ON_CUDA):
# their measured errors against the reference, the same bounds as on the CPU.
if wanted model-tests; then
  models=$(bin ferry_cuda_model_tests)
  if [[ -n $models ]]; then
    run_stage model-tests 90 "$logs/model-tests.txt" "$models"
    judge model-tests "$logs/model-tests.txt" 1 "$models"
    row model-tests "$stage_status" "$stage_secs" "$(gtest_counts "$logs/model-tests.txt")"
  else
    missing model-tests
  fi
fi

# ==== video sizes: attention at 27,280 tokens (flash and tiled vs float64), the 720p FFN linear
# in bf16 and fp8 vs the CPU, an add over more than 2^31 elements (tests/cuda/video_size_test).
if wanted video-size; then
  video=$(bin ferry_cuda_video_tests)
  if [[ -n $video ]]; then
    run_stage video-size 120 "$logs/video-size.txt" "$video"
    judge video-size "$logs/video-size.txt" 1 "$video"
    figures=$(grep -E '^(attention|linear) ' "$logs/video-size.txt" |
      sed -E 's/ vs (float64 \(24 rows\)|the CPU backend)//' | paste -sd';' - | cut -c1-200)
    row video-size "$stage_status" "$stage_secs" \
      "$(gtest_counts "$logs/video-size.txt")${figures:+; $figures}"
  else
    missing video-size
  fi
fi

# ==== compute-sanitizer (memcheck, racecheck, initcheck) on the parity suite's small shapes of
# attention, rope, permute and linear, and on the dequantisation kernels.
if wanted sanitizer; then
  filter='BackendParity.linear*:BackendParity.*attention*:BackendParity.rope*:BackendParity.permute*'
  filter+=':QuantParity.dequantize*'  # the dequantisation kernels' reads of the blocks
  if [[ -z $cuda_tests ]]; then
    missing sanitizer
  elif [[ -z $sanitizer ]]; then
    if ((gpu)); then
      echo "==== sanitizer: compute-sanitizer not found on this image" >>"$out/failures.txt"
      row sanitizer "FAILED (no sanitizer)" 0 "compute-sanitizer not found on this image"
    else
      row sanitizer "skipped (no GPU)" 0 "compute-sanitizer not found either"
    fi
  else
    run_stage sanitizer 150 "$logs/sanitizer.txt" "$self" --sanitize "$sanitizer" \
      "$cuda_tests" "$filter"
    judge sanitizer "$logs/sanitizer.txt" 1
    figures=$(grep -E '^========= ERROR SUMMARY|^== [a-z]+: exit' "$logs/sanitizer.txt" |
      paste -sd' ' - | cut -c1-200)
    row sanitizer "$stage_status" "$stage_secs" "$figures"
  fi
fi

# ==== gpu_ops: CudaBackend::linear (bf16, fp8 weights) against a plain cuBLASLt call, and
# attention at L = 8k, 27k, 75k against the best bf16 GEMM rate (about a minute).
if wanted gpu_ops; then
  gpu_ops=$(bin gpu_ops)
  if [[ -n $gpu_ops ]]; then
    run_stage gpu_ops 120 "$logs/gpu_ops.txt" "$gpu_ops"
    judge gpu_ops "$logs/gpu_ops.txt" 0 "$gpu_ops"
    figures=$(awk '
      /^ +[0-9]+ +[0-9]+ +[0-9]+ \|/ {
        split($0, part, "|"); split(part[2], a, " "); split(part[3], b, " ")
        if (n++ == 0 || a[3] < lo) lo = a[3]; if (a[3] > hi) hi = a[3]
        if (m++ == 0 || b[2] < flo) flo = b[2]; if (b[2] > fhi) fhi = b[2]
      }
      /L=S +TFLOP\/call/ { att = 1; next }
      att && /^ +[0-9]+ +[0-9.]+ +[0-9]+ +[0-9.]+ +[0-9.]+ +[0-9.]+ *$/ {
        s = s sprintf(" L%dk %.0f TF/s %.2f", $1 / 1000 + 0.5, $5, $6)
      }
      /^cuBLASLt: / { lt = $0 }
      END {
        if (n) printf "linear/cuBLAS %.2f-%.2f, fp8/bf16 %.2f-%.2f;", lo, hi, flo, fhi
        if (s != "") printf " attention (L, rate, vs GEMM):%s;", s
        if (lt != "") printf " %s", lt
      }' "$logs/gpu_ops.txt")
    grep -q MISMATCH "$logs/gpu_ops.txt" && figures="MISMATCH; $figures"
    row gpu_ops "$stage_status" "$stage_secs" "$figures"
  else
    missing gpu_ops
  fi
fi

# ==== dit_step: one TI2V-5B denoising step (CFG pair + UniPC, all 30 blocks, synthetic bf16
# checkpoint of 10 GB on this disk) resident, streamed from pinned RAM and from disk, at
# 832x480x81 (8190 tokens) and 1280x704x121 (27280 tokens); the final latents of the three runs
# must be identical bit for bit; target streamed <= 1.05 x resident at 720p. Also resident with a
# rank-64 LoRA on every block Linear (runtime form): its cost, target <= 1.06 x resident.
if wanted dit_step; then
  dit_step=$(bin dit_step)
  if [[ -n $dit_step ]]; then
    dit_args=(--backend cuda --steps 2 --rounds 1 --lora-rank 64
              --file "$build/bench-data/dit_step.safetensors")
    run_stage dit_step 190 "$logs/dit_step.txt" "$dit_step" "${dit_args[@]}"
    judge dit_step "$logs/dit_step.txt" 0 "$dit_step" "${dit_args[@]}"
    figures=$(awk '
      /^[0-9]+x[0-9]+, [0-9]+ frames:/ { split($1, wh, ","); size = wh[1] "x" $2 }
      /^  (resident|pinned|disk) / {
        for (i = 1; i <= NF; ++i) if ($i == "ratio") r = $(i + 1)
        if ($1 == "resident") s = s sprintf("%s%s: %.2f s", s == "" ? "" : "; ", size, $2)
        else s = s sprintf(", %s %s", $1, r)
      }
      /final latents: identical/ { s = s ", latents identical" }
      /final latents: DIFFER/ { s = s ", LATENTS DIFFER" }
      /720p target/ { s = s ", 720p target " ($NF == "met" ? "met" : "MISSED") }
      /LoRA cost:/ { for (i = 1; i <= NF; ++i) if ($i == "x") c = $(i - 1); s = s ", LoRA r64 " c }
      END { print s }' "$logs/dit_step.txt")
    rm -f "$build/bench-data/dit_step.safetensors" "$build/bench-data/dit_step.lora.safetensors"
    row dit_step "$stage_status" "$stage_secs" "$figures"
  else
    missing dit_step
  fi
fi

# ==== h3_dit_step: MiniMax-H3's DiT at real widths (4 NF4 blocks of random data, full and pruned
# files of 2.2 and 1.6 GB on this disk) on the 480p T2VA sequence (832x480x124: 14,972 rows), one
# pass resident and streamed from disk each, and the AdaLN projections' cost streamed per pass vs
# precomputed for a 51-timestep schedule (issue 19); resident and streamed outputs must be
# identical bit for bit.
if wanted h3_dit_step; then
  h3_dit_step=$(bin h3_dit_step)
  if [[ -n $h3_dit_step ]]; then
    h3_args=(--backend cuda --passes 1 --rounds 1 --folder "$build/bench-data")
    run_stage h3_dit_step 120 "$logs/h3_dit_step.txt" "$h3_dit_step" "${h3_args[@]}"
    judge h3_dit_step "$logs/h3_dit_step.txt" 0 "$h3_dit_step" "${h3_args[@]}"
    figures=$(awk '
      /^  resident / { printf "resident %s s/pass", $2 }
      /^streamed over resident:/ { printf ", streamed/resident %s", $4 }
      /^AdaLN:/ { for (i = 1; i <= NF; ++i) { if ($i == "costs") a = $(i + 1); if ($i == "passes'"'"'") p = $(i - 1) }
                  printf ", AdaLN in stream %s %% of a pass, precompute %s passes", a, p }
      /identical bit for bit/ { printf ", outputs identical" }
      /DIFFER/ { printf ", OUTPUTS DIFFER" }' "$logs/h3_dit_step.txt")
    rm -f "$build/bench-data/h3_dit_step_full.safetensors" \
      "$build/bench-data/h3_dit_step_pruned.safetensors"
    row h3_dit_step "$stage_status" "$stage_secs" "$figures"
  else
    missing h3_dit_step
  fi
fi

# ==== vae_decode: the Wan 2.2 decode (real widths, random weights) on the GPU at 480x832x81 and
# 704x1280x121 as the laptop-8gb plan runs it (its tile): measured arena peak and driver-reported
# VRAM against the plan's predictions. About 30 s and 90 s of f32 decoding, 10 s of weights.
if wanted vae_decode; then
  vae_decode=$(bin vae_decode)
  if [[ -n $vae_decode ]]; then
    vae_args=(--backend cuda --dir "$build/bench-data")
    run_stage vae_decode 150 "$logs/vae_decode.txt" "$vae_decode" "${vae_args[@]}"
    judge vae_decode "$logs/vae_decode.txt" 0 "$vae_decode" "${vae_args[@]}"
    figures=$(awk '/^result / { sub(/^result /, ""); printf "%s%s", n++ ? "; " : "", $0 }' \
      "$logs/vae_decode.txt")
    rm -f "$build/bench-data/vae22_random_decoder.safetensors"  # left by a run cut short
    row vae_decode "$stage_status" "$stage_secs" "$figures"
  else
    missing vae_decode
  fi
fi

# ==== taehv_preview: the live TAEHV preview (one latent frame of x0, taew2_2 shapes, random
# weights) at the TI2V-5B 1280x704x121 latent on the GPU, and its share of a DiT step there (the
# step's FLOPs at the bf16 Linear rate measured in the same run: an upper bound on the share).
if wanted taehv_preview; then
  taehv_preview=$(bin taehv_preview)
  if [[ -n $taehv_preview ]]; then
    taehv_args=(--backend cuda --file "$build/bench-data/taew2_2_random.safetensors")
    run_stage taehv_preview 60 "$logs/taehv_preview.txt" "$taehv_preview" "${taehv_args[@]}"
    judge taehv_preview "$logs/taehv_preview.txt" 0 "$taehv_preview" "${taehv_args[@]}"
    figures=$(awk '
      /^  preview:/ { for (i = 1; i <= NF; ++i) if ($i == "s") t = $(i - 1) }
      /^  preview \/ step/ { f = $5 }
      END { if (t != "") printf "preview %s s, preview/step <= %s", t, f }' \
      "$logs/taehv_preview.txt")
    row taehv_preview "$stage_status" "$stage_secs" "$figures"
  else
    missing taehv_preview
  fi
fi

# ==== ferry-cli demo on the CUDA backend: the whole path (umT5, the DiT streamed from disk, the
# VAE, the video) on the tiny built-in model, 256x256x17, 8 steps. Running on the CPU where a GPU
# is shown is a failure.
if wanted demo; then
  cli=$(bin ferry-cli)
  if [[ -n $cli ]]; then
    export FERRY_DATA_DIR="$build/ferry-data"
    run_stage demo 60 "$logs/demo.txt" "$cli" demo --stats "$logs/demo-stats.jsonl"
    unset FERRY_DATA_DIR
    figures=$(awk '
      /^ +step +seconds/ { device = $5 == "VRAM" ? "CUDA" : "the CPU" }
      /^ +[0-9]+ +[0-9.]+ / { n++; t += $2 }
      END { if (n) printf "on %s: %d steps, %.2f s/step", device, n, t / n }' "$logs/demo.txt")
    if [[ $stage_status == ok && $figures != "on CUDA"* ]]; then
      if ((gpu)); then
        stage_status="FAILED (ran on the CPU)"
        record_failure demo "$logs/demo.txt" "a GPU is shown but the demo ran on the CPU"
      else
        stage_status="skipped (no GPU)"
      fi
    else
      judge demo "$logs/demo.txt" 0 "$cli" demo
    fi
    vram=$(grep -o '"vram_peak_in_[a-z]*":[0-9]*' "$logs/demo-stats.jsonl" 2>/dev/null |
      awk -F: '$2 > m { m = $2 } END { if (m) printf "VRAM peak %.0f MiB", m / 1048576 }')
    [[ -n $vram ]] && figures="$figures, $vram"
    rm -rf "$build/ferry-data/demo-model"  # 7 MB of random weights
    row demo "$stage_status" "$stage_secs" "$figures"
  else
    missing demo
  fi
fi

# ==== h3_seed: issue 21's seed scenario on the CUDA backend. The tiny H3 demo set, FL2VA (both
# keyframes), 50 steps, every block streamed from disk, under laptop-8gb with the seed laptop's
# profile (8 GiB VRAM, 24 GiB RAM). RSS and commit at step 50 must equal step 2 (0 bytes of
# growth); each stage's RSS and VRAM peaks go in the row. Running on the CPU where a GPU is shown
# is a failure.
if wanted h3_seed; then
  cli=$(bin ferry-cli)
  if [[ -n $cli ]]; then
    export FERRY_DATA_DIR="$build/ferry-data"
    seed_stats="$logs/h3-seed-stats.jsonl"
    rm -f "$seed_stats"
    run_stage h3_seed 150 "$logs/h3_seed.txt" "$cli" demo --model h3 --preset laptop-8gb \
      --vram-mib 8192 --ram-mib 24576 --steps 50 --image tests/data/media/start.png \
      --end-image tests/data/media/start.png --stats "$seed_stats" --out "$build/h3-seed.mp4"
    unset FERRY_DATA_DIR
    judge h3_seed "$logs/h3_seed.txt" 0 "$cli" demo --model h3 --preset laptop-8gb
    figures=$(awk -F'[:,{}]' '
      function field(name,   i) { for (i = 1; i < NF; i++) if ($i == "\"" name "\"") return $(i + 1); return "" }
      /"step":2,/ { rss2 = field("rss_bytes"); commit2 = field("commit_bytes") }
      /"step":50,/ { rss50 = field("rss_bytes"); commit50 = field("commit_bytes") }
      /"stage":/ { stage = field("stage"); gsub(/"/, "", stage)
                   peaks = peaks sprintf(" %s %.0f/%.0f", stage, field("rss_peak_in_stage") / 1048576,
                                         field("vram_peak_in_stage") / 1048576) }
      END {
        if (rss50 == "") { print "NO STEP 50"; exit }
        printf "RSS step 2 -> 50: %+d B, commit %+d B; RSS/VRAM MiB per stage:%s",
               rss50 - rss2, commit50 - commit2, peaks
        if (rss50 - rss2 > 0 || commit50 - commit2 > 0) printf ", GREW"
      }' "$seed_stats" 2>/dev/null)
    if [[ $stage_status == ok ]]; then
      if [[ $figures == *GREW* || $figures == *"NO STEP 50"* || -z $figures ]]; then
        stage_status="FAILED (memory)"
        record_failure h3_seed "$logs/h3_seed.txt" "RSS or commit grew, or no step 50: $figures"
      elif ((gpu)) && ! grep -q '"vram_peak_in_stage":[1-9]' "$seed_stats"; then
        stage_status="FAILED (ran on the CPU)"
        record_failure h3_seed "$logs/h3_seed.txt" "a GPU is shown but no stage used VRAM"
      elif ((!gpu)); then
        stage_status="skipped (no GPU)"
      fi
    fi
    cp "$seed_stats" "$out/h3-seed-stats.jsonl" 2>/dev/null
    rm -rf "$build/ferry-data/demo-model-h3" "$build/h3-seed.mp4"
    row h3_seed "$stage_status" "$stage_secs" "$figures"
  else
    missing h3_seed
  fi
fi

# ==== on request: the weight store and the streamer on this machine's disk (CPU side).
for bench in stream_read overlap; do
  wanted "$bench" || continue
  exe=$(bin "$bench")
  if [[ -z $exe ]]; then
    missing "$bench"
    continue
  fi
  args=()
  [[ $bench == stream_read ]] && args=(--size-gib 2 --passes 1)
  run_stage "$bench" 60 "$logs/$bench.txt" "$self" --in-dir "$build" "$exe" "${args[@]}"
  [[ $stage_status != ok ]] && record_failure "$bench" "$logs/$bench.txt" "$stage_status"
  missed=$(grep -c 'TARGET MISSED' "$logs/$bench.txt")
  row "$bench" "$stage_status" "$stage_secs" "$( ((missed > 0)) && echo "TARGET MISSED x $missed")"
done

# ==== the CUDA backend's log lines (attention kernels, cuBLASLt fallbacks), once each.
grep -h '^ferry-cuda: ' "$logs"/*.txt 2>/dev/null | sort | uniq -c | sort -rn >"$out/cuda-log.txt"
fallbacks=$(grep -c 'no algorithm\|falling back' "$out/cuda-log.txt")
kernels=$(grep -c 'attention: ' "$out/cuda-log.txt")
tar -czf "$out/logs.tar.gz" -C "$build" gpu-logs 2>/dev/null

if ((failed)); then
  status=1 verdict="FAILED (see failures.txt)"
elif ((skipped)) || ((!gpu)); then
  status=3 verdict="nothing was checked on a GPU (none is shown): NOT a pass"
else
  status=0 verdict="passed on the GPU"
fi
{
  echo
  echo "== summary ($((SECONDS - start)) s of a ${budget_s} s budget; GPU: $(grep -m1 '^GPU ' \
    "$out/preflight.txt" | cut -c20-); logs in $out)"
  printf '%s\n' "${rows[@]}"
  echo "CUDA log: $kernels attention kernel lines, $fallbacks cuBLASLt fallbacks (cuda-log.txt)"
  [[ -s $out/failures.txt ]] && echo "failed: $(grep -o '^==== [^:]*' "$out/failures.txt" |
    cut -c6- | sort -u | paste -sd, -)"
  echo "gpu check: $verdict; exit $status"
} | tee "$out/summary.txt"
exit "$status"
