#!/usr/bin/env bash
# The MSI's life under Wine: tables as intended, silent install, the installed ferry-cli runs
# (inspect, and the demo through the whole generation path), a newer MSI upgrades in place (one
# uninstall entry), an older one is refused, uninstall leaves nothing behind. Run by ctest in the
# mingw-wine lane (the Wine prefix is already booted).
#   msi_lifecycle.sh WIXL WXS STAGE_DIR WORK_DIR VERSION
set -euo pipefail
wixl=$1 wxs=$2 stage=$3 work=$4 version=$5

fail() { echo "FAIL: $*" >&2; exit 1; }
rm -rf "$work" && mkdir -p "$work"
IFS=. read -r major minor patch <<<"$version"
newer="$major.$minor.$((patch + 1))"
older="$major.$minor.$((patch > 0 ? patch - 1 : 0))"
[[ "$older" != "$version" ]] || older="$major.$((minor > 0 ? minor - 1 : 0)).9"

# wixl takes Source paths relative to where it runs only.
build() {
  (cd "$(dirname "$stage")" &&
    "$wixl" --arch x64 -D "Version=$1" -D "StageDir=$(basename "$stage")/" -o "$work/Ferry-$1.msi" "$wxs")
}
build "$version"
build "$newer"
build "$older"

# --- tables ---
dump="$work/tables"
mkdir -p "$dump"
msidump -d "$dump" -t "$work/Ferry-$version.msi" >/dev/null
grep -q 'ferry-cli.exe' "$dump/File.idt" || fail "File table lacks ferry-cli.exe"
grep -q 'LICENSE.txt' "$dump/File.idt" || fail "File table lacks LICENSE.txt"
grep -q '0E364CCC-0BB5-4D89-97F1-2157C335E0E1' "$dump/Upgrade.idt" ||
  fail "Upgrade table lacks Ferry's UpgradeCode"
grep -qi 'ALLUSERS.*1' "$dump/Property.idt" || fail "not a per-machine package (ALLUSERS)"
grep -q "ProductVersion.$version" "$dump/Property.idt" || fail "ProductVersion is not $version"
grep -q 'ProgramFiles64Folder' "$dump/Directory.idt" || fail "not installed under Program Files (x64)"
echo "tables: ok"

installed="$WINEPREFIX/drive_c/Program Files/Ferry"
uninstall_entries() {
  wine reg query 'HKLM\Software\Microsoft\Windows\CurrentVersion\Uninstall' /s 2>/dev/null |
    tr -d '\r' | grep -c 'DisplayName.*REG_SZ.*Ferry$' || true
}
cleanup() { wine msiexec /x "$work/Ferry-$newer.msi" /qn >/dev/null 2>&1 || true
            wine msiexec /x "$work/Ferry-$version.msi" /qn >/dev/null 2>&1 || true; }
trap cleanup EXIT
cleanup

# --- install ---
wine msiexec /i "$work/Ferry-$version.msi" /qn || fail "install of $version failed"
[[ -f "$installed/bin/ferry-cli.exe" ]] || fail "ferry-cli.exe not installed"
[[ -f "$installed/LICENSE.txt" ]] || fail "LICENSE.txt not installed"
[[ "$(uninstall_entries)" == 1 ]] || fail "expected one uninstall entry after install"
out=$(wine "$installed/bin/ferry-cli.exe" version | tr -d '\r')
[[ "$out" == "ferry-cli "* ]] || fail "installed ferry-cli does not run: $out"
wine "$installed/bin/ferry-cli.exe" synth --config t2v-1.3b --blocks 0 --out 'C:\synth.safetensors' >/dev/null ||
  fail "installed ferry-cli synth failed"
wine "$installed/bin/ferry-cli.exe" inspect 'C:\synth.safetensors' | tr -d '\r' | grep -q '^total: 1 file' ||
  fail "installed ferry-cli inspect failed"
rm -f "$WINEPREFIX/drive_c/synth.safetensors"
# The installed program runs the whole generation path (the demo model is built into it; this
# lane writes uncompressed AVI).
FERRY_DATA_DIR='C:\ferry-data' wine "$installed/bin/ferry-cli.exe" demo --width 64 --height 64 \
  --frames 5 --steps 2 --out 'C:\demo.avi' | tr -d '\r' | grep -q '^wrote C:.demo.avi' ||
  fail "installed ferry-cli demo failed"
[[ -s "$WINEPREFIX/drive_c/demo.avi" && -s "$WINEPREFIX/drive_c/demo.json" ]] ||
  fail "installed ferry-cli demo wrote no video"
rm -rf "$WINEPREFIX/drive_c/ferry-data" "$WINEPREFIX/drive_c/demo.avi" "$WINEPREFIX/drive_c/demo.json"
echo "install: ok"

# --- major upgrade in place ---
wine msiexec /i "$work/Ferry-$newer.msi" /qn || fail "upgrade to $newer failed"
[[ "$(uninstall_entries)" == 1 ]] || fail "expected one uninstall entry after the upgrade"
wine reg query 'HKLM\Software\Microsoft\Windows\CurrentVersion\Uninstall' /s 2>/dev/null |
  tr -d '\r' | grep -q "DisplayVersion.*$newer" || fail "the uninstall entry does not show $newer"
echo "upgrade: ok"

# --- downgrade refused ---
if wine msiexec /i "$work/Ferry-$older.msi" /qn; then fail "the downgrade to $older was accepted"; fi
wine reg query 'HKLM\Software\Microsoft\Windows\CurrentVersion\Uninstall' /s 2>/dev/null |
  tr -d '\r' | grep -q "DisplayVersion.*$newer" || fail "the downgrade attempt changed the install"
echo "downgrade refused: ok"

# --- uninstall ---
wine msiexec /x "$work/Ferry-$newer.msi" /qn || fail "uninstall failed"
[[ ! -e "$installed" ]] || { find "$installed" >&2; fail "files left behind after uninstall"; }
[[ "$(uninstall_entries)" == 0 ]] || fail "uninstall entry left behind"
echo "uninstall: ok"
trap - EXIT
