#!/usr/bin/env bash
# Runs tests/gpu/run.sh here as it would run on the GPU machine's image: in a private mount
# namespace where the system's nlohmann-json, GoogleTest (sources, headers, CMake package),
# OpenBLAS and FFmpeg are hidden (empty folders mounted over them; nothing outside the namespace
# changes), so that the build must come from the carried .gpu-deps alone and the optional
# packages are absent. Needs root (or user namespaces) for unshare --mount.
#
# Usage: tests/gpu/simulate-image.sh [--fake-gpu DRIVER_VERSION] [run.sh's environment...]
#   --fake-gpu V  puts a fake nvidia-smi on the PATH that shows an NVIDIA H200 with driver V:
#                 run.sh then believes a GPU exists (every CUDA stage must fail, none skip),
#                 or, with V below 580, must stop at the pre-flight.
# Example: OUT=/tmp/sim STAGES=all tests/gpu/simulate-image.sh --fake-gpu 580.159.03
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
fake_driver=""
if [[ ${1:-} == --fake-gpu ]]; then
  fake_driver=$2
  shift 2
fi

hidden=(
  /usr/include/nlohmann /usr/share/cmake/nlohmann_json
  /usr/src/googletest /usr/include/gtest /usr/include/gmock /usr/lib/x86_64-linux-gnu/cmake/GTest
  /usr/lib/x86_64-linux-gnu/cmake/openblas /usr/include/x86_64-linux-gnu/openblas-pthread
  /usr/lib/x86_64-linux-gnu/openblas-pthread
  /usr/include/x86_64-linux-gnu/libavcodec /usr/include/x86_64-linux-gnu/libavformat
  /usr/include/x86_64-linux-gnu/libavutil /usr/include/x86_64-linux-gnu/libswscale
  /usr/include/x86_64-linux-gnu/libswresample
)

fake_bin=""
if [[ -n $fake_driver ]]; then
  fake_bin=$(mktemp -d)
  cat >"$fake_bin/nvidia-smi" <<EOF
#!/bin/sh
# A fake nvidia-smi (tests/gpu/simulate-image.sh): a GPU that is not there.
case "\$*" in
  *--query-gpu*) echo "NVIDIA H200, $fake_driver, 143771 MiB, 9.0" ;;
  *) echo "NVIDIA-SMI $fake_driver  Driver Version: $fake_driver  (fake, for the dry run)"
     echo "GPU 0: NVIDIA H200 143771MiB" ;;
esac
EOF
  chmod +x "$fake_bin/nvidia-smi"
fi

# Inside the namespace: an empty folder over each hidden one, then run.sh.
inner='
  set -e
  empty=$(mktemp -d)
  for p in "$@"; do [ -d "$p" ] && mount --bind "$empty" "$p"; done
  set +e
  [ -n "$FAKE_BIN" ] && export PATH="$FAKE_BIN:$PATH"
  # What a configure would find now (nothing, if the hiding works):
  ls /usr/include/nlohmann /usr/src/googletest 2>/dev/null | head -n 3
  PKG_CONFIG_LIBDIR=/nonexistent bash "$ROOT/tests/gpu/run.sh"
'
set +e
FAKE_BIN="$fake_bin" ROOT="$root" unshare --mount --propagation private \
  bash -c "$inner" inner "${hidden[@]}"
rc=$?
[[ -n $fake_bin ]] && rm -rf "$fake_bin"
exit $rc
