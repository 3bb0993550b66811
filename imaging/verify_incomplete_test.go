package imaging

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// shrinkingTarget is a file target whose card "shrinks" (reads end early)
// or "vanishes" (reads fail with EIO) after the write.
type shrinkingTarget struct {
	fileTarget
	readErr error
}

func (s *shrinkingTarget) ReadAt(p []byte, off int64) (int, error) {
	if off >= 1<<20 {
		return 0, s.readErr
	}
	return s.fileTarget.ReadAt(p, off)
}

// A card that shrinks or vanishes during verify is an incomplete card, not
// a verify mismatch nor an internal error.
func TestVerifyOnVanishingCardIsIncomplete(t *testing.T) {
	img := testImage(t)
	src := writeTemp(t, "metal-arm64.raw.xz", img.XZ)
	for name, readErr := range map[string]error{"shrinks": nil, "vanishes": syscall.EIO} {
		t.Run(name, func(t *testing.T) {
			f, err := os.Create(filepath.Join(t.TempDir(), "card.img"))
			if err != nil {
				t.Fatal(err)
			}
			tgt := &shrinkingTarget{fileTarget: fileTarget{f: f}, readErr: readErr}
			_, err = flashOne(context.Background(), FlashOptions{Source: Source{Path: src}, Targets: []string{f.Name()}, Verify: true,
				Open: func(string, int64) (Target, error) { return tgt, nil }})
			if !errors.Is(err, ErrIncomplete) || errors.Is(err, ErrVerifyMismatch) {
				t.Fatalf("got %v, want ErrIncomplete", err)
			}
		})
	}
}
