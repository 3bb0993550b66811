package cli

import (
	"strings"
	"testing"

	"github.com/talosflash/talosflash/node/nodetest"
)

// A legacy node (no extension statuses), no --role, and a config whose
// installer is a known schematic: the check can only use the config's own
// installer, and apply says so instead of passing silently.
func TestApplyOnLegacyNodeSaysWhatItCheckedAgainst(t *testing.T) {
	srv := nodetest.Start(t, nodetest.Options{Legacy: true})
	path, _ := testConfig(t, "worker.yaml")
	code, _, stderr := cliRun(t, "apply", "--node", srv.Addr(), "--file", path, "--dry-run", "--factory", "http://127.0.0.1:1")
	if code != ExitOK {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	for _, want := range []string{"does not report what it booted", "config's own install image (ee21ef4a5ef8", "--role"} {
		if !strings.Contains(stderr, want) {
			t.Errorf("stderr lacks %q:\n%s", want, stderr)
		}
	}
}
