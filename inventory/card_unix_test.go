//go:build unix

package inventory

import (
	"errors"
	"path/filepath"
	"syscall"
	"testing"
)

// A FIFO is refused without being opened (opening it would wait for a
// writer: the card list would hang).
func TestReadCardPathRefusesFIFO(t *testing.T) {
	fifo := filepath.Join(t.TempDir(), "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Skip(err)
	}
	if _, _, err := ReadCardPath(fifo); !errors.Is(err, ErrNotACard) {
		t.Errorf("FIFO: %v", err)
	}
}
