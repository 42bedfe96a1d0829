#!/usr/bin/env bash
# Sets up a fresh Debian 12 machine (apt), builds every lane and runs every test:
#   linux-release (with the CUDA backend when the toolkit is present; its tests skip without a
#   GPU), linux-asan (AddressSanitizer + UndefinedBehaviorSanitizer), mingw-wine (the Windows
#   build, tests under Wine), then the fuzz lane (scripts/fuzz-smoke.sh: the libFuzzer targets
#   built alone with clang 19, each run FERRY_FUZZ_SECONDS, 30 by default, from its seeds,
#   FERRY_JOBS at once).
#   Exits non-zero if any lane fails.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
export FERRY_JOBS="${FERRY_JOBS:-$(nproc)}"
start=$SECONDS

bash scripts/setup-debian.sh
# The CUDA toolkit is not a Debian package: use it where this machine has one.
if [[ -x /usr/local/cuda/bin/nvcc ]]; then export PATH="/usr/local/cuda/bin:$PATH"; fi

declare -a summary
run_lane() {
  local lane=$1 t0=$SECONDS
  echo "=== $lane: configure, build, test"
  cmake --preset "$lane" >/dev/null
  cmake --build --preset "$lane" --parallel "$FERRY_JOBS"
  ctest --preset "$lane" --parallel "$FERRY_JOBS"
  summary+=("$lane: passed in $((SECONDS - t0)) s")
}

run_lane linux-release
run_lane linux-asan
t0=$SECONDS
echo "=== mingw-wine: configure, build, test under Wine"
bash scripts/test-mingw-wine.sh
summary+=("mingw-wine: passed in $((SECONDS - t0)) s")
t0=$SECONDS
echo "=== linux-fuzz: build the fuzz targets, a short run of each"
bash scripts/fuzz-smoke.sh
summary+=("linux-fuzz: passed in $((SECONDS - t0)) s")

printf '%s\n' "${summary[@]}" "all lanes passed in $((SECONDS - start)) s"
