package cli

import (
	"bytes"
	"encoding/json"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/talosflash/talosflash/app/contract"
	"github.com/talosflash/talosflash/factory"
	"github.com/talosflash/talosflash/factory/factorytest"
)

// killOnEvent is a stdout that sends this process SIGINT (caught by Main's
// signal.NotifyContext, as a real Ctrl-C would be) once a JSON progress line
// of stage has reached done >= atLeast.
type killOnEvent struct {
	mu      sync.Mutex
	buf     bytes.Buffer
	stage   string
	atLeast int64
	fired   bool
}

func (k *killOnEvent) Write(p []byte) (int, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.buf.Write(p)
	var ev struct {
		Event, Stage string
		Done         int64
	}
	if !k.fired && json.Unmarshal(p, &ev) == nil && ev.Event == "progress" && ev.Stage == k.stage && ev.Done >= k.atLeast {
		k.fired = true
		signalSelf(syscall.SIGINT)
	}
	return len(p), nil
}

func TestInterruptDownloadLeavesResumablePartial(t *testing.T) {
	if !canSignalSelf {
		t.Skip("no signals to this process here")
	}
	srv, fx := fakeFactory(t)
	srv.SetObjectStorage(true) // where Image Factory downloads can resume
	dir := t.TempDir()
	workerID, _ := factory.BuiltinProfiles()[1].SchematicID()
	path := factorytest.ImagePath(workerID, factory.DefaultTalosVersion, "metal-arm64.raw.xz")
	half := int64(len(fx.XZ) / 2)
	srv.StallAfter(path, half)

	// Ctrl-C once half the image sits in the partial file and the server stalls.
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		for {
			select {
			case <-stop:
				return
			case <-time.After(20 * time.Millisecond):
			}
			if p := findPartials(dir); len(p) == 1 {
				if st, err := os.Stat(p[0]); err == nil && st.Size() >= half {
					signalSelf(syscall.SIGINT)
					return
				}
			}
		}
	}()
	var errOut bytes.Buffer
	args := []string{"--flash", "--role", "worker", "--format", "xz", "--device", filepath.Join(dir, "card.img"), "--yes", "--create-file", "--json",
		"--factory", srv.URL, "--cache-dir", dir}
	start := time.Now()
	code := Main(args, Env{Stdin: strings.NewReader(""), Stdout: io.Discard, Stderr: &errOut})
	if code != contract.ExitInterrupted {
		t.Fatalf("exit %d, want %d; stderr %s", code, contract.ExitInterrupted, errOut.String())
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("interrupt took %s to take effect", d)
	}
	partials := findPartials(dir)
	if len(partials) != 1 {
		t.Fatalf("want one resumable partial download in the cache, found %v", partials)
	}
	st, _ := os.Stat(partials[0])
	if st.Size() == 0 || st.Size() > half {
		t.Fatalf("partial holds %d bytes; want 0 < n <= %d", st.Size(), half)
	}

	before := srv.BytesServed()
	code, _, stderr := cliRun(t, args...)
	if code != contract.ExitOK {
		t.Fatalf("resume: exit %d: %s", code, stderr)
	}
	if got, want := srv.BytesServed()-before, int64(len(fx.XZ))-st.Size(); got != want {
		t.Fatalf("resume downloaded %d bytes, want only the missing %d", got, want)
	}
}

func TestInterruptWriteReportsIncompleteCard(t *testing.T) {
	if !canSignalSelf {
		t.Skip("no signals to this process here")
	}
	dir := t.TempDir()
	img := bigSparseImage(t, dir)
	out := &killOnEvent{stage: "write", atLeast: 1}
	var errOut bytes.Buffer
	card := filepath.Join(dir, "card.img")
	args := []string{"--flash", "--image", img, "--device", card, "--yes", "--create-file", "--json"}
	start := time.Now()
	code := Main(args, Env{Stdin: strings.NewReader(""), Stdout: out, Stderr: &errOut})
	assertInterruptedWrite(t, code, start, errOut.String())
	// A file card is sized to the image first (its zero chunks are holes):
	// what shows an unfinished card is its first sector, written last.
	b := make([]byte, 512)
	if f, err := os.Open(card); err == nil {
		f.ReadAt(b, 0)
		f.Close()
	}
	if b[510] == 0x55 && b[511] == 0xAA {
		t.Fatalf("the card holds the image's first sector despite the interrupt")
	}
	if !strings.Contains(out.buf.String(), `"event":"error"`) {
		t.Fatalf("no JSON error event: %s", out.buf.String())
	}
}

func findPartials(dir string) []string {
	var partials []string
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && strings.HasSuffix(p, ".partial") {
			partials = append(partials, p)
		}
		return nil
	})
	return partials
}

// bigSparseImage is a 1 GiB raw image (sparse: reads as zeros after an MBR
// signature, so it starts like a disk) in dir, so a write is still running
// when a test interrupts it.
func bigSparseImage(t *testing.T, dir string) string {
	t.Helper()
	img := filepath.Join(dir, "big.raw")
	mbr := make([]byte, 512)
	mbr[510], mbr[511] = 0x55, 0xAA
	if err := os.WriteFile(img, mbr, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(img, 1<<30); err != nil {
		t.Fatal(err)
	}
	return img
}

// assertInterruptedWrite checks how an interrupted write ends: exit 130,
// promptly, with the card reported incomplete.
func assertInterruptedWrite(t *testing.T, code int, start time.Time, stderr string) {
	t.Helper()
	if code != contract.ExitInterrupted {
		t.Fatalf("exit %d, want %d; stderr %s", code, contract.ExitInterrupted, stderr)
	}
	if d := time.Since(start); d > 15*time.Second {
		t.Errorf("interrupted write took %s to stop", d)
	}
	if !strings.Contains(stderr, "incomplete") {
		t.Fatalf("stderr should say the card is incomplete: %s", stderr)
	}
}
