package devices

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestEjectImageFileOnlyFlushes(t *testing.T) {
	p := filepath.Join(t.TempDir(), "card.img")
	if err := os.WriteFile(p, []byte("data"), 0o600); err != nil {
		t.Fatal(err)
	}
	e := Eject(context.Background(), p)
	if !e.Flushed || e.PoweredOff || !strings.Contains(e.Note, "image file") {
		t.Fatalf("Eject(file) = %+v", e)
	}
	if b, _ := os.ReadFile(p); string(b) != "data" {
		t.Fatalf("file changed: %q", b)
	}
}

func TestEjectGoneCard(t *testing.T) {
	e := Eject(context.Background(), filepath.Join(t.TempDir(), "missing"))
	if e.Flushed || e.PoweredOff || !strings.Contains(e.Note, "removed") {
		t.Fatalf("Eject(missing) = %+v", e)
	}
}

// udisks2 refusing the power-off (a partition mounted meanwhile) is told
// apart from a card that is safe to remove.
func TestEjectPowerOffRefused(t *testing.T) {
	fake := filepath.Join(t.TempDir(), "udisksctl")
	if err := os.WriteFile(fake, []byte("#!/bin/sh\necho 'Error powering off drive: device is mounted' >&2\nexit 1\n"), 0o700); err != nil {
		t.Fatal(err)
	}
	old := udisksctl
	udisksctl = fake
	t.Cleanup(func() { udisksctl = old })
	e := Eject(context.Background(), "/dev/null") // a device node that is not a loop device
	if !e.PowerOffFailed || e.PoweredOff || !strings.Contains(e.Note, "device is mounted") {
		t.Fatalf("%+v", e)
	}
}
