#!/usr/bin/env bash
# The mingw lane's CMAKE_CROSSCOMPILING_EMULATOR: runs a Windows executable under Wine, as
# `wine PROGRAM ARGS...` would, with one difference. In one CI run out of many, a test failed in
# 0.00 s having printed nothing at all: Wine gave up before the program started (no executable
# Ferry builds exits non-zero without saying why). Such a launch, and only such a launch, is
# retried once, with a line on stderr saying so. Everything else passes through unchanged: the
# program's exit code, its stdout and its stderr (each kept apart, replayed after it exits).
set -u
wine_bin="${FERRY_WINE:-$(command -v wine || command -v wine64 || echo /usr/lib/wine/wine64)}"
tmp="$(mktemp -d "${TMPDIR:-/tmp}/ferry-wine-run.XXXXXX")" || exec "$wine_bin" "$@"
trap 'rm -rf "$tmp"' EXIT

run() { "$wine_bin" "$@" >"$tmp/out" 2>"$tmp/err"; }

run "$@"
code=$?
if [[ $code -ne 0 && ! -s "$tmp/out" && ! -s "$tmp/err" ]]; then
  echo "wine-run: Wine exited $code before the program printed anything; retrying once" >&2
  sleep 1
  run "$@"
  code=$?
fi
cat "$tmp/out"
cat "$tmp/err" >&2
exit "$code"
