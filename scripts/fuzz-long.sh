#!/usr/bin/env bash
# A long libFuzzer run of one target, outside CI, at the lowest priority (the machine is shared):
#   scripts/fuzz-long.sh TARGET [SECONDS]     (default 600; the targets: build/linux-fuzz/fuzzers.tsv)
# Builds the fuzz targets (preset linux-fuzz) when needed. The corpus it grows is kept under
# build/fuzz-long/TARGET/corpus (out of git) and reused by the next run; a finding is written
# there too. The last lines printed are libFuzzer's final stats (runs, coverage).
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
target="${1:?usage: scripts/fuzz-long.sh TARGET [SECONDS]}"
seconds="${2:-600}"

if [[ ! -f build/linux-fuzz/fuzzers.tsv ]]; then cmake --preset linux-fuzz >/dev/null; fi
cmake --build --preset linux-fuzz --parallel "${FERRY_JOBS:-2}" --target "$target"
line="$(awk -F'\t' -v t="$target" '$1 == t' build/linux-fuzz/fuzzers.tsv)"
if [[ -z $line ]]; then
  echo "fuzz-long: $target is not a fuzz target with seeds (see build/linux-fuzz/fuzzers.tsv)" >&2
  exit 1
fi
IFS=$'\t' read -r _ exe dict seeds <<<"$line"
work="build/fuzz-long/$target"
mkdir -p "$work/corpus"
args=(-max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1
      -artifact_prefix="$work/")
if [[ $dict != "-" ]]; then args+=(-dict="$dict"); fi
read -r -a seed_dirs <<<"$seeds"
nice -n 19 "$exe" "${args[@]}" "$work/corpus" "${seed_dirs[@]}" 2>&1 | tee "$work/log" |
  grep -E '^#[0-9]+[[:space:]]+(DONE|pulse)|^Done|^stat::|ERROR|SUMMARY' || true
exit "${PIPESTATUS[0]}"
