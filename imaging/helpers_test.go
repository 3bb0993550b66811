package imaging

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/talosflash/talosflash/imaging/imagetest"
)

// fixtureSize is not a multiple of the 4 MiB chunk nor of 4 KiB, so the
// short, unaligned last write is exercised.
const fixtureSize = 6<<20 + 512

var (
	fixtureOnce sync.Once
	fixture     *imagetest.Fixture
)

// testImage is a shared ~6 MiB image compressed in 1 MiB blocks.
func testImage(t testing.TB) *imagetest.Fixture {
	t.Helper()
	fixtureOnce.Do(func() {
		// The xz binary is much faster than ulikunitz/xz's encoder; both
		// produce multi-block files here.
		var ok bool
		if fixture, ok = imagetest.NewMultiBlock(t, fixtureSize, 42, 1<<20); !ok {
			fixture = imagetest.New(t, fixtureSize, 42, 1<<20)
		}
	})
	if fixture == nil {
		t.Fatal("fixture generation failed")
	}
	return fixture
}

func writeTemp(t testing.TB, name string, data []byte) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func sha256Prefix(t testing.TB, path string, n int64) string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.CopyN(h, f, n); err != nil {
		t.Fatalf("read %s: %v", path, err)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// loopDevice attaches a sparse file of size bytes to a loop device.
func loopDevice(t *testing.T, size int64) string {
	t.Helper()
	backing := filepath.Join(t.TempDir(), "card.img")
	f, err := os.Create(backing)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(size); err != nil {
		t.Fatal(err)
	}
	f.Close()
	out, err := exec.Command("losetup", "-f", "--show", backing).CombinedOutput()
	if err != nil {
		t.Skipf("loop devices unavailable (losetup -f --show: %v: %s)", err, bytes.TrimSpace(out))
	}
	dev := strings.TrimSpace(string(out))
	t.Cleanup(func() {
		if out, err := exec.Command("losetup", "-d", dev).CombinedOutput(); err != nil {
			t.Errorf("losetup -d %s: %v: %s", dev, err, out)
		}
	})
	return dev
}

// progressLog records progress reports.
type progressLog struct {
	mu   sync.Mutex
	reps []Progress
}

func (l *progressLog) fn(p Progress) {
	l.mu.Lock()
	l.reps = append(l.reps, p)
	l.mu.Unlock()
}

func (l *progressLog) last(stage Stage) (Progress, int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	var p Progress
	n := 0
	for _, r := range l.reps {
		if r.Stage == stage {
			p = r
			n++
		}
	}
	return p, n
}

// fileTarget wraps an *os.File without exposing Fd, with hooks.
type fileTarget struct {
	f       *os.File
	off     int64
	onWrite func(off int64, p []byte) ([]byte, int, error) // may replace p / fail
	delay   time.Duration
}

func (w *fileTarget) Write(p []byte) (int, error) {
	if w.delay > 0 {
		time.Sleep(w.delay)
	}
	if w.onWrite != nil {
		q, n, err := w.onWrite(w.off, p)
		if err != nil {
			m, _ := w.f.Write(p[:n])
			w.off += int64(m)
			return m, err
		}
		p = q
	}
	n, err := w.f.Write(p)
	w.off += int64(n)
	return n, err
}

func (w *fileTarget) ReadAt(p []byte, off int64) (int, error) { return w.f.ReadAt(p, off) }
func (w *fileTarget) Sync() error                             { return w.f.Sync() }
func (w *fileTarget) Close() error                            { return w.f.Close() }

func sha256Hex(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

func strconvFormat(n int64) string { return strconv.FormatInt(n, 10) }
