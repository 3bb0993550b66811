package imaging

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/talosflash/talosflash/imaging/imagetest"
)

// orderTarget is a file that records the order of writes and syncs and
// can fail its sequential writes from an offset on.
type orderTarget struct {
	*os.File
	mu     sync.Mutex
	ops    []string
	off    int64
	failAt int64 // > 0: sequential writes from here fail
}

func (o *orderTarget) log(op string) {
	o.mu.Lock()
	o.ops = append(o.ops, op)
	o.mu.Unlock()
}

func (o *orderTarget) Write(p []byte) (int, error) {
	if o.failAt > 0 && o.off+int64(len(p)) > o.failAt {
		n, _ := o.File.Write(p[:o.failAt-o.off])
		o.off += int64(n)
		return n, errors.New("EIO (test)")
	}
	n, err := o.File.Write(p)
	if len(p) > 0 && o.off == 0 {
		o.log("write0")
	}
	o.off += int64(n)
	o.log("write")
	return n, err
}

func (o *orderTarget) WriteAt(p []byte, off int64) (int, error) {
	if o.failAt > 0 && off+int64(len(p)) > o.failAt {
		n, _ := o.File.WriteAt(p[:max(0, o.failAt-off)], off)
		return n, errors.New("EIO (test)")
	}
	switch {
	case off == 0 && allZero(p):
		o.log("zeros0")
	case off == 0:
		o.log("head")
	default:
		o.log("write")
	}
	return o.File.WriteAt(p, off)
}

func (o *orderTarget) Sync() error { o.log("sync"); return o.File.Sync() }

// The first MiB is written last, after the rest was written and synced:
// until then the card holds zeros there (written first where it held
// anything else: old data; a new file reads zeros already). The card is
// still the whole image.
func TestFirstMiBWrittenLast(t *testing.T) {
	img := testImage(t)
	for _, old := range []bool{false, true} {
		t.Run(fmt.Sprintf("old data %v", old), func(t *testing.T) {
			dst := filepath.Join(t.TempDir(), "card.img")
			f, err := os.Create(dst)
			if err != nil {
				t.Fatal(err)
			}
			if old {
				junk := bytes.Repeat([]byte{0x5A}, int(img.Size))
				if _, err := f.WriteAt(junk, 0); err != nil {
					t.Fatal(err)
				}
			}
			var ot *orderTarget
			open := func(string, int64) (Target, error) {
				ot = &orderTarget{File: f}
				return ot, nil
			}
			res, err := flashOne(context.Background(), FlashOptions{Source: Source{Path: writeTemp(t, "img.xz", img.XZ)}, Targets: []string{dst}, Open: open, Verify: true})
			if err != nil || !res.Verified || imagetest.FileSHA256(t, dst, img.Size) != img.SHA256 {
				t.Fatalf("%+v %v", res, err)
			}
			ops := ot.ops
			first, last := -1, -1
			for i, op := range ops {
				switch {
				case op == "head" && last >= 0:
					t.Fatalf("head written twice: %v", ops)
				case op == "head":
					last = i
				case op == "write" && first < 0:
					first = i
				}
			}
			if old != (len(ops) > 0 && ops[0] == "zeros0") || first < 0 || last < first+1 || ops[last-1] != "sync" || ops[len(ops)-1] != "sync" {
				t.Fatalf("the head is not written after a sync of the rest (after zeros, on old data), then synced: %v", ops)
			}
			for _, op := range ops[last+1:] {
				if op == "write" {
					t.Fatalf("a write after the head: %v", ops)
				}
			}
		})
	}
}

// A card that fails half-way holds no partition table: its first MiB is
// zeros, not the image's (even a card that held the image before).
func TestFailedCardHasNoPartitionTable(t *testing.T) {
	img := testImage(t)
	dst := filepath.Join(t.TempDir(), "card.img")
	// A card holding the image's partition table already, but other data
	// (another version): it is compared chunk by chunk and rewritten.
	old := bytes.Clone(img.Raw)
	for i := 2 << 20; i < len(old); i += 4096 {
		old[i] ^= 0xA5
	}
	if err := os.WriteFile(dst, old, 0o644); err != nil {
		t.Fatal(err)
	}
	open := func(string, int64) (Target, error) {
		f, err := os.OpenFile(dst, os.O_RDWR, 0)
		return &orderTarget{File: f, failAt: 3 << 20}, err
	}
	_, err := flashOne(context.Background(), FlashOptions{Source: Source{Path: writeTemp(t, "img.xz", img.XZ)}, Targets: []string{dst}, Open: open, Verify: true})
	if !errors.Is(err, ErrIncomplete) {
		t.Fatalf("got %v, want an incomplete card", err)
	}
	got, err := os.ReadFile(dst)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Equal(got[:headSize], img.Raw[:headSize]) || !bytes.Equal(got[:headSize], make([]byte, headSize)) {
		t.Fatal("the failed card's first MiB is not zeros")
	}
}
