#!/usr/bin/env bash
# The main job: set up (apt), build ferry-cli, and run `ferry-cli demo` — the whole generation
# path (umT5 text encoder, Wan 2.2 TI2V DiT streamed from disk, Wan 2.2 VAE, H.264 MP4) on a tiny
# built-in model with random weights. It prints the per-step memory table and the video's path.
# Extra arguments go to the demo (e.g. --prompt "..." --steps 12 --out clip.mp4).
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
bash scripts/setup-debian.sh
if [[ -x /usr/local/cuda/bin/nvcc ]]; then export PATH="/usr/local/cuda/bin:$PATH"; fi

cmake --preset linux-release >/dev/null
cmake --build --preset linux-release --target ferry-cli --parallel "$(nproc)"

# The demo model and the video go to the per-user data folder (~/.local/share/Ferry) unless
# FERRY_DATA_DIR says otherwise.
"$root/build/linux-release/cli/ferry-cli" demo "$@"
