#!/usr/bin/env bash
# Installs what building and testing talosflash needs on Debian/Ubuntu:
# Fyne's cgo headers (X11 + GL), Xvfb, xdotool and ImageMagick for the
# real-window test and screenshots, dbus (a private session bus for the
# file chooser portal test), udisks2 (with polkitd and udev: the real
# UDisks2 flash test, root only), xz, zstd and util-linux for tests and
# benchmarks, then the Go modules. Idempotent: installs only what is missing.
# --cross adds the Windows cross tools: the mingw-w64 C compiler (the
# desktop app for Windows, `make package-windows`) and Wine (the Windows
# unit tests, scripts/wine-test.sh); where they cannot be installed it says
# so and succeeds: the Wine tests then skip and package-windows says why.
# --release adds what `make release` needs for the linux/arm64 app: Debian's
# aarch64 cross compiler and the arm64 X11/GL libraries (dpkg multiarch),
# and qemu-user to start the arm64 build in make release-test.
set -euo pipefail
cd "$(dirname "$0")/.."

if [ "${1:-}" = "--release" ]; then
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  rel=(gcc-aarch64-linux-gnu libc6-dev-arm64-cross dpkg-dev qemu-user)
  for l in libgl1-mesa-dev libx11-dev libxcursor-dev libxrandr-dev libxinerama-dev libxi-dev libxxf86vm-dev; do rel+=("$l:arm64"); done
  missing=()
  for p in "${rel[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  [ ${#missing[@]} -eq 0 ] && exit 0
  command -v apt-get >/dev/null || { echo "setup: --release needs apt-get (Debian/Ubuntu) for: ${missing[*]}" >&2; exit 1; }
  dpkg --print-foreign-architectures | grep -qx arm64 || $sudo dpkg --add-architecture arm64
  echo "setup: installing ${missing[*]}"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  exit 0
fi

pkgs=(gcc pkg-config xorg-dev libgl1-mesa-dev xz-utils zstd util-linux xvfb xauth xdotool imagemagick dbus udisks2)
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
