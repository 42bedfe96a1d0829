#!/usr/bin/env bash
# The main job, as far as Ferry goes today: set up (apt), build ferry-cli, write a synthetic
# Wan 2.2 TI2V-5B checkpoint (2 of its 30 blocks, random bf16 weights, official key layout)
# and inspect it. `ferry-cli demo` (a generated video) replaces this once the pipeline exists.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
bash scripts/setup-debian.sh
if [[ -x /usr/local/cuda/bin/nvcc ]]; then export PATH="/usr/local/cuda/bin:$PATH"; fi

cmake --preset linux-release >/dev/null
cmake --build --preset linux-release --target ferry-cli --parallel "$(nproc)"

cli="$root/build/linux-release/cli/ferry-cli"
out="$root/build/demo/synthetic-ti2v-5b-2blocks.safetensors"
mkdir -p "$(dirname "$out")"
"$cli" synth --config ti2v-5b --blocks 2 --out "$out"
"$cli" inspect "$out"
