package devices

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// An active swap file as the target is refused by the safety rules
// (CodeSwap, exit 5 in the CLI), as a disk with swap on it is, before
// anything is opened: the kernel's "text file busy" on the truncate came
// first (exit 1).
func TestCheckRefusesActiveSwapFile(t *testing.T) {
	l := buildFakeSystem(t, fakeSystem)
	dir := t.TempDir()
	swap := filepath.Join(dir, "swap file.img")
	if err := os.WriteFile(swap, make([]byte, 4096), 0o600); err != nil {
		t.Fatal(err)
	}
	l.ProcSwaps = filepath.Join(dir, "swaps")
	table := "Filename\t\t\t\tType\t\tSize\t\tUsed\t\tPriority\n" +
		strings.ReplaceAll(swap, " ", `\040`) + "                        file\t\t4\t\t0\t\t-2\n"
	if err := os.WriteFile(l.ProcSwaps, []byte(table), 0o600); err != nil {
		t.Fatal(err)
	}
	var r *RefusedError
	// Through another name (a symlink) it is the same file.
	link := filepath.Join(dir, "card.img")
	if err := os.Symlink(swap, link); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{swap, link} {
		_, err := l.Check(p, 0, Options{})
		if !errors.As(err, &r) || r.Reason != CodeSwap || !strings.Contains(r.Msg, "active swap file") || !strings.Contains(r.Msg, "swapoff") {
			t.Fatalf("Check(%s): %v, want a swap refusal", p, err)
		}
	}
	// Another file is a file target as before.
	other := filepath.Join(dir, "other.img")
	if err := os.WriteFile(other, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if d, err := l.Check(other, 0, Options{}); err != nil || d.Transport != TransportFile {
		t.Fatalf("other file: %+v %v", d, err)
	}
}
