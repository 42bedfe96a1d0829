#!/usr/bin/env bash
# The MSI's life under Wine: tables as intended (every staged file, stable component GUIDs, the
# uninstall entry's icon), silent install of exactly the staged files, the installed ferry-cli
# runs (inspect, and the demo through the whole generation path), a newer MSI upgrades in place
# (one uninstall entry), an older one is refused, uninstall leaves nothing behind; and the
# desktop app's Start-menu shortcut comes and goes with it. Run by ctest in the mingw-wine lane
# (the Wine prefix is already booted). MSIs are built exactly as the `msi` target builds them.
#   msi_lifecycle.sh CMAKE WIXL BUILD_MSI_CMAKE STAGE_DIR WORK_DIR VERSION
set -euo pipefail
cmake=$1 wixl=$2 build_msi=$3 stage=$4 work=$5 version=$6

fail() { echo "FAIL: $*" >&2; exit 1; }
rm -rf "$work" && mkdir -p "$work"
IFS=. read -r major minor patch <<<"$version"
newer="$major.$minor.$((patch + 1))"
older="$major.$minor.$((patch > 0 ? patch - 1 : 0))"
[[ "$older" != "$version" ]] || older="$major.$((minor > 0 ? minor - 1 : 0)).9"

# build VERSION STAGE NAME
build() {
  "$cmake" -DSTAGE="$2" -DOUT="$work/$3.msi" -DVERSION="$1" -DWORK="$work/build-$3" \
    -DWIXL="$wixl" -P "$build_msi" >/dev/null || fail "building $3.msi failed"
}
build "$version" "$stage" "Ferry-$version"
build "$newer" "$stage" "Ferry-$newer"
build "$older" "$stage" "Ferry-$older"

staged_files() { (cd "$1" && find . -type f | sed 's|^\./||' | sort); }
staged_files "$stage" >"$work/staged.txt"
[[ -s "$work/staged.txt" ]] || fail "nothing staged in $stage"
# --- tables ---
dump() { mkdir -p "$work/tables-$1" && msidump -d "$work/tables-$1" -t "$work/$1.msi" >/dev/null; }
dump "Ferry-$version"
dump "Ferry-$newer"
t="$work/tables-Ferry-$version"
# Every staged file is in the File table, once (the table's 3 header lines aside). A long name
# is stored as SHORT|long.
[[ $(($(wc -l <"$t/File.idt") - 3)) == $(wc -l <"$work/staged.txt") ]] ||
  fail "File table has $(($(wc -l <"$t/File.idt") - 3)) rows for $(wc -l <"$work/staged.txt") staged files"
while read -r rel; do
  name=$(basename "$rel")
  awk -F'\t' -v n="$name" 'NR > 3 && ($3 == n || $3 ~ ("\\|" n "$")) { found = 1 } END { exit !found }' \
    "$t/File.idt" || fail "File table lacks $rel"
done <"$work/staged.txt"
grep -q 'ferry-cli.exe' "$t/File.idt" || fail "File table lacks ferry-cli.exe"
# Component GUIDs follow the installed path, not the build: two versions list the same ones.
cmp -s "$t/Component.idt" "$work/tables-Ferry-$newer/Component.idt" ||
  fail "component GUIDs differ between $version and $newer"
grep -q '0E364CCC-0BB5-4D89-97F1-2157C335E0E1' "$t/Upgrade.idt" ||
  fail "Upgrade table lacks Ferry's UpgradeCode"
grep -qi 'ALLUSERS.*1' "$t/Property.idt" || fail "not a per-machine package (ALLUSERS)"
grep -q "ProductVersion.$version" "$t/Property.idt" || fail "ProductVersion is not $version"
grep -q 'ProgramFiles64Folder' "$t/Directory.idt" || fail "not installed under Program Files (x64)"
grep -q "ARPPRODUCTICON.ferry.ico" "$t/Property.idt" || fail "the uninstall entry has no icon"
grep -q '^ferry.ico' "$t/Icon.idt" || fail "Icon table lacks ferry.ico"
[[ $(wc -l <"$t/Shortcut.idt") == 3 ]] || fail "a Start-menu shortcut without the app"
echo "tables: ok ($(wc -l <"$work/staged.txt") files)"

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
staged_files "$installed" | diff "$work/staged.txt" - >&2 ||
  fail "the installed files differ from the staged ones"
[[ "$(uninstall_entries)" == 1 ]] || fail "expected one uninstall entry after install"
# The uninstall entry's icon: Windows Installer keeps ARPPRODUCTICON's icon in its own folder and
# names it in the product's registration.
icon=$(wine reg query 'HKLM\Software\Classes\Installer\Products' /s 2>/dev/null | tr -d '\r' |
  sed -n 's/^ *ProductIcon *REG_SZ *//p' | grep -i 'ferry.ico$' | head -n1)
[[ -n "$icon" ]] || fail "the product's registration names no icon"
icon_unix="$WINEPREFIX/drive_c/$(echo "${icon#?:\\}" | tr '\\' /)"
[[ -s "$icon_unix" ]] || fail "the uninstall entry's icon $icon is missing"
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

# --- the desktop app's Start-menu shortcut ---
# This lane builds no Qt app, so a stand-in (ferry-cli.exe under the app's name) goes where a
# Windows build stages bin/Ferry.exe: what is checked is the package, not the program.
app_stage="$work/app-stage"
cp -r "$stage" "$app_stage"
cp "$stage/bin/ferry-cli.exe" "$app_stage/bin/Ferry.exe"
build "$version" "$app_stage" "Ferry-app-$version"
dump "Ferry-app-$version"
awk -F'\t' 'NR > 3 && $2 == "ProgramMenuFolder" && $3 == "Ferry" && $5 == "[INSTALLDIR]bin\\Ferry.exe" && $9 == "ferry.ico" { found = 1 } END { exit !found }' \
  "$work/tables-Ferry-app-$version/Shortcut.idt" || fail "Shortcut table lacks the app's shortcut"
# Windows puts a per-machine package's shortcut in the all-users Start menu (ProgramData); Wine
# resolves ProgramMenuFolder to the installing user's. Either is the Start menu.
find_shortcut() {
  find "$WINEPREFIX/drive_c/ProgramData/Microsoft/Windows/Start Menu/Programs" \
       "$WINEPREFIX/drive_c/users" -path '*Start Menu/Programs/Ferry.lnk' 2>/dev/null
}
trap 'wine msiexec /x "$work/Ferry-app-$version.msi" /qn >/dev/null 2>&1 || true' EXIT
wine msiexec /i "$work/Ferry-app-$version.msi" /qn || fail "install of the app package failed"
[[ -f "$installed/bin/Ferry.exe" ]] || fail "Ferry.exe not installed"
[[ -n "$(find_shortcut)" ]] || fail "no Start-menu shortcut after install"
wine msiexec /x "$work/Ferry-app-$version.msi" /qn || fail "uninstall of the app package failed"
[[ -z "$(find_shortcut)" ]] || fail "the Start-menu shortcut outlived the uninstall: $(find_shortcut)"
[[ ! -e "$installed" ]] || { find "$installed" >&2; fail "files left behind after uninstall"; }
[[ "$(uninstall_entries)" == 0 ]] || fail "uninstall entry left behind"
echo "start-menu shortcut: ok"
trap - EXIT
