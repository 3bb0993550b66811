#!/usr/bin/env bash
# Captures the desktop app into docs/screenshots/.
#
# 1-8 (1000x700, the README's) come from the real-window end-to-end test
# (app/gui/e2e): the real talosflash binary under Xvfb, driven by keyboard
# through xdotool, flashing a loop device from a fake Image Factory on
# 127.0.0.1, then scanning for a fake Talos node on 127.0.0.131 (--subnet
# 127.0.0.131/32) and applying its config. It needs root (losetup), Xvfb,
# xdotool and ImageMagick's import (scripts/setup.sh installs them).
#
# Every step of the demo build (-tags demo: a fake factory on 127.0.0.1, a
# file as the card, canned nodes; the status step runs three configured
# fake nodes on 127.0.0.61-63 and reads the configs of
# node/testdata/talos114/valid) at the window's minimum, 820x600, and at
# 1400x1000: docs/screenshots/820x600/NN-STEP.png and
# docs/screenshots/1400x1000/NN-STEP.png.
#
#   scripts/screenshots.sh               # all
#   scripts/screenshots.sh demo [STEP...] # demo steps only (default: all of them)
set -euo pipefail
cd "$(dirname "$0")/.."
out=$PWD/docs/screenshots
mkdir -p "$out"

# The demo's steps, in the order of the flow (gui.DemoSteps).
all=(image local card confirm flashing done cached flashall failed second nodes details findings applyall bootstrap status)
read -r -a sizes <<<"${SIZES:-820x600 1400x1000}" # SIZES="1400x1000" for one

steps=("${all[@]}")
if [[ ${1:-} == demo ]]; then
	shift
	if (($#)); then steps=("$@"); fi
else
	log=$(mktemp)
	if ! TALOSFLASH_SCREENSHOTS=$out go test -count=1 -v -run TestRealWindowFlashesLoopDevice ./app/gui/e2e/ >"$log" 2>&1 ||
		! grep -q -- "--- PASS" "$log"; then
		echo "the real-window test did not run to the end:" >&2; cat "$log" >&2; rm -f "$log"; exit 1
	fi
	rm -f "$log"
	for f in "$out"/[1-8]-*.png; do echo "wrote ${f#"$PWD"/} ($(du -k "$f" | cut -f1) KiB)"; done
fi

bin=$(mktemp -d)/talosflash-demo
go build -tags demo -o "$bin" ./app/gui/cmd/demo

xvfb=
cleanup() { if [[ -n $xvfb ]]; then kill "$xvfb" 2>/dev/null || true; fi; rm -rf "$(dirname "$bin")"; }
trap cleanup EXIT
display=:97
for size in "${sizes[@]}"; do
	w=${size%x*} h=${size#*x}
	Xvfb "$display" -screen 0 "${w}x${h}x24" -nolisten tcp >/dev/null 2>&1 &
	xvfb=$!
	for _ in $(seq 50); do xdpyinfo -display "$display" >/dev/null 2>&1 && break; sleep 0.1; done
	mkdir -p "$out/$size"
	for step in "${steps[@]}"; do
		n=0
		for i in "${!all[@]}"; do [[ ${all[$i]} == "$step" ]] && n=$((i + 1)); done
		if ((n == 0)); then echo "unknown demo step $step (want one of ${all[*]})" >&2; exit 2; fi
		log=$(dirname "$bin")/$size-$step.log
		for attempt in 1 2; do # a window that did not come up once gets one more try
			DISPLAY=$display LIBGL_ALWAYS_SOFTWARE=1 "$bin" -step "$step" -size "$size" >"$log" 2>&1 &
			app=$!
			for _ in $(seq 300); do grep -qs "^READY" "$log" && break; sleep 0.1; done
			grep -qs "^READY" "$log" && break
			kill "$app" 2>/dev/null || true
			wait "$app" 2>/dev/null || true
			if ((attempt == 2)); then echo "step $step did not get ready at $size:" >&2; cat "$log" >&2; exit 1; fi
		done
		sleep 0.5
		file=$out/$size/$(printf %02d "$n")-$step.png
		import -display "$display" -window root -crop "${w}x${h}+0+0" +repage -strip -depth 8 -colors 256 PNG8:"$file"
		kill "$app"; wait "$app" 2>/dev/null || true
		echo "wrote ${file#"$PWD"/} ($(du -k "$file" | cut -f1) KiB)"
	done
	kill "$xvfb"; wait "$xvfb" 2>/dev/null || true
	xvfb=
done
