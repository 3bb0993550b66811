package imaging

import (
	"bytes"
	"context"
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/talosflash/talosflash/imaging/imagetest"
)

var (
	skipImageOnce sync.Once
	skipImage     []byte
)

// skipRaw is a 64 MiB image with whole zero chunks, as the factory's has.
func skipRaw(t *testing.T) []byte {
	skipImageOnce.Do(func() {
		var err error
		if skipImage, err = imagetest.Raw(64<<20, 5); err != nil {
			t.Fatal(err)
		}
	})
	return skipImage
}

// flashOnto flashes raw onto a card that already holds before (opened
// as is, not truncated) and returns the result and the card's bytes.
func flashOnto(t *testing.T, raw, before []byte, wrap func(*os.File) Target) (*CardResult, []byte, error) {
	t.Helper()
	dir := t.TempDir()
	card := filepath.Join(dir, "card.img")
	if err := os.WriteFile(card, before, 0o644); err != nil {
		t.Fatal(err)
	}
	open := func(string, int64) (Target, error) {
		f, err := os.OpenFile(card, os.O_RDWR, 0)
		if err != nil || wrap == nil {
			return f, err
		}
		return wrap(f), nil
	}
	res, err := flashOne(context.Background(), FlashOptions{Source: Source{Path: writeTemp(t, "img.raw", raw)}, Targets: []string{card}, Open: open, Verify: true})
	got, rerr := os.ReadFile(card)
	if rerr != nil {
		t.Fatal(rerr)
	}
	return res, got, err
}

// Only the bytes the card lacks are written, and the card is the image
// byte for byte whatever it held: zeros, the image itself, random data.
// (TestRunsProperty covers random images and cards; this is the
// factory-shaped image.)
func TestOnlyWhatTheCardLacksIsWritten(t *testing.T) {
	raw := skipRaw(t)
	size := int64(len(raw))
	random := make([]byte, size)
	r := rand.New(rand.NewPCG(1, 2))
	for i := range random {
		random[i] = byte(r.Uint32())
	}
	zeros := make([]byte, size)
	cases := []struct {
		name             string
		before           []byte
		written, skipped int64 // written: the writes (the head's zeros included)
	}{
		{"zeroed", zeros, writeBound(zeros, raw, writeUnit), size - writeBound(zeros, raw, writeUnit)},
		{"holding the image", raw, 0, size},
		{"random", random, writeBound(random, raw, writeUnit), 0},
		{"new file", nil, writeBound(zeros, raw, writeUnit), size - writeBound(zeros, raw, writeUnit)},
	}
	if w := cases[0].written; w > size/4 || cases[2].written < size || cases[2].written > size+headSize {
		t.Fatalf("the test image: %d bytes to write on a zeroed card, %d on a random one", w, cases[2].written)
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ct := &countingTarget{}
			res, got, err := flashOnto(t, raw, c.before, func(f *os.File) Target { ct.File = f; return ct })
			if err != nil || !res.Verified || res.Bytes != size {
				t.Fatalf("%+v %v", res, err)
			}
			if !bytes.Equal(got, raw) {
				t.Fatal("the card is not the image")
			}
			if ct.written.Load() != c.written || res.Skipped != c.skipped || res.Written+res.Skipped != size || res.Written > c.written {
				t.Fatalf("wrote %d (written %d, %d zeroed first) skipped %d, want %d and %d (image %d)", ct.written.Load(), res.Written, res.Zeroed, res.Skipped, c.written, c.skipped, size)
			}
		})
	}
}

// lyingCard reads zeros wherever it is asked, whatever it holds.
type lyingCard struct{ *os.File }

func (l lyingCard) ReadAt(p []byte, off int64) (int, error) {
	clear(p)
	return len(p), nil
}

// A card whose reads lie is caught: what was written does not read back.
func TestLyingReadsCaught(t *testing.T) {
	raw := skipRaw(t)
	_, _, err := flashOnto(t, raw, make([]byte, len(raw)), func(f *os.File) Target { return lyingCard{f} })
	if !errors.Is(err, ErrVerifyMismatch) {
		t.Fatalf("got %v, want a verify mismatch", err)
	}
}

// A 720-byte image onto a card that held other data: "written" is the
// image's 720 bytes (it said 1440: the zeros written over the head first
// counted as image bytes), the zeros are Zeroed.
func TestTinyImageWrittenOnce(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 20))
	raw := make([]byte, 720)
	for i := range raw {
		raw[i] = byte(r.Uint32())
	}
	raw[510], raw[511] = 0x55, 0xaa // an MBR: a disk image
	before := make([]byte, 720)
	for i := range before {
		before[i] = byte(r.Uint32())
	}
	res, got, err := flashOnto(t, raw, before, nil)
	if err != nil || !bytes.Equal(got, raw) {
		t.Fatalf("%+v %v", res, err)
	}
	if res.Written != 720 || res.Skipped != 0 || res.Zeroed != 720 {
		t.Fatalf("written %d skipped %d zeroed %d, want 720, 0, 720", res.Written, res.Skipped, res.Zeroed)
	}
}
