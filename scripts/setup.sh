#!/usr/bin/env bash
# Installs what building and testing talosflash needs on Debian/Ubuntu:
# Fyne's cgo headers (X11 + GL), Xvfb, xdotool and ImageMagick for the
# real-window test and screenshots, dbus (a private session bus for the
# file chooser portal test), xz, zstd and util-linux for tests and
# benchmarks, then the Go modules. Idempotent: installs only what is missing.
# --cross adds the Windows cross tools: the mingw-w64 C compiler (the
# desktop app for Windows, `make package-windows`) and Wine (the Windows
# unit tests, scripts/wine-test.sh); where they cannot be installed it says
# so and succeeds: the Wine tests then skip and package-windows says why.
set -euo pipefail
cd "$(dirname "$0")/.."

pkgs=(gcc pkg-config xorg-dev libgl1-mesa-dev xz-utils zstd util-linux xvfb xauth xdotool imagemagick dbus)
cross=false
if [ "${1:-}" = "--cross" ]; then
  cross=true
  pkgs=(gcc-mingw-w64-x86-64 wine wine64 zip)
fi
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  if ! command -v apt-get >/dev/null; then
    if $cross; then
      echo "setup: not installed: ${missing[*]} (no apt-get); the Wine tests will be skipped" >&2
      exit 0
    fi
    echo "setup: please install: ${missing[*]} (Fyne needs a C compiler and X11/GL headers)" >&2
    exit 1
  fi
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  echo "setup: installing ${missing[*]}"
  $sudo apt-get update -qq
  if ! DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null; then
    $cross || exit 1
    echo "setup: could not install ${missing[*]}; the Wine tests will be skipped" >&2
    exit 0
  fi
fi
$cross && exit 0
go mod download
