package cli

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/talosflash/talosflash/app/contract"
	"github.com/talosflash/talosflash/internal/testkit"
)

// status shows the Kubernetes view once a kubeconfig reaches the cluster:
// found in ~/.kube/config after `talosflash kubeconfig` (its context's
// server is cp-1), each node NotReady with the CNI reason read from the
// control plane's config (no KubeFlannelCNIConfig, kube-proxy disabled) and
// the kubelet's words; Ready once the fake's CNI is installed. --json: a
// `kubernetes` line with the documented keys.
func TestStatusKubernetesView(t *testing.T) {
	kport := strconv.Itoa(testkit.FreePort(t, "127.0.0.71"))
	c := startCluster(t, "127.0.0.71", "127.0.0.72", "https://127.0.0.71:"+kport)
	home := t.TempDir()
	t.Setenv("HOME", home)
	t.Setenv("KUBECONFIG", "")
	if code, stdout, stderr := cliRun(t, "kubeconfig", "--inventory", c.inv, "--port", c.port, "--talosconfig", c.tc); code != contract.ExitOK {
		t.Fatalf("kubeconfig: exit %d\n%s\n%s", code, stdout, stderr)
	}
	secrets := append(kubeconfigSecrets(t, filepath.Join(home, ".kube", "config")), c.frags...)

	code, stdout, stderr := cliRun(t, "status", "--inventory", c.inv, "--port", c.port, "--talosconfig", c.tc)
	if code != contract.ExitOK {
		t.Fatalf("status: exit %d\n%s\n%s", code, stdout, stderr)
	}
	for _, want := range []string{
		"Kubernetes (context admin@homelab, https://127.0.0.71:" + kport + "):",
		"  cp-1: NotReady: no CNI yet — Flannel is disabled in your config; install your CNI (e.g. Cilium) now\n",
		"  worker-1: NotReady: no CNI yet — Flannel is disabled in your config; install your CNI (e.g. Cilium) now\n",
		"kubelet: KubeletNotReady: container runtime network not ready: NetworkReady=false reason:NetworkPluginNotReady message:Network plugin returns error: cni plugin not initialized",
		"fix: the nodes turn Ready once the CNI's pods run on them (Flannel is off: no KubeFlannelCNIConfig document); kube-proxy is disabled too",
		`unmet: nodeReady: node "worker-1" is not ready`,
	} {
		if !strings.Contains(stdout, want) {
			t.Errorf("stdout lacks %q:\n%s", want, stdout)
		}
	}
	assertNoFragments(t, secrets, stdout, stderr)

	c.cp.Node().KubeAPI().InstallCNI()
	kc := filepath.Join(home, ".kube", "config")
	code, stdout, stderr = cliRun(t, "status", "--inventory", c.inv, "--port", c.port, "--talosconfig", c.tc, "--kubeconfig", kc, "--json")
	if code != contract.ExitOK {
		t.Fatalf("status --json: exit %d\n%s\n%s", code, stdout, stderr)
	}
	var line string
	for _, l := range strings.Split(strings.TrimSpace(stdout), "\n") {
		if strings.Contains(l, `"event":"kubernetes"`) {
			line = l
		}
	}
	if line == "" {
		t.Fatalf("no kubernetes line:\n%s", stdout)
	}
	keys := assertSnakeCase(t, "kubernetes", []byte(line))
	wantKeys(t, "kubernetes", keys, "context", "server", "time", "reachable", "cni.flannel", "cni.source", "cni.kube_proxy_disabled",
		"nodes", "nodes.name", "nodes.hostname", "nodes.internal_ip", "nodes.ready", "nodes.reason", "nodes.message", "nodes.since", "nodes.no_cni",
		"nodes.diagnosis", "all_ready")
	docRowKeys(t, "| `status --json` (Kubernetes)", keys)
	m := answerMap(t, stdout, "kubernetes")
	if m["all_ready"] != true || len(m["nodes"].([]any)) != 2 {
		t.Fatalf("after the CNI: %v", m)
	}
	for _, l := range statusLines(t, stdout) {
		if l["ready"] != true || l["healthy"] != true {
			t.Errorf("%s after the CNI: %v", l["hostname"], l)
		}
	}
	assertNoFragments(t, secrets, stdout, stderr)

	// A kubeconfig named but missing is a usage error; none found is no section.
	if code, _, stderr := cliRun(t, "status", "--inventory", c.inv, "--port", c.port, "--talosconfig", c.tc, "--kubeconfig", filepath.Join(home, "nope")); code != contract.ExitUsage {
		t.Errorf("missing --kubeconfig: exit %d: %s", code, stderr)
	}
	if err := os.Remove(kc); err != nil {
		t.Fatal(err)
	}
	if _, stdout, _ := cliRun(t, "status", "--inventory", c.inv, "--port", c.port, "--talosconfig", c.tc); strings.Contains(stdout, "Kubernetes (") {
		t.Errorf("a Kubernetes section without a kubeconfig:\n%s", stdout)
	}
}

// docRowKeys: every key's leaf is in the docs/JSON.md row starting with prefix.
func docRowKeys(t *testing.T, prefix string, keys map[string]bool) {
	t.Helper()
	doc, err := os.ReadFile("../../docs/JSON.md")
	if err != nil {
		t.Fatal(err)
	}
	var row string
	for _, l := range strings.Split(string(doc), "\n") {
		if strings.HasPrefix(l, prefix) {
			row = l
		}
	}
	if row == "" {
		t.Fatalf("docs/JSON.md has no row %q", prefix)
	}
	for k := range keys {
		leaf := k[strings.LastIndex(k, ".")+1:]
		if leaf != "event" && leaf != "contract" && !strings.Contains(row, "`"+leaf+"`") {
			t.Errorf("docs/JSON.md's row %q lacks `%s`", prefix, leaf)
		}
	}
}
