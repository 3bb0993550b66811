package cli

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
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
	cut := filepath.Join(dir, "cut.raw.gz") // found cut while the card is written
	if err := os.WriteFile(img, fx.XZ, 0o600); err != nil {
		t.Fatal(err)
	}
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	zw.Write(fx.Raw)
	zw.Close()
	if err := os.WriteFile(cut, gz.Bytes()[:gz.Len()-100], 0o600); err != nil {
		t.Fatal(err)
	}
	card := filepath.Join(dir, "card.img")

	code, stdout, stderr := childRun(t, elevate.Args{Image: img, Devices: []string{card}})
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

	os.Remove(card)
	code, stdout, _ = childRun(t, elevate.Args{Image: cut, Devices: []string{card}})
	evs := childEvents(t, stdout)
	var errs []map[string]any
	for _, ev := range evs {
		if ev["event"] == "error" {
			errs = append(errs, ev)
		}
	}
	if code != contract.ExitImage || len(errs) != 2 || errs[0]["device"] != card || errs[0]["code"] != float64(contract.ExitImage) || errs[1]["device"] != nil {
		t.Fatalf("exit %d, errors %v, want the card's (with its device) then the child's", code, errs)
	}
}
