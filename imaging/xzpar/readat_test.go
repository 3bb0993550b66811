package xzpar

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/talosflash/talosflash/imaging/imagetest"
)

// countingAt counts the bytes read through it.
type countingAt struct {
	r io.ReaderAt
	n atomic.Int64
}

func (c *countingAt) ReadAt(p []byte, off int64) (int, error) {
	n, err := c.r.ReadAt(p, off)
	c.n.Add(int64(n))
	return n, err
}

// readAtCases are ranges of a decoded image: its start, one inside a
// block, one over a block boundary, the last bytes, one past the end.
func readAtCases(size int64) [][2]int64 {
	return [][2]int64{{0, 512}, {100_000, 70_000}, {64<<10 - 10, 20}, {size - 512<<10, 512 << 10}, {size - 100, 200}, {size, 10}, {size + 5, 1}}
}

// checkReadAt reads every case through x and compares with raw.
func checkReadAt(t *testing.T, x *ReaderAt, raw []byte) {
	t.Helper()
	if x.Size() != int64(len(raw)) {
		t.Fatalf("size %d, want %d", x.Size(), len(raw))
	}
	for _, c := range readAtCases(int64(len(raw))) {
		off, n := c[0], c[1]
		got := make([]byte, n)
		k, err := x.ReadAt(got, off)
		end := min(off+n, int64(len(raw)))
		want := raw[min(off, end):end]
		if !bytes.Equal(got[:k], want) {
			t.Fatalf("at %d (+%d): %d bytes differ from the data", off, n, k)
		}
		if short := int64(len(want)) < n; short != (err == io.EOF) || (!short && err != nil) {
			t.Fatalf("at %d (+%d): %d bytes, %v", off, n, k, err)
		}
	}
}

// ReadAt gives the decoded bytes of any range, for every shape of file:
// sized blocks, one streamed block (single-threaded xz), several streams
// with padding, and blocks over the memory budget (decoded up to the
// range's end).
func TestReaderAtMatchesTheData(t *testing.T) {
	needXZ(t)
	raw := testImage(t)
	a, b := raw[:512<<10], raw[512<<10:]
	za := xzRun(t, a, "-c", "-T2", "--block-size=128KiB", "-0")
	zb := xzRun(t, b, "-c", "-T1", "-0", "--check=sha256")
	for name, z := range map[string][]byte{
		"64 KiB blocks":   xzRun(t, raw, "-c", "-T2", "--block-size=64KiB", "-0"),
		"one block":       xzRun(t, raw, "-c", "-T1", "-1"),
		"crc32":           xzRun(t, raw, "-c", "-T2", "--block-size=256KiB", "-1", "--check=crc32"),
		"no check":        xzRun(t, raw, "-c", "-T2", "--block-size=256KiB", "-1", "--check=none"),
		"streams, padded": bytes.Join([][]byte{za, make([]byte, 8), zb, make([]byte, 4)}, nil),
	} {
		t.Run(name, func(t *testing.T) {
			x, err := NewReaderAt(bytes.NewReader(z), int64(len(z)))
			if err != nil {
				t.Fatal(err)
			}
			checkReadAt(t, x, raw)
			x.memLimit = 1 // every block over the budget: decoded up to the range's end
			checkReadAt(t, x, raw)
		})
	}
}

// Random access: the last 512 KiB of a multi-block file cost the blocks
// that hold them (and the index), not the file.
func TestReaderAtDecodesOnlyTheCoveringBlocks(t *testing.T) {
	needXZ(t)
	raw := testImage(t)
	z := xzRun(t, raw, "-c", "-T2", "--block-size=64KiB", "-0")
	c := &countingAt{r: bytes.NewReader(z)}
	x, err := NewReaderAt(c, int64(len(z)))
	if err != nil {
		t.Fatal(err)
	}
	indexed := c.n.Load()
	got := make([]byte, 100)
	if _, err := x.ReadAt(got, int64(len(raw))-64<<10+10); err != nil || !bytes.Equal(got, raw[len(raw)-64<<10+10:][:100]) {
		t.Fatalf("%v", err)
	}
	last := xzBlocks(t, z)[len(x.blocks)-1]
	if read := c.n.Load() - indexed; read > last.total+64 {
		t.Fatalf("read %d bytes of the file for one block of %d (%d in the file)", read, last.total, len(z))
	}
	t.Logf("index: %d bytes; one block: %d bytes of %d", indexed, c.n.Load()-indexed, len(z))
}

// A damaged block is an error naming it, never other bytes: its check is
// verified before its bytes are returned.
func TestReaderAtCorruptBlock(t *testing.T) {
	needXZ(t)
	z, raw := multiBlock(t)
	bs := xzBlocks(t, z)
	for i, b := range bs {
		c := bytes.Clone(z)
		c[b.offset+b.total/2] ^= 0x55
		x, err := NewReaderAt(bytes.NewReader(c), int64(len(c)))
		if err != nil {
			t.Fatal(err)
		}
		got := make([]byte, len(raw))
		n, err := x.ReadAt(got, 0)
		if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("block %d", i+1)) {
			t.Fatalf("block %d damaged: %d bytes, %v", i+1, n, err)
		}
		if !bytes.Equal(got[:n], raw[:n]) {
			t.Fatalf("block %d damaged: the bytes before it differ", i+1)
		}
	}
	if _, err := NewReaderAt(bytes.NewReader(z[:len(z)-1]), int64(len(z)-1)); err == nil {
		t.Fatal("a cut file indexed")
	}
}

// The blocks indexed are bounded: a file with more is ErrTooManyBlocks
// (its reader reads it in order instead).
func TestReaderAtBlocksBounded(t *testing.T) {
	needXZ(t)
	z, _ := multiBlock(t)
	defer func(n int) { maxRandomBlocks = n }(maxRandomBlocks)
	maxRandomBlocks = len(xzBlocks(t, z)) - 1
	if _, err := NewReaderAt(bytes.NewReader(z), int64(len(z))); !errors.Is(err, ErrTooManyBlocks) {
		t.Fatalf("%v", err)
	}
	maxRandomBlocks++
	if _, err := NewReaderAt(bytes.NewReader(z), int64(len(z))); err != nil {
		t.Fatal(err)
	}
}

// FuzzReaderAt: never panics, and every range it returns without an error
// (or up to io.EOF) is the stream decoder's bytes there, for any file,
// within or over the memory budget.
func FuzzReaderAt(f *testing.F) {
	raw, err := imagetest.Raw(1<<20, 3)
	if err != nil {
		f.Fatal(err)
	}
	small := raw[:24<<10]
	for _, bs := range []int64{0, 8 << 10} {
		z, err := imagetest.XZBytes(small, bs)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(z, uint16(100), uint16(9000), false)
	}
	if imagetest.HaveXZBinary() {
		f.Add(xzRun(f, small, "-c", "-T2", "--block-size=8KiB", "-0"), uint16(8000), uint16(300), true)
		f.Add(xzRun(f, small[:2<<10], "-c", "-T1", "-0", "--check=sha256"), uint16(0), uint16(4096), false)
	}
	const maxOut = 8 << 20
	f.Fuzz(func(t *testing.T, data []byte, off, n uint16, overBudget bool) {
		x, err := NewReaderAt(bytes.NewReader(data), int64(len(data)))
		if err != nil || x.Size() > maxOut {
			return
		}
		if overBudget {
			x.memLimit = 1
		}
		got := make([]byte, n)
		k, err := x.ReadAt(got, int64(off))
		if err != nil && err != io.EOF {
			return
		}
		r, err := newReader(bytes.NewReader(data), 2, 4<<20)
		if err != nil {
			t.Fatalf("ReaderAt read what NewReader refuses: %v", err)
		}
		defer r.Close()
		all, err := io.ReadAll(io.LimitReader(r, int64(off)+int64(k)))
		if int64(len(all)) < int64(off)+int64(k) {
			if err == nil {
				t.Fatalf("the stream has %d bytes, ReaderAt gave %d at %d", len(all), k, off)
			}
			return // damaged further on than the stream could reach: nothing to compare
		}
		if !bytes.Equal(got[:k], all[off:]) {
			t.Fatalf("%d bytes at %d differ from the stream's", k, off)
		}
	})
}
