//go:build unix

package cli

import (
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/talosflash/talosflash/app/contract"
)

// Opening a FIFO waits for a writer: card refuses it before opening.
func TestCardRefusesFIFO(t *testing.T) {
	fifo := filepath.Join(t.TempDir(), "fifo")
	if err := unix.Mkfifo(fifo, 0o600); err != nil {
		t.Skipf("mkfifo: %v", err)
	}

	code, _, stderr := cliRun(t, "card", fifo)
	if code != contract.ExitUsage || !strings.Contains(stderr, "not a disk or an image file") {
		t.Fatalf("fifo: %d %q", code, stderr)
	}
}
