#!/usr/bin/env bash
# Regenerates the Talos 1.14 test fixtures under node/testdata/talos114/ with
# the talosctl found on PATH (a Talos v1.14 release binary: its
# `talosctl gen config` writes the configs, `talosctl validate` judges them):
#
#   scripts/gen-talos114-fixtures.sh
#
# Writes two sets, each controlplane.yaml, worker.yaml and talosconfig made
# by `talosctl gen config homelab https://192.168.1.20:6443 --install-disk
# /dev/sda` with the user's patches (below) and a fresh, throwaway PKI
# (test-only: never use them for a real cluster):
#   user/   the user's patches as they are (Talos v1.14.0-rc.1 refuses parts of them)
#   valid/  the same without the two patches v1.14.0-rc.1 refuses
# then app/gui/testdata/controlplane-no-esc.yaml (valid/controlplane.yaml
# without its Newt ExtensionServiceConfig, for the app's demo), and records
# each file's `talosctl validate --mode metal` verdict in the README there.
# Nothing else is needed: no network, no other repository.
set -euo pipefail

if ! command -v talosctl >/dev/null; then
	echo "$0: needs talosctl v1.14 on PATH (a release binary from https://github.com/siderolabs/talos/releases)" >&2
	exit 2
fi
if ! talosctl version --client --short 2>/dev/null | grep -q 'v1\.14\.'; then
	echo "$0: talosctl on PATH is not v1.14: $(talosctl version --client --short 2>&1 | tr '\n' ' ')" >&2
	exit 2
fi
root=$(cd "$(dirname "$0")/.." && pwd)
out=$root/node/testdata/talos114

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
p=$tmp/patches
mkdir -p "$p"

# The user's patches. patch.yaml (every node): no Flannel, no kube-proxy
# (the user installs Cilium); Talos v1.14.0-rc.1 refuses KubeProxyConfig on
# a worker, so valid/ gives the kube-proxy half to the control plane only.
cat >"$p/no-flannel.yaml" <<'EOF'
apiVersion: v1alpha1
kind: KubeFlannelCNIConfig
$patch: delete
EOF
cat >"$p/no-kube-proxy.yaml" <<'EOF'
apiVersion: v1alpha1
kind: KubeProxyConfig
enabled: false
EOF
cat "$p/no-flannel.yaml" >"$p/patch.yaml"
printf -- '---\n' >>"$p/patch.yaml"
cat "$p/no-kube-proxy.yaml" >>"$p/patch.yaml"

cat >"$p/controlplane-schedulable.yaml" <<'EOF'
cluster:
  allowSchedulingOnControlPlanes: true
EOF

# installer-<role>.yaml as the user kept them (before talosflash schematic
# --installer-yaml wrote the whole document): the installer image only, in
# an UnattendedInstallConfig that replaces the generated one, so its
# provisioning.diskSelector is gone (v1.14.0-rc.1 requires it: user/ only).
installer() { # role schematic-id
	cat <<EOF
apiVersion: v1alpha1
kind: UnattendedInstallConfig
\$patch: delete
---
apiVersion: v1alpha1
kind: UnattendedInstallConfig
installer:
  image: factory.talos.dev/metal-installer/$2:v1.14.5
provisioning:
  wipe: false
EOF
}
installer controlplane 29a2fae6a7f059e83882db3447b6411d474c6154d8cd1a34ec27779ab198f50d >"$p/installer-controlplane.yaml"
installer worker ee21ef4a5ef808a9b7484cc0dda0f25075021691c8c09a276591eedb638ea1f9 >"$p/installer-worker.yaml"

cat >"$p/worker-local-path.yaml" <<'EOF'
apiVersion: v1alpha1
kind: UserVolumeConfig
name: local-path-provisioner
volumeType: directory
EOF

# Newt on the control plane (its image carries the extension). The values
# are throwaway test values; tests look for them (node/patch_test.go).
cat >"$p/newt.yaml" <<'EOF'
apiVersion: v1alpha1
kind: ExtensionServiceConfig
name: newt
environment:
  - PANGOLIN_ENDPOINT=https://pangolin.example.net
  - NEWT_ID=n3wt1d0000000042
  - NEWT_SECRET=S3cr3tN3wtV4lu3zz9Qk7
EOF

gen() { # set, then the patch flags
	local set=$1
	shift
	talosctl gen config homelab https://192.168.1.20:6443 --install-disk /dev/sda \
		--output "$tmp/$set" "$@" \
		--config-patch-control-plane @"$p/controlplane-schedulable.yaml" \
		--config-patch-control-plane @"$p/newt.yaml" \
		--config-patch-worker @"$p/worker-local-path.yaml" 2>"$tmp/$set.log" || {
		cat "$tmp/$set.log" >&2
		exit 1
	}
	rm -rf "${out:?}/$set"
	mkdir -p "$out/$set"
	cp "$tmp/$set"/{controlplane.yaml,worker.yaml,talosconfig} "$out/$set/"
}
gen user --config-patch @"$p/patch.yaml" \
	--config-patch-control-plane @"$p/installer-controlplane.yaml" \
	--config-patch-worker @"$p/installer-worker.yaml"
gen valid --config-patch @"$p/no-flannel.yaml" \
	--config-patch-control-plane @"$p/no-kube-proxy.yaml"

# The app's demo (app/gui/demo.go) shows the incident on a real 1.14 control
# plane config: the generated one without its Newt ExtensionServiceConfig.
{
	echo "# TEST ONLY: node/testdata/talos114/valid/controlplane.yaml without its Newt ExtensionServiceConfig"
	echo "# (scripts/gen-talos114-fixtures.sh): a throwaway PKI, never for a real cluster."
	awk 'BEGIN { RS = "\n---\n"; ORS = "" } !/\nkind: ExtensionServiceConfig\n/ && !/^kind: ExtensionServiceConfig\n/ { if (n++) print "\n---\n"; print }' "$out/valid/controlplane.yaml"
	echo
} >"$root/app/gui/testdata/controlplane-no-esc.yaml"

verdict() {
	local v
	v=$(talosctl validate --config "$1" --mode metal 2>&1) || true
	printf '%s' "$v" | head -c 2000 | tr '\n' ' '
}

{
	cat <<'TEXT'
# Talos 1.14 configs as `talosctl gen config` v1.14 writes them (TEST ONLY)

Made by `scripts/gen-talos114-fixtures.sh` with a Talos v1.14 `talosctl`:
`talosctl gen config homelab https://192.168.1.20:6443 --install-disk /dev/sda` with the user's
patches (`patch.yaml`: no Flannel, no kube-proxy; `controlplane-schedulable.yaml`;
`installer-<role>.yaml`; `worker-local-path.yaml`; a Newt ExtensionServiceConfig on the control
plane), each set with a fresh PKI. The script holds the patches and regenerates both sets with
the `talosctl` on PATH.

**The PKI, tokens and the Newt secret in these files are throwaway test values made for this
directory. They must never be used for a real cluster.** Tests check that no fragment of them ever
appears in the tool's output (`nodetest.SecretFragments`).

- `user/`: the user's patches as they are. Talos v1.14.0-rc.1 refuses parts of them: the installer
  patch replaces the generated `UnattendedInstallConfig` and drops `provisioning.diskSelector` (which
  rc.1's message calls `volumeSelector`), and `patch.yaml` puts `KubeProxyConfig` on the worker.
- `valid/`: the same without those two patches (kube-proxy disabled on the control plane only).

Verdicts of `talosctl validate --config FILE --mode metal` when generated:

TEXT
	for set in user valid; do
		for f in controlplane.yaml worker.yaml; do
			printf -- '- `%s/%s`: %s\n' "$set" "$f" "$(verdict "$out/$set/$f")"
		done
	done
	printf -- '- `app/gui/testdata/controlplane-no-esc.yaml` (valid/controlplane.yaml without the Newt ExtensionServiceConfig, for the demo): %s\n' \
		"$(verdict "$root/app/gui/testdata/controlplane-no-esc.yaml")"
} >"$out/README.md"
cat "$out/README.md"
