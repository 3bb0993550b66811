package imaging

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Three cards from one decode: each holds the image byte for byte, each is
// verified, and progress names the card of every write/verify/done report.
func TestFlashAllThreeFiles(t *testing.T) {
	img := testImage(t)
	src := writeTemp(t, "metal-arm64.raw.xz", img.XZ)
	dir := t.TempDir()
	targets := []string{filepath.Join(dir, "a.img"), filepath.Join(dir, "b.img"), filepath.Join(dir, "c.img")}
	var log progressLog
	cards, err := FlashAll(context.Background(), FlashOptions{Source: Source{Path: src}, Targets: targets, Verify: true, Progress: log.fn})
	if err != nil {
		t.Fatal(err)
	}
	if len(cards) != 3 {
		t.Fatalf("%d results, want 3", len(cards))
	}
	for i, c := range cards {
		if c.Err != nil || c.Target != targets[i] || !c.Verified || c.SHA256 != img.SHA256 {
			t.Fatalf("card %d: %+v (%v)", i, c, c.Err)
		}
		got, err := os.ReadFile(targets[i])
		if err != nil || !bytes.Equal(got, img.Raw) {
			t.Fatalf("%s differs from the raw image (%v)", targets[i], err)
		}
	}
	done := map[string]map[Stage]int64{}
	log.mu.Lock()
	for _, p := range log.reps {
		if p.Stage == StageWrite || p.Stage == StageVerify || p.Stage == StageDone {
			if p.Target == "" {
				t.Errorf("%s report without its card: %+v", p.Stage, p)
			}
			if done[p.Target] == nil {
				done[p.Target] = map[Stage]int64{}
			}
			done[p.Target][p.Stage] = p.Done
		}
	}
	log.mu.Unlock()
	for _, name := range targets {
		for _, st := range []Stage{StageWrite, StageVerify, StageDone} {
			if done[name][st] != img.Size {
				t.Errorf("%s: last %s report at %d, want %d", name, st, done[name][st], img.Size)
			}
		}
	}
}

// A card that fails in the middle of the write (EIO after 2 MiB) fails
// alone: the other two are written and verified.
func TestFlashAllOneCardFailsMidWrite(t *testing.T) {
	img := testImage(t)
	src := writeTemp(t, "metal-arm64.raw.xz", img.XZ)
	dir := t.TempDir()
	targets := []string{filepath.Join(dir, "a.img"), "pulled", filepath.Join(dir, "c.img")}
	open := func(path string, size int64) (Target, error) {
		if path != "pulled" {
			return OpenFile(path, size)
		}
		f, err := os.Create(filepath.Join(dir, "pulled.img"))
		if err != nil {
			return nil, err
		}
		return &fileTarget{f: f, onWrite: func(off int64, p []byte) ([]byte, int, error) {
			if off+int64(len(p)) > 2<<20 {
				return nil, int(max(0, 2<<20-off)), syscall.EIO
			}
			return p, 0, nil
		}}, nil
	}
	cards, err := FlashAll(context.Background(), FlashOptions{Source: Source{Path: src}, Targets: targets, Verify: true, Open: open})
	if err != nil {
		t.Fatal(err)
	}
	var we *WriteError
	if !errors.As(cards[1].Err, &we) || !errors.Is(cards[1].Err, ErrIncomplete) || !errors.Is(cards[1].Err, syscall.EIO) {
		t.Fatalf("pulled card: %v, want a write error (EIO, incomplete)", cards[1].Err)
	}
	if we.Offset != 2<<20 {
		t.Errorf("pulled card failed after %d bytes, want %d", we.Offset, 2<<20)
	}
	for _, i := range []int{0, 2} {
		if cards[i].Err != nil || !cards[i].Verified {
			t.Fatalf("card %s: %v", targets[i], cards[i].Err)
		}
		if got := sha256File(t, targets[i]); got != img.SHA256 {
			t.Fatalf("card %s holds %s, want %s", targets[i], got, img.SHA256)
		}
	}
}

// A card refused when opened (too small) does not stop the others; every
// card refused is no error of the flash itself, each result says why.
func TestFlashAllTooSmallCard(t *testing.T) {
	img := testImage(t)
	src := writeTemp(t, "metal-arm64.raw.xz", img.XZ)
	dir := t.TempDir()
	targets := []string{filepath.Join(dir, "a.img"), filepath.Join(dir, "small.img")}
	cards, err := FlashAll(context.Background(), FlashOptions{Source: Source{Path: src}, Targets: targets, Verify: true,
		Open: func(path string, size int64) (Target, error) {
			t, err := OpenFile(path, size)
			if err != nil || filepath.Base(path) != "small.img" {
				return t, err
			}
			return notedSizedFile{sizedFile{t.(*os.File), 1 << 20}}, nil
		}})
	if err != nil {
		t.Fatal(err)
	}
	if !errors.Is(cards[1].Err, ErrTargetTooSmall) || cards[1].SHA256 != "" {
		t.Fatalf("small card: %+v, %v", cards[1], cards[1].Err)
	}
	if !slices.Equal(cards[1].Notes, openNoted{}.Notes()) { // opened (and unmounted), then refused
		t.Errorf("small card's notes %q", cards[1].Notes)
	}
	if cards[0].Err != nil || sha256File(t, targets[0]) != img.SHA256 {
		t.Fatalf("good card: %v", cards[0].Err)
	}
	if st, err := os.Stat(targets[1]); err != nil || st.Size() != 0 {
		t.Fatalf("small card was written: %v, %v", st, err)
	}
}

// Cancelling a flash of several cards reports each as incomplete.
func TestFlashAllCancelled(t *testing.T) {
	img := testImage(t)
	src := writeTemp(t, "metal-arm64.raw.xz", img.XZ)
	dir := t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	targets := []string{filepath.Join(dir, "a.img"), filepath.Join(dir, "b.img")}
	open := func(path string, size int64) (Target, error) {
		f, err := os.Create(path)
		if err != nil {
			return nil, err
		}
		return &fileTarget{f: f, onWrite: func(off int64, p []byte) ([]byte, int, error) {
			if off >= 4<<20 {
				cancel() // the second chunk: cancel from inside the write
			}
			return p, 0, nil
		}}, nil
	}
	cards, err := FlashAll(ctx, FlashOptions{Source: Source{Path: src}, Targets: targets, Verify: true, Open: open})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range cards {
		if !errors.Is(c.Err, ErrIncomplete) || !errors.Is(c.Err, context.Canceled) {
			t.Fatalf("%s: %v, want incomplete (cancelled)", c.Target, c.Err)
		}
	}
}

type sizedFile struct {
	*os.File
	size int64
}

func (s sizedFile) Size() (int64, error) { return s.size, nil }

func sha256File(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return sha256Hex(b)
}

// A card whose write hangs (a reader pulled out that the kernel does not
// fail) is given up after cardStall; the others are written and verified
// without waiting for it, and the flash returns with its write still stuck.
func TestFlashAllStuckCardIsGivenUp(t *testing.T) {
	old := cardStall
	cardStall = 2 * time.Second // far above a 4 MiB write to a temp file
	t.Cleanup(func() { cardStall = old })
	img := testImage(t)
	src := writeTemp(t, "metal-arm64.raw.xz", img.XZ)
	dir := t.TempDir()
	release := make(chan struct{})
	t.Cleanup(func() { close(release) }) // lets the stuck write return
	targets := []string{filepath.Join(dir, "a.img"), "stuck", filepath.Join(dir, "c.img")}
	open := func(path string, size int64) (Target, error) {
		if path != "stuck" {
			return OpenFile(path, size)
		}
		f, err := os.Create(filepath.Join(dir, "stuck.img"))
		if err != nil {
			return nil, err
		}
		return openNoted{&fileTarget{f: f, onWrite: func(off int64, p []byte) ([]byte, int, error) {
			if off >= 4<<20 {
				<-release // the second chunk never finishes
			}
			return p, 0, nil
		}}}, nil
	}
	cards, err := FlashAll(context.Background(), FlashOptions{Source: Source{Path: src}, Targets: targets, Verify: true, Open: open})
	if err != nil {
		t.Fatal(err)
	}
	if !errors.Is(cards[1].Err, ErrIncomplete) || !strings.Contains(cards[1].Err.Error(), "did not finish") {
		t.Fatalf("stuck card: %v, want it given up as incomplete", cards[1].Err)
	}
	if !slices.Equal(cards[1].Notes, openNoted{}.Notes()) { // what its Open did is still said
		t.Errorf("stuck card's notes %q", cards[1].Notes)
	}
	for _, i := range []int{0, 2} {
		if cards[i].Err != nil || !cards[i].Verified || sha256File(t, targets[i]) != img.SHA256 {
			t.Fatalf("card %s: %v", targets[i], cards[i].Err)
		}
	}
}

// hangingFile is a file target whose Sync or ReadAt blocks until release,
// as a pulled reader can in the kernel.
type hangingFile struct {
	*os.File
	hangSync, hangRead bool
	release            chan struct{}
	onRead             func() // called as a read starts
}

func (h hangingFile) Sync() error {
	if h.hangSync {
		<-h.release
	}
	return h.File.Sync()
}

func (h hangingFile) ReadAt(p []byte, off int64) (int, error) {
	if h.onRead != nil {
		h.onRead()
	}
	if h.hangRead {
		<-h.release
	}
	return h.File.ReadAt(p, off)
}

// A card that hangs in its fsync or its read-back is given up after
// cardStall like a hung write: the good card is verified and reported and
// the flash returns (it used to wait for the stuck card for ever). With one
// card, Ctrl-C ends a stuck read-back at once.
func TestFlashAllCardHangingInSyncOrVerify(t *testing.T) {
	old := cardStall
	cardStall = 2 * time.Second
	t.Cleanup(func() { cardStall = old })
	img := testImage(t)
	src := writeTemp(t, "metal-arm64.raw.xz", img.XZ)
	for _, hang := range []string{"sync", "read"} {
		t.Run(hang, func(t *testing.T) {
			dir := t.TempDir()
			release := make(chan struct{})
			t.Cleanup(func() { close(release) })
			targets := []string{filepath.Join(dir, "good.img"), filepath.Join(dir, "hang.img")}
			open := func(path string, size int64) (Target, error) {
				tg, err := OpenFile(path, size)
				if err != nil || filepath.Base(path) != "hang.img" {
					return tg, err
				}
				return hangingFile{File: tg.(*os.File), hangSync: hang == "sync", hangRead: hang == "read", release: release}, nil
			}
			done := make(chan struct{})
			var cards []CardResult
			var err error
			go func() {
				defer close(done)
				cards, err = FlashAll(context.Background(), FlashOptions{Source: Source{Path: src}, Targets: targets, Verify: true, Open: open})
			}()
			select {
			case <-done:
			case <-time.After(30 * time.Second):
				t.Fatalf("FlashAll still waits for the card hanging in %s", hang)
			}
			if err != nil {
				t.Fatal(err)
			}
			if !errors.Is(cards[1].Err, ErrIncomplete) || !errors.Is(cards[1].Err, errStalled) {
				t.Fatalf("hanging card: %v, want it given up as incomplete", cards[1].Err)
			}
			if cards[0].Err != nil || !cards[0].Verified || sha256File(t, targets[0]) != img.SHA256 {
				t.Fatalf("good card: %+v", cards[0])
			}
		})
	}
	t.Run("cancel", func(t *testing.T) {
		cardStall = time.Hour // only the cancel can end it
		dir := t.TempDir()
		release := make(chan struct{})
		t.Cleanup(func() { close(release) })
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		open := func(path string, size int64) (Target, error) {
			tg, err := OpenFile(path, size)
			if err != nil {
				return nil, err
			}
			return hangingFile{File: tg.(*os.File), hangRead: true, release: release, onRead: cancel}, nil
		}
		done := make(chan error, 1)
		go func() {
			_, err := flashOne(ctx, FlashOptions{Source: Source{Path: src}, Targets: []string{filepath.Join(dir, "card.img")}, Verify: true, Open: open})
			done <- err
		}()
		select {
		case err := <-done:
			if !errors.Is(err, context.Canceled) {
				t.Fatalf("err %v, want the cancel", err)
			}
		case <-time.After(30 * time.Second):
			t.Fatal("Ctrl-C does not end a stuck read-back")
		}
	})
}

// Naming the source image among several targets is refused before any
// card is written (it used to write the others first).
func TestFlashAllSourceAmongTargets(t *testing.T) {
	img := testImage(t)
	dir := t.TempDir()
	src := filepath.Join(dir, "src.raw")
	if err := os.WriteFile(src, img.Raw, 0o600); err != nil {
		t.Fatal(err)
	}
	other := filepath.Join(dir, "b.img")
	_, err := FlashAll(context.Background(), FlashOptions{Source: Source{Path: src}, Targets: []string{other, src}, Verify: true})
	if !errors.Is(err, ErrTargetIsSource) {
		t.Fatalf("err %v, want ErrTargetIsSource", err)
	}
	if _, err := os.Stat(other); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the other card was written: %v", err)
	}
}
