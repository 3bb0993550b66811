#!/usr/bin/env bash
# Performance benchmark on images shaped like Image Factory's (`make bench`;
# by hand, never CI). Prints one markdown table, each row our command against
# a shell pipeline, timed in turn (A B A B ..., one warm-up each): median
# wall time (range), peak RSS of the largest process, and the median of the
# per-pair time ratios ours/theirs (< 1: we are faster). The table is also
# appended to $BENCH_DIR/results.md.
#
# Generates once, under $BENCH_DIR (default /tmp/talosflash-bench, outside the
# repo): a 1246 MiB GPT disk-like raw image (imaging/imagetest, the factory's
# raw size) compressed as the factory does, `xz -0 -T0` (1 MiB blocks,
# 256 KiB dictionary) and `zstd -T0 -18`, plus the older `xz -6 -T0` shape.
# Environment: BENCH_DIR, BENCH_SIZE (bytes), BENCH_RUNS (pairs, default 3),
# BENCH_ONLY=xz0|zst18|xz6|dl|cards|bmap|cluster (one part), TALOSFLASH (binary, default
# ./talosflash), BENCH_CARDS=0 to skip the emulated-card part (~5 min at the
# default 25 MB/s write, 45 MB/s read: BENCH_CARD_MBPS, BENCH_CARD_READ_MBPS).
set -euo pipefail
cd "$(dirname "$0")/.."
D=${BENCH_DIR:-/tmp/talosflash-bench}
SIZE=${BENCH_SIZE:-1306525696}
N=${BENCH_RUNS:-3}
BIN=$(realpath "${TALOSFLASH:-./talosflash}")
mkdir -p "$D"
for t in xz zstd dd; do
  command -v $t >/dev/null || { echo "bench: $t not installed (scripts/setup.sh)"; exit 1; }
done
[ -x "$BIN" ] || { echo "bench: $BIN missing (make build)"; exit 1; }

go build -o "$D/benchtool" ./bench/benchtool
TOOL="$D/benchtool"
RAW="$D/img-$SIZE.raw"
T="$D/target.img"
if [ ! -s "$RAW" ]; then
  echo "generating $RAW ($SIZE bytes)"
  "$TOOL" gen -size "$SIZE" -seed 1 "$RAW.tmp" && mv "$RAW.tmp" "$RAW"
fi
declare -A IMG=([xz0]="$RAW.xz0.xz" [zst18]="$RAW.zst18.zst" [xz6]="$RAW.xz6.xz")
for s in xz0 zst18 xz6; do
  if [ ! -s "${IMG[$s]}" ]; then
    echo "compressing $RAW ($s)"
    "$TOOL" compress -shape "$s" "$RAW" "${IMG[$s]}"
  fi
done
RES="$D/results.md"
cat "${IMG[@]}" > /dev/null # compressed inputs in the page cache for every run

# row NAME OURS-LABEL OURS-CMD REF-LABEL REF-CMD
row() { "$TOOL" pair -n "$N" -name "$1" -la "$2" -a "$3" -lb "$4" -b "$5" 2>>"$D/commands.log" | tee -a "$RES"; }
dd_to="dd of='$T' bs=4M conv=fsync status=none"
flash() { echo "rm -f '$T'; '$BIN' --flash --image '$1' --device '$T' --create-file --yes ${2:-} >/dev/null"; }
want() { [ -z "${BENCH_ONLY:-}" ] || [ "$BENCH_ONLY" = "$1" ]; }

{
  echo
  echo "### $(date -u +%FT%TZ) $(uname -sr), $(nproc) CPUs, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs); $N pairs per row"
  echo
  echo "raw $(stat -L -c %s "$RAW") B;" \
    "xz0 $(stat -L -c %s "${IMG[xz0]}") B in $(xz --robot -l "${IMG[xz0]}" | awk '$1=="totals"{print $3}') blocks;" \
    "zst18 $(stat -L -c %s "${IMG[zst18]}") B;" \
    "xz6 $(stat -L -c %s "${IMG[xz6]}") B in $(xz --robot -l "${IMG[xz6]}" | awk '$1=="totals"{print $3}') blocks"
  echo
  echo "| case | ours | median (range) | peak RSS | reference | median (range) | peak RSS | ours/ref |"
  echo "|---|---|---|---|---|---|---|---|"
} | tee -a "$RES"

X=${IMG[xz0]}
if want xz0; then
  row "xz -0: flash + verify to a file" "talosflash --flash" "$(flash "$X")" \
    "xz -dc \\| dd conv=fsync" "rm -f '$T'; xz -dc '$X' | $dd_to"
  row "xz -0: flash + verify to a file" "talosflash --flash" "$(flash "$X")" \
    "xz -T0 -dc \\| dd conv=fsync" "rm -f '$T'; xz -T0 -dc '$X' | $dd_to"
  row "xz -0: flash, no verify" "talosflash --flash --no-verify" "$(flash "$X" --no-verify)" \
    "xz -dc \\| dd conv=fsync" "rm -f '$T'; xz -dc '$X' | $dd_to"
  row "xz -0: decode alone" "xzpar, 2 workers" "'$TOOL' decode -workers 2 '$X' >/dev/null" \
    "xz -dc" "xz -dc '$X' >/dev/null"
  row "xz -0: decode alone" "xzpar, 2 workers" "'$TOOL' decode -workers 2 '$X' >/dev/null" \
    "xz -T0 -dc" "xz -T0 -dc '$X' >/dev/null"
  row "xz -0: the decoder patch, 1 thread" "third_party/xz NewReader" "'$TOOL' decode -fork '$X' >/dev/null" \
    "ulikunitz/xz v0.5.17 NewReader" "'$TOOL' decode -plain '$X' >/dev/null"
fi
Z=${IMG[zst18]}
if want zst18; then
  row "zstd -18: decode alone" "klauspost/compress/zstd" "'$TOOL' decode '$Z' >/dev/null" \
    "zstd -dc" "zstd -dc '$Z' >/dev/null"
  row "zstd -18: decode + write to a file, no verify" "klauspost zstd + write + fsync" "rm -f '$T'; '$TOOL' write '$Z' '$T'" \
    "zstd -dc \\| dd conv=fsync" "rm -f '$T'; zstd -dc '$Z' | $dd_to"
  row "zstd -18: flash + verify to a file" "talosflash --flash" "$(flash "$Z")" \
    "zstd -dc \\| dd conv=fsync" "rm -f '$T'; zstd -dc '$Z' | $dd_to"
  row "zstd -18: flash + verify to a file" "talosflash --flash" "$(flash "$Z")" \
    "xz -0: talosflash --flash" "$(flash "$X")"
fi
# Time to a verified card from the factory (the fake one, 127.0.0.1): fresh
# cache each run, so the download counts; .raw.zst against .raw.xz.
if want dl; then
  coproc SRV { "$TOOL" serve "${IMG[xz0]}" "$Z"; }
  read -r URL <&"${SRV[0]}"
  dl() { echo "rm -rf '$D/dlcache' '$T'; '$BIN' --flash --role worker --factory $URL --format $1 --cache-dir '$D/dlcache' --device '$T' --create-file --yes >/dev/null"; }
  row "download + flash + verify" "--format zst ($(stat -L -c %s "$Z") B)" "$(dl zst)" \
    "--format xz ($(stat -L -c %s "${IMG[xz0]}") B)" "$(dl xz)"
  eval "exec ${SRV[1]}>&-" # closes the server's stdin: it exits
  wait "$SRV_PID" || true
  rm -rf "$D/dlcache"
fi
X6=${IMG[xz6]}
if want xz6; then
  row "xz -6: flash + verify to a file" "talosflash --flash" "$(flash "$X6")" \
    "xz -dc \\| dd conv=fsync" "rm -f '$T'; xz -dc '$X6' | $dd_to"
  row "xz -6: decode alone" "xzpar, 2 workers" "'$TOOL' decode -workers 2 '$X6' >/dev/null" \
    "xz -dc" "xz -dc '$X6' >/dev/null"
fi
# The last flash must have produced the raw image exactly.
if want xz0 || want xz6; then
  sh -c "$(flash "$X")" && cmp -s "$T" "$RAW" && echo "check: talosflash target identical to the raw image" | tee -a "$RES"
fi
rm -f "$T"
# Emulated cards (throttled write and read, imaging/bench_test.go): flash +
# verify of the factory-shaped .zst against the card's floor (bytes/write
# speed + bytes/read speed), and three cards at once against the slowest alone.
if [ "${BENCH_CARDS:-1}" != 0 ] && want cards; then
  echo | tee -a "$RES"
  echo "emulated cards, $(stat -L -c %s "$RAW") B image, ${BENCH_CARD_MBPS:-25} MB/s write, ${BENCH_CARD_READ_MBPS:-45} MB/s read (x-floor 1.00: the card is the only cost):" | tee -a "$RES"
  TALOSFLASH_BENCH_IMAGE="$Z" TALOSFLASH_BENCH_CARD_MBPS=${BENCH_CARD_MBPS:-25} TALOSFLASH_BENCH_CARD_READ_MBPS=${BENCH_CARD_READ_MBPS:-45} \
    go test -run '^$' -bench 'CardFlashVerify|CardsThreeVsAlone' -benchtime 1x -timeout 60m ./imaging/ | grep '^Benchmark' | tee -a "$RES"
fi
# The whole cluster in one run (issue 32): cp-1 from the control plane's
# image, worker-1 and worker-2 from the workers' (two 384 MiB Talos-shaped
# images, zstd -18, seeds 1 and 2). Emulated cards: the three at once
# against the slowest card alone, paired in one run (goal <= 1.10). Whole
# process, the static CLI (TALOSFLASH_CLI, default ./talosflash-cli: make
# build-cli): download from the loopback fake factory (fresh cache) + flash
# + verify of the three cards to files against worker-1's alone (peak RSS:
# goals < 96 MiB and < 64 MiB).
if [ "${BENCH_CARDS:-1}" != 0 ] && want cluster; then
  CP="$D/talos-402653184.raw" # bench/cards.sh's image (seed 1)
  WK="$D/talos-402653184-seed2.raw"
  [ -s "$CP" ] || "$TOOL" gen -talos -size 402653184 -seed 1 "$CP"
  [ -s "$WK" ] || "$TOOL" gen -talos -size 402653184 -seed 2 "$WK"
  for r in "$CP" "$WK"; do [ -s "$r.zst18.zst" ] || "$TOOL" compress -shape zst18 "$r" "$r.zst18.zst"; done
  CP="$CP.zst18.zst" WK="$WK.zst18.zst"
  echo | tee -a "$RES"
  echo "the cluster in one run, emulated cards (${BENCH_CARD_MBPS:-25} MB/s write, ${BENCH_CARD_READ_MBPS:-45} MB/s read; cp-1 1.2x, worker-2 1.4x), $N pairs:" | tee -a "$RES"
  TALOSFLASH_BENCH_IMAGE="$CP" TALOSFLASH_BENCH_IMAGE2="$WK" TALOSFLASH_BENCH_CARD_MBPS=${BENCH_CARD_MBPS:-25} TALOSFLASH_BENCH_CARD_READ_MBPS=${BENCH_CARD_READ_MBPS:-45} \
    go test -run '^$' -bench 'CardsClusterVsAlone' -benchtime "${N}x" -timeout 60m ./imaging/ | grep '^Benchmark' | tee -a "$RES"
  CLI=$(realpath "${TALOSFLASH_CLI:-./talosflash-cli}")
  [ -x "$CLI" ] || { echo "bench: $CLI missing (make build-cli)"; exit 1; }
  "$TOOL" inventory "$D/inventory.yaml"
  coproc SRV { "$TOOL" serve controlplane="$CP" worker="$WK"; }
  read -r URL <&"${SRV[0]}"
  cl() { echo "cd '$D' && rm -rf clcache c1.img c2.img c3.img && '$CLI' --flash --inventory inventory.yaml $1 --factory $URL --cache-dir clcache --create-file --yes >/dev/null 2>&1"; }
  row "cluster: download + flash + verify to files, static CLI" "cp-1 + worker-1 + worker-2 (two images)" \
    "$(cl '--hostname cp-1 --hostname worker-1 --hostname worker-2 --device c1.img --device c2.img --device c3.img')" \
    "worker-1 alone" "$(cl '--hostname worker-1 --device c2.img')"
  eval "exec ${SRV[1]}>&-"
  wait "$SRV_PID" || true
  rm -rf "$D/clcache" "$D"/c[123].img
fi
# talosflash and bmaptool on loop devices, four card states (bench/cards.sh;
# root only, installs bmap-tools): bytes read and written by the loop
# devices, modelled card time, byte-exactness, stale META.
if [ "${BENCH_CARDS:-1}" != 0 ] && want bmap; then
  BENCH_DIR="$D" TALOSFLASH="$BIN" ./bench/cards.sh
fi
echo "table appended to $RES"
