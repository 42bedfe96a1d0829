#!/usr/bin/env bash
# The Windows lane on Linux: cross-compiles the core and its tests with mingw-w64 (warnings as
# errors) and runs them under Wine. Usage: scripts/test-mingw-wine.sh [extra ctest arguments]
# FERRY_JOBS sets build and test parallelism (default 2).
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
jobs="${FERRY_JOBS:-2}"
start=$SECONDS

if [[ -f CMakePresets.json ]] && cmake --list-presets 2>/dev/null | grep -q '"mingw-wine"'; then
  configure_log="$(mktemp)"
  cmake --preset mingw-wine --no-warn-unused-cli 2>&1 | tee "$configure_log"
  # The preset names the build folder; cmake says where it wrote it.
  build="$(sed -n 's/^-- Build files have been written to: //p' "$configure_log" | tail -n1)"
  rm -f "$configure_log"
  [[ -n "$build" ]] || build="$root/build/mingw-wine"
else
  build="$root/build/mingw-wine"
  cmake -S . -B "$build" -G Ninja \
    -DCMAKE_TOOLCHAIN_FILE=cmake/mingw-w64-x86_64.cmake \
    -DCMAKE_BUILD_TYPE=Release \
    -DFERRY_CUDA=OFF -DFERRY_BUILD_BENCH=OFF -DFERRY_WERROR=ON
fi
cmake --build "$build" --parallel "$jobs"

# Whatever happens from here on, the wineserver (and the services it keeps) must not outlive us.
export WINEPREFIX="$build/wineprefix"
trap 'wineserver -k >/dev/null 2>&1 || true' EXIT
trap 'exit 130' INT TERM HUP
# shellcheck source=scripts/wine-env.sh
source "$root/scripts/wine-env.sh" "$build"

status=0
ctest --test-dir "$build" --output-on-failure --timeout 120 --parallel "$jobs" "$@" || status=$?
echo "test-mingw-wine: ctest exit $status, $((SECONDS - start)) s in all"
exit "$status"
