# shellcheck shell=bash
# Sourced, not run: prepares Wine for running the mingw-w64 build's tests without hangs.
#
#   source scripts/wine-env.sh [BUILD_DIR]      (default: build/mingw-wine)
#
# Puts a private 64-bit prefix under BUILD_DIR/wineprefix, silences Wine, keeps it from asking
# for Mono and Gecko, starts the wineserver detached and persistent, and boots the prefix once.
# Every Wine process started afterwards (ctest's) attaches to that server and its services
# instead of spawning them with ctest's pipes inherited, which is what makes ctest slow or hang
# (docs: shared/design/windows-lane.md). Stop the server afterwards with `wineserver -k`.

_ferry_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
_ferry_build="${1:-${FERRY_WINE_BUILD_DIR:-$_ferry_root/build/mingw-wine}}"
mkdir -p "$_ferry_build/wineprefix"

WINEPREFIX="$(cd "$_ferry_build/wineprefix" && pwd)"
export WINEPREFIX
export WINEARCH=win64
export WINEDEBUG=-all
# No Mono or Gecko prompts; and no winemenubuilder, which would mirror the MSI test's Start-menu
# shortcut into this machine's own desktop menus.
export WINEDLLOVERRIDES="mscoree,mshtml,winemenubuilder.exe="
unset DISPLAY WAYLAND_DISPLAY

# wineserver daemonizes itself; the redirections keep it (and the services the boot starts)
# from holding the caller's terminal or pipes.
wineserver -p </dev/null >/dev/null 2>&1
# Creates the prefix the first time (~7 s, ~700 MB) and starts its services. A first boot has
# been seen to fail once on a loaded machine and succeed on a second try: it gets one retry, with
# a fresh wineserver.
if ! wine cmd /c exit </dev/null >/dev/null 2>&1; then
  wineserver -k </dev/null >/dev/null 2>&1 || true
  sleep 2
  wineserver -p </dev/null >/dev/null 2>&1
  wine cmd /c exit </dev/null >/dev/null 2>&1 || {
    echo "wine-env: booting the Wine prefix $WINEPREFIX failed (twice)" >&2
    unset _ferry_root _ferry_build
    return 1
  }
fi
unset _ferry_root _ferry_build
