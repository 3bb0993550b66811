package cli

import (
	"bytes"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/talosflash/talosflash/app/contract"
	"github.com/talosflash/talosflash/app/elevate"
	"github.com/talosflash/talosflash/imaging/imagetest"
)

// withoutFileTargets runs the elevated child as a real run does: block
// devices only (the package's TestMain turns the seam on for the others).
func withoutFileTargets(t *testing.T) {
	t.Helper()
	old := ElevatedFileTargets
	ElevatedFileTargets = false
	t.Cleanup(func() { ElevatedFileTargets = old })
}

// mainWithin runs Main, failing the test if it has not returned in 10 s
// (a FIFO it opened would block it).
func mainWithin(t *testing.T, args []string) (int, string) {
	t.Helper()
	var out, errOut bytes.Buffer
	stdin, parent := io.Pipe() // open, as the parent keeps it: its close cancels
	defer parent.Close()
	done := make(chan int, 1)
	go func() { done <- Main(args, Env{Stdin: stdin, Stdout: &out, Stderr: &errOut}) }()
	select {
	case code := <-done:
		return code, out.String() + errOut.String()
	case <-time.After(10 * time.Second):
		t.Fatalf("%q: still running after 10 s (it opened a FIFO?)", args)
		return 0, ""
	}
}

// The root child takes only what its parent passes (elevate.Args.List):
// every other flag (an image path above all: the image comes on stdin),
// a target that is not a block device are refused with exit 2 before
// anything is opened, read or created. It used to take the whole CLI:
// --image /etc/shadow --force-raw --device leak.img made a readable copy
// of it.
func TestElevatedChildRefuses(t *testing.T) {
	withoutFileTargets(t)
	dir := t.TempDir()
	const secret = "root:SECRET-HASH:19000:0:99999:7:::"
	fifo := func(name string) string {
		p := filepath.Join(dir, name)
		if err := syscall.Mkfifo(p, 0o600); err != nil {
			t.Fatal(err)
		}
		return p // opening it to read blocks: mainWithin fails
	}
	img := filepath.Join(dir, "img.raw")
	if err := os.WriteFile(img, []byte(secret), 0o644); err != nil {
		t.Fatal(err)
	}
	existing := filepath.Join(dir, "existing.img")
	if err := os.WriteFile(existing, []byte("keep"), 0o644); err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(dir, "leak.img")
	cacheDir := filepath.Join(dir, "cache")
	// A block device where one exists, so that the flags are what fails.
	dev := "/dev/null"
	if fi, err := os.Stat("/dev/loop0"); err == nil && fi.Mode()&os.ModeDevice != 0 && fi.Mode()&os.ModeCharDevice == 0 {
		dev = "/dev/loop0"
	}
	child := func(device string, extra ...string) []string {
		return append([]string{"--flash", "--elevated", "--device", device, "--yes", "--json"}, extra...)
	}
	cases := map[string][]string{
		"--image":              child(dev, "--image", img),
		"--image, a FIFO":      child(dev, "--image", fifo("image")),
		"--image, --force-raw": child(missing, "--image", img, "--force-raw"),
		"--follow":             child(dev, "--follow"),
		"--profiles":           child(missing, "--profiles", fifo("profiles.yaml"), "--role", "worker"),
		"--role":               child(missing, "--role", "worker"),
		"--inventory":          child(missing, "--inventory", fifo("talosflash.yaml"), "--hostname", "n1"),
		"--hostname":           child(missing, "--hostname", "n1"),
		"--factory":            child(missing, "--factory", "http://127.0.0.1:1"),
		"--cache-dir":          child(missing, "--cache-dir", cacheDir),
		"--force-raw":          child(dev, "--force-raw"),
		"--installer":          child(missing, "--installer", "factory.talos.dev/metal-installer/x:v1.10.0"),
		"--installer-file":     child(missing, "--installer-file", fifo("installer.yaml")),
		"--no-cache":           child(missing, "--no-cache"),
		"--version":            child(missing, "--version", "v1.10.0"),
		"--arch":               child(missing, "--arch", "amd64"),
		"--format":             child(missing, "--format", "xz"),
		"no --yes":             {"--flash", "--elevated", "--device", missing, "--json"},
		"no --json":            {"--flash", "--elevated", "--device", missing, "--yes"},
		"a positional":         append(child(dev), img),
		"a file target":        child(existing),
		"a missing target":     child(missing),
		"a FIFO target":        child(fifo("card")),
		"a dir target":         child(dir),
		"a relative target":    child("leak.img"),
		"a symlink to a file": child(func() string {
			l := filepath.Join(dir, "link")
			if err := os.Symlink(existing, l); err != nil {
				t.Fatal(err)
			}
			return l
		}()),
	}
	for name, args := range cases {
		t.Run(name, func(t *testing.T) {
			code, out := mainWithin(t, args)
			if code != contract.ExitUsage {
				t.Fatalf("exit %d, want %d (usage): %s", code, contract.ExitUsage, out)
			}
			if strings.Contains(out, "SECRET") {
				t.Fatalf("the output quotes the image: %s", out)
			}
			for _, p := range []string{missing, cacheDir, filepath.Join(dir, "leak.img")} {
				if _, err := os.Lstat(p); !errors.Is(err, os.ErrNotExist) {
					t.Fatalf("%s was created (%v)", p, err)
				}
			}
			if got, _ := os.ReadFile(existing); string(got) != "keep" {
				t.Fatalf("the file target was written: %q", got)
			}
		})
	}
}

// Under pkexec, a flash without --elevated is refused too: pkexec runs us
// as root on any arguments, and dropping --elevated dropped every check.
func TestPkexecRunsOnlyTheElevatedWrite(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("only a root process is held to it")
	}
	t.Setenv("PKEXEC_UID", "65534")
	dir := t.TempDir()
	img := filepath.Join(dir, "img.raw")
	if err := os.WriteFile(img, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	leak := filepath.Join(dir, "leak.img")
	code, out := mainWithin(t, []string{"--flash", "--image", img, "--device", leak, "--yes", "--force-raw", "--json"})
	if code != contract.ExitUsage {
		t.Fatalf("exit %d, want %d: %s", code, contract.ExitUsage, out)
	}
	if _, err := os.Lstat(leak); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("%s was created", leak)
	}
}

// loopCard attaches a loop device over a new file of size bytes.
func loopCard(t *testing.T, size int64) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root to attach a loop device")
	}
	if _, err := exec.LookPath("losetup"); err != nil {
		t.Skip("losetup not installed")
	}
	file := filepath.Join(t.TempDir(), "card.img")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(file, size); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("losetup", "-f", "--show", file).Output()
	if err != nil {
		t.Skipf("cannot attach a loop device: %v", err)
	}
	dev := strings.TrimSpace(string(out))
	t.Cleanup(func() { _ = exec.Command("losetup", "-d", dev).Run() })
	return dev
}

// The root child writes a real block device from what its stdin carries
// (as pkexec runs it: PKEXEC_UID set), and names no path for its image.
func TestElevatedChildWritesWhatStdinCarries(t *testing.T) {
	withoutFileTargets(t)
	dev := loopCard(t, 16<<20)
	fx := fakeFixture(t)
	img := filepath.Join(t.TempDir(), "img.raw.xz")
	if err := os.WriteFile(img, fx.XZ, 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PKEXEC_UID", "65534")
	code, out, errOut := childRun(t, elevate.Args{Devices: []string{dev}, AllowLoop: true, ForceNonRemovable: true}, img)
	if code != contract.ExitOK {
		t.Fatalf("exit %d: %s%s", code, out, errOut)
	}
	if imagetest.FileSHA256(t, dev, fx.Size) != fx.SHA256 || !strings.Contains(out, `"sha256":"`+fx.SHA256+`"`) {
		t.Fatalf("the card is not the image: %s", out)
	}
	if strings.Contains(out, img) || strings.Contains(out, "/proc/self/fd") {
		t.Fatalf("the child names a path for its image: %s", out)
	}
}
