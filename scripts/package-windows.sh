#!/usr/bin/env bash
# Builds the Windows desktop bundle on Linux: talosflash.exe (the Fyne app
# and the CLI, cgo through Debian's mingw-w64 cross compiler) with its icon
# and a manifest asking for administrator rights at start (raw disk writes
# need them and Windows cannot elevate a piped child), zipped as
# talosflash-windows-amd64.zip. Needs scripts/setup.sh --cross.
set -euo pipefail
cd "$(dirname "$0")/.."

CC=${CC:-x86_64-w64-mingw32-gcc}
command -v "$CC" >/dev/null || { echo "package-windows: $CC not found (scripts/setup.sh --cross installs gcc-mingw-w64-x86-64)" >&2; exit 1; }
FYNE_TOOLS=${FYNE_TOOLS:-fyne.io/tools/cmd/fyne@v1.7.4}

# fyne package writes temporary files next to the sources: it works on a
# copy, so the checkout is never left half-packaged.
out=$PWD
tools=$(mktemp -d)
trap 'rm -rf "$tools"' EXIT
GOBIN="$tools/bin" go install "$FYNE_TOOLS" # built for this machine, not for Windows
mkdir "$tools/src"
tar --exclude=./.git --exclude='./talosflash*' -cf - . | tar -C "$tools/src" -xf -
cd "$tools/src"

# fyne package embeds <exe>.manifest when it exists instead of its own.
manifest=talosflash.exe.manifest
cat >"$manifest" <<'XML'
<?xml version="1.0" encoding="UTF-8" standalone="yes"?>
<assembly xmlns="urn:schemas-microsoft-com:asm.v1" manifestVersion="1.0">
  <assemblyIdentity version="0.1.0.1" processorArchitecture="*" name="talosflash" type="win32"/>
  <trustInfo xmlns="urn:schemas-microsoft-com:asm.v3">
    <security>
      <requestedPrivileges>
        <requestedExecutionLevel level="requireAdministrator" uiAccess="false"/>
      </requestedPrivileges>
    </security>
  </trustInfo>
</assembly>
XML

CC="$CC" GOARCH=amd64 CGO_ENABLED=1 "$tools/bin/fyne" package -os windows -release
rm -f "$out/talosflash.exe" "$out/talosflash-windows-amd64.zip"
cp talosflash.exe "$out/"
cd "$out"
zip -q -j talosflash-windows-amd64.zip talosflash.exe README.md
ls -l talosflash.exe talosflash-windows-amd64.zip
