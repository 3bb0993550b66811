#!/usr/bin/env bash
# Captures the desktop app into docs/screenshots/*.png.
#
# 1-8 come from the real-window end-to-end test (app/gui/e2e): the real
# talosflash binary under Xvfb, driven by keyboard through xdotool, flashing
# a loop device from a fake Image Factory on 127.0.0.1, then scanning for a
# fake Talos node on 127.0.0.131 (--subnet 127.0.0.131/32) and applying its
# config. It needs root (losetup), Xvfb, xdotool and ImageMagick's import
# (scripts/setup.sh installs them).
# 9 (a config blocked by the incident check, three canned nodes), 11 (a
# local image file in step 1) and 12-15 (issues 29 and 30: one of two cards
# out of space, Apply all with a blocked node and a card of the wrong
# image, a second card for a node, the nodes followed after their config:
# the incident's countdown, Kubernetes waiting for a CNI) come from the demo
# build (-tags demo; the status step runs three configured fake nodes on
# 127.0.0.61-63, and reads the configs of node/testdata/talos114/valid).
#
#   scripts/screenshots.sh               # all
#   scripts/screenshots.sh demo STEP...  # demo steps only (image local card confirm flashing done nodes findings
#                                        # failed applyall second status), written as demo-STEP.png or the
#                                        # numbered names below
set -euo pipefail
cd "$(dirname "$0")/.."
out=$PWD/docs/screenshots
mkdir -p "$out"

demo_steps=(findings local failed applyall second status)
if [[ ${1:-} == demo ]]; then
	shift
	demo_steps=("$@")
else
	log=$(mktemp)
	if ! TALOSFLASH_SCREENSHOTS=$out go test -count=1 -v -run TestRealWindowFlashesLoopDevice ./app/gui/e2e/ >"$log" 2>&1 ||
		! grep -q -- "--- PASS" "$log"; then
		echo "the real-window test did not run to the end:" >&2; cat "$log" >&2; rm -f "$log"; exit 1
	fi
	rm -f "$log"
	for f in "$out"/[1-8]-*.png; do echo "wrote ${f#"$PWD"/} ($(du -k "$f" | cut -f1) KiB)"; done
fi

all=(image local card confirm flashing done nodes findings failed applyall second status)
bin=$(mktemp -d)/talosflash-demo
go build -tags demo -o "$bin" ./app/gui/cmd/demo

display=:97
Xvfb "$display" -screen 0 1000x700x24 -nolisten tcp >/dev/null 2>&1 &
xvfb=$!
cleanup() { kill "$xvfb" 2>/dev/null || true; rm -rf "$(dirname "$bin")"; }
trap cleanup EXIT
for _ in $(seq 50); do xdpyinfo -display "$display" >/dev/null 2>&1 && break; sleep 0.1; done

for step in "${demo_steps[@]}"; do
	if ! printf '%s\n' "${all[@]}" | grep -qx "$step"; then echo "unknown demo step $step" >&2; exit 2; fi
	log=$(dirname "$bin")/$step.log
	DISPLAY=$display LIBGL_ALWAYS_SOFTWARE=1 "$bin" -step "$step" >"$log" 2>&1 &
	app=$!
	for _ in $(seq 300); do grep -qs "^READY" "$log" && break; sleep 0.1; done
	if ! grep -qs "^READY" "$log"; then
		echo "step $step did not get ready:" >&2; cat "$log" >&2; kill "$app" || true; exit 1
	fi
	sleep 0.5
	file=$out/demo-$step.png
	case $step in
	findings) file=$out/9-findings.png ;;
	local) file=$out/11-local-image.png ;;
	failed) file=$out/12-failed-card.png ;;
	applyall) file=$out/13-apply-all.png ;;
	second) file=$out/14-second-card.png ;;
	status) file=$out/15-status.png ;;
	esac
	import -display "$display" -window root -crop 1000x700+0+0 +repage -strip -depth 8 -colors 256 PNG8:"$file"
	kill "$app"; wait "$app" 2>/dev/null || true
	echo "wrote ${file#"$PWD"/} ($(du -k "$file" | cut -f1) KiB)"
done
