package cli

import (
	"bytes"
	"compress/gzip"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/talosflash/talosflash/app/contract"
	"github.com/talosflash/talosflash/app/elevate"
	"github.com/talosflash/talosflash/imaging/imagetest"
)

// A cut image is never a card, whichever process writes it: the in-process
// flash of one or several cards and the elevated child all end with exit 9
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
				"elevated":    func() (int, string, string) { return childRun(t, elevate.Args{Image: img, Devices: []string{a}}) },
				"elevated x2": func() (int, string, string) { return childRun(t, elevate.Args{Image: img, Devices: []string{a, b}}) },
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

// childRun runs the elevated child as its parent would (stdin open).
func childRun(t *testing.T, args elevate.Args) (int, string, string) {
	t.Helper()
	return childRunArgs(t, args.List())
}

func childRunArgs(t *testing.T, args []string) (int, string, string) {
	t.Helper()
	pr, pw := io.Pipe() // stdin stays open: closing it cancels the child
	defer pw.Close()
	var out, errOut strings.Builder
	code := Main(args, Env{Stdin: pr, Stdout: &out, Stderr: &errOut})
	return code, out.String(), errOut.String()
}

// replayedChild is a plan.Job.Elevate whose child is this package's Main,
// run in process on the parent's arguments (recorded in args when not
// nil); the parent then reads its real output, replayed from a file in dir.
func replayedChild(t *testing.T, dir string, args *[]string) func([]string) (*exec.Cmd, error) {
	return func(a []string) (*exec.Cmd, error) {
		if args != nil {
			*args = a
		}
		code, stdout, stderr := childRunArgs(t, a)
		if code != contract.ExitOK {
			t.Fatalf("child exit %d: %s", code, stderr)
		}
		replay := filepath.Join(dir, "child.out")
		if err := os.WriteFile(replay, []byte(stdout), 0o600); err != nil {
			t.Fatal(err)
		}
		return exec.Command("cat", replay), nil
	}
}
