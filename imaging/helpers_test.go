package imaging

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
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

// flashOne flashes one card (FlashAll with one target): the card (nil
// when nothing was written) and its failure, or the flash's.
func flashOne(ctx context.Context, opts FlashOptions) (*CardResult, error) {
	cards, err := FlashAll(ctx, opts)
	if err != nil {
		return nil, err
	}
	c := &cards[0]
	if c.SHA256 == "" {
		return nil, c.Err
	}
	return c, c.Err
}
