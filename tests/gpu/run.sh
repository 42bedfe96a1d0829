#!/usr/bin/env bash
# The GPU check, in one call on the device machine (one NVIDIA GPU, no network): builds for
# sm_90, runs the CUDA tests (the model tests on the CUDA backend among them), the backend parity
# suite and the GPU benchmarks, and leaves their output under $OUT (or build/gpu-out), ending
# with a summary table (each stage ok / failed / timed out / skipped, and its key figures; also
# in $OUT/summary.txt). Keep it under 8 minutes: the stages share a 470 s budget, each with its
# own cap, and one that fails or runs out of time never stops the next.
#
# Expected seconds on the H200 (16 cores), estimates until a run measures them: build 60 (the
# targets below only, 122 steps; 173 s from scratch on 2 cores) | model-tests 30 | cuda-tests 10
# | parity 45 | gpu_ops 60 | dit_step 100 | vae_decode 130 | demo 15 | stream_read 15 |
# overlap 25 — about 490 s. The stages run in this order, so what does not fit is the last ones,
# cut short or reported as skipped. A second call on the still-warm machine finds the build done
# (seconds) and runs only what is asked, e.g. STAGES=build,vae_decode,demo,stream_read,overlap.
#
# Environment: OUT (where the output goes), STAGES (comma-separated stage names, default all:
# build, model-tests, cuda-tests, parity, gpu_ops, dit_step, vae_decode, demo, stream_read,
# overlap), BUILD_DIR (default build/gpu-sm90; a dry run without a GPU can point it at a build
# configured with CUDA, where every CUDA binary then skips).
set -uo pipefail

# Helpers the stages run through `timeout` (which runs programs, not shell functions).
case "${1:-}" in
  --build)  # --build DIR GENERATOR TARGET...: configure for sm_90, build the targets
    dir=$2 gen=$3
    shift 3
    gen_args=() keep_going=(-k)
    [[ $gen == Ninja ]] && gen_args=(-G Ninja) keep_going=(-k 0)
    cmake -S . -B "$dir" "${gen_args[@]}" -DCMAKE_BUILD_TYPE=Release -DFERRY_CUDA=ON \
      -DCMAKE_CUDA_ARCHITECTURES=90 -DFERRY_GUI=OFF -DFERRY_BUILD_TESTS=ON \
      -DFERRY_BUILD_BENCH=ON -DFERRY_WERROR=ON || exit 1
    # Every target that compiles is built even when one does not (-k): its stage alone fails.
    cmake --build "$dir" --parallel "$(nproc)" --target "$@" -- "${keep_going[@]}"
    exit $?
    ;;
  --cuda-tests)  # --cuda-tests CUDA_TESTS HOST_TESTS: both, the parity suite left out
    "$2" --gtest_filter='-BackendParity.*'
    a=$?
    "$3"
    b=$?
    ((a == 0 && b == 0))
    exit $?
    ;;
  --in-dir)  # --in-dir DIR COMMAND...
    cd "$2" || exit 1
    shift 2
    exec "$@"
    ;;
esac

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
self="$root/tests/gpu/run.sh"
cd "$root" || exit 1
out="${OUT:-$root/build/gpu-out}"
mkdir -p "$out"
build="${BUILD_DIR:-$root/build/gpu-sm90}"
[[ $build == /* ]] || build="$root/$build"
export PATH="/usr/local/cuda/bin:$PATH"
stages="${STAGES:-all}"
start=$SECONDS
rm -f "$out/summary.txt"

{
  echo "== machine"
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader || true
  nvcc --version | tail -n 2 || true
  echo "cores: $(nproc); disk free: $(df -h "$root" | awk 'NR == 2 {print $4}')"
  for tool in cmake ninja g++; do command -v "$tool" >/dev/null || echo "missing: $tool"; done
} 2>&1 | tee "$out/machine.txt"

# ---- the summary: one row per stage ----
rows=()
status=0
row() {  # row NAME STATUS SECONDS FIGURES
  rows+=("$(printf '%-12s %-22s %5s s  %s' "$1" "$2" "$3" "$4")")
  [[ $2 == ok || $2 == skipped* ]] || status=1
}
wanted() { [[ $stages == all || ",$stages," == *",$1,"* ]]; }

# The whole script must end within 8 minutes (480 s): every stage gets at most what is left of a
# 470 s budget, and is skipped when under 20 s remain.
budget() {
  local left=$((470 - (SECONDS - start)))
  ((left > $1)) && left=$1
  echo "$left"
}

# run_stage NAME MAX_SECONDS LOG COMMAND...: runs COMMAND (stdout line-buffered, so that a stage
# cut short keeps what it printed) into LOG under the stage's time budget. Sets stage_rc (the
# exit status; 124 after a timeout, -1 when not run), stage_secs and stage_status (ok, failed,
# timed out, skipped ...); the caller adds the row with its figures.
stage_rc=0
stage_secs=0
stage_status=""
run_stage() {
  local name=$1 max=$2 log=$3
  shift 3
  stage_rc=-1
  stage_secs=0
  if ! wanted "$name"; then
    stage_status="skipped (STAGES)"
    echo "$name: skipped, not in STAGES=$stages" >"$log"
    return 0
  fi
  local t
  t=$(budget "$max")
  if ((t < 20)); then
    stage_status="skipped (time spent)"
    echo "$name: skipped, the 8-minute budget is spent" >"$log"
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
    *) stage_status="failed (exit $stage_rc)" ;;
  esac
  echo "   $stage_status, $stage_secs s"
}

# A stage whose binary is missing: reported, not fatal to the others.
missing() {  # missing NAME LOG
  if ! wanted "$1"; then
    row "$1" "skipped (STAGES)" 0 ""
    return 0
  fi
  echo "$1 was not built" | tee "$2"
  row "$1" "failed (not built)" 0 ""
}

# GoogleTest counts: "12 passed, 0 failed, 3 skipped"; all skipped reads "skipped (no GPU)".
gtest_counts() {  # gtest_counts LOG
  local p f k
  p=$(grep -c '^\[       OK \]' "$1")
  f=$(grep -c '^\[  FAILED  \] [A-Za-z_0-9]*\.[A-Za-z_0-9]* (' "$1")
  k=$(grep -c '^\[  SKIPPED \] [A-Za-z_0-9]*\.[A-Za-z_0-9]* (' "$1")
  echo "$p passed, $f failed, $k skipped"
}
test_row() {  # test_row NAME LOG EXTRA: the row of a test stage, all-skipped read as no GPU
  local name=$1 log=$2 extra=${3:-} st=$stage_status counts
  counts=$(gtest_counts "$log")
  if [[ $st == ok && $counts == "0 passed, 0 failed, "* && $counts != *", 0 skipped" ]]; then
    st="skipped (no GPU)"
  fi
  row "$name" "$st" "$stage_secs" "$counts${extra:+; $extra}"
}

# ---- build: only what the stages run ----
targets=(ferry_cuda_tests ferry_cuda_host_tests ferry_cuda_model_tests gpu_ops dit_step vae_decode
  ferry-cli stream_read overlap)
generator=Make
command -v ninja >/dev/null && generator=Ninja
run_stage build 300 "$out/build-full.txt" "$self" --build "$build" "$generator" "${targets[@]}"
if [[ -f $out/build-full.txt ]]; then
  grep -E 'error:|FAILED:|CMake Error|Error [0-9]' "$out/build-full.txt" | head -n 40 |
    tee "$out/build.txt"
  tail -n 3 "$out/build-full.txt" | tee -a "$out/build.txt"
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
row build "$stage_status" "$stage_secs" "$built of ${#targets[@]} targets built"

# ---- the model tests on the CUDA backend (tests/models/ built with FERRY_MODEL_TESTS_ON_CUDA):
# their measured errors against the reference ("max error" lines), the same bounds as on the CPU.
models=$(bin ferry_cuda_model_tests)
if [[ -n $models ]]; then
  run_stage model-tests 90 "$out/model-tests-full.txt" "$models"
  grep -E '^\[ *(FAILED|SKIPPED) *\]|Failure|max error|tiled (de|en)code|fp8\]' \
    "$out/model-tests-full.txt" >"$out/model-tests.txt"
  test_row model-tests "$out/model-tests-full.txt"
else
  missing model-tests "$out/model-tests.txt"
fi

# ---- the CUDA runtime tests and the backend's host-side tests (the parity suite runs below).
cuda_tests=$(bin ferry_cuda_tests)
host_tests=$(bin ferry_cuda_host_tests)
if [[ -n $cuda_tests && -n $host_tests ]]; then
  run_stage cuda-tests 60 "$out/cuda-tests.txt" "$self" --cuda-tests "$cuda_tests" "$host_tests"
  test_row cuda-tests "$out/cuda-tests.txt"
else
  missing cuda-tests "$out/cuda-tests.txt"
fi

# ---- backend parity: every op of the CUDA backend against the CPU backend (tests/backend/),
# one process, so that its summary (one line per comparison: error against threshold) is whole.
if [[ -n $cuda_tests ]]; then
  run_stage parity 120 "$out/parity-full.txt" "$cuda_tests" --gtest_filter='BackendParity.*'
  sed -n '/^== backend parity summary/,$p' "$out/parity-full.txt" >"$out/parity-summary.txt"
  test_row parity "$out/parity-full.txt" \
    "$(grep -m1 -o '[0-9]* comparisons, [0-9]* failed' "$out/parity-full.txt")"
else
  missing parity "$out/parity-summary.txt"
fi

# ---- gpu_ops: CudaBackend::linear (bf16, fp8 weights) against a plain cuBLASLt call, and
# attention at L = 8k, 27k, 75k against the best bf16 GEMM rate (about a minute).
gpu_ops=$(bin gpu_ops)
if [[ -n $gpu_ops ]]; then
  run_stage gpu_ops 120 "$out/bench-gpu_ops.txt" "$gpu_ops"
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
    END {
      if (n) printf "linear/cuBLAS %.2f-%.2f, fp8/bf16 %.2f-%.2f;", lo, hi, flo, fhi
      if (s != "") printf " attention (L, rate, vs GEMM):%s", s
    }' "$out/bench-gpu_ops.txt")
  grep -q 'no CUDA device' "$out/bench-gpu_ops.txt" && stage_status="skipped (no GPU)"
  grep -q MISMATCH "$out/bench-gpu_ops.txt" && figures="MISMATCH; $figures"
  row gpu_ops "$stage_status" "$stage_secs" "$figures"
else
  missing gpu_ops "$out/bench-gpu_ops.txt"
fi

# ---- dit_step: one TI2V-5B denoising step (CFG pair + UniPC, all 30 blocks, synthetic bf16
# checkpoint of 10 GB on this disk) resident, streamed from pinned RAM and from disk, at
# 832x480x81 (8190 tokens) and 1280x704x121 (27280 tokens); target streamed <= 1.05 x resident at
# 720p. One round of 2 measured steps after a warm-up per way: about 100 s with the checkpoint.
dit_step=$(bin dit_step)
if [[ -n $dit_step ]]; then
  run_stage dit_step 150 "$out/bench-dit_step.txt" "$dit_step" --backend cuda --steps 2 \
    --rounds 1 --file "$build/bench-data/dit_step.safetensors"
  figures=$(awk '
    /^[0-9]+x[0-9]+, [0-9]+ frames:/ { split($1, wh, ","); size = wh[1] "x" $2 }
    /^  (resident|pinned|disk) / {
      for (i = 1; i <= NF; ++i) if ($i == "ratio") r = $(i + 1)
      if ($1 == "resident") s = s sprintf("%s%s: %.2f s", s == "" ? "" : "; ", size, $2)
      else s = s sprintf(", %s %s", $1, r)
    }
    /720p target/ { s = s ", 720p target " ($NF == "met" ? "met" : "MISSED") }
    END { print s }' "$out/bench-dit_step.txt")
  grep -q 'no CUDA device' "$out/bench-dit_step.txt" && stage_status="skipped (no GPU)"
  rm -f "$build/bench-data/dit_step.safetensors"  # 10 GB, left by a run cut short
  row dit_step "$stage_status" "$stage_secs" "$figures"
else
  missing dit_step "$out/bench-dit_step.txt"
fi

# ---- vae_decode: the Wan 2.2 decode (real widths, random weights) on the GPU at 480x832x81 and
# 704x1280x121 as the laptop-8gb plan runs it (its tile): measured arena peak and driver-reported
# VRAM against the plan's predictions. About 30 s and 90 s of f32 decoding, 10 s of weights.
vae_decode=$(bin vae_decode)
if [[ -n $vae_decode ]]; then
  run_stage vae_decode 150 "$out/bench-vae_decode.txt" "$vae_decode" --backend cuda \
    --dir "$build/bench-data"
  figures=$(awk '/^result / { sub(/^result /, ""); printf "%s%s", n++ ? "; " : "", $0 }' \
    "$out/bench-vae_decode.txt")
  grep -q 'no CUDA device' "$out/bench-vae_decode.txt" && stage_status="skipped (no GPU)"
  rm -f "$build/bench-data/vae22_random_decoder.safetensors"  # left by a run cut short
  row vae_decode "$stage_status" "$stage_secs" "$figures"
else
  missing vae_decode "$out/bench-vae_decode.txt"
fi

# ---- ferry-cli demo on the CUDA backend: the whole path (umT5, the DiT streamed from disk, the
# VAE, MP4) on the tiny built-in model, 256x256x17, 8 steps; the per-step stats as JSONL, the
# video under $OUT/ferry-data/videos.
cli=$(bin ferry-cli)
if [[ -n $cli ]]; then
  export FERRY_DATA_DIR="$out/ferry-data"
  run_stage demo 60 "$out/demo.txt" "$cli" demo --stats "$out/demo-stats.jsonl"
  unset FERRY_DATA_DIR
  figures=$(awk '
    /^ +step +seconds/ { device = $5 == "VRAM" ? "CUDA" : "the CPU (no GPU)" }
    /^ +[0-9]+ +[0-9.]+ / { n++; t += $2 }
    END { if (n) printf "on %s: %d steps, %.2f s/step", device, n, t / n }' "$out/demo.txt")
  vram=$(grep -o '"vram_peak_in_[a-z]*":[0-9]*' "$out/demo-stats.jsonl" 2>/dev/null |
    awk -F: '$2 > m { m = $2 } END { if (m) printf "VRAM peak %.0f MiB", m / 1048576 }')
  [[ -n $vram ]] && figures="$figures, $vram"
  rm -rf "$out/ferry-data/demo-model"  # 7 MB of random weights: the video and its JSON stay
  row demo "$stage_status" "$stage_secs" "$figures"
else
  missing demo "$out/demo.txt"
fi

# ---- the weight store and the streamer on this machine's disk (CPU side; the same tables as on
# the CPU machines, with a faster disk).
for bench in stream_read overlap; do
  exe=$(bin "$bench")
  if [[ -z $exe ]]; then
    missing "$bench" "$out/bench-$bench.txt"
    continue
  fi
  args=()
  [[ $bench == stream_read ]] && args=(--size-gib 2 --passes 1)
  run_stage "$bench" 60 "$out/bench-$bench.txt" "$self" --in-dir "$build" "$exe" "${args[@]}"
  if [[ $bench == stream_read ]]; then
    figures=$(awk '
      /^summary:/ { summary = 1 }
      summary && /raw pread \(floor\)/ { raw = $4 }
      summary && /^ +\((a|b)\) / { s = s sprintf(", %s %s", $1, $4) }
      END { if (raw != "") printf "raw %s GB/s%s of raw", raw, s }' "$out/bench-$bench.txt")
  else
    figures=$(awk '
      /^(compute|I\/O)-bound/ { kind = $1 }
      /-> ratio/ { for (i = 1; i <= NF; ++i) if ($i == "ratio") r = $(i + 1)
                   s = s sprintf("%s%s %s", s == "" ? "" : ", ", kind, r) }
      END { print s }' "$out/bench-$bench.txt")
  fi
  missed=$(grep -c 'TARGET MISSED' "$out/bench-$bench.txt")
  ((missed > 0)) && figures="$figures; TARGET MISSED x $missed"
  row "$bench" "$stage_status" "$stage_secs" "$figures"
done

{
  echo
  echo "== summary ($((SECONDS - start)) s; the output of each stage is in $out)"
  printf '%s\n' "${rows[@]}"
  echo "gpu check: exit $status"
} | tee "$out/summary.txt"
exit "$status"
