package imaging

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"hash/crc32"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"
)

// readsFrom is a card whose reads from byte `from` on fail or lie.
type readsFrom struct {
	*os.File
	from int64
	err  error // nil: the reads there return other bytes
}

func (r readsFrom) ReadAt(p []byte, off int64) (int, error) {
	n, err := r.File.ReadAt(p, off)
	if off+int64(n) <= r.from {
		return n, err
	}
	if r.err != nil {
		return 0, r.err
	}
	for i := max(0, int(r.from-off)); i < n; i++ {
		p[i] ^= 0xFF
	}
	return n, err
}

// The read-back's buffers are shared by every card (the write stage's
// pool): however one card's read-back ends (verified, a mismatch, a read
// error, cancelled), every unit it took goes back, so the other cards
// never wait for buffers that are gone.
func TestReadBackUnitsComeBack(t *testing.T) {
	const unit, units = 1 << 20, 6
	data := make([]byte, 10<<20+4096) // not a whole number of units
	rand.NewChaCha8([32]byte{1}).Read(data)
	w := &written{n: int64(len(data)), unit: unit, units: make(chan *chunk, units)}
	s := sha256.Sum256(data)
	w.sum = s[:]
	for i := 0; i < len(data); i += crcBlock {
		if i%chunkSize == 0 {
			w.crcs = append(w.crcs, nil)
		}
		w.crcs[i/chunkSize] = append(w.crcs[i/chunkSize], crc32.Checksum(data[i:min(i+crcBlock, len(data))], crcTable))
	}
	for range units {
		w.units <- &chunk{buf: alignedBuf(unit)}
	}
	path := filepath.Join(t.TempDir(), "card.img")
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	for _, tc := range []struct {
		name string
		ctx  context.Context
		t    func(*os.File) Target
		want func(error) bool
	}{
		{"verified", context.Background(), func(f *os.File) Target { return f }, func(err error) bool { return err == nil }},
		{"mismatch", context.Background(), func(f *os.File) Target { return readsFrom{File: f, from: 5<<20 + 5} },
			func(err error) bool { var v *VerifyError; return errors.As(err, &v) && v.Offset == 5<<20 }},
		{"read error", context.Background(), func(f *os.File) Target { return readsFrom{File: f, from: 2 << 20, err: syscall.EIO} },
			func(err error) bool { return errors.Is(err, ErrIncomplete) && errors.Is(err, syscall.EIO) }},
		{"first read fails", context.Background(), func(f *os.File) Target { return readsFrom{File: f, err: io.ErrUnexpectedEOF} },
			func(err error) bool { return errors.Is(err, ErrIncomplete) }},
		{"cancelled", cancelled, func(f *os.File) Target { return f }, func(err error) bool { return errors.Is(err, context.Canceled) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, err := os.Open(path)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			for _, depth := range []int{2, 3} {
				_, err := verifyTarget(tc.ctx, tc.t(f), w, nil, newMeter(nil, StageVerify, w.n, false), depth)
				if !tc.want(err) {
					t.Fatalf("depth %d: verify: %v", depth, err)
				}
				// All of them back (a backstop bound: they come back as
				// the reader stops, at once here).
				got := make([]*chunk, 0, units)
				deadline := time.After(30 * time.Second)
				for len(got) < units {
					select {
					case c := <-w.units:
						got = append(got, c)
					case <-deadline:
						t.Fatalf("depth %d: %d of the %d read-back units came back", depth, len(got), units)
					}
				}
				for _, c := range got {
					w.units <- c
				}
			}
		})
	}
}

// Several cards verify from the one pool of the write stage, in units of
// a quarter chunk: byte-exact cards, and a card whose read-back fails
// early leaves the pool whole for the others.
func TestFlashAllReadBackSharesThePool(t *testing.T) {
	img := testImage(t)
	src := writeTemp(t, "metal-arm64.raw.xz", img.XZ)
	dir := t.TempDir()
	var targets []string
	for _, n := range []string{"a", "bad1", "b", "bad2", "bad3", "c"} {
		targets = append(targets, filepath.Join(dir, n+".img"))
	}
	open := func(path string, size int64) (Target, error) {
		tg, err := OpenFile(path, size)
		if err != nil || !bytes.HasPrefix([]byte(filepath.Base(path)), []byte("bad")) {
			return tg, err
		}
		return readsFrom{File: tg.(*os.File), from: 1 << 20, err: syscall.EIO}, nil
	}
	cards, err := FlashAll(context.Background(), FlashOptions{Source: Source{Path: src}, Targets: targets, Verify: true, Open: open})
	if err != nil {
		t.Fatal(err)
	}
	for i, c := range cards {
		bad := bytes.HasPrefix([]byte(filepath.Base(targets[i])), []byte("bad"))
		if bad {
			if !errors.Is(c.Err, syscall.EIO) {
				t.Errorf("%s: %v, want its read-back's EIO", targets[i], c.Err)
			}
			continue
		}
		if c.Err != nil || !c.Verified || sha256File(t, targets[i]) != img.SHA256 {
			t.Errorf("%s: %+v %v", targets[i], c, c.Err)
		}
	}
}

// The decoder is closed and let go of at the stream's checked end, not
// when the flash returns: its window is not held through the read-back.
func TestDecoderReleasedAtItsEnd(t *testing.T) {
	c := &countingCloser{Reader: bytes.NewReader([]byte("disk"))}
	d := &releasing{r: c, c: c}
	got, err := io.ReadAll(d)
	if err != nil || string(got) != "disk" {
		t.Fatalf("read %q, %v", got, err)
	}
	if c.closed != 1 || d.r != nil || d.c != nil {
		t.Fatalf("at the end: closed %d times, reader held %v, closer held %v", c.closed, d.r != nil, d.c != nil)
	}
	d.close() // the flash's own close, later
	if n, err := d.Read(make([]byte, 8)); n != 0 || err != io.EOF {
		t.Fatalf("read after the end: %d, %v", n, err)
	}
	if c.closed != 1 {
		t.Fatalf("closed %d times", c.closed)
	}
	// Cancelled before the end: closed once, by the flash.
	c2 := &countingCloser{Reader: bytes.NewReader([]byte("disk"))}
	d2 := &releasing{r: c2, c: c2}
	d2.close()
	d2.close()
	if c2.closed != 1 {
		t.Fatalf("cancelled: closed %d times", c2.closed)
	}
}

// A close from another goroutine (a cancelled flash) while the decoder is
// in a Read waits for that Read to return: klauspost/compress's zstd
// decoder crashed (nil pointer in nextBlockSync) when closed mid-Read.
// The Read closes it as it returns, and the next Read reads nothing.
func TestDecoderNotClosedDuringARead(t *testing.T) {
	in, release := make(chan struct{}), make(chan struct{})
	c := &blockingCloser{in: in, release: release}
	d := &releasing{r: c, c: c}
	done := make(chan error, 1)
	go func() { _, err := d.Read(make([]byte, 8)); done <- err }()
	<-in // the Read is in the decoder
	d.close()
	if c.closedDuringRead {
		t.Fatal("closed while its Read ran")
	}
	c.mu.Lock()
	closed := c.closed
	c.mu.Unlock()
	if closed != 0 {
		t.Fatal("closed before its Read returned")
	}
	close(release)
	if err := <-done; err != nil {
		t.Fatalf("the Read in progress: %v", err)
	}
	if c.closed != 1 || c.closedDuringRead {
		t.Fatalf("after the Read: closed %d times (during a read: %v)", c.closed, c.closedDuringRead)
	}
	if n, err := d.Read(make([]byte, 8)); n != 0 || !errors.Is(err, errDecoderClosed) {
		t.Fatalf("read after the close: %d, %v", n, err)
	}
}

// blockingCloser's Read waits for release; Close records whether a Read
// was running.
type blockingCloser struct {
	in, release      chan struct{}
	mu               sync.Mutex
	inRead           bool
	closed           int
	closedDuringRead bool
}

func (b *blockingCloser) Read(p []byte) (int, error) {
	b.mu.Lock()
	b.inRead = true
	b.mu.Unlock()
	close(b.in)
	<-b.release
	b.mu.Lock()
	b.inRead = false
	b.mu.Unlock()
	return len(p), nil
}

func (b *blockingCloser) Close() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.closed++
	b.closedDuringRead = b.closedDuringRead || b.inRead
	return nil
}

type countingCloser struct {
	io.Reader
	closed int
}

func (c *countingCloser) Close() error { c.closed++; return nil }
