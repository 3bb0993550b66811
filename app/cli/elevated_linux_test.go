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
// every other flag, a target that is not a block device and an image the
// invoking user could not read are refused with exit 2 before anything is
// opened, read or created. It used to take the whole CLI: --image
// /etc/shadow --force-raw --device leak.img made a readable copy of it.
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
	child := func(image, device string, extra ...string) []string {
		return append([]string{"--flash", "--elevated", "--image", image, "--device", device, "--yes", "--json"}, extra...)
	}
	cases := map[string][]string{
		"--profiles":        child(img, missing, "--profiles", fifo("profiles.yaml"), "--role", "worker"),
		"--role":            child(img, missing, "--role", "worker"),
		"--inventory":       child(img, missing, "--inventory", fifo("talosflash.yaml"), "--hostname", "n1"),
		"--hostname":        child(img, missing, "--hostname", "n1"),
		"--factory":         child(img, missing, "--factory", "http://127.0.0.1:1"),
		"--cache-dir":       child(img, missing, "--cache-dir", cacheDir),
		"--force-raw":       child(img, missing, "--force-raw"),
		"--installer":       child(img, missing, "--installer", "factory.talos.dev/metal-installer/x:v1.10.0"),
		"--installer-file":  child(img, missing, "--installer-file", fifo("installer.yaml")),
		"--no-cache":        child(img, missing, "--no-cache"),
		"--version":         child(img, missing, "--version", "v1.10.0"),
		"--arch":            child(img, missing, "--arch", "amd64"),
		"--format":          child(img, missing, "--format", "xz"),
		"no --yes":          {"--flash", "--elevated", "--image", img, "--device", missing, "--json"},
		"no --json":         {"--flash", "--elevated", "--image", img, "--device", missing, "--yes"},
		"a positional":      append(child(img, missing), "extra"),
		"a file target":     child(img, existing),
		"a missing target":  child(img, missing),
		"a FIFO target":     child(img, fifo("card")),
		"a dir target":      child(img, dir),
		"a relative target": child(img, "leak.img"),
		"a symlink to a file": child(img, func() string {
			l := filepath.Join(dir, "link")
			if err := os.Symlink(existing, l); err != nil {
				t.Fatal(err)
			}
			return l
		}()),
		"a relative image": child("img.raw", "/dev/null"),
		"a FIFO image":     child(fifo("image"), "/dev/null"),
	}
	// A block device for the image cases: they must fail on the image.
	if fi, err := os.Stat("/dev/loop0"); err == nil && fi.Mode()&os.ModeDevice != 0 && fi.Mode()&os.ModeCharDevice == 0 {
		cases["a relative image"] = child("img.raw", "/dev/loop0")
		cases["a FIFO image"] = child(filepath.Join(dir, "image"), "/dev/loop0")
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

// The image is read with the rights of the user who ran pkexec: one they
// can read is written to the card; one only root can read is refused
// (exit 2, its content never quoted), even on a real block device.
func TestElevatedChildReadsTheImageAsTheInvokingUser(t *testing.T) {
	withoutFileTargets(t)
	dev := loopCard(t, 16<<20)
	fx := fakeFixture(t)
	pub := t.TempDir()
	for _, d := range []string{filepath.Dir(pub), pub} { // the user can reach it
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	readable := filepath.Join(pub, "img.raw.xz")
	if err := os.WriteFile(readable, fx.XZ, 0o644); err != nil {
		t.Fatal(err)
	}
	private := filepath.Join(pub, "shadow.raw")
	if err := os.WriteFile(private, append(append([]byte{}, fx.Raw[:1<<20]...), "SECRET"...), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PKEXEC_UID", "65534")
	child := func(image string) []string {
		return []string{"--flash", "--elevated", "--image", image, "--device", dev, "--yes", "--json", "--allow-loop", "--force-non-removable"}
	}
	code, out := mainWithin(t, child(private))
	if code != contract.ExitUsage || !strings.Contains(out, "permission denied") || strings.Contains(out, "SECRET") {
		t.Fatalf("root-only image: exit %d, want %d (permission denied): %s", code, contract.ExitUsage, out)
	}
	if code, out = mainWithin(t, child(readable)); code != contract.ExitOK {
		t.Fatalf("readable image: exit %d: %s", code, out)
	}
	if imagetest.FileSHA256(t, dev, fx.Size) != fx.SHA256 {
		t.Fatal("the card is not the image")
	}
	if !strings.Contains(out, readable) || strings.Contains(out, "/proc/self/fd") {
		t.Fatalf("the child names its image by the descriptor, not the path it was given: %s", out)
	}
}
