#!/usr/bin/env bash
# Captures each step of the desktop app into docs/screenshots/*.png.
# Runs the real UI (built with -tags demo) under Xvfb against a fake Image
# Factory on 127.0.0.1 and a file as the SD card: no hardware, no network.
set -euo pipefail
cd "$(dirname "$0")/.."

out=docs/screenshots
all=(image card confirm flashing done nodes findings)
steps=("${@:-${all[@]}}") # optional: only these steps
bin=$(mktemp -d)/talosflash-demo
go build -tags demo -o "$bin" ./app/gui/cmd/demo
mkdir -p "$out"

display=:97
Xvfb "$display" -screen 0 1000x700x24 -nolisten tcp >/dev/null 2>&1 &
xvfb=$!
cleanup() { kill "$xvfb" 2>/dev/null || true; rm -rf "$(dirname "$bin")"; }
trap cleanup EXIT
for _ in $(seq 50); do xdpyinfo -display "$display" >/dev/null 2>&1 && break; sleep 0.1; done

for step in "${steps[@]}"; do
	i=0; for s in "${all[@]}"; do [[ $s == "$step" ]] && break; i=$((i + 1)); done
	log=$(dirname "$bin")/$step.log
	DISPLAY=$display LIBGL_ALWAYS_SOFTWARE=1 "$bin" -step "$step" >"$log" 2>&1 &
	app=$!
	for _ in $(seq 300); do grep -qs "^READY" "$log" && break; sleep 0.1; done
	if ! grep -qs "^READY" "$log"; then
		echo "step $step did not get ready:" >&2; cat "$log" >&2; kill "$app" || true; exit 1
	fi
	sleep 0.5
	file=$(printf '%s/%d-%s.png' "$out" $((i + 1)) "$step")
	import -display "$display" -window root -crop 1000x700+0+0 +repage -strip -depth 8 -colors 256 PNG8:"$file"
	kill "$app"; wait "$app" 2>/dev/null || true
	echo "wrote $file ($(du -k "$file" | cut -f1) KiB)"
done
