package imagetest

import (
	"bytes"
	"io"
	"testing"

	"github.com/talosflash/talosflash/imaging/gpt"
)

// capture keeps the bytes of a stream that lie in its ranges (the rest is
// only counted): a factory-sized image checked without holding it.
type capture struct {
	off    int64
	ranges [][2]int64
	kept   map[int64][]byte
}

func (c *capture) Write(p []byte) (int, error) {
	end := c.off + int64(len(p))
	for _, r := range c.ranges {
		if lo, hi := max(r[0], c.off), min(r[1], end); lo < hi {
			c.kept[r[0]] = append(c.kept[r[0]], p[lo-c.off:hi-c.off]...)
		}
	}
	c.off = end
	return len(p), nil
}

// ReadAt serves the kept ranges (a GPT read touches only them).
func (c *capture) ReadAt(p []byte, off int64) (int, error) {
	for _, r := range c.ranges {
		if off >= r[0] && off+int64(len(p)) <= r[1] {
			return copy(p, c.kept[r[0]][off-r[0]:]), nil
		}
	}
	return 0, io.ErrUnexpectedEOF
}

// The factory-shaped Talos image has the factory's table, both copies
// valid, META blank at 1101 MiB, after BOOT (0.5 s to generate).
func TestWriteTalosImage(t *testing.T) {
	metaOff := int64(1101 << 20)
	c := &capture{ranges: [][2]int64{{0, 1 << 20}, {metaOff - 4096, metaOff + 1<<20 + 4096}, {FactorySize - 1<<20, FactorySize}}, kept: map[int64][]byte{}}
	off, err := WriteTalosImage(c, FactorySize, 1)
	if err != nil || off != metaOff || c.off != FactorySize {
		t.Fatalf("META at %d, %d bytes, %v", off, c.off, err)
	}
	tab, err := gpt.Read(c, FactorySize)
	if err != nil || !tab.Primary || !tab.Backup {
		t.Fatalf("%+v %v", tab, err)
	}
	p, ok := tab.Find("META")
	if !ok || p.Offset != metaOff || p.Size != 1<<20 {
		t.Fatalf("META %+v", p)
	}
	store := c.kept[metaOff-4096][4096 : 4096+1<<20]
	if !bytes.Equal(store, make([]byte, 1<<20)) {
		t.Fatal("META is not blank")
	}
}
