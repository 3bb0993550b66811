#!/usr/bin/env bash
# `make release`: everything a release ships, into dist/ (emptied first):
#   talosflash_<v>_amd64.deb, talosflash_<v>_arm64.deb   the app + CLI for
#       Debian/Ubuntu: /usr/bin/talosflash, /usr/lib/talosflash/talosflash-cli
#       (the static CLI below: the elevated write runs it), desktop file,
#       icon, the polkit policy of the elevated write (packaging/linux/,
#       built by nfpm)
#   talosflash-app_linux-amd64, talosflash-app_linux-arm64   the same binaries
#   talosflash-cli_<os>-<arch>[.exe]   the static CLI (cgo-free, -tags nogui)
#       for linux, darwin and windows on amd64 and arm64
#   SHA256SUMS   sha256sum of every file above
# The linux/arm64 app is cgo: Debian's aarch64 cross compiler with the arm64
# X11/GL headers (dpkg multiarch), installed by scripts/setup.sh --release.
# VERSION defaults to FyneApp.toml's; NFPM is the nfpm module run with
# `go run` (from the Go module proxy, not in go.mod).
set -euo pipefail
cd "$(dirname "$0")/.."

GO=${GO:-go}
NFPM=${NFPM:-github.com/goreleaser/nfpm/v2/cmd/nfpm@v2.48.0}
VERSION=${VERSION:-$(sed -n 's/^ *Version *= *"\(.*\)"/\1/p' FyneApp.toml)}
[ -n "$VERSION" ] || { echo "release: no version (FyneApp.toml [Details] Version, or VERSION=)" >&2; exit 1; }
ARM64_CC=${ARM64_CC:-aarch64-linux-gnu-gcc}
DIST=dist
LDFLAGS="-s -w -X github.com/talosflash/talosflash/app/cli.Version=$VERSION"
start=$(date +%s)

rm -rf "$DIST"
mkdir -p "$DIST"

for os in linux darwin windows; do
  for arch in amd64 arm64; do
    ext=""
    [ "$os" = windows ] && ext=.exe
    echo "release: CLI $os/$arch"
    CGO_ENABLED=0 GOOS=$os GOARCH=$arch "$GO" build -trimpath -tags nogui -ldflags "$LDFLAGS" \
      -o "$DIST/talosflash-cli_$os-$arch$ext" .
  done
done

echo "release: app linux/amd64"
CGO_ENABLED=1 GOOS=linux GOARCH=amd64 "$GO" build -trimpath -ldflags "$LDFLAGS" -o "$DIST/talosflash-app_linux-amd64" .
arches=(amd64)
if command -v "$ARM64_CC" >/dev/null && [ -e /usr/lib/aarch64-linux-gnu/libGL.so ] && [ -e /usr/lib/aarch64-linux-gnu/libXrandr.so ]; then
  echo "release: app linux/arm64 ($ARM64_CC)"
  CGO_ENABLED=1 GOOS=linux GOARCH=arm64 CC=$ARM64_CC "$GO" build -trimpath -ldflags "$LDFLAGS" -o "$DIST/talosflash-app_linux-arm64" .
  arches+=(arm64)
else
  echo "release: NOT building the linux/arm64 app and .deb: $ARM64_CC or the arm64 GL/X11 libraries are missing (scripts/setup.sh --release installs them)" >&2
fi

# nfpm expands ${VAR} in some fields only, not in contents' paths: the
# config is filled in here, one per architecture.
conf=$(mktemp)
trap 'rm -f "$conf"' EXIT
for arch in "${arches[@]}"; do
  echo "release: talosflash_${VERSION}_$arch.deb"
  sed -e "s|\${ARCH}|$arch|g" -e "s|\${VERSION}|$VERSION|g" -e "s|\${DIST}|$DIST|g" packaging/linux/nfpm.yaml >"$conf"
  "$GO" run "$NFPM" package --config "$conf" --packager deb --target "$DIST/talosflash_${VERSION}_$arch.deb" >/dev/null
done

(cd "$DIST" && sha256sum -- * >SHA256SUMS)
echo "release: dist/ in $(($(date +%s) - start)) s, $(du -sh "$DIST" | cut -f1):"
ls -l "$DIST"
if [ "${#arches[@]}" -lt 2 ]; then
  exit 3 # a release without the arm64 package is not complete
fi
