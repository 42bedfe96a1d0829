#!/usr/bin/env bash
# installer/qt_audio_runtime.cmake on made-up install trees: a tree with Qt6Multimedia.dll and
# Qt's Windows media plugin passes, and the FFmpeg media plugin windeployqt may add is removed
# (nothing else); a tree without the DLL or without the Windows plugin is refused, naming it.
#   qt_audio_runtime_check.sh CMAKE CHECK_SCRIPT WORK_DIR
set -euo pipefail
cmake=$1 check=$2 work=$3

fail() { echo "FAIL: $*" >&2; exit 1; }
rm -rf "$work" && mkdir -p "$work"

# tree NAME FILE... : a staged tree holding these (empty) files
tree() {
  local root="$work/$1"
  shift
  for f in "$@"; do mkdir -p "$root/$(dirname "$f")" && : >"$root/$f"; done
  echo "$root"
}
run() { "$cmake" -DFERRY_STAGE="$1" -P "$check" >"$work/out.txt" 2>&1; }

good=$(tree good bin/Ferry.exe bin/Qt6Multimedia.dll bin/avcodec-61.dll \
  plugins/multimedia/windowsmediaplugin.dll plugins/multimedia/ffmpegmediaplugin.dll)
run "$good" || fail "a complete tree was refused: $(cat "$work/out.txt")"
[[ ! -e "$good/plugins/multimedia/ffmpegmediaplugin.dll" ]] || fail "the FFmpeg media plugin was kept"
[[ -e "$good/plugins/multimedia/windowsmediaplugin.dll" ]] || fail "the Windows media plugin was removed"
[[ -e "$good/bin/avcodec-61.dll" ]] || fail "Ferry's own FFmpeg DLL was removed"
[[ -e "$good/bin/Qt6Multimedia.dll" ]] || fail "Qt6Multimedia.dll was removed"

# DLL names are case-insensitive on Windows.
upper=$(tree upper bin/QT6MULTIMEDIA.DLL plugins/multimedia/WindowsMediaPlugin.dll)
run "$upper" || fail "names in another case were refused: $(cat "$work/out.txt")"

no_dll=$(tree no_dll bin/Ferry.exe plugins/multimedia/windowsmediaplugin.dll)
! run "$no_dll" || fail "a tree without Qt6Multimedia.dll passed"
grep -q "Qt6Multimedia.dll" "$work/out.txt" || fail "the refusal does not name Qt6Multimedia.dll"

no_plugin=$(tree no_plugin bin/Ferry.exe bin/Qt6Multimedia.dll plugins/multimedia/ffmpegmediaplugin.dll)
! run "$no_plugin" || fail "a tree with only the FFmpeg media plugin passed"
grep -q "windowsmediaplugin" "$work/out.txt" || fail "the refusal does not name the Windows plugin"
echo "qt audio runtime check: ok"
