package imaging

// The read-back: every byte of each card compared with what was decoded.

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"hash/crc32"
	"io"
	"time"

	"github.com/talosflash/talosflash/internal/humanbytes"
)

var crcTable = crc32.MakeTable(crc32.Castagnoli)

// verifyTarget reads back exactly w.n bytes and compares them with what was
// written, bypassing the page cache so the card itself is checked:
//   - O_DIRECT (set on the open descriptor with F_SETFL) where supported:
//     block devices and most disk file systems. Reads go to the device.
//   - otherwise fsync + POSIX_FADV_DONTNEED: evicts the (clean) cached
//     pages so the reads that follow come from the device.
//   - targets without Fd() are read through whatever caching they have.
//
// Reading and comparing overlap (reader goroutine + hashing here); the
// first differing 4 KiB block ends the check early.
//
// A unit in held (runs.go) was found on the card by a direct read before
// the write, byte for byte: that read was its verification, it is not
// read again (and the SHA-256 of the whole read-back, which then has gaps,
// is left to the blocks' CRCs). The rest, every unit written, is read
// back in runs of at most w.unit bytes.
func verifyTarget(ctx context.Context, t Target, w *written, held unitSet, meter *meter, depth int) (string, error) {
	mode := "cached"
	if f, ok := t.(fdTarget); ok {
		if err := setDirect(f.Fd(), true); err == nil {
			mode = "O_DIRECT"
			defer setDirect(f.Fd(), false)
		} else if err := dropCache(f.Fd()); err == nil {
			mode = "fadvise"
		}
	}
	meter.update(0, true)

	// The buffers are the write stage's, shared with the other cards
	// (w.units): at most depth chunks' worth in flight for this card, the
	// one being read and the one being checked included. Every unit goes
	// back to w.units, however this ends, for the other cards.
	depth = max(2, depth*chunkSize/w.unit)
	full := make(chan *chunk, depth-2)
	stop := make(chan struct{})
	defer func() {
		close(stop)
		go func() { // the reader's units, once it has stopped
			for c := range full {
				w.units <- c
			}
		}()
	}()
	var readErr error
	go func() {
		defer close(full)
		unit := int64(writeUnit)
		for off := int64(0); off < w.n; {
			if held.has(int(off / unit)) {
				off += unit
				continue
			}
			// One read: the units from off not held, up to w.unit bytes.
			end := off + unit
			for end < w.n && end-off < int64(w.unit) && !held.has(int(end/unit)) {
				end += unit
			}
			want := int(min(end, w.n) - off)
			var c *chunk
			select {
			case c = <-w.units:
			case <-stop:
				return
			}
			if ctx.Err() != nil {
				w.units <- c
				readErr = ctx.Err()
				return
			}
			// O_DIRECT needs aligned lengths; read a little more at the end.
			n, err := t.ReadAt(c.buf[:(want+alignment-1)/alignment*alignment], off)
			if n >= want {
				err = nil
			} else if err == nil || err == io.EOF {
				err = fmt.Errorf("the target ends after %s, the image is %s", humanbytes.Exact(off+int64(n)), humanbytes.Exact(w.n))
			}
			if err != nil {
				// The card shrank, vanished or fails to read: it can't be
				// trusted to hold the image.
				w.units <- c
				readErr = fmt.Errorf("verify: read target at byte %d: %w; %w", off+int64(n), err, ErrIncomplete)
				return
			}
			c.n, c.off = want, off
			select {
			case full <- c:
			case <-stop:
				w.units <- c
				return
			}
			off += int64(want)
		}
	}()

	// With chunks skipped the read-back has gaps: no SHA-256 of it to
	// compare, so none is computed (the blocks' CRCs are compared).
	h, whole := sha256.New(), held.count() == 0
	// A read that hangs (a pulled reader) or a cancel must not hold the
	// flash: give up after cardStall without a byte, or at once on cancel.
	stall := time.NewTimer(cardStall)
	defer stall.Stop()
	for {
		var c *chunk
		var ok bool
		select {
		case c, ok = <-full:
		case <-ctx.Done():
			return mode, fmt.Errorf("verify interrupted (%w); the image was written completely", ctx.Err())
		case <-stall.C:
			return mode, fmt.Errorf("verify: %w for %s: %w", errStalled, cardStall, ErrIncomplete)
		}
		if !ok {
			break
		}
		stall.Reset(cardStall)
		b := c.buf[:c.n]
		if whole {
			h.Write(b)
		}
		for i := 0; i < len(b); i += crcBlock {
			off := c.off + int64(i)
			if crc32.Checksum(b[i:min(i+crcBlock, len(b))], crcTable) != w.crc(off) {
				w.units <- c
				return mode, &VerifyError{Offset: off, Want: hex.EncodeToString(w.sum)}
			}
		}
		meter.update(c.off+int64(c.n), false)
		w.units <- c
	}
	if readErr != nil {
		if ctx.Err() != nil {
			return mode, fmt.Errorf("verify interrupted (%w); the image was written completely", ctx.Err())
		}
		return mode, readErr
	}
	if whole && !bytes.Equal(h.Sum(nil), w.sum) {
		return mode, &VerifyError{Offset: -1, Want: hex.EncodeToString(w.sum)}
	}
	meter.update(w.n, true)
	return mode, nil
}
