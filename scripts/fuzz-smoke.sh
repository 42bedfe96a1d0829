#!/usr/bin/env bash
# The fuzz lane of CI: builds the libFuzzer targets only (preset linux-fuzz, target ferry_fuzzers,
# not the tree), then runs every target tests/fuzz/CMakeLists.txt registers with seeds for
# FERRY_FUZZ_SECONDS (default 30) each, from its committed seeds and dictionary, printing each
# target's final libFuzzer line (runs, coverage). FERRY_JOBS targets run at once (each fuzzes on
# one core), so the lane takes seconds × targets / jobs. A finding (crash, sanitizer report,
# timeout, out of memory) fails the lane; its input is left under build/fuzz-smoke/<target>/.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
seconds="${FERRY_FUZZ_SECONDS:-30}"
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

# One target's smoke run; its exit status is the verdict, its log stays in $work/<name>/log.
fuzz_one() {
  local name=$1 exe=$2 dict=$3 seeds=$4
  mkdir -p "$work/$name/corpus"
  local args=(-max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1
              -artifact_prefix="$work/$name/")
  if [[ $dict != "-" ]]; then args+=(-dict="$dict"); fi
  local seed_dirs
  read -r -a seed_dirs <<<"$seeds"
  "$exe" "${args[@]}" "$work/$name/corpus" "${seed_dirs[@]}" >"$work/$name/log" 2>&1
}

names=()
declare -A pid_of
while IFS=$'\t' read -r name exe dict seeds; do
  [[ -n $name ]] || continue
  # At most $jobs at once: wait for any one to end before starting the next.
  while (($(jobs -rp | wc -l) >= jobs)); do wait -n || true; done
  echo "=== fuzz $name: ${seconds} s from ${seeds}"
  fuzz_one "$name" "$exe" "$dict" "$seeds" &
  pid_of[$name]=$!
  names+=("$name")
done <"$list"

failed=()
for name in "${names[@]}"; do
  if wait "${pid_of[$name]}"; then
    # libFuzzer's last status line ("#N DONE cov: C ft: F corp: ...": the coverage
    # reached) and its run count ("Done N runs in S second(s)").
    echo "--- $name"
    grep -E '^#[0-9]+[[:space:]].*cov: ' "$work/$name/log" | tail -1 || true
    grep -E '^Done [0-9]+ runs' "$work/$name/log" | tail -1 || true
  else
    echo "fuzz $name: FINDING (input under $work/$name/); the end of its log:" >&2
    tail -40 "$work/$name/log" >&2
    failed+=("$name")
  fi
done
count=${#names[@]}

if ((${#failed[@]} > 0)); then
  echo "fuzz-smoke: ${#failed[@]} of $count targets found a problem: ${failed[*]}" >&2
  exit 1
fi
echo "fuzz-smoke: $count targets ran ${seconds} s each, $jobs at once, without a finding"
