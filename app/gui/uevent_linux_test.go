package gui

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// A loop device attached (a card inserted) is a block uevent: the device
// list is read again without polling.
func TestBlockEventsSeeALoopDevice(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to attach a loop device")
	}
	if _, err := exec.LookPath("losetup"); err != nil {
		t.Skip("losetup not installed")
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	events := BlockEvents(ctx)
	if events == nil {
		t.Skip("no uevent socket here (a container without netlink)")
	}
	file := filepath.Join(t.TempDir(), "card.img")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(file, 1<<20); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("losetup", "-f", "--show", file).Output()
	if err != nil {
		t.Skipf("cannot attach a loop device: %v", err)
	}
	dev := strings.TrimSpace(string(out))
	t.Cleanup(func() { _ = exec.Command("losetup", "-d", dev).Run() })
	select {
	case <-events:
	case <-time.After(20 * time.Second): // a backstop: the event comes at once
		t.Fatalf("no block uevent for %s", dev)
	}
}
