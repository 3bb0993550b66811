package imaging

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"testing"
)

// notedTarget is a target with something to tell the user once closed,
// like a devices.Device that unmounted the card first.
type notedTarget struct {
	*fileTarget
	closed bool
}

func (n *notedTarget) Close() error {
	n.closed = true
	return n.fileTarget.Close()
}

func (n *notedTarget) Notes() []string {
	if !n.closed {
		return []string{"asked before Close"}
	}
	return []string{"unmounted /media/" + filepath.Base(n.f.Name()) + " before writing"}
}

// openNoted is a target whose Open had something to say (a device that
// unmounted the card), whatever happens to it next.
type openNoted struct{ *fileTarget }

func (openNoted) Notes() []string { return []string{"unmounted /media/u/boot before writing"} }

// notedSizedFile is a sizedFile whose Open unmounted the card.
type notedSizedFile struct{ sizedFile }

func (notedSizedFile) Notes() []string { return openNoted{}.Notes() }

// Every card's result is one Card: its own image fields, and the notes of
// its target taken after Close, for a card that failed mid-write as for
// one that was verified (app/plan no longer keeps its own map of targets).
func TestCardCarriesItsTargetsNotes(t *testing.T) {
	img := testImage(t)
	src := writeTemp(t, "metal-arm64.raw.xz", img.XZ)
	dir := t.TempDir()
	targets := []string{filepath.Join(dir, "a.img"), filepath.Join(dir, "pulled.img")}
	open := func(path string, size int64) (Target, error) {
		f, err := os.Create(path)
		if err != nil {
			return nil, err
		}
		ft := &fileTarget{f: f}
		if filepath.Base(path) == "pulled.img" {
			ft.onWrite = func(off int64, p []byte) ([]byte, int, error) {
				if off+int64(len(p)) > 2<<20 {
					return nil, int(max(0, 2<<20-off)), syscall.EIO
				}
				return p, 0, nil
			}
		}
		return &notedTarget{fileTarget: ft}, nil
	}
	cards, err := FlashAll(context.Background(), FlashOptions{Source: Source{Path: src}, Targets: targets, Verify: true, Open: open})
	if err != nil {
		t.Fatal(err)
	}
	good, pulled := cards[0], cards[1]
	if !good.OK() || !good.Verified || good.SHA256 != img.SHA256 || good.Bytes != img.Size || good.Target != targets[0] {
		t.Fatalf("good card %+v", good)
	}
	if pulled.OK() || pulled.Err == nil || pulled.Target != targets[1] {
		t.Fatalf("pulled card %+v", pulled)
	}
	for i, c := range cards {
		want := []string{"unmounted /media/" + filepath.Base(targets[i]) + " before writing"}
		if !slices.Equal(c.Notes, want) {
			t.Errorf("card %s notes %q, want %q", c.Target, c.Notes, want)
		}
	}
}
