#!/bin/sh
# Screenshots of the real window during a real demo generation, as docs/screenshots keeps them:
# the window as a first start opens it on a screen of the given size (maximised), ready, mid-run
# (the stage bars, live charts, latent preview, "step k/N · s/step · ETA" for the whole job) and
# at the end (the player showing the decoded video, the history item, "Done in …"), then with
# three more seeds queued (the queue tab mid-way: done, running, pending) and the history as a
# gallery. Each size gets its own files, ferry-1-ready-WxH.png, ferry-2-running-WxH.png,
# ferry-3-done-WxH.png, ferry-4-queue-WxH.png and ferry-5-gallery-WxH.png, in OUT_DIR. Qt's offscreen platform with one screen of that size (a JSON file it reads): the same
# pixels on any machine, no window decorations, no display needed.
#
#   gui/screenshots.sh [BUILD_DIR] [OUT_DIR] [WIDTHxHEIGHT ...]
#   e.g. gui/screenshots.sh build/linux-release docs/screenshots 1280x720 1920x1080
# Default sizes: 1280x720 (a laptop) and 1920x1080.
set -eu
build=${1:-build/linux-release}
out=${2:-${TMPDIR:-/tmp}/ferry-screenshots}
[ $# -gt 2 ] && shift 2 || set -- 1280x720 1920x1080
app="$build/gui/Ferry"
[ -x "$app" ] || { echo "no $app: build the Ferry target first" >&2; exit 2; }
mkdir -p "$out"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
for size in "$@"; do
  case $size in
    *x*) w=${size%x*}; h=${size#*x} ;;
    *) echo "not a screen size: $size (WIDTHxHEIGHT, e.g. 1280x720)" >&2; exit 2 ;;
  esac
  case $w$h in *[!0-9]*|'') echo "not a screen size: $size" >&2; exit 2 ;; esac
  cat > "$work/screen.json" <<JSON
{"screens": [{"name": "screen", "x": 0, "y": 0, "width": $w, "height": $h,
  "logicalDpi": 96, "logicalBaseDpi": 96, "dpr": 1}]}
JSON
  # A fresh data folder per size: each run is a first start (no remembered geometry or history).
  rm -rf "$work/data" "$work/shots"
  mkdir -p "$work/data" "$work/shots"
  QT_QPA_PLATFORM="offscreen:configfile=$work/screen.json" \
    "$app" --data "$work/data" --demo-screenshots "$work/shots"
  for shot in "$work"/shots/ferry-*.png; do
    name=$(basename "$shot" .png)
    cp "$shot" "$out/$name-${w}x$h.png"
  done
done
ls -l "$out"/ferry-*.png
