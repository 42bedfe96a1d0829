#!/usr/bin/env bash
# The mingw lane's CMAKE_CROSSCOMPILING_EMULATOR: runs a Windows executable under Wine, as
# `wine PROGRAM ARGS...` would, with one difference. Wine sometimes never starts the program: in
# one CI run out of many a test failed in 0.00 s having printed nothing at all, and on a loaded
# machine a launch hung for the test's whole 300 s with no output (a GoogleTest binary prints its
# first line at once; no executable Ferry builds exits non-zero without saying why). Such a
# launch — one that exits non-zero, or is still silent after FERRY_WINE_START_S seconds (90) — and
# only such a launch, is retried once, with a line on stderr saying so. Everything else passes
# through unchanged: the program's exit code, its stdout and its stderr (each kept apart, replayed
# after it exits).
set -u
wine_bin="${FERRY_WINE:-$(command -v wine || command -v wine64 || echo /usr/lib/wine/wine64)}"
tmp="$(mktemp -d "${TMPDIR:-/tmp}/ferry-wine-run.XXXXXX")" || exec "$wine_bin" "$@"
trap 'rm -rf "$tmp"' EXIT

start_limit="${FERRY_WINE_START_S:-90}"

silent() { [[ ! -s "$tmp/out" && ! -s "$tmp/err" ]]; }

# Runs the program; a launch still silent after start_limit seconds is killed (status 125).
run() {
  "$wine_bin" "$@" >"$tmp/out" 2>"$tmp/err" &
  local pid=$! started=$SECONDS
  while kill -0 "$pid" 2>/dev/null; do
    if silent && ((SECONDS - started >= start_limit)); then
      kill "$pid" 2>/dev/null
      wait "$pid" 2>/dev/null
      return 125
    fi
    silent && sleep 0.1 || break
  done
  wait "$pid"
}

run "$@"
code=$?
if [[ $code -ne 0 ]] && silent; then
  echo "wine-run: Wine exited $code (125: started nothing in ${start_limit} s) before the" \
    "program printed anything; retrying once" >&2
  sleep 1
  run "$@"
  code=$?
fi
cat "$tmp/out"
cat "$tmp/err" >&2
exit "$code"
