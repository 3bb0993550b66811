package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/talosflash/talosflash/app/contract"
	"github.com/talosflash/talosflash/internal/testkit"
	"github.com/talosflash/talosflash/node/nodetest"
)

// The incident recovering in place, through the CLI: worker-1 is stuck
// booting (ext-newt waits for its ExtensionServiceConfig), status says so
// with the countdown and gives patch as the fix; that very patch, run as
// said, sends the document; status then says running, no countdown, no
// ERROR, exit 0; and the node does not reboot at BootTimeout.
func TestIncidentPatchedInPlaceThroughTheCLI(t *testing.T) {
	pki := newTestPKI(t)
	tc, frags := talosconfigFile(t, pki, "os:admin")
	inv, port := statusInventory(t)
	clock := nodetest.NewClock(12 * time.Minute)
	w1 := nodetest.StartNode(t, nodetest.NodeOptions{PKI: pki, Addr: "127.0.0.32:" + port, Worker: true, Hostname: "worker-1",
		Schematic: builtinSchematic(t, "controlplane"), Stage: "booting", WaitingExtensions: []string{"newt"}, Clock: clock,
		Config: testkit.Testdata(t, "talos114/valid/worker.yaml"), RebootDowntime: 20 * time.Millisecond})

	code, stdout, stderr := cliRun(t, "status", "--inventory", inv, "--hostname", "worker-1", "--port", port, "--talosconfig", tc)
	const fix = "talosflash patch --inventory "
	if code != contract.ExitConfig || !strings.Contains(stdout, "in about 58 min") || !strings.Contains(stdout, fix) {
		t.Fatalf("stuck: exit %d\n%s%s", code, stdout, stderr)
	}
	dir := t.TempDir()
	esc := filepath.Join(dir, "newt.yaml")
	if err := os.WriteFile(esc, []byte("apiVersion: v1alpha1\nkind: ExtensionServiceConfig\nname: newt\nenvironment:\n"+
		"    - PANGOLIN_ENDPOINT=https://pangolin.example.net\n    - NEWT_ID=n3wt1d0000000042\n    - NEWT_SECRET=N3wS3cr3tV4lu3Xq8Zp1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	code, pout, perr := cliRun(t, "patch", "--inventory", inv, "--hostname", "worker-1", "--port", port, "--talosconfig", tc, "--patch", "@"+esc)
	if code != contract.ExitOK {
		t.Fatalf("patch: exit %d\n%s%s", code, pout, perr)
	}
	code, stdout, stderr = cliRun(t, "status", "--inventory", inv, "--hostname", "worker-1", "--port", port, "--talosconfig", tc)
	if code != contract.ExitOK || !strings.Contains(stdout, "running") || strings.Contains(stdout, "ERROR") ||
		strings.Contains(stdout, "in about") || strings.Contains(stdout, "BootTimeout") || !strings.Contains(stdout, "ext-newt Running") {
		t.Fatalf("after the patch: exit %d\n%s%s", code, stdout, stderr)
	}
	boot := w1.BootID()
	clock.Advance(2 * time.Hour)
	if w1.Reboots() != 0 || w1.BootID() != boot {
		t.Fatalf("rebooted after the recovery")
	}
	assertNoFragments(t, append(frags, "N3wS3cr3tV4lu3Xq8Zp1", "n3wt1d0000000042"), stdout, stderr, pout, perr)
}
