#!/usr/bin/env bash
# talosflash and bmaptool side by side on loop devices (`make bench`, part
# BENCH_ONLY=bmap; root only). One run writes the table of
# docs/PERFORMANCE.md "Issue 32": for each card state before the flash
# (zeroed, random data, the same image, an older Talos card of another
# node) and each tool, the bytes the loop device read and wrote (its own
# counters, /sys/block/loopN/stat), the card time they model at
# BENCH_CARD_MBPS write (25) and BENCH_CARD_READ_MBPS read (45), whether
# the card is then the image byte for byte, and whether its META partition
# is the image's or a stale one. The floor beside talosflash is "read
# every byte once, write the 4 KiB blocks that differ, read those back".
#
# The image: $BENCH_DIR/talos-SIZE.raw (imagetest.TalosRaw, factory-shaped
# data with a blank META; BENCH_CARD_SIZE, default 384 MiB), compressed as
# the factory does (zstd -18); bmaptool's bmap is made from a hole-punched
# copy of the raw image (fallocate --dig-holes; bmaptool create), and both
# tools flash the .zst. Debian's bmap-tools is installed here if missing
# (only this benchmark needs it). Every loop device attached is detached.
set -euo pipefail
cd "$(dirname "$0")/.."
[ "$(id -u)" -eq 0 ] || { echo "cards: loop devices need root (skipped)"; exit 0; }
if ! command -v bmaptool >/dev/null; then
  echo "cards: installing bmap-tools"
  apt-get install -y -qq bmap-tools >/dev/null 2>&1 || { apt-get update -qq && apt-get install -y -qq bmap-tools >/dev/null; }
fi
D=${BENCH_DIR:-/tmp/talosflash-bench}
SIZE=${BENCH_CARD_SIZE:-402653184}
W=${BENCH_CARD_MBPS:-25}
R=${BENCH_CARD_READ_MBPS:-45}
BIN=$(realpath "${TALOSFLASH:-./talosflash}")
[ -x "$BIN" ] || { echo "cards: $BIN missing (make build)"; exit 1; }
mkdir -p "$D"
TOOL="$D/benchtool"
go build -o "$TOOL" ./bench/benchtool
RAW="$D/talos-$SIZE.raw"
ZST="$RAW.zst18.zst"
[ -s "$RAW" ] || "$TOOL" gen -talos -size "$SIZE" -seed 1 "$RAW"
[ -s "$ZST" ] || "$TOOL" compress -shape zst18 "$RAW" "$ZST"
BMAP="$RAW.bmap"
if [ ! -s "$BMAP" ]; then
  cp --sparse=never "$RAW" "$RAW.holed"
  fallocate --dig-holes "$RAW.holed"
  bmaptool -q create -o "$BMAP" "$RAW.holed"
  rm -f "$RAW.holed"
fi
CARD="$D/card.img"
BEFORE="$D/card-before.img"
DEV=""
detach() { [ -z "$DEV" ] || losetup -d "$DEV" || true; DEV=""; }
trap 'detach; rm -f "$CARD" "$BEFORE"' EXIT

# prepare STATE: the card's bytes before the flash, in $BEFORE.
prepare() {
  rm -f "$BEFORE"
  case $1 in
    zeroed) truncate -s "$SIZE" "$BEFORE" ;;
    random) head -c "$SIZE" /dev/urandom > "$BEFORE" ;;
    image) cp "$RAW" "$BEFORE" ;;
    old) "$TOOL" oldcard "$RAW" "$BEFORE" ;;
  esac
}
# sectors read and written by the loop device so far.
counters() { awk '{print $3, $7}' "/sys/block/$(basename "$DEV")/stat"; }
mib() { awk -v s="$1" 'BEGIN{printf "%.0f", s*512/1048576}'; }
secs() { awk -v r="$1" -v w="$2" -v R="$R" -v W="$W" 'BEGIN{printf "%.1f", r*512/(R*1e6) + w*512/(W*1e6)}'; }

# run TOOL STATE: flashes the card holding STATE; prints "read written time exact meta wall".
run() {
  cp --sparse=always "$BEFORE" "$CARD"
  DEV=$(losetup -f --show "$CARD")
  udevadm settle 2>/dev/null || true
  read -r r0 w0 < <(counters)
  local start end
  start=$(date +%s.%N)
  case $1 in
    talosflash) "$BIN" --flash --image "$ZST" --device "$DEV" --yes --allow-loop >/dev/null ;;
    bmaptool) bmaptool -q copy --bmap "$BMAP" "$ZST" "$DEV" ;;
  esac
  end=$(date +%s.%N)
  read -r r1 w1 < <(counters)
  local exact=no
  cmp -s -n "$SIZE" "$DEV" "$RAW" && exact=yes
  local m
  m=$("$TOOL" meta "$DEV" "$RAW")
  detach
  echo "$((r1 - r0)) $((w1 - w0)) $exact $(awk -v a="$start" -v b="$end" 'BEGIN{printf "%.1f", b-a}')|$m"
}

RES="$D/results.md"
{
  echo
  echo "### $(date -u +%FT%TZ) talosflash and bmaptool on loop devices: $((SIZE >> 20)) MiB image ($(basename "$ZST")), card time at $W MB/s write, $R MB/s read"
  echo
  echo "| card before | talosflash read / written | card time | floor (read all, write and read back the differing 4 KiB blocks) | talosflash / floor | card = image? | META | bmaptool read / written | card time | card = image? | META |"
  echo "|---|---|---|---|---|---|---|---|---|---|---|"
} | tee -a "$RES"
declare -A LABEL=([zeroed]="zeroed" [random]="random data" [image]="the same image" [old]="an older Talos card of another node")
for s in zeroed random image old; do
  prepare "$s"
  d=$("$TOOL" diff4k "$BEFORE" "$RAW")
  floor=$(awk -v n="$SIZE" -v d="$d" -v R="$R" -v W="$W" 'BEGIN{printf "%.2f", (n+d)/(R*1e6) + d/(W*1e6)}')
  IFS='|' read -r tf tmeta < <(run talosflash)
  read -r tr tw tx twall <<<"$tf"
  IFS='|' read -r bf bmeta < <(run bmaptool)
  read -r br bw bx bwall <<<"$bf"
  ttime=$(secs "$tr" "$tw")
  echo "| ${LABEL[$s]} | $(mib "$tr") / $(mib "$tw") MiB | $ttime s | $floor s ($(awk -v d="$d" 'BEGIN{printf "%.1f", d/1048576}') MiB differ) | $(awk -v a="$ttime" -v b="$floor" 'BEGIN{printf "%.2f", a/b}') | $tx | $tmeta | $(mib "$br") / $(mib "$bw") MiB | $(secs "$br" "$bw") s | $bx | $bmeta |" | tee -a "$RES"
  echo "  wall: talosflash $twall s, bmaptool $bwall s ($s)" >> "$D/commands.log"
done
nz=$("$TOOL" diff4k <(head -c "$SIZE" /dev/zero) "$RAW")
echo "non-zero 4 KiB blocks of the image: $(awk -v d="$nz" -v n="$SIZE" 'BEGIN{printf "%.1f MiB (%.1f %%)", d/1048576, 100*d/n}')" | tee -a "$RES"
