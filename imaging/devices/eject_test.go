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
