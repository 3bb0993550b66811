package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"

	"github.com/talosflash/talosflash/app/contract"
	"github.com/talosflash/talosflash/node/nodetest"
)

// cancelWriter collects output and cancels when a line holds any of marks:
// a Ctrl-C at a known step, without timing.
type cancelWriter struct {
	mu     sync.Mutex
	buf    bytes.Buffer
	marks  []string
	cancel context.CancelFunc
}

func (w *cancelWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, m := range w.marks {
		if bytes.Contains(p, []byte(m)) {
			w.cancel()
		}
	}
	return w.buf.Write(p)
}

// runInterrupted runs the CLI, "pressing Ctrl-C" when the progress (on
// stderr with --json) shows one of marks; it returns the exit code, stdout
// and stderr as Main would.
func runInterrupted(t *testing.T, marks []string, args ...string) (int, string, string) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var stdout bytes.Buffer
	stderr := &cancelWriter{marks: marks, cancel: cancel}
	err := run(ctx, args, Env{Stdin: strings.NewReader(""), Stdout: &stdout, Stderr: stderr})
	code := contract.ExitOK
	if err != nil {
		code = exitCode(err)
		stderr.Write([]byte("talosflash: " + err.Error() + "\n"))
	}
	return code, stdout.String(), stderr.buf.String()
}

// Ctrl-C after the reboot was sent: exit 130, and both the message and
// --json say the reboot was requested (it used to say "the node did not
// reboot: context canceled", "rebooted":false and nothing else).
func TestUpgradeCommandInterruptedAfterReboot(t *testing.T) {
	fac, _, _, _ := upgradeFactory(t)
	pki := newTestPKI(t)
	n := nodetest.StartNode(t, nodetest.NodeOptions{PKI: pki, Schematic: builtinSchematic(t, "controlplane"), Bootstrapped: true})
	tc, frags := talosconfigFile(t, pki, "os:admin")
	code, stdout, stderr := runInterrupted(t, []string{"waiting for the reboot", "rebooting (API not answering)", "boot ID changed"},
		"upgrade", "--node", n.Addr(), "--to", "v1.14.6", "--talosconfig", tc, "--factory", fac.URL, "--json")
	if code != contract.ExitInterrupted {
		t.Fatalf("exit %d\n%s\n%s", code, stdout, stderr)
	}
	if strings.Contains(stderr, "did not reboot") || !strings.Contains(stderr, "interrupted") || !strings.Contains(stderr, "reboot") {
		t.Errorf("stderr:\n%s", stderr)
	}
	var got []upgradeJSON
	if err := json.Unmarshal(answer(t, stdout, "upgrade"), &got); err != nil || len(got) != 1 {
		t.Fatalf("json %v:\n%s", err, stdout)
	}
	if r := got[0]; !r.RebootRequested || !r.InstallerPulled || !r.InstallerRun || r.Phase != "reboot-requested" && r.Phase != "rebooted" || r.Interrupted == "" {
		t.Errorf("result %+v", r)
	}
	assertNoFragments(t, frags, stdout, stderr)
}

// Ctrl-C during a bootstrap is not "gave up after 10m0s": it says what was sent.
func TestBootstrapCommandInterrupted(t *testing.T) {
	pki := newTestPKI(t)
	n := nodetest.StartNode(t, nodetest.NodeOptions{PKI: pki, NotReady: 1000})
	tc, _ := talosconfigFile(t, pki, "os:admin")
	code, stdout, stderr := runInterrupted(t, []string{"node not ready for bootstrap yet"}, "bootstrap", "--node", n.Addr(), "--talosconfig", tc, "--json")
	if code != contract.ExitInterrupted || strings.Contains(stderr, "gave up after") || !strings.Contains(stderr, "refused as not ready yet: the node was not bootstrapped") {
		t.Fatalf("exit %d\n%s\n%s", code, stdout, stderr)
	}
	var got map[string]any
	if err := json.Unmarshal(answer(t, stdout, "bootstrap"), &got); err != nil || got["bootstrap_sent"] != true || got["accepted"] != false || got["interrupted"] == nil {
		t.Fatalf("json %v: %s", err, stdout)
	}
}

// Ctrl-C during a scan: the one interruption type, node.InterruptedError
// (exit 130), saying nothing was sent.
func TestNodesScanInterrupted(t *testing.T) {
	code, _, stderr := runInterrupted(t, []string{"scanning"}, "nodes", "--subnet", "127.0.0.0/30")
	if code != contract.ExitInterrupted || !strings.Contains(stderr, "talosflash: scan 127.0.0.0/30 interrupted: the scan stopped; nothing was sent to any node") {
		t.Fatalf("exit %d: %s", code, stderr)
	}
}
