package cli

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/talosflash/talosflash/app/contract"
	"github.com/talosflash/talosflash/app/elevate"
	"github.com/talosflash/talosflash/app/plan"
	"github.com/talosflash/talosflash/imaging"
	"github.com/talosflash/talosflash/imaging/imagetest"
)

// --device three times: one download, three cards byte for byte, one
// "result" event per card naming it, progress naming its card.
func TestFlashSeveralDevices(t *testing.T) {
	srv, fx := fakeFactory(t)
	dir := t.TempDir()
	targets := []string{filepath.Join(dir, "a.img"), filepath.Join(dir, "b.img"), filepath.Join(dir, "c.img")}
	args := []string{"--flash", "--role", "worker", "--yes", "--create-file", "--json", "--format", "xz", "--factory", srv.URL, "--cache-dir", filepath.Join(dir, "cache")}
	for _, d := range targets {
		args = append(args, "--device", d)
	}
	code, stdout, stderr := cliRun(t, args...)
	if code != contract.ExitOK {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if srv.BytesServed() != int64(len(fx.XZ)) {
		t.Fatalf("served %d bytes for three cards, want one download of %d", srv.BytesServed(), len(fx.XZ))
	}
	results := map[string]bool{}
	progress := map[string]bool{}
	for _, ev := range jsonLines(t, "flash --json", stdout) {
		switch ev["event"] {
		case "result":
			if ev["verified"] != true || ev["sha256"] != fx.SHA256 {
				t.Errorf("result %v", ev)
			}
			results[ev["device"].(string)] = true
		case "progress":
			if d, ok := ev["device"].(string); ok && ev["stage"] == "verify" && ev["done"] == ev["total"] {
				progress[d] = true
			}
		case "error":
			t.Errorf("error event %v", ev)
		}
	}
	for _, d := range targets {
		if !results[d] || !progress[d] {
			t.Errorf("%s: result %v, complete verify progress %v", d, results[d], progress[d])
		}
		if got := imagetest.FileSHA256(t, d, imageSize); got != fx.SHA256 {
			t.Errorf("%s holds %s, want %s", d, got, fx.SHA256)
		}
	}
	// The same device twice is refused before anything is downloaded.
	code, _, stderr = cliRun(t, "--flash", "--image", targets[0], "--device", targets[1], "--device", filepath.Join(dir, ".", "b.img"), "--yes")
	if code != contract.ExitUsage || !strings.Contains(stderr, "twice") {
		t.Fatalf("duplicate device: exit %d: %s", code, stderr)
	}
}

// One card on a full file system fails; the two others are written and
// verified; the exit code reports the failure and the JSON names the card.
func TestFlashSeveralDevicesOneFails(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("mounting a small tmpfs needs root")
	}
	srv, fx := fakeFactory(t)
	dir := t.TempDir()
	small := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=2m,mode=0700", "tmpfs", small).CombinedOutput(); err != nil {
		t.Skipf("mount tmpfs: %v: %s", err, out)
	}
	t.Cleanup(func() { _ = unmount(small) })
	bad := filepath.Join(small, "card.img")
	good := []string{filepath.Join(dir, "a.img"), filepath.Join(dir, "c.img")}
	code, stdout, stderr := cliRun(t, "--flash", "--role", "worker", "--yes", "--create-file", "--json", "--format", "xz", "--factory", srv.URL, "--cache-dir", filepath.Join(dir, "cache"),
		"--device", good[0], "--device", bad, "--device", good[1])
	if code == contract.ExitOK {
		t.Fatalf("exit 0 with a failed card: %s", stderr)
	}
	var cardErr, finalErr map[string]any
	results := 0
	for _, ev := range jsonLines(t, "flash --json", stdout) {
		switch {
		case ev["event"] == "result":
			results++
		case ev["event"] == "error" && ev["device"] == bad:
			cardErr = ev
		case ev["event"] == "error" && ev["device"] == nil:
			finalErr = ev
		}
	}
	if results != 2 || cardErr == nil || finalErr == nil || int(finalErr["code"].(float64)) != code {
		t.Fatalf("results %d, card error %v, final error %v (exit %d)", results, cardErr, finalErr, code)
	}
	if !strings.Contains(stderr, bad+": FAILED") || !strings.Contains(stderr, "1 of 3 cards failed") {
		t.Errorf("stderr does not name the failed card:\n%s", stderr)
	}
	for _, d := range good {
		if got := imagetest.FileSHA256(t, d, imageSize); got != fx.SHA256 {
			t.Errorf("%s holds %s, want %s", d, got, fx.SHA256)
		}
	}
}

// A flash runs under a 40 MiB Go memory limit unless GOMEMLIMIT is set,
// and puts the previous limit back.
func TestFlashMemoryLimit(t *testing.T) {
	var set []int64
	orig := setMemoryLimit
	setMemoryLimit = func(n int64) int64 { set = append(set, n); return orig(n) }
	t.Cleanup(func() { setMemoryLimit = orig })
	dir := t.TempDir()
	fx := fakeFixture(t)
	img := filepath.Join(dir, "img.raw.xz")
	if err := os.WriteFile(img, fx.XZ, 0o600); err != nil {
		t.Fatal(err)
	}
	before := debug.SetMemoryLimit(-1)
	t.Setenv("GOMEMLIMIT", "")
	if code, _, stderr := cliRun(t, "--flash", "--image", img, "--device", filepath.Join(dir, "a.img"), "--yes", "--create-file"); code != contract.ExitOK {
		t.Fatal(stderr)
	}
	if len(set) != 2 || set[0] != 40<<20 || set[1] != before || debug.SetMemoryLimit(-1) != before {
		t.Fatalf("limits set %v (before %d)", set, before)
	}
	set = nil
	t.Setenv("GOMEMLIMIT", "100MiB")
	if code, _, stderr := cliRun(t, "--flash", "--image", img, "--device", filepath.Join(dir, "b.img"), "--yes", "--create-file"); code != contract.ExitOK {
		t.Fatal(stderr)
	}
	if len(set) != 0 {
		t.Fatalf("GOMEMLIMIT set, yet the limit was changed: %v", set)
	}
}

func fakeFixture(t *testing.T) *imagetest.Fixture {
	t.Helper()
	fixtureOnce.Do(func() { fixture = imagetest.New(t, imageSize, 7, 1<<20) })
	if fixture == nil {
		t.Fatal("image fixture failed")
	}
	return fixture
}

// Several cards on a plain stderr: one line naming every card, its stage
// and percentage.
func TestTermProgressSeveralCards(t *testing.T) {
	var out strings.Builder
	r := newTermReporter(&out, false)
	r.Progress(imaging.Progress{Stage: imaging.StageWrite, Done: 1, Total: 4, Target: "/dev/sdb"})
	r.Progress(imaging.Progress{Stage: imaging.StageWrite, Done: 2, Total: 4, Target: "/dev/sdc"})
	r.lastOut = time.Time{} // the next report is due
	r.Progress(imaging.Progress{Stage: imaging.StageVerify, Done: 4, Total: 4, Target: "/dev/sdb"})
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if last := lines[len(lines)-1]; last != "sdb verify 100%  sdc write  50%" {
		t.Fatalf("last line %q (all: %q)", last, lines)
	}
}

// The elevated child with several --device writes what the parent's
// plan.Flash sends it and reads back: a real child process, one verified
// imaging.Card per device.
func TestElevatedChildSeveralDevicesRoundTrip(t *testing.T) {
	dir := t.TempDir()
	fx := fakeFixture(t)
	img := filepath.Join(dir, "metal-arm64.raw.xz")
	if err := os.WriteFile(img, fx.XZ, 0o600); err != nil {
		t.Fatal(err)
	}
	devs := []string{filepath.Join(dir, "a.img"), filepath.Join(dir, "b.img")}
	var childArgs []string
	var targets []string
	res, err := plan.Flash(context.Background(), plan.Job{
		Image: plan.FromFile(img), Devices: devs,
		NeedsElevation: func(string) bool { return true },
		Elevate:        realChild(&childArgs),
		Progress: func(p imaging.Progress) {
			if p.Stage == imaging.StageVerify && p.Done == p.Total {
				targets = append(targets, p.Target)
			}
		},
	})
	if err != nil || len(res.Cards) != 2 {
		t.Fatalf("%+v, %v", res, err)
	}
	if want := (elevate.Args{Devices: devs}).List(); !slices.Equal(childArgs, want) {
		t.Fatalf("child args %q, want one --device per card: %q", childArgs, want)
	}
	for i, c := range res.Cards {
		if c.Target != devs[i] || c.Err != nil || c.SHA256 != fx.SHA256 || !c.Verified {
			t.Fatalf("card %d: %+v", i, c)
		}
		if imagetest.FileSHA256(t, devs[i], imageSize) != fx.SHA256 {
			t.Fatalf("%s does not hold the image", devs[i])
		}
	}
	slices.Sort(targets)
	if !slices.Equal(targets, devs) {
		t.Fatalf("complete verify progress for %q, want %q", targets, devs)
	}
}
