package imaging

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/talosflash/talosflash/imaging/imagetest"
)

// Two images at once, one job: each card holds its own group's image byte
// for byte; a card that fails mid-write and a group whose image is corrupt
// fail only themselves.
func TestFlashGroupsEachCardItsImage(t *testing.T) {
	cp, worker := testImage(t), imagetest.New(t, 3<<20, 7, 1<<20)
	corrupt := bytes.Clone(worker.XZ)
	corrupt[len(corrupt)/2] ^= 0xff
	cpSrc := writeTemp(t, "cp.raw.xz", cp.XZ)
	workerSrc := writeTemp(t, "worker.raw.xz", worker.XZ)
	badSrc := writeTemp(t, "bad.raw.xz", corrupt)
	dir := t.TempDir()
	card := func(n string) string { return filepath.Join(dir, n) }
	open := func(path string, size int64) (Target, error) {
		if filepath.Base(path) != "pulled.img" {
			return OpenFile(path, size)
		}
		f, err := os.Create(path)
		if err != nil {
			return nil, err
		}
		return &fileTarget{f: f, onWrite: func(off int64, p []byte) ([]byte, int, error) {
			if off+int64(len(p)) > 1<<20 {
				return nil, 0, syscall.EIO
			}
			return p, 0, nil
		}}, nil
	}
	var log progressLog
	res, err := FlashGroups(context.Background(), []FlashOptions{
		{Source: Source{Path: cpSrc}, Targets: []string{card("cp.img")}, Verify: true, Open: open, Progress: log.fn},
		{Source: Source{Path: workerSrc}, Targets: []string{card("w1.img"), card("pulled.img"), card("w2.img")}, Verify: true, Open: open, Progress: log.fn},
		{Source: Source{Path: badSrc}, Targets: []string{card("w3.img")}, Verify: true, Open: open},
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(res) != 3 || len(res[0]) != 1 || len(res[1]) != 3 || len(res[2]) != 1 {
		t.Fatalf("results %+v", res)
	}
	want := map[string]*imagetest.Fixture{card("cp.img"): cp, card("w1.img"): worker, card("w2.img"): worker}
	for _, g := range res[:2] {
		for _, c := range g {
			fx := want[c.Target]
			if fx == nil {
				continue
			}
			if c.Err != nil || !c.Verified || c.SHA256 != fx.SHA256 {
				t.Fatalf("%s: %+v (%v)", c.Target, c, c.Err)
			}
			if got, _ := os.ReadFile(c.Target); !bytes.Equal(got, fx.Raw) {
				t.Fatalf("%s is not its image", c.Target)
			}
		}
	}
	if c := res[1][1]; !errors.Is(c.Err, syscall.EIO) || c.Target != card("pulled.img") {
		t.Fatalf("pulled card: %+v", c)
	}
	if c := res[2][0]; !errors.Is(c.Err, ErrCorruptImage) || c.OK() {
		t.Fatalf("the corrupt image's card: %+v, %v", c, c.Err)
	}
	if _, err := os.Stat(card("w3.img")); err == nil {
		if got := sha256File(t, card("w3.img")); got == worker.SHA256 {
			t.Fatal("the corrupt image's card holds the image")
		}
	}
	// Both groups' cards report their progress, named.
	seen := map[string]bool{}
	log.mu.Lock()
	for _, p := range log.reps {
		if p.Stage == StageDone {
			seen[p.Target] = true
		}
	}
	log.mu.Unlock()
	// One card in its group: FlashAll names no card in its reports.
	if !seen[card("w1.img")] || !seen[card("w2.img")] || !seen[""] {
		t.Fatalf("done reports for %v", seen)
	}
}

// Refused before anything is touched: one card named in two groups, and a
// card that is another group's image file.
func TestFlashGroupsRefusals(t *testing.T) {
	img := testImage(t)
	a := writeTemp(t, "a.raw.xz", img.XZ)
	b := writeTemp(t, "b.raw.xz", img.XZ)
	dir := t.TempDir()
	card := filepath.Join(dir, "card.img")
	_, err := FlashGroups(context.Background(), []FlashOptions{
		{Source: Source{Path: a}, Targets: []string{card}},
		{Source: Source{Path: b}, Targets: []string{card}},
	})
	if !errors.Is(err, ErrTargetInUse) {
		t.Fatalf("one card in two groups: %v", err)
	}
	before, _ := os.ReadFile(b)
	_, err = FlashGroups(context.Background(), []FlashOptions{
		{Source: Source{Path: a}, Targets: []string{card}},
		{Source: Source{Path: b}, Targets: []string{a}},
	})
	if !errors.Is(err, ErrTargetIsSource) {
		t.Fatalf("a card that is the other image: %v", err)
	}
	if after, _ := os.ReadFile(a); !bytes.Equal(after, img.XZ) || !bytes.Equal(before, img.XZ) {
		t.Fatal("an image file was touched")
	}
	if _, err := os.Stat(card); err == nil {
		t.Fatal("a card was written")
	}
	// The cache entry of another group (not downloaded yet) is refused too.
	c := &Cache{Dir: t.TempDir()}
	entry, _ := c.Path("f/s/v1.14.5/metal-arm64.raw.zst")
	if err := os.MkdirAll(filepath.Dir(entry), 0o700); err != nil {
		t.Fatal(err)
	}
	_, err = FlashGroups(context.Background(), []FlashOptions{
		{Source: Source{URL: "http://127.0.0.1:1/x", Key: "f/s/v1.14.5/metal-arm64.raw.zst", Cache: c}, Targets: []string{card}},
		{Source: Source{Path: a}, Targets: []string{entry + ".partial"}},
	})
	if !errors.Is(err, ErrTargetIsSource) {
		t.Fatalf("a card that is the other image's download: %v", err)
	}
}
