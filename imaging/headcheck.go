package imaging

// The check before any card is touched (FlashOptions.CheckHead): the
// decoded image's head, and, for an image file, any of its bytes read
// without writing anything (imageAt); the bytes read are then compared
// with the flash's own decode as it passes them (checkedStream), so that
// what a card gets is what was checked.

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"sort"

	"github.com/talosflash/talosflash/imaging/xzpar"
)

// HeadSize is how much of the decoded image FlashOptions.CheckHead sees:
// the protective MBR and the primary GPT with its entries, for 512- and
// 4096-byte sectors, and a META store (512 KiB) that lies in the first
// 2 MiB, so that its contents too are checked before a card is touched.
const HeadSize = 2 << 20

// maxChecked bounds the bytes CheckHead may read through its image
// (each kept until the stream has passed them): a META store is 512 KiB.
const maxChecked = 4 << 20

// ErrImageChanged: the decoded bytes a card was about to get differ from
// the ones CheckHead read before any card was touched (the image file was
// changed during the flash). The cards fail before their first MiB (the
// partition table) is written. It is ErrCorruptImage.
var ErrImageChanged = fmt.Errorf("%w: the image changed during the flash", ErrCorruptImage)

// checkHead lets check look at the decoded stream's first HeadSize bytes
// (and, for an image file, any of its bytes through at: nil for a stream)
// and returns the stream to write: the same bytes, from the start, each
// byte check read through at compared as it passes.
func checkHead(stream io.Reader, check func([]byte, int64, io.ReaderAt) error, size int64, at *imageAt) (io.Reader, error) {
	if check == nil {
		return stream, nil
	}

	br := bufio.NewReaderSize(stream, HeadSize)

	head, err := br.Peek(HeadSize)
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, err
	}

	var image io.ReaderAt
	if at != nil {
		image = at
		defer at.close() // a decoder of its own: not held through the flash
	}
	if err := check(head, size, image); err != nil {
		return nil, err
	}

	if at == nil || len(at.read) == 0 {
		return br, nil
	}
	sort.Slice(at.read, func(i, j int) bool { return at.read[i].off < at.read[j].off })
	return &checkedStream{r: br, regions: at.read}, nil
}

// checkedRegion is bytes of the decoded image read before the flash, at off.
type checkedRegion struct {
	off int64
	b   []byte
}

// imageAt reads the decoded image of a local image file (or cache entry)
// at any offset, before any card is touched, writing nothing: a raw file
// is read where asked; an xz file decodes only the blocks covering the
// range (xzpar.ReaderAt, through the streams' indexes); zstd and gzip,
// which have no index, are decoded from the start up to the range's end,
// discarding (one pass, kept going forward for later ranges). What it
// returns is kept (read), at most maxChecked bytes, to be compared with
// the flash's own decode.
type imageAt struct {
	src  *openedSource
	at   io.ReaderAt // set on first use
	fwd  *forwardDecoder
	read []checkedRegion
	kept int
	ioErr
}

// ioErr keeps the last error reading the file itself (not the decoder's).
type ioErr struct{ err error }

// recording reads the file, keeping its errors apart from the decoder's.
type recording struct {
	r io.ReaderAt
	e *ioErr
}

func (r recording) ReadAt(p []byte, off int64) (int, error) {
	n, err := r.r.ReadAt(p, off)
	if err != nil && err != io.EOF {
		r.e.err = err
	}
	return n, err
}

// newImageAt is the source's image read at any offset, nil for a stream
// (a first download read as it arrives, --no-cache, Source.Stream): its
// bytes come once, in order.
func newImageAt(src *openedSource) *imageAt {
	if src.file == nil || src.follow != nil {
		return nil
	}
	return &imageAt{src: src}
}

func (a *imageAt) ReadAt(p []byte, off int64) (int, error) {
	if a.kept+len(p) > maxChecked {
		return 0, fmt.Errorf("checking the image before the flash: at most %d bytes of it are read ahead, %d asked", maxChecked, a.kept+len(p))
	}
	var n int
	err := a.open()
	if err == nil {
		n, err = a.at.ReadAt(p, off)
	}
	if err != nil && err != io.EOF {
		if a.ioErr.err != nil {
			err = fmt.Errorf("reading image %s: %w", a.src.name(), a.ioErr.err)
		} else {
			err = a.src.corrupt(fmt.Errorf("checking %s before the flash: %w: %v", a.src.name(), ErrCorruptImage, err))
		}
		return n, err
	}
	if n > 0 {
		a.read = append(a.read, checkedRegion{off: off, b: bytes.Clone(p[:n])})
		a.kept += n
	}
	return n, err
}

// open sets up the reader for the source's format, on first use.
func (a *imageAt) open() error {
	if a.at != nil {
		return nil
	}
	s := a.src
	file := recording{r: s.file, e: &a.ioErr}
	switch s.format {
	case FormatRaw:
		a.at = io.NewSectionReader(file, 0, s.compressed)
	case FormatXZ:
		x, err := xzpar.NewReaderAt(file, s.compressed)
		if errors.Is(err, xzpar.ErrTooManyBlocks) {
			a.forward() // read in order, as zstd is
			return nil
		}
		if err != nil {
			return err
		}
		a.at = x
	default:
		a.forward()
	}
	return nil
}

// forward reads the image through its stream decoder, from the start.
func (a *imageAt) forward() {
	s := a.src
	file := recording{r: s.file, e: &a.ioErr}
	a.fwd = &forwardDecoder{open: func() (io.Reader, error) {
		return decoderFor(s.format, io.NewSectionReader(file, 0, s.compressed), s.zstdWindow)
	}}
	a.at = a.fwd
}

// close lets go of a decoder (zstd's window) once the check is done.
func (a *imageAt) close() {
	if a.fwd != nil {
		a.fwd.close()
	}
}

// forwardDecoder reads a stream decoder at offsets: it decodes on from
// where it is, discarding up to the offset (back to the start for an
// earlier one).
type forwardDecoder struct {
	open func() (io.Reader, error)
	r    io.Reader
	pos  int64
}

func (d *forwardDecoder) ReadAt(p []byte, off int64) (int, error) {
	if d.r == nil || off < d.pos {
		d.close()
		r, err := d.open()
		if err != nil {
			return 0, err
		}
		d.r, d.pos = r, 0
	}
	skipped, err := io.CopyN(io.Discard, d.r, off-d.pos)
	d.pos += skipped
	if err != nil {
		return 0, err // io.EOF: the image ends before off
	}
	n, err := io.ReadFull(d.r, p)
	d.pos += int64(n)
	if err == io.ErrUnexpectedEOF {
		err = io.EOF
	}
	return n, err
}

func (d *forwardDecoder) close() {
	if c, ok := d.r.(io.Closer); ok {
		c.Close()
	}
	d.r = nil
}

// checkedStream is the decoded stream a flash writes, compared as it
// passes with the regions read before the flash (sorted by offset): a
// difference fails the read (ErrImageChanged) without handing over the
// bytes that differ, and the write stage fails every card before its
// first MiB is written.
type checkedStream struct {
	r       io.Reader
	off     int64
	regions []checkedRegion
	err     error
}

func (c *checkedStream) Read(p []byte) (int, error) {
	if c.err != nil {
		return 0, c.err
	}
	n, err := c.r.Read(p)
	end := c.off + int64(n)
	left := c.regions[:0]
	for _, rg := range c.regions { // one or two: META's store
		rgEnd := rg.off + int64(len(rg.b))
		lo, hi := max(rg.off, c.off), min(rgEnd, end)
		if lo < hi && !bytes.Equal(p[lo-c.off:hi-c.off], rg.b[lo-rg.off:hi-rg.off]) {
			c.err = fmt.Errorf("%w: its decoded bytes %d-%d are not the ones checked before any card was touched", ErrImageChanged, lo, hi-1)
			return 0, c.err
		}
		if rgEnd > end {
			left = append(left, rg) // the rest of it comes later
		}
	}
	c.regions = left
	c.off = end
	if err == io.EOF && len(c.regions) > 0 {
		c.err = fmt.Errorf("%w: it ends at byte %d, before bytes %d-%d checked before any card was touched", ErrImageChanged, c.off, c.regions[0].off, c.regions[0].off+int64(len(c.regions[0].b))-1)
		return n, c.err
	}
	return n, err
}
