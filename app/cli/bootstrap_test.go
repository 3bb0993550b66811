package cli

import (
	"encoding/json"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/talosflash/talosflash/app/contract"
	"github.com/talosflash/talosflash/node/nodetest"
)

// talosconfigFile writes a talosconfig with fresh key material and returns
// its path and every 12-character fragment of its CA, certificate and key
// (base64 and PEM), which must never appear on any output.
func talosconfigFile(t *testing.T, pki *nodetest.PKI, role string) (string, []string) {
	t.Helper()
	data, err := pki.Talosconfig("home", role, "127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), "talosconfig")
	if err := os.WriteFile(p, data, 0o600); err != nil {
		t.Fatal(err)
	}
	frags, err := nodetest.SecretFragments(data)
	if err != nil {
		t.Fatal(err)
	}
	return p, frags
}

func assertNoFragments(t *testing.T, frags []string, outputs ...string) {
	t.Helper()
	all := strings.Join(outputs, "\n")
	for _, f := range frags {
		if strings.Contains(all, f) {
			t.Fatalf("talosconfig material %q on an output path:\n%s", f, all)
		}
	}
}

func newTestPKI(t *testing.T) *nodetest.PKI {
	t.Helper()
	pki, err := nodetest.NewPKI()
	if err != nil {
		t.Fatal(err)
	}
	return pki
}

func TestBootstrapCommand(t *testing.T) {
	pki := newTestPKI(t)
	n := nodetest.StartNode(t, nodetest.NodeOptions{PKI: pki})
	tc, frags := talosconfigFile(t, pki, "os:admin")

	code, stdout, stderr := cliRun(t, "bootstrap", "--node", n.Addr(), "--talosconfig", tc)
	if code != contract.ExitOK || !n.Bootstrapped() || n.Bootstraps() != 1 {
		t.Fatalf("exit %d, bootstrapped %v (%d calls)\n%s%s", code, n.Bootstrapped(), n.Bootstraps(), stdout, stderr)
	}
	host, _, _ := net.SplitHostPort(n.Addr())
	// The next step as a command that works with gen config's talosconfig
	// (endpoints: []): it named no endpoint ("talosctl ... kubeconfig -n IP").
	next := "Next: talosflash kubeconfig --node " + n.Addr() + " --talosconfig " + tc + " (or talosctl --talosconfig " + tc + " --nodes " + host + " --endpoints " + n.Addr() + " kubeconfig)"
	for _, want := range []string{"waiting for the Talos API", "bootstrapping etcd", "etcd is running and healthy", "bootstrapped etcd on " + n.Addr(), next} {
		if !strings.Contains(stdout, want) {
			t.Errorf("stdout lacks %q:\n%s", want, stdout)
		}
	}
	assertNoFragments(t, frags, stdout, stderr)

	// Second time: refused, exit 8, nothing sent.
	code, stdout, stderr = cliRun(t, "bootstrap", "-n", n.Addr(), "--talosconfig", tc, "--json")
	if code != contract.ExitApply || n.Bootstraps() != 1 || !strings.Contains(stderr, "already bootstrapped") {
		t.Fatalf("second bootstrap: exit %d, %d calls\n%s%s", code, n.Bootstraps(), stdout, stderr)
	}
	assertNoFragments(t, frags, stdout, stderr)

	// --json on a fresh node: one JSON object on stdout, progress on stderr.
	n2 := nodetest.StartNode(t, nodetest.NodeOptions{PKI: pki})
	code, stdout, stderr = cliRun(t, "bootstrap", "-n", n2.Addr(), "--talosconfig", tc, "--json")
	var got map[string]any
	if code != contract.ExitOK || json.Unmarshal(answer(t, stdout, "bootstrap"), &got) != nil || got["etcd_healthy"] != true || !strings.Contains(stderr, "bootstrapping etcd") {
		t.Fatalf("json: exit %d\n%s\n%s", code, stdout, stderr)
	}
}

func TestBootstrapCommandBadTalosconfig(t *testing.T) {
	pki := newTestPKI(t)
	n := nodetest.StartNode(t, nodetest.NodeOptions{PKI: pki})
	tc, frags := talosconfigFile(t, pki, "os:admin")
	data, _ := os.ReadFile(tc)
	broken := filepath.Join(t.TempDir(), "broken")
	// Cut the key in half: its tail must not be echoed.
	text := string(data)
	i := strings.Index(text, "key: ") + 40
	if err := os.WriteFile(broken, []byte(text[:i]+"\n  x: [\n"+text[i:]), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"bootstrap", "--node", n.Addr(), "--talosconfig", broken},
		{"bootstrap", "--node", n.Addr(), "--talosconfig", tc, "--context", "nope"},
		{"bootstrap", "--node", n.Addr()},
		{"upgrade", "--node", n.Addr(), "--to", "v1.14.6", "--talosconfig", broken},
	} {
		t.Setenv("TALOSCONFIG", "")
		code, stdout, stderr := cliRun(t, args...)
		if code != contract.ExitUsage || n.Bootstraps() != 0 {
			t.Fatalf("%v: exit %d\n%s%s", args, code, stdout, stderr)
		}
		assertNoFragments(t, frags, stdout, stderr)
	}
}

func TestLifecycleCommandsUsage(t *testing.T) {
	for _, cmd := range []string{"bootstrap", "upgrade", "outdated"} {
		code, stdout, stderr := cliRun(t, cmd, "-h")
		if code != contract.ExitOK || stderr != "" || !strings.Contains(stdout, "Usage: talosflash "+cmd) || !strings.Contains(stdout, "Example:\n  talosflash "+cmd) {
			t.Errorf("%s -h: exit %d\n%s%s", cmd, code, stdout, stderr)
		}
		for _, line := range strings.Split(stdout, "\n") {
			if len([]rune(line)) > 80 && !strings.HasPrefix(line, "Usage:") && !strings.HasPrefix(line, "  talosflash ") {
				t.Errorf("%s -h: line over 80 columns: %q", cmd, line)
			}
		}
		_, all, _ := cliRun(t, "--help")
		if !strings.Contains(all, "\n  "+cmd+" ") {
			t.Errorf("--help does not list %s", cmd)
		}
	}
}
