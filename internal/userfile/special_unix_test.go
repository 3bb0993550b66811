//go:build unix

package userfile

import (
	"path/filepath"
	"syscall"
	"testing"
)

// addSpecialFiles adds a FIFO and a character device to the files Read
// must refuse, with what the refusal names.
func addSpecialFiles(t *testing.T, dir string, names map[string]string) {
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	names[fifo] = "a FIFO"
	names["/dev/zero"] = "a character device"
}
