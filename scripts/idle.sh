#!/usr/bin/env bash
# Measures the idle desktop app: CPU time and RSS of a window that nobody
# touches, under Xvfb (software GL), over 30 s after a 10 s settle.
#
#   scripts/idle.sh [BINARY] [STEP]   # default ./talosflash, step 1 (1-4: Alt+N)
#
# The factory is a closed loopback port (the step 1 check fails at once and
# the offline banner shows); nothing leaves 127.0.0.1. Takes turns with the
# real-window tests through their lock file (internal/xvfbtest).
set -euo pipefail
bin=$(realpath "${1:-./talosflash}")
step=${2:-1}
hz=$(getconf CLK_TCK)
exec 9>"${TMPDIR:-/tmp}/talosflash-xvfb.lock"
flock 9
home=$(mktemp -d)
fdfile=$home/display
Xvfb -displayfd 3 -screen 0 1000x700x24 -nolisten tcp 3>"$fdfile" >/dev/null 2>&1 &
xvfb=$!
cleanup() { kill "${app:-}" 2>/dev/null || true; kill "$xvfb" 2>/dev/null || true; wait 2>/dev/null || true; rm -rf "$home"; }
trap cleanup EXIT
for _ in $(seq 100); do [[ -s $fdfile ]] && break; sleep 0.1; done
display=:$(head -1 "$fdfile")
env -i PATH="$PATH" HOME="$home" XDG_CACHE_HOME="$home/.cache" XDG_CONFIG_HOME="$home/.config" DISPLAY="$display" \
	LIBGL_ALWAYS_SOFTWARE=1 LANG=C.UTF-8 "$bin" gui --factory http://127.0.0.1:9 >"$home/log" 2>&1 &
app=$!
sleep 3
if [[ $step != 1 ]] && command -v xdotool >/dev/null; then
	win=$(DISPLAY=$display xdotool search --onlyvisible --name talosflash | head -1)
	DISPLAY=$display xdotool key --window "$win" "alt+$step"
fi
sleep 7
cpu() { awk '{print $14+$15}' "/proc/$app/stat"; }
ctx() { awk '/ctxt_switches/ {s+=$2} END {print s}' /proc/"$app"/task/*/status; }
c0=$(cpu) x0=$(ctx)
sleep 30
c1=$(cpu) x1=$(ctx)
rss=$(awk '/VmRSS/ {print $2}' "/proc/$app/status")
awk -v c="$((c1 - c0))" -v hz="$hz" -v rss="$rss" -v x="$((x1 - x0))" -v step="$step" \
	'BEGIN {printf "step %s: CPU %.2f %% of a core over 30 s (%d ticks), RSS %.0f MiB, %d context switches\n", step, c/hz/30*100, c, rss/1024, x}'
