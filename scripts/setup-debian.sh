#!/usr/bin/env bash
# Installs the Debian 12 packages Ferry needs to build and test every lane. Idempotent: packages
# already present are left alone, and apt is only called when something is missing.
set -euo pipefail

packages=(
  # build
  build-essential cmake ninja-build pkg-config git ca-certificates
  # core
  nlohmann-json3-dev libopenblas-dev
  # video: FFmpeg's libraries (images in, MP4 out) and its command-line tools (the tests decode
  # Ferry's MP4s back with ffprobe)
  libavformat-dev libavcodec-dev libswscale-dev libavutil-dev ffmpeg
  # the desktop app (Qt 6 Widgets; Qt Test runs on the offscreen platform; Qt Multimedia's
  # QAudioSink plays the soundtrack)
  qt6-base-dev qt6-qpa-plugins qt6-multimedia-dev
  # tests (the ASan lane uses GCC's sanitizers)
  libgtest-dev googletest
  # the fuzz lane (preset linux-fuzz): clang 19 and its libFuzzer runtime. Debian 12's clang 14
  # rejects the tree (structured bindings captured by lambdas), so the fuzz targets rotted there.
  clang-19 libclang-rt-19-dev
  # benchmarks
  libbenchmark-dev
  # the Windows lane: mingw-w64 cross compilers, Wine to run the tests, wixl/msitools for the MSI
  g++-mingw-w64-x86-64-posix gcc-mingw-w64-x86-64-posix mingw-w64 wine wine64 wixl msitools
)

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if ((${#missing[@]} == 0)); then
  echo "setup: all ${#packages[@]} packages present"
  exit 0
fi

sudo=""
if [[ $(id -u) -ne 0 ]]; then sudo="sudo"; fi
echo "setup: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
