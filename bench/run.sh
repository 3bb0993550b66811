#!/usr/bin/env bash
# Performance benchmark for talosflash's decompress -> write -> verify path.
# Run by hand (not CI): ./bench/run.sh   (or `make bench`). Results are
# appended to bench/out/results.txt; docs/PERFORMANCE.md records a run.
#
# Generates once, under bench/out/ (git-ignored): a realistic raw image
# (imaging/imagetest layout, default 1280 MiB = a Talos metal-arm64 image),
# compressed with xz -T0 (multi-block, like Image Factory) and with
# single-threaded xz (one block, no sizes). Then times, each command under
# /usr/bin/time -v (elapsed, max RSS), bounded by STEP_TIMEOUT:
#   (a) xz -dc | dd conv=fsync to a file        (reference pipeline)
#   (b) decode alone to /dev/null: xz -dc vs xzpar (1, 2 workers) vs ulikunitz
#   (c) talosflash --flash to a file target (skipped if the binary lacks it)
#   (d) SHA-256 throughput: sha256sum vs Go crypto/sha256
#   (e) write everything vs seek over zero chunks, to a file target
# Environment: BENCH_SIZE (bytes), STEP_TIMEOUT (seconds, default 900),
# SKIP_PLAIN=1 to skip the slow ulikunitz single-threaded runs.
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=bench/out
SIZE=${BENCH_SIZE:-$((1280 << 20))}
STEP_TIMEOUT=${STEP_TIMEOUT:-900}
mkdir -p "$OUT"
RES="$OUT/results.txt"

command -v xz >/dev/null || { echo "bench: xz not installed (apt-get install xz-utils)"; exit 1; }
[ -x /usr/bin/time ] || { echo "bench: /usr/bin/time missing (apt-get install time)"; exit 1; }

go build -o "$OUT/benchtool" ./bench/benchtool
TOOL="$OUT/benchtool"
RAW="$OUT/img-$SIZE.raw"
XZ_MT="$RAW.T0.xz"
XZ_1="$RAW.T1.xz"
TARGET="$OUT/target.img"

if [ ! -s "$RAW" ]; then
  echo "generating $RAW ($SIZE bytes)"
  "$TOOL" gen -size "$SIZE" -seed 1 "$RAW.tmp" && mv "$RAW.tmp" "$RAW"
fi
if [ ! -s "$XZ_MT" ]; then
  echo "compressing with xz -T0 (multi-block)"
  xz -T0 -6 -c "$RAW" > "$XZ_MT.tmp" && mv "$XZ_MT.tmp" "$XZ_MT"
fi
if [ ! -s "$XZ_1" ]; then
  echo "compressing with xz -T1 (single block)"
  xz -T1 -6 -c "$RAW" > "$XZ_1.tmp" && mv "$XZ_1.tmp" "$XZ_1"
fi

{
  echo "=== $(date -u +%FT%TZ) $(uname -srm), $(nproc) CPUs: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)"
  echo "raw $(stat -c %s "$RAW") B; $(xz --robot -l "$XZ_MT" | awk '$1=="totals"{print "T0.xz " $5 " B, " $3 " blocks"}'); $(xz --robot -l "$XZ_1" | awk '$1=="totals"{print "T1.xz " $5 " B, " $3 " blocks"}')"
} | tee -a "$RES"

# measure NAME CMD...: runs CMD (a shell string) under time -v, prints
# seconds, MB/s of raw image bytes, and max RSS.
measure() {
  local name=$1 cmd=$2 log
  log=$(mktemp)
  sync
  if ! timeout "$STEP_TIMEOUT" /usr/bin/time -v -o "$log" bash -c "$cmd"; then
    echo "$(printf '%-40s' "$name") FAILED or timed out" | tee -a "$RES"
    rm -f "$log"; return 0
  fi
  local el rss secs
  el=$(awk -F': ' '/Elapsed \(wall clock\)/{print $2}' "$log")
  rss=$(awk -F': ' '/Maximum resident set size/{print $2}' "$log")
  secs=$(echo "$el" | awk -F: '{ if (NF==3) print $1*3600+$2*60+$3; else print $1*60+$2 }')
  printf '%-40s %8.2f s %8.1f MB/s  maxRSS %6d MiB\n' "$name" "$secs" \
    "$(echo "$SIZE $secs" | awk '{print $1/1e6/$2}')" $((rss / 1024)) | tee -a "$RES"
  rm -f "$log"
}

# Warm the page cache so every run reads the compressed files from memory.
cat "$XZ_MT" "$XZ_1" > /dev/null

echo "--- (b) decode alone to /dev/null" | tee -a "$RES"
measure "xz -dc T0.xz"                 "xz -dc '$XZ_MT' > /dev/null"
measure "xz -T2 -dc T0.xz"             "xz -T2 -dc '$XZ_MT' > /dev/null"
measure "xzpar 2 workers T0.xz"        "'$TOOL' decode -workers 2 '$XZ_MT' > /dev/null"
measure "xzpar 1 worker T0.xz"         "'$TOOL' decode -workers 1 '$XZ_MT' > /dev/null"
measure "xz -dc T1.xz"                 "xz -dc '$XZ_1' > /dev/null"
measure "xzpar T1.xz (streamed)"       "'$TOOL' decode -workers 2 '$XZ_1' > /dev/null"
if [ "${SKIP_PLAIN:-0}" != 1 ]; then
  measure "ulikunitz xz.NewReader T0.xz" "'$TOOL' decode -plain '$XZ_MT' > /dev/null"
fi

echo "--- (a) reference pipeline to a file" | tee -a "$RES"
measure "xz -dc | dd bs=4M conv=fsync"  "xz -dc '$XZ_MT' | dd of='$TARGET' bs=4M conv=fsync status=none"
measure "xz -T2 -dc | dd bs=4M conv=fsync" "xz -T2 -dc '$XZ_MT' | dd of='$TARGET' bs=4M conv=fsync status=none"

echo "--- (e) write everything vs skip zero chunks (file target)" | tee -a "$RES"
rm -f "$TARGET"
measure "xzpar write all, fsync"        "'$TOOL' write -workers 2 '$XZ_MT' '$TARGET'"
rm -f "$TARGET"
measure "xzpar write skip-zeros, fsync" "'$TOOL' write -skip-zeros -workers 2 '$XZ_MT' '$TARGET'"
cmp -s "$TARGET" "$RAW" && echo "skip-zeros target identical to raw image" | tee -a "$RES"

echo "--- (d) SHA-256 of the raw image (page cache)" | tee -a "$RES"
cat "$RAW" > /dev/null
measure "sha256sum raw"                 "sha256sum '$RAW' > /dev/null"
measure "Go crypto/sha256 raw"          "'$TOOL' sha256 '$RAW' > /dev/null"

echo "--- (c) full pipeline: talosflash --flash to a file target" | tee -a "$RES"
BIN=./talosflash
[ -x "$BIN" ] || go build -o "$BIN" . 2>/dev/null || true
if [ -x "$BIN" ] && "$BIN" --flash --help 2>&1 | grep -q -- '-device'; then
  rm -f "$TARGET"
  measure "talosflash --flash (verify)"   "'$BIN' --flash --image '$XZ_MT' --device '$TARGET' --yes > /dev/null"
  measure "talosflash --flash --no-verify" "'$BIN' --flash --image '$XZ_MT' --device '$TARGET' --yes --no-verify > /dev/null"
  cmp -s "$TARGET" "$RAW" && echo "talosflash target identical to raw image" | tee -a "$RES"
else
  echo "skipped: $BIN has no --flash yet (run again once the CLI is in)" | tee -a "$RES"
fi
rm -f "$TARGET"
echo "results appended to $RES"
