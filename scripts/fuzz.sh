#!/usr/bin/env bash
# Runs every Fuzz* target briefly (default 5s each) after the seed corpus.
set -euo pipefail
cd "$(dirname "$0")/.."
dur=${1:-5s}
for pkg in $(go list ./...); do
  dir=$(go list -f '{{.Dir}}' "$pkg")
  for f in $(grep -hoE '^func (Fuzz[A-Za-z0-9_]+)' "$dir"/*_test.go 2>/dev/null | awk '{print $2}'); do
    echo "fuzz: $pkg $f ($dur)"
    go test -run '^$' -fuzz "^${f}\$" -fuzztime "$dur" "$pkg" >/tmp/talosflash-fuzz.log 2>&1 || { cat /tmp/talosflash-fuzz.log; exit 1; }
  done
done
