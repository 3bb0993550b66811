package cli

import (
	"bytes"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/talosflash/talosflash/app/contract"
	"github.com/talosflash/talosflash/app/elevate"
)

// childEvents are the elevated child's JSON lines, decoded.
func childEvents(t *testing.T, stdout string) []map[string]any {
	t.Helper()
	var evs []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(stdout), "\n") {
		var ev map[string]any
		if err := json.Unmarshal([]byte(line), &ev); err != nil {
			t.Fatalf("not a JSON line: %q", line)
		}
		evs = append(evs, ev)
	}
	return evs
}

// The elevated child reports each card once, as events: its parent prints
// the lines for the user (the child's own "wrote …" and "next: …" lines
// showed twice through the parent), and one card's failure is that card's
// (an "error" with its device, so the parent keeps the card in its list of
// one) before the child's own "error".
func TestElevatedChildReportsEachCardOnce(t *testing.T) {
	fx := fakeFixture(t)
	dir := t.TempDir()
	img := filepath.Join(dir, "metal-arm64.raw.xz")
	if err := os.WriteFile(img, fx.XZ, 0o600); err != nil {
		t.Fatal(err)
	}
	card := filepath.Join(dir, "card.img")

	code, stdout, stderr := childRun(t, elevate.Args{Devices: []string{card}}, img)
	if code != contract.ExitOK {
		t.Fatalf("exit %d: %s%s", code, stdout, stderr)
	}
	results := 0
	for _, ev := range childEvents(t, stdout) {
		msg, _ := ev["message"].(string)
		switch {
		case ev["event"] == "result":
			results++
			if ev["device"] != card || ev["verified"] != true || ev["sha256"] != fx.SHA256 {
				t.Errorf("result %v", ev)
			}
		case strings.HasPrefix(msg, "wrote ") || strings.HasPrefix(msg, "next: "):
			t.Errorf("the child printed its parent's summary line: %q", msg)
		}
	}
	if results != 1 {
		t.Fatalf("%d result events, want 1: %s", results, stdout)
	}

	// A byte changed on the way (the stream's end names the bytes sent):
	// the card fails on its own, before its partition table is written.
	os.Remove(card)
	code, stdout, _ = childRunWire(t, elevate.Args{Devices: []string{card}}.List(), func(w io.Writer) {
		sendImage(t, &flipAt{w: w, at: 2 << 20}, img)
	})
	evs := childEvents(t, stdout)
	var errs []map[string]any
	for _, ev := range evs {
		if ev["event"] == "error" {
			errs = append(errs, ev)
		}
	}
	if code != contract.ExitVerify || len(errs) != 2 || errs[0]["device"] != card || errs[0]["code"] != float64(contract.ExitVerify) || errs[1]["device"] != nil {
		t.Fatalf("exit %d, errors %v, want the card's (with its device) then the child's", code, errs)
	}
	if head, _ := os.ReadFile(card); len(head) >= 1<<20 && bytes.Equal(head[:1<<20], fx.Raw[:1<<20]) {
		t.Fatal("the card holds the image's first MiB although other bytes came")
	}
}

// flipAt flips one bit of the byte at offset at of what goes through it.
type flipAt struct {
	w   io.Writer
	at  int64
	off int64
}

func (f *flipAt) Write(p []byte) (int, error) {
	if i := f.at - f.off; i >= 0 && i < int64(len(p)) {
		p = bytes.Clone(p)
		p[i] ^= 0x10
	}
	f.off += int64(len(p))
	return f.w.Write(p)
}
