package cli

import (
	"bytes"
	"compress/gzip"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/talosflash/talosflash/app/contract"
	"github.com/talosflash/talosflash/imaging/imagetest"
)

// A cut image is never a card, whichever process writes it: the in-process
// flash of one or several cards and the flash through the elevated child
// (the parent decodes, the child writes) all end with exit 9
// and the cards reported incomplete (issue 20: a cut gzip was written 92
// bytes short and "verified").
func TestCutImageIsNeverACard(t *testing.T) {
	fx := fakeFixture(t)
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	zw.Write(fx.Raw)
	zw.Close()
	zst, err := imagetest.ZstdBytes(fx.Raw)
	if err != nil {
		t.Fatal(err)
	}
	for name, data := range map[string][]byte{"gz": gz.Bytes(), "zst": zst, "xz": fx.XZ, "raw": fx.Raw} {
		for _, cut := range []int{1, 100, len(data) / 2} {
			dir := t.TempDir()
			img := filepath.Join(dir, "cut.raw."+name)
			if err := os.WriteFile(img, data[:len(data)-cut], 0o600); err != nil {
				t.Fatal(err)
			}
			a, b := filepath.Join(dir, "a.img"), filepath.Join(dir, "b.img")
			runs := map[string]func() (int, string, string){
				"one card": func() (int, string, string) {
					return cliRun(t, "--flash", "--image", img, "--device", a, "--yes", "--create-file")
				},
				"two cards": func() (int, string, string) {
					return cliRun(t, "--flash", "--image", img, "--device", a, "--device", b, "--yes", "--create-file", "--json")
				},
				"elevated":    func() (int, string, string) { return elevatedFlash(t, img, a) },
				"elevated x2": func() (int, string, string) { return elevatedFlash(t, img, a, b) },
			}
			for how, run := range runs {
				code, stdout, stderr := run()
				if code != contract.ExitImage {
					t.Errorf("%s cut by %d, %s: exit %d, want %d: %s%s", name, cut, how, code, contract.ExitImage, stdout, stderr)
					continue
				}
				if strings.Contains(stdout, `"verified":true`) {
					t.Errorf("%s cut by %d, %s: a card reported verified: %s", name, cut, how, stdout)
				}
				if _, err := os.Stat(a); err == nil && !strings.Contains(stdout+stderr, "incomplete") {
					t.Errorf("%s cut by %d, %s: card written but not reported incomplete: %s%s", name, cut, how, stdout, stderr)
				}
				os.Remove(a)
				os.Remove(b)
			}
		}
	}
}
