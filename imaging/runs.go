package imaging

// Writing only the runs that differ: each chunk is read from the card
// first and compared writeUnit by writeUnit; only the units that differ
// are written (adjacent ones in one write), and only those are read back
// (verify.go). A unit found equal by that direct read is verified by it.

import (
	"bytes"
	"io"
	"math/bits"
)

// writeUnit is the granularity of the comparison with the card and of the
// writes: a unit is written whole when any of its bytes differs, and
// writes start and end on unit boundaries. 64 KiB (measured 4 to 64 KiB,
// docs/PERFORMANCE.md "Issue 32"): a multiple of every O_DIRECT alignment
// and of an SD card's program page (16 KiB on current NAND), so the card
// never rewrites a page around a short write; a few writes per
// file-system run instead of one a 4 KiB block (a card pays ~1 ms a
// command); and it costs 3 % more bytes than 4 KiB units on the
// factory-shaped image, whose data, like a file system's, comes in runs.
// A package variable for the benchmarks only; a power of two dividing
// holdProbe.
var writeUnit = 64 << 10

// unitSet is a bitmap over the image's write units.
type unitSet []uint64

func (s *unitSet) add(i int) {
	for len(*s) <= i/64 {
		*s = append(*s, 0)
	}
	(*s)[i/64] |= 1 << (i % 64)
}

func (s unitSet) has(i int) bool { return i/64 < len(s) && s[i/64]&(1<<(i%64)) != 0 }

func (s unitSet) remove(i int) {
	if i/64 < len(s) {
		s[i/64] &^= 1 << (i % 64)
	}
}

func (s unitSet) count() int {
	n := 0
	for _, w := range s {
		n += bits.OnesCount64(w)
	}
	return n
}

// heldBytes is how many of an image of n bytes the units in s cover.
func (s unitSet) heldBytes(n int64, unit int) int64 {
	total := int64(s.count()) * int64(unit)
	if last := int((n - 1) / int64(unit)); n > 0 && s.has(last) {
		total -= int64(last+1)*int64(unit) - n // the image's last unit is short
	}
	return total
}

// headState is what the card held in the image's first MiB, unit by unit,
// from the first chunk's read: the head is written last, after zeros
// where the card held anything else (only once something is to be
// written at all: a card that already holds the image is not touched).
type headState struct {
	same   []bool // the card's unit is the image's
	zero   []bool // the card's unit reads zeros
	zeroed bool   // the card's non-zero units have been zeroed
}

// cardView is what a read of the card found at one piece of a chunk.
type cardView struct {
	ok   bool   // known; else every unit of the piece is written
	zero bool   // reads zeros (a hole of a regular file), b unused
	b    []byte // what it reads
}

func (v cardView) same(img []byte, at int) bool {
	switch {
	case !v.ok:
		return false
	case v.zero:
		return allZero(img)
	}
	return bytes.Equal(v.b[at:at+len(img)], img)
}

func (v cardView) zeros(at, n int) bool {
	return v.ok && (v.zero || allZero(v.b[at:at+n]))
}

// writeRuns puts chunk c on a card with positional writes: the units that
// differ from what the card holds (all of them where it cannot be read
// first), the first MiB deferred to finish. It returns the bytes of c
// done (written or found there).
func (p *pipeline) writeRuns(cd *card, c *chunk, direct *bool) (int, error) {
	b := c.buf[:c.n]
	unit := writeUnit
	read := skipHeld && (*direct || cd.regular) && cd.probe()
	promising := false // the card holds the image's bytes or zeros here
	run := -1          // start in b of the units waiting to be written
	flush := func(end int) (int, error) {
		if run < 0 {
			return 0, nil
		}
		start := run
		run = -1
		if err := p.zeroHead(cd, direct); err != nil {
			return start, err
		}
		n, err := p.putRun(cd, b[start:end], c.off+int64(start), direct)
		return start + n, err
	}
	for lo := 0; lo < len(b); {
		n := min(len(b)-lo, holdRead)
		if lo == 0 {
			n = min(n, holdProbe)
		}
		var view cardView
		if read {
			view = cd.look(c.off+int64(lo), n)
		}
		for u := lo; u < lo+n; u += unit {
			e := min(u+unit, len(b))
			off := c.off + int64(u)
			zeros := view.zeros(u-lo, e-u)
			same := c.zero && zeros || !c.zero && view.same(b[u:e], u-lo)
			promising = promising || same || zeros
			if off < headSize {
				i := int(off) / unit
				cd.head.same = append(cd.head.same, same)
				cd.head.zero = append(cd.head.zero, zeros)
				if same {
					cd.held.add(i)
				}
				continue // written by finish
			}
			if same {
				cd.held.add(int(off / int64(unit)))
				if done, err := flush(u); err != nil {
					return done, err
				}
				continue
			}
			if run < 0 {
				run = u
			}
		}
		lo += n
		if read && lo == n && !promising {
			// The card holds other data here: the rest of this chunk and
			// the next few are written without reading them first.
			read = false
			cd.probeGap = min(max(1, 2*cd.probeGap), 64)
			cd.probeWait = cd.probeGap
		}
	}
	if read {
		cd.probeGap = 0
	}
	if done, err := flush(len(b)); err != nil {
		return done, err
	}
	return len(b), nil
}

// putRun writes one run of units (O_DIRECT unless it ends unaligned, the
// image's tail) and, when buffered, bounds the dirty page cache.
func (p *pipeline) putRun(cd *card, b []byte, off int64, direct *bool) (int, error) {
	p.unalign(cd, len(b), direct)
	n, err := cd.put(b, off)
	if err == nil && !*direct {
		// Buffered: bound the dirty page cache (and pin an error to a
		// region) as devices.Device does for its own writes.
		if cd.sinceSync += int64(n); cd.sinceSync >= 32<<20 {
			cd.sinceSync, err = 0, cd.t.Sync()
		}
	}
	return n, err
}

// zeroHead zeroes, before the card's first write, the units of the first
// MiB that hold anything: until finish writes the image's head, the card
// has no partition table and never boots half an image. Units zeroed are
// written ones: read back like any other.
func (p *pipeline) zeroHead(cd *card, direct *bool) error {
	h := &cd.head
	if h.zeroed {
		return nil
	}
	h.zeroed = true
	unit := writeUnit
	for i := range h.zero {
		if h.zero[i] {
			continue
		}
		n := min(unit, len(p.head)-i*unit)
		p.unalign(cd, n, direct)
		for done := 0; done < n; {
			m, err := cd.put(zeroBlock[:min(n-done, len(zeroBlock))], int64(i*unit+done))
			cd.zeroed.Add(int64(m))
			if err != nil {
				return err
			}
			done += m
		}
		h.zero[i] = true
		h.same[i] = allZero(p.head[i*unit : i*unit+n])
		cd.held.remove(i)
	}
	return nil
}

// finishHead writes the units of the image's first MiB the card does not
// hold (after zeroHead, when there are any). It runs after the rest was
// synced, with the descriptor buffered again: a sync follows.
func (p *pipeline) finishHead(cd *card) error {
	h := &cd.head
	unit := writeUnit
	if len(h.same) < (len(p.head)+unit-1)/unit {
		return nil // the first chunk never reached this card's writer
	}
	for _, same := range h.same {
		if !same {
			direct := false
			if err := p.zeroHead(cd, &direct); err != nil {
				return err
			}
			break
		}
	}
	for lo := 0; lo < len(p.head); lo += unit {
		if h.same[lo/unit] {
			continue
		}
		hi := lo + unit
		for hi < len(p.head) && !h.same[hi/unit] {
			hi += unit
		}
		hi = min(hi, len(p.head))
		if _, err := cd.put(p.head[lo:hi], int64(lo)); err != nil {
			return err
		}
		for j := lo / unit; j*unit < hi; j++ {
			h.same[j] = true
			cd.held.remove(j)
		}
		lo = hi - unit
	}
	return nil
}

// look reads n bytes of the card at off (a whole number of O_DIRECT
// blocks) into its read buffer. A regular file's hole reads zeros without
// a read (lseek SEEK_DATA); past its end it reads zeros once finish grows
// it. A short read or an error is "unknown": those units are written.
func (cd *card) look(off int64, n int) cardView {
	if cd.regular {
		if off >= cd.zerosFrom && off+int64(n) <= cd.zerosTo {
			return cardView{ok: true, zero: true}
		}
		if next, ok := nextData(cd.t, off); ok && next >= off+int64(n) {
			cd.zerosFrom, cd.zerosTo = off, next
			cd.grow = true // the hole may be past the file's end
			return cardView{ok: true, zero: true}
		}
	}
	al := (n + alignment - 1) / alignment * alignment
	m, err := cd.t.ReadAt(cd.rbuf[:al], off)
	if m >= n {
		return cardView{ok: true, b: cd.rbuf[:n]}
	}
	if cd.regular && (err == io.EOF || err == nil) {
		// Past the end of a regular file: zeros once finish grows it.
		clear(cd.rbuf[m:n])
		cd.grow = true
		return cardView{ok: true, b: cd.rbuf[:n]}
	}
	return cardView{}
}
