#!/usr/bin/env bash
# Runs the Windows backend's unit tests (imaging/devices: the Windows
# structures, the safety decisions, the diskutil model, sector padding;
# imaging: the unbuffered-handle check) as Windows test binaries under Wine. Skips, saying so, without wine or the
# mingw-w64 compiler (scripts/setup.sh --cross installs both).
set -euo pipefail
cd "$(dirname "$0")/.."

if ! command -v wine >/dev/null || ! command -v x86_64-w64-mingw32-gcc >/dev/null; then
  echo "wine-test: skipped (needs wine and gcc-mingw-w64-x86-64: scripts/setup.sh --cross)"
  exit 0
fi
export WINEPREFIX="${WINEPREFIX:-${TMPDIR:-/tmp}/talosflash-wine}" WINEDEBUG=-all
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# Go >= 1.24 programs need bcryptprimitives.dll!ProcessPrng, which Wine
# before 9.x lacks (Debian 12 ships 8.0): a shim built from three lines of
# C forwards it to advapi32!SystemFunction036 (RtlGenRandom).
[ -d "$WINEPREFIX/drive_c/windows/system32" ] || wineboot -i >/dev/null 2>&1 || true
sys32="$WINEPREFIX/drive_c/windows/system32"
if [ ! -e "$sys32/bcryptprimitives.dll" ] && ! ls /usr/lib/x86_64-linux-gnu/wine/x86_64-windows/bcryptprimitives.dll >/dev/null 2>&1; then
  cat >"$work/prng.c" <<'C'
#include <windows.h>
BOOLEAN WINAPI SystemFunction036(PVOID, ULONG);
__declspec(dllexport) BOOL WINAPI ProcessPrng(PBYTE p, SIZE_T n) {
  for (; n > 0;) { ULONG c = n > 0x40000000 ? 0x40000000 : (ULONG)n; if (!SystemFunction036(p, c)) return FALSE; p += c; n -= c; }
  return TRUE;
}
C
  x86_64-w64-mingw32-gcc -shared -O2 -o "$sys32/bcryptprimitives.dll" "$work/prng.c" -ladvapi32
  echo "wine-test: installed a ProcessPrng shim into $sys32 (Wine $(wine --version) has no bcryptprimitives.dll)"
fi

GOOS=windows GOARCH=amd64 CGO_ENABLED=0 go test -c -o "$work/devices.test.exe" ./imaging/devices
GOOS=windows GOARCH=amd64 CGO_ENABLED=0 go test -c -o "$work/imaging.test.exe" ./imaging
# The sysfs tests are Linux's (symlinked fake /sys trees); these are the
# OS-neutral and Windows ones.
run='Diskutil|Darwin|Windows|Decode|SectorPadded|AlignedBuffer|TooSmall'
cd imaging/devices
echo "wine-test: $(wine --version): imaging/devices -run '$run'"
wine "$work/devices.test.exe" -test.count=1 -test.run "$run" -test.v | grep -E '^(--- |PASS|FAIL|ok)'
cd ..
echo "wine-test: imaging -run SetDirect (the read-back's cache bypass on Windows handles)"
wine "$work/imaging.test.exe" -test.count=1 -test.run SetDirect -test.v | grep -E '^(--- |PASS|FAIL|ok)'
