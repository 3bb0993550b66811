package cli

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/talosflash/talosflash/app/contract"
)

// The user's story, after the cards: one control plane with Newt (its
// config has Newt's ExtensionServiceConfig) and two workers, each Pi a
// fake booted from a card flashed by the CLI. One `apply --inventory
// --talosconfig --bootstrap` sends the configs, follows each node (the
// workers run, the control plane waits for its bootstrap), bootstraps etcd
// and follows the control plane to running; `talosflash kubeconfig` merges
// the admin kubeconfig into ~/.kube/config, which clientcmd loads and
// client-go reaches the cluster's API with; `status` shows every node
// NotReady for want of a CNI (Flannel is disabled in the config), then
// Ready once the fake's CNI is installed. No fragment of the cluster's
// PKI, the Newt secret or the kubeconfig's key on any output.
func TestUserStoryFromCardsToKubernetes(t *testing.T) {
	c := newStoryCluster(t)
	inv, tc, port, endpoint, fakes, secrets := c.inv, c.tc, c.port, c.endpoint, c.fakes, c.secrets
	var outputs []string

	// Apply all three, follow them, bootstrap, follow the control plane.
	code, stdout, stderr := cliRun(t, "apply", "--inventory", inv, "--port", port, "--wait", "30s", "--talosconfig", tc,
		"--bootstrap", "--interval", "50ms", "--json")
	outputs = append(outputs, stdout, stderr)
	if code != contract.ExitOK {
		t.Fatalf("apply: exit %d\n%s\n%s", code, stdout, stderr)
	}
	var follows []map[string]any
	for _, ev := range jsonEvents(t, stdout) {
		if ev["event"] == "follow" {
			follows = append(follows, ev)
		}
	}
	want := []struct{ host, outcome string }{
		{"cp-1", "awaiting-bootstrap"}, {"worker-1", "running"}, {"worker-2", "running"}, // before the bootstrap
		{"cp-1", "running"}, // after it: only its Kubernetes node is not Ready
	}
	if len(follows) != len(want) {
		t.Fatalf("%d follow lines, want %d:\n%s", len(follows), len(want), stdout)
	}
	for i, w := range want {
		if follows[i]["hostname"] != w.host || follows[i]["outcome"] != w.outcome {
			t.Errorf("follow %d: %v, want %s %s", i, follows[i], w.host, w.outcome)
		}
	}
	// Running, its Kubernetes node not Ready: whether its kubelet has
	// registered yet is a race the node reports either way (MachineStatus
	// nodeReady: "status is not available yet", then "is not ready").
	if msg := follows[3]["message"].(string); !strings.Contains(msg, `node "cp-1" is not ready`) && !strings.Contains(msg, `node "cp-1" status is not available yet`) {
		t.Errorf("cp-1 after the bootstrap: %s", msg)
	}
	if !strings.Contains(stderr, "next: talosflash kubeconfig --inventory "+inv+" --talosconfig "+tc) {
		t.Errorf("no kubeconfig step:\n%s", stderr)
	}
	cp := fakes["cp-1"].Node()
	api := cp.KubeAPI()
	if api == nil || cp.Bootstraps() != 1 {
		t.Fatalf("cp-1: API %v, %d bootstraps", api, cp.Bootstraps())
	}
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	if err := api.WaitNodes(ctx, 3); err != nil {
		t.Fatal(err)
	}

	// The kubeconfig, merged into ~/.kube/config; client-go reaches the API.
	home := t.TempDir()
	t.Setenv("HOME", home)
	t.Setenv("KUBECONFIG", "")
	code, stdout, stderr = cliRun(t, "kubeconfig", "--inventory", inv, "--port", port, "--talosconfig", tc)
	outputs = append(outputs, stdout, stderr)
	kc := filepath.Join(home, ".kube", "config")
	if code != contract.ExitOK || !strings.Contains(stdout, "wrote a new kubeconfig "+kc+" (0600): cluster homelab, context admin@homelab (current), server "+endpoint) {
		t.Fatalf("kubeconfig: exit %d\n%s\n%s", code, stdout, stderr)
	}
	if st, err := os.Stat(kc); err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("%s: %v %v", kc, st, err)
	}
	if names := nodesThrough(t, kc); strings.Join(names, ",") != "cp-1,worker-1,worker-2" {
		t.Fatalf("client-go sees %v", names)
	}
	secrets = append(secrets, kubeconfigSecrets(t, kc)...)

	// NotReady for want of a CNI, said in the user's words.
	code, stdout, stderr = cliRun(t, "status", "--inventory", inv, "--port", port, "--talosconfig", tc)
	outputs = append(outputs, stdout, stderr)
	if code != contract.ExitOK {
		t.Fatalf("status: exit %d\n%s\n%s", code, stdout, stderr)
	}
	for _, h := range []string{"cp-1", "worker-1", "worker-2"} {
		if w := "  " + h + ": NotReady: no CNI yet — Flannel is disabled in your config; install your CNI (e.g. Cilium) now\n"; !strings.Contains(stdout, w) {
			t.Errorf("status lacks %q:\n%s", w, stdout)
		}
	}
	if !strings.Contains(stdout, "ext-newt Running") {
		t.Errorf("cp-1's Newt does not run:\n%s", stdout)
	}

	// The user installs the CNI: Ready, Kubernetes and Talos alike.
	api.InstallCNI()
	code, stdout, stderr = cliRun(t, "status", "--inventory", inv, "--port", port, "--talosconfig", tc, "--json")
	outputs = append(outputs, stdout, stderr)
	if code != contract.ExitOK {
		t.Fatalf("status --json: exit %d\n%s\n%s", code, stdout, stderr)
	}
	if k := answerMap(t, stdout, "kubernetes"); k["all_ready"] != true || len(k["nodes"].([]any)) != 3 {
		t.Fatalf("kubernetes after the CNI: %v", k)
	}
	for _, l := range statusLines(t, stdout) {
		if l["stage"] != "running" || l["healthy"] != true {
			t.Errorf("%s after the CNI: %v", l["hostname"], l)
		}
	}
	assertNoFragments(t, secrets, outputs...)
	assertNoPEM(t, outputs...)
}
