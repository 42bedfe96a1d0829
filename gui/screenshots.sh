#!/bin/sh
# Screenshots of the real window during a real demo generation (issue 9): the window ready, mid-run
# (live charts, latent preview, "step k/N · s/step · ETA" in the status bar) and at the end (the
# player showing the decoded video, the history item). Nothing here is committed; the PNGs go to
# OUT_DIR. Uses Xvfb when it is installed, else Qt's offscreen platform (same pixels, no window
# decorations).
#
#   gui/screenshots.sh [BUILD_DIR] [OUT_DIR]      e.g. gui/screenshots.sh build/linux-release /tmp/shots
set -eu
build=${1:-build/linux-release}
out=${2:-${TMPDIR:-/tmp}/ferry-screenshots}
app="$build/gui/Ferry"
[ -x "$app" ] || { echo "no $app: build the Ferry target first" >&2; exit 2; }
mkdir -p "$out"
data=$(mktemp -d)
trap 'rm -rf "$data"' EXIT
if command -v xvfb-run >/dev/null 2>&1; then
  xvfb-run -a -s "-screen 0 1600x1000x24" "$app" --data "$data" --demo-screenshots "$out"
else
  QT_QPA_PLATFORM=offscreen "$app" --data "$data" --demo-screenshots "$out"
fi
ls -l "$out"/ferry-*.png
