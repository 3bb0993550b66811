package node

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/talosflash/talosflash/node/nodetest"
)

// The shapes a Talos dry-run diff takes (a unified diff of the encoder's
// YAML documents): every value off the allow-list and every non-schema key
// is replaced, the structure stays.
func TestRedactDiffStructures(t *testing.T) {
	const s = "Sq9vLmT2wX"
	for _, c := range []struct{ name, in, want string }{
		{"maps, list items, public and typed values",
			"+version: v1alpha1\n+machine:\n+    type: worker\n+    network:\n+        interfaces:\n+            - interface: end0\n+              mtu: 1500\n+              dhcp: true\n+              addresses:\n+                - 10.0.0.2/24\n+              routes:\n+                - network: 0.0.0.0/0\n+                  gateway: " + s + "\n+    nodeLabels:\n+        " + s + ": " + s + "\n+    certSANs:\n+        - 10.0.0.2\n+        - " + s + " with space",
			"+version: v1alpha1\n+machine:\n+    type: worker\n+    network:\n+        interfaces:\n+            - interface: end0\n+              mtu: 1500\n+              dhcp: true\n+              addresses:\n+                - 10.0.0.2/24\n+              routes:\n+                - network: 0.0.0.0/0\n+                  gateway: <redacted>\n+    nodeLabels:\n+        <redacted>: <redacted>\n+    certSANs:\n+        - 10.0.0.2\n+        - <redacted>"},
		{"several documents, ESC environment, unknown kind",
			"+machine:\n+    type: worker\n+---\n+apiVersion: v1alpha1\n+kind: ExtensionServiceConfig\n+name: newt\n+environment:\n+    - NEWT_SECRET=" + s + "\n+---\n+apiVersion: v1alpha1\n+kind: FutureConfig\n+name: x\n+secretThing: " + s,
			"+machine:\n+    type: worker\n+---\n+apiVersion: v1alpha1\n+kind: ExtensionServiceConfig\n+name: newt\n+environment:\n+    - NEWT_SECRET=<redacted>\n+---\n+apiVersion: v1alpha1\n+kind: FutureConfig\n+name: x\n+<redacted>: <redacted>"},
		{"block scalars and multi-line plain scalars",
			"+machine:\n+    files:\n+        - content: |-\n+            a " + s + "\n+\n+            b " + s + "\n+          path: /var/f\n+    kubelet:\n+        image: ghcr.io/siderolabs/kubelet:v1.34.1\n+        extraArgs:\n+            a: first " + s + "\n+                second " + s + "\n+        defaultRuntimeSeccompProfileEnabled: true",
			"+machine:\n+    files:\n+        - content: |-\n+            <redacted>\n+          path: /var/f\n+    kubelet:\n+        image: ghcr.io/siderolabs/kubelet:v1.34.1\n+        extraArgs:\n+            <redacted>: <redacted>\n+                <redacted>\n+        defaultRuntimeSeccompProfileEnabled: true"},
		{"flow mappings and sequences, over lines",
			"+cluster:\n+    clusterName: homelab\n+    extraManifestHeaders: {X-A: " + s + ", X-B: " + s + "}\n+    network:\n+        podSubnets: [10.244.0.0/16, " + s + "]\n+        dnsDomain: cluster.local\n+    apiServer:\n+        extraArgs: {a: " + s + ",\n+            b: " + s + "}\n+        image: registry.k8s.io/kube-apiserver:v1.34.1",
			"+cluster:\n+    clusterName: homelab\n+    extraManifestHeaders: <redacted>\n+    network:\n+        podSubnets: <redacted>\n+        dnsDomain: cluster.local\n+    apiServer:\n+        extraArgs: <redacted>\n+            <redacted>\n+        image: registry.k8s.io/kube-apiserver:v1.34.1"},
		{"old and new sides, a hunk that starts mid-document",
			"--- a\n+++ b\n@@ -1,3 +1,3 @@\n version: v1alpha1\n machine:\n-    type: " + s + "\n+    type: worker\n@@ -40,3 +40,3 @@ " + s + "\n         hostname: " + s + "\n-        disk: /dev/sda\n+        image: " + s,
			"--- a\n+++ b\n@@ -1,3 +1,3 @@\n version: v1alpha1\n machine:\n-    type: <redacted>\n+    type: worker\n@@ -40,3 +40,3 @@\n         <redacted>: <redacted>\n-        <redacted>: <redacted>\n+        <redacted>: <redacted>"},
		{"quoted keys and values, URLs with credentials",
			"+cluster:\n+    controlPlane:\n+        endpoint: https://u:" + s + "@host:6443\n+    extraManifestHeaders:\n+        \"X: " + s + "\": '" + s + "'\n+    clusterName: 'homelab'",
			"+cluster:\n+    controlPlane:\n+        endpoint: <redacted>\n+    extraManifestHeaders:\n+        <redacted>: <redacted>\n+    clusterName: 'homelab'"},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := redactDiff(c.in)
			if got != c.want {
				t.Errorf("got:\n%s\nwant:\n%s", got, c.want)
			}
			if strings.Contains(got, s) {
				t.Errorf("shows the secret:\n%s", got)
			}
		})
	}
}

// A node's refusal that quotes a value of the config sent (any value off the
// allow-list, whatever it looks like) does not show it.
func TestRefusalEchoScrubbed(t *testing.T) {
	worker := readFixture(t, "worker.yaml")
	secret := "plain words are secrets too"
	cfg := strings.Replace(worker, "cluster:\n", "cluster:\n  extraManifestHeaders:\n    X-Note: "+secret+"\n", 1)
	srv := nodetest.Start(t, nodetest.Options{ApplyErr: status.Error(codes.InvalidArgument,
		`configuration validation failed: header X-Note value "`+secret+`" is `+secret[6:20]+` not allowed`)})
	_, err := Apply(context.Background(), ApplyOptions{Endpoint: srv.Addr(), Config: []byte(cfg)})
	if err == nil {
		t.Fatal("no error")
	}
	for _, f := range nodetest.Fragments(secret[:len(secret)-1]) {
		if strings.Contains(err.Error(), f[:8]) {
			t.Fatalf("error shows %q: %v", f[:8], err)
		}
	}
	if !strings.Contains(err.Error(), "configuration validation failed") {
		t.Errorf("error lost its reason: %v", err)
	}
}

func readFixture(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// A document's name shows when it is a lower-case word or one of Talos'
// upper-case volume names (VolumeConfig name: EPHEMERAL was hidden); a
// name shaped like a token (mixed case, digits) stays hidden.
func TestRedactDocumentNames(t *testing.T) {
	for in, want := range map[string]string{
		"+apiVersion: v1alpha1\n+kind: VolumeConfig\n+name: EPHEMERAL":        "+apiVersion: v1alpha1\n+kind: VolumeConfig\n+name: EPHEMERAL",
		"+apiVersion: v1alpha1\n+kind: UserVolumeConfig\n+name: local-path":   "+apiVersion: v1alpha1\n+kind: UserVolumeConfig\n+name: local-path",
		"+apiVersion: v1alpha1\n+kind: UserVolumeConfig\n+name: Sq9vLmT2wX":   "+apiVersion: v1alpha1\n+kind: UserVolumeConfig\n+name: <redacted>",
		"+apiVersion: v1alpha1\n+kind: UserVolumeConfig\n+name: AB12CD34EF56": "+apiVersion: v1alpha1\n+kind: UserVolumeConfig\n+name: <redacted>",
	} {
		if got := redactDiff(in); got != want {
			t.Errorf("got:\n%s\nwant:\n%s", got, want)
		}
	}
}
