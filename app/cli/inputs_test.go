package cli

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/klauspost/compress/zstd"

	"github.com/talosflash/talosflash/app/contract"
	"github.com/talosflash/talosflash/factory"
	"github.com/talosflash/talosflash/factory/factorytest"
	"github.com/talosflash/talosflash/imaging/imagetest"
	"github.com/talosflash/talosflash/internal/testkit"
)

// runBounded runs the CLI and fails the test if it has not returned within
// d (a FIFO or endless device read would hang it); unblock is called then.
func runBounded(t *testing.T, d time.Duration, unblock func(), args ...string) (int, string) {
	t.Helper()
	type result struct {
		code   int
		stderr string
	}
	done := make(chan result, 1)
	go func() {
		code, _, stderr := cliRun(t, args...)
		done <- result{code, stderr}
	}()
	select {
	case r := <-done:
		return r.code, r.stderr
	case <-time.After(d):
		if unblock != nil {
			unblock()
		}
		<-done
		t.Fatalf("%v did not return within %v", args, d)
	}
	return 0, ""
}

// User-named files are read with bounds: devices and FIFOs are refused at
// once (no endless read of /dev/zero, no wait for a FIFO writer).
func TestUserFilesRefuseDevicesAndFIFOs(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "config.fifo")
	if err := mkfifo(fifo); err != nil {
		t.Skipf("mkfifo: %v", err)
	}
	unblock := func() {
		if f, err := os.OpenFile(fifo, os.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
			f.Close()
		}
	}
	card := filepath.Join(dir, "card.img")
	for _, src := range []string{"/dev/zero", fifo} {
		for name, args := range map[string][]string{
			"apply --file":     {"apply", "--node", "127.0.0.1", "--file", src},
			"--installer-file": {"--flash", "--installer-file", src, "--device", card, "--yes", "--create-file", "--factory", "http://127.0.0.1:1"},
			"--profiles":       {"profiles", "--profiles", src},
		} {
			t.Run(name+" "+filepath.Base(src), func(t *testing.T) {
				code, stderr := runBounded(t, 10*time.Second, unblock, args...)
				if code != contract.ExitUsage || !strings.Contains(stderr, "not a regular file") {
					t.Fatalf("exit %d, want %d with 'not a regular file': %s", code, contract.ExitUsage, stderr)
				}
			})
		}
	}
}

// Inputs that are not images are refused with exit 9 before the card is
// touched; --format must be xz or zst; a cache directory that can't be
// used is exit 10 naming it, not a network failure.
func TestInputExitCodes(t *testing.T) {
	srv, _ := fakeFactory(t)
	dir := t.TempDir()
	card := filepath.Join(dir, "card.img")
	raw := bytes.Repeat([]byte("not a disk "), 100_000)
	notDisk := filepath.Join(dir, "notdisk.raw")
	if err := os.WriteFile(notDisk, raw, 0o644); err != nil {
		t.Fatal(err)
	}
	bz := filepath.Join(dir, "image.raw.xz")
	out, err := exec.Command("sh", "-c", "head -c 100000 /dev/urandom | bzip2 -c > "+bz).CombinedOutput()
	if err != nil {
		t.Skipf("bzip2: %v %s", err, out)
	}
	empty := testkit.WriteFile(t, dir, "empty.img.xz", "")
	cacheFile := testkit.WriteFile(t, dir, "cachefile", "")
	for _, c := range []struct {
		name string
		args []string
		code int
		msg  string
	}{
		{"bzip2 named .xz", []string{"--flash", "--image", bz, "--device", card, "--yes", "--create-file"}, contract.ExitImage, "bzip2"},
		{"empty file", []string{"--flash", "--image", empty, "--device", card, "--yes", "--create-file"}, contract.ExitImage, "empty"},
		{"not a disk", []string{"--flash", "--image", notDisk, "--device", card, "--yes", "--create-file"}, contract.ExitImage, "--force-raw"},
		{"bad format", []string{"--flash", "--role", "worker", "--format", "gz", "--device", card, "--yes", "--create-file", "--factory", srv.URL, "--cache-dir", dir}, contract.ExitUsage, "--format"},
		{"cache dir is a file", []string{"--flash", "--role", "worker", "--device", card, "--yes", "--create-file", "--factory", srv.URL, "--cache-dir", cacheFile}, contract.ExitStorage, cacheFile},
	} {
		t.Run(c.name, func(t *testing.T) {
			code, _, stderr := cliRun(t, c.args...)
			if code != c.code || !strings.Contains(stderr, c.msg) {
				t.Fatalf("exit %d, want %d with %q: %s", code, c.code, c.msg, stderr)
			}
			if _, err := os.Stat(card); err == nil {
				t.Fatal("the card was touched")
			}
		})
	}
	// With --force-raw the blob is written as is.
	code, _, stderr := cliRun(t, "--flash", "--image", notDisk, "--device", card, "--yes", "--create-file", "--force-raw")
	if code != contract.ExitOK || imagetest.FileSHA256(t, card, int64(len(raw))) != sha256hex(raw) {
		t.Fatalf("--force-raw: exit %d: %s", code, stderr)
	}
}

// --format zst downloads metal-arm64.raw.zst and writes the same card.
func TestFlashFormatZst(t *testing.T) {
	srv, fx := fakeFactory(t)
	enc, err := zstd.NewWriter(nil, zstd.WithEncoderCRC(true))
	if err != nil {
		t.Fatal(err)
	}
	zst := enc.EncodeAll(fx.Raw, nil)
	enc.Close()
	id, _ := factory.BuiltinProfiles()[1].SchematicID()
	srv.AddImage(id, factory.DefaultTalosVersion, "metal-arm64.raw.zst", zst)
	dir := t.TempDir()
	card := filepath.Join(dir, "card.img")
	code, _, stderr := cliRun(t, "--flash", "--role", "worker", "--format", "zst", "--device", card, "--yes", "--create-file", "--factory", srv.URL, "--cache-dir", dir)
	if code != contract.ExitOK {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if got := imagetest.FileSHA256(t, card, fx.Size); got != fx.SHA256 {
		t.Fatal("card differs from the image")
	}
	if n := len(srv.RequestsTo(factorytest.ImagePath(id, factory.DefaultTalosVersion, "metal-arm64.raw.zst"))); n != 1 {
		t.Fatalf("%d requests for the .raw.zst", n)
	}
}

// sigOnWrite sends sig to this process at the first write progress line.
type sigOnWrite struct {
	mu    sync.Mutex
	sig   syscall.Signal
	fired bool
	buf   bytes.Buffer
}

func (s *sigOnWrite) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.buf.Write(p)
	var ev struct{ Event, Stage string }
	if !s.fired && json.Unmarshal(p, &ev) == nil && ev.Event == "progress" && ev.Stage == "write" {
		s.fired = true
		signalSelf(s.sig)
	}
	return len(p), nil
}

// SIGTERM and SIGHUP end a write like Ctrl-C: the card is reported
// incomplete, exit 128+signal.
func TestTermAndHupEndLikeInterrupt(t *testing.T) {
	if !canSignalSelf {
		t.Skip("no signals to this process here")
	}
	for sig, want := range map[syscall.Signal]int{syscall.SIGTERM: 143, syscall.SIGHUP: 129} {
		t.Run(sig.String(), func(t *testing.T) {
			dir := t.TempDir()
			img := bigSparseImage(t, dir)
			out := &sigOnWrite{sig: sig}
			var errOut bytes.Buffer
			code := Main([]string{"--flash", "--image", img, "--device", filepath.Join(dir, "card.img"), "--yes", "--create-file", "--json"},
				Env{Stdin: strings.NewReader(""), Stdout: out, Stderr: &errOut})
			if code != want || !strings.Contains(errOut.String(), "incomplete") {
				t.Fatalf("exit %d, want %d with the card incomplete: %s", code, want, errOut.String())
			}
		})
	}
}

func sha256hex(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// Ctrl-C at the "type the device name" prompt ends the command (exit 130)
// instead of waiting for a line that never comes; the card is untouched.
func TestInterruptAtConfirmationPrompt(t *testing.T) {
	if !canSignalSelf {
		t.Skip("no signals to this process here")
	}
	stdinIsTerminal = func(any) bool { return true }
	t.Cleanup(func() { stdinIsTerminal = isTerminal })
	dir := t.TempDir()
	img := bigSparseImage(t, dir)
	card := filepath.Join(dir, "card.img")
	pr, pw := io.Pipe() // stdin that never delivers a line
	t.Cleanup(func() { pw.Close() })
	prompt := &sigOnText{text: "Type", sig: syscall.SIGINT}
	done := make(chan int, 1)
	go func() {
		done <- Main([]string{"--flash", "--image", img, "--device", card, "--create-file"}, Env{Stdin: pr, Stdout: io.Discard, Stderr: prompt})
	}()
	select {
	case code := <-done:
		if code != contract.ExitInterrupted {
			t.Fatalf("exit %d, want %d: %s", code, contract.ExitInterrupted, prompt.String())
		}
	case <-time.After(10 * time.Second):
		pw.Close()
		t.Fatal("Ctrl-C at the prompt did not end the command")
	}
	if _, err := os.Stat(card); err == nil {
		t.Fatal("the card was touched")
	}
}

// sigOnText sends sig to this process once text was written to it.
type sigOnText struct {
	mu    sync.Mutex
	buf   bytes.Buffer
	text  string
	sig   syscall.Signal
	fired bool
}

func (s *sigOnText) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.buf.Write(p)
	if !s.fired && strings.Contains(s.buf.String(), s.text) {
		s.fired = true
		signalSelf(s.sig)
	}
	return len(p), nil
}

func (s *sigOnText) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.buf.String()
}

// --image naming a device or a FIFO is refused at once (exit 9), not read
// endlessly or waited on.
func TestImageFlagRefusesDevicesAndFIFOs(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "image.fifo")
	if err := mkfifo(fifo); err != nil {
		t.Skipf("mkfifo: %v", err)
	}
	unblock := func() {
		if f, err := os.OpenFile(fifo, os.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
			f.Close()
		}
	}
	card := filepath.Join(dir, "card.img")
	for _, src := range []string{"/dev/zero", fifo} {
		code, stderr := runBounded(t, 10*time.Second, unblock, "--flash", "--image", src, "--device", card, "--yes", "--create-file")
		if code != contract.ExitImage || !strings.Contains(stderr, "not a regular file") {
			t.Fatalf("%s: exit %d, want %d: %s", src, code, contract.ExitImage, stderr)
		}
		if _, err := os.Stat(card); err == nil {
			t.Fatal("the card was touched")
		}
	}
}
