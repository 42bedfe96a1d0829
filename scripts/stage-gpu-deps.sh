#!/usr/bin/env bash
# Stages into .gpu-deps/ (git-ignored) what the GPU machine's image lacks and the GPU build needs:
# nlohmann-json's headers with their CMake package files, and GoogleTest's sources, both from this
# machine's Debian packages (nlohmann-json3-dev, googletest). The image has CUDA 13 (nvcc,
# cuBLASLt), CMake, ninja and a host compiler, no package registry and no network
# (/work/.library/device/KINDS.md). tests/gpu/run.sh uses the folder when the system has no copy;
# the device call carries it: run(command="bash tests/gpu/run.sh", carry=[".gpu-deps"], ...).
#
# Usage: scripts/stage-gpu-deps.sh [DIR]   (default: .gpu-deps in the repository root)
# Idempotent: the folder is rebuilt from scratch. Prints what it staged and the folder's size.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
dest="${1:-$root/.gpu-deps}"

json_headers=/usr/include/nlohmann
json_cmake=/usr/share/cmake/nlohmann_json
gtest_src=/usr/src/googletest
for need in "$json_headers/json.hpp" "$json_cmake/nlohmann_jsonConfig.cmake" \
  "$gtest_src/CMakeLists.txt"; do
  if [[ ! -e $need ]]; then
    echo "stage-gpu-deps: $need is missing: install nlohmann-json3-dev and googletest" \
      "(scripts/setup-debian.sh)" >&2
    exit 1
  fi
done

rm -rf "$dest"
mkdir -p "$dest/include" "$dest/share/cmake"
# A prefix as find_package(nlohmann_json CONFIG) expects it: its targets file locates the headers
# three folders above itself (share/cmake/nlohmann_json -> the prefix), so the copy is relocatable.
cp -a "$json_headers" "$dest/include/"
cp -a "$json_cmake" "$dest/share/cmake/"
# GoogleTest and GoogleMock sources, built by the project itself (add_subdirectory), as the CI
# lanes build Debian's copy.
cp -a "$gtest_src" "$dest/googletest"

json_version=$(dpkg-query -W -f='${Version}' nlohmann-json3-dev 2>/dev/null || echo unknown)
gtest_version=$(dpkg-query -W -f='${Version}' googletest 2>/dev/null || echo unknown)
cat >"$dest/MANIFEST.txt" <<EOF
Staged by scripts/stage-gpu-deps.sh on $(date -u +%Y-%m-%dT%H:%MZ) from Debian packages:
  nlohmann-json3-dev $json_version: include/nlohmann, share/cmake/nlohmann_json
  googletest $gtest_version: googletest (GoogleTest and GoogleMock sources)
EOF
cat "$dest/MANIFEST.txt"
echo "size: $(du -sh "$dest" | cut -f1) in $(find "$dest" -type f | wc -l) files ($dest)"
