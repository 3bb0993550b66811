package xzpar

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync/atomic"
	"testing"
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
