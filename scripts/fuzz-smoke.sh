#!/usr/bin/env bash
# The fuzz lane of CI: builds the libFuzzer targets only (preset linux-fuzz, target ferry_fuzzers,
# not the tree), then runs every target tests/fuzz/CMakeLists.txt registers with seeds for
# FERRY_FUZZ_SECONDS (default 20) each, from its committed seeds and dictionary, printing each
# target's final libFuzzer line (runs, coverage). A finding (crash, sanitizer report, timeout,
# out of memory) fails the lane; its input is left under build/fuzz-smoke/<target>/.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
seconds="${FERRY_FUZZ_SECONDS:-20}"
jobs="${FERRY_JOBS:-$(nproc)}"

cmake --preset linux-fuzz >/dev/null
cmake --build --preset linux-fuzz --parallel "$jobs" --target ferry_fuzzers

list=build/linux-fuzz/fuzzers.tsv
if [[ ! -s $list ]]; then
  echo "fuzz-smoke: no fuzz target registered with seeds in $list" >&2
  exit 1
fi
work=build/fuzz-smoke
rm -rf "$work"
failed=()
count=0
while IFS=$'\t' read -r name exe dict seeds; do
  [[ -n $name ]] || continue
  count=$((count + 1))
  mkdir -p "$work/$name/corpus"
  args=(-max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1
        -artifact_prefix="$work/$name/")
  if [[ $dict != "-" ]]; then args+=(-dict="$dict"); fi
  read -r -a seed_dirs <<<"$seeds"
  echo "=== fuzz $name: ${seconds} s from ${seeds}"
  if "$exe" "${args[@]}" "$work/$name/corpus" "${seed_dirs[@]}" >"$work/$name/log" 2>&1; then
    # libFuzzer's last status line ("#N DONE cov: C ft: F corp: ...": the coverage
    # reached) and its run count ("Done N runs in S second(s)").
    grep -E '^#[0-9]+[[:space:]].*cov: ' "$work/$name/log" | tail -1 || true
    grep -E '^Done [0-9]+ runs' "$work/$name/log" | tail -1 || true
  else
    echo "fuzz $name: FINDING (input under $work/$name/); the end of its log:" >&2
    tail -40 "$work/$name/log" >&2
    failed+=("$name")
  fi
done <"$list"

if ((${#failed[@]} > 0)); then
  echo "fuzz-smoke: ${#failed[@]} of $count targets found a problem: ${failed[*]}" >&2
  exit 1
fi
echo "fuzz-smoke: $count targets ran ${seconds} s each without a finding"
