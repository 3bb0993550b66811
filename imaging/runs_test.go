package imaging

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"

	"github.com/talosflash/talosflash/imaging/imagetest"
)

// countingTarget is a card file that counts the bytes written to it and
// read from it (all of its I/O goes through here).
type countingTarget struct {
	*os.File
	written, read atomic.Int64
	// dropAt, if > 0: the first write at or past it is acknowledged but
	// never lands (a card that loses a write).
	dropAt  int64
	dropped atomic.Bool
}

func (c *countingTarget) Write(p []byte) (int, error) {
	n, err := c.File.Write(p)
	c.written.Add(int64(n))
	return n, err
}

func (c *countingTarget) WriteAt(p []byte, off int64) (int, error) {
	if c.dropAt > 0 && off >= c.dropAt && !allZero(p) && c.dropped.CompareAndSwap(false, true) {
		c.written.Add(int64(len(p)))
		return len(p), nil
	}
	n, err := c.File.WriteAt(p, off)
	c.written.Add(int64(n))
	return n, err
}

func (c *countingTarget) ReadAt(p []byte, off int64) (int, error) {
	n, err := c.File.ReadAt(p, off)
	c.read.Add(int64(n))
	return n, err
}

// randomDisk is a disk-like image: zeros with n extents of data (random
// or text-like, 512 B to 1 MiB each) at random sector offsets, an MBR
// signature so it starts like a disk.
func randomDisk(r *rand.Rand, size int64, n int) []byte {
	b := make([]byte, size)
	for range n {
		l := (1 + r.Int64N(2048)) * 512
		off := r.Int64N(size/512) * 512
		e := b[off:min(size, off+l)]
		text := r.IntN(2) == 0
		for i := range e {
			if text {
				e[i] = "talos node config "[i%18]
			} else {
				e[i] = byte(r.Uint32())
			}
		}
	}
	b[510], b[511] = 0x55, 0xAA
	return b
}

func randomBytes(r *rand.Rand, n int64) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

// partlySame is img with some ranges changed: random data, zeros, and a
// 256 KiB "META" of another node somewhere: an older card of another node.
func partlySame(r *rand.Rand, img []byte) []byte {
	b := bytes.Clone(img)
	size := int64(len(b))
	for range 1 + r.IntN(8) {
		off := r.Int64N(size)
		e := b[off:min(size, off+1+r.Int64N(512<<10))]
		if r.IntN(3) == 0 {
			clear(e)
		} else {
			copy(e, randomBytes(r, int64(len(e))))
		}
	}
	meta := r.Int64N(size - 256<<10)
	copy(b[meta:], bytes.Repeat([]byte("address: 192.0.2.7/24 hostname: old-node "), 256<<10/41))
	return b
}

// writeBound is the most a flash of img may write onto a card holding
// before: every unit that differs from the card, and in the first MiB
// zeros where the card held anything else, then the image's units; a unit
// not read first (the probe's back-off on a card that holds other data)
// counts as differing. Nothing at all if the card holds the image.
func writeBound(before, img []byte, unit int) int64 {
	n := len(img)
	var body int64
	var headSame, headZero []bool
	gap, wait := 0, 0
	for c := 0; c < n; c += chunkSize {
		ce := min(c+chunkSize, n)
		read := wait == 0
		if !read {
			wait--
		}
		known := ce // bytes of the chunk read first
		if read {
			probe := min(ce, c+holdProbe)
			promising := false
			for u := c; u < probe; u += unit {
				e := min(u+unit, n)
				promising = promising || bytes.Equal(before[u:e], img[u:e]) || allZero(before[u:e])
			}
			if !promising {
				known = probe
				gap = min(max(1, 2*gap), 64)
				wait = gap
			} else {
				gap = 0
			}
		} else {
			known = c
		}
		for u := c; u < ce; u += unit {
			e := min(u+unit, n)
			k := u < known
			same := k && bytes.Equal(before[u:e], img[u:e])
			if u < headSize {
				headSame = append(headSame, same)
				headZero = append(headZero, k && allZero(before[u:e]))
				continue
			}
			if !same {
				body += int64(e - u)
			}
		}
	}
	any := body > 0
	for _, s := range headSame {
		any = any || !s
	}
	if !any {
		return 0
	}
	total := body
	for i := range headSame {
		lo, hi := i*unit, min((i+1)*unit, n, headSize)
		if !headZero[i] {
			total += int64(hi - lo)
		}
		if !headZero[i] && !allZero(img[lo:hi]) || headZero[i] && !headSame[i] {
			total += int64(hi - lo)
		}
	}
	return total
}

// differing4K is the bytes of img's 4 KiB blocks that differ from before.
func differing4K(before, img []byte) int64 {
	var d int64
	for o := 0; o < len(img); o += 4096 {
		e := min(o+4096, len(img))
		if !bytes.Equal(before[o:e], img[o:e]) {
			d += int64(e - o)
		}
	}
	return d
}

// Property: whatever the card holds (zeros, random data, the image itself,
// an older card of another node, another image; a sparse new file) and
// whatever the image, the card is the image byte for byte afterwards, the
// flash verified; it wrote at most the units that differ (writeBound), at
// least the 4 KiB blocks that differ; it read every byte at most once
// before writing and read back only what it wrote (never less than
// verified: Skipped + read back = the image).
func TestRunsProperty(t *testing.T) {
	r := rand.New(rand.NewPCG(32, 2))
	for iter := range 12 {
		size := (5<<20 + r.Int64N(10<<20)) / 512 * 512
		img := randomDisk(r, size, 1+r.IntN(40))
		src := writeTemp(t, fmt.Sprintf("img%d.raw", iter), img)
		cards := map[string][]byte{
			"zeroed":      make([]byte, size),
			"random":      randomBytes(r, size),
			"same image":  img,
			"partly same": partlySame(r, img),
			"other image": randomDisk(r, size, 1+r.IntN(40)),
			"sparse":      nil,
		}
		for name, before := range cards {
			t.Run(fmt.Sprintf("%d %s", iter, name), func(t *testing.T) {
				res, ct, got := flashCounted(t, src, before, size, 0)
				if res.Err != nil || !res.Verified || res.Bytes != size {
					t.Fatalf("%+v", res)
				}
				if !bytes.Equal(got[:size], img) {
					t.Fatal("the card is not the image")
				}
				if before == nil {
					before = make([]byte, size)
				}
				bound := writeBound(before, img, writeUnit)
				// Written counts each of the image's bytes once (with
				// what the card held, the image); the writes are those
				// bytes, or those and the head's zeros.
				w := ct.written.Load()
				if w < res.Written || w > res.Written+res.Zeroed || w > bound || w < differing4K(before, img) {
					t.Fatalf("wrote %d (reported %d, %d zeroed first), want %d..%d", w, res.Written, res.Zeroed, differing4K(before, img), bound)
				}
				if res.Written+res.Skipped != size || res.Zeroed > headSize {
					t.Fatalf("written %d + skipped %d, want the image's %d (zeroed %d)", res.Written, res.Skipped, size, res.Zeroed)
				}
				readBack := size - res.Skipped
				if rd := ct.read.Load(); rd > size+alignment+readBack+alignment {
					t.Fatalf("read %d bytes: more than the image once (%d) and what was written back (%d)", rd, size, readBack)
				}
			})
		}
	}
}

// flashCounted flashes the raw image src onto a card file holding before
// (nil: a new sparse file of size bytes) through a countingTarget.
func flashCounted(t *testing.T, src string, before []byte, size, dropAt int64) (*CardResult, *countingTarget, []byte) {
	t.Helper()
	card := filepath.Join(t.TempDir(), "card.img")
	if before == nil {
		if err := os.WriteFile(card, nil, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Truncate(card, size); err != nil {
			t.Fatal(err)
		}
	} else if err := os.WriteFile(card, before, 0o644); err != nil {
		t.Fatal(err)
	}
	var ct *countingTarget
	open := func(string, int64) (Target, error) {
		f, err := os.OpenFile(card, os.O_RDWR, 0)
		ct = &countingTarget{File: f, dropAt: dropAt}
		return ct, err
	}
	cards, err := FlashAll(context.Background(), FlashOptions{Source: Source{Path: src}, Targets: []string{card}, Open: open, Verify: true})
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(card)
	if err != nil {
		t.Fatal(err)
	}
	return &cards[0], ct, got
}

// On a zeroed card a factory-shaped image (imagetest: a Talos-like GPT
// disk, its data in runs) costs at most 1.25x its non-zero 4 KiB blocks.
func TestRunsZeroedCardBound(t *testing.T) {
	raw := skipRaw(t)
	size := int64(len(raw))
	res, ct, got := flashCounted(t, writeTemp(t, "img.raw", raw), make([]byte, size), size, 0)
	if res.Err != nil || !res.Verified || !bytes.Equal(got, raw) {
		t.Fatalf("%+v", res)
	}
	nonZero := differing4K(make([]byte, size), raw)
	if w := ct.written.Load(); float64(w) > 1.25*float64(nonZero) {
		t.Fatalf("wrote %d bytes for %d non-zero (%.2fx)", w, nonZero, float64(w)/float64(nonZero))
	} else {
		t.Logf("wrote %d bytes for %d non-zero: %.3fx", w, nonZero, float64(w)/float64(nonZero))
	}
}

// Never less than verified: a write the card acknowledges but loses is
// found by the read-back of what was written.
func TestRunsLostWriteCaught(t *testing.T) {
	raw := skipRaw(t)
	size := int64(len(raw))
	res, ct, _ := flashCounted(t, writeTemp(t, "img.raw", raw), make([]byte, size), size, 2<<20)
	if !ct.dropped.Load() {
		t.Fatal("no write was dropped")
	}
	if !errors.Is(res.Err, ErrVerifyMismatch) {
		t.Fatalf("got %v, want a verify mismatch", res.Err)
	}
}

// Several cards holding different things, from one decode (the read-back
// in 1 MiB units): each is the image, each wrote what it lacked.
func TestRunsSeveralCards(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 9))
	size := int64(9<<20 + 512)
	img := randomDisk(r, size, 30)
	src := writeTemp(t, "img.raw", img)
	befores := [][]byte{make([]byte, size), randomBytes(r, size), img, partlySame(r, img)}
	dir := t.TempDir()
	var names []string
	targets := map[string]*countingTarget{}
	for i, b := range befores {
		p := filepath.Join(dir, fmt.Sprintf("card%d.img", i))
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		names = append(names, p)
	}
	cards, err := FlashAll(context.Background(), FlashOptions{Source: Source{Path: src}, Targets: names, Verify: true,
		Open: func(p string, _ int64) (Target, error) {
			f, err := os.OpenFile(p, os.O_RDWR, 0)
			targets[p] = &countingTarget{File: f}
			return targets[p], err
		}})
	if err != nil {
		t.Fatal(err)
	}
	for i, c := range cards {
		got, _ := os.ReadFile(c.Target)
		if c.Err != nil || !c.Verified || !bytes.Equal(got, img) {
			t.Fatalf("card %d: %+v", i, c)
		}
		if w, bound := targets[c.Target].written.Load(), writeBound(befores[i], img, writeUnit); w > bound {
			t.Fatalf("card %d wrote %d, bound %d", i, w, bound)
		}
	}
}

// The same on a loop device (a block device, O_DIRECT reads and writes):
// a card that held an older image of another node is the image after,
// verified, and wrote at most what differed.
func TestRunsLoopDevice(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("loop devices need root")
	}
	r := rand.New(rand.NewPCG(5, 6))
	raw := skipRaw(t)
	size := int64(len(raw))
	before := partlySame(r, raw)
	dev := imagetest.LoopDevice(t, size+1<<20, false)
	f, err := os.OpenFile(dev, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt(before, 0); err != nil {
		t.Fatal(err)
	}
	f.Sync()
	f.Close()
	var ct *countingTarget
	cards, err := FlashAll(context.Background(), FlashOptions{Source: Source{Path: writeTemp(t, "img.raw", raw)}, Targets: []string{dev}, Verify: true,
		Open: func(p string, _ int64) (Target, error) {
			f, err := os.OpenFile(p, os.O_RDWR, 0)
			ct = &countingTarget{File: f}
			return ct, err
		}})
	if err != nil || cards[0].Err != nil || cards[0].VerifyMode != "O_DIRECT" {
		t.Fatalf("%+v %v", cards, err)
	}
	if got := imagetest.FileSHA256(t, dev, size); got != cards[0].SHA256 {
		t.Fatal("the loop device is not the image")
	}
	if w, bound := ct.written.Load(), writeBound(before, raw, writeUnit); w > bound || w == 0 {
		t.Fatalf("wrote %d, bound %d", w, bound)
	} else {
		t.Logf("wrote %d of %d (bound %d)", w, size, bound)
	}
}
