package imaging

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/talosflash/talosflash/internal/humanbytes"
)

// Decoded is an image decoded in this process for cards another process
// writes (the elevated child, which reads it as a Source.Stream): the same
// source, format checks, decoder and end checks as FlashAll's, so the
// privileged process never opens the image's file nor runs a decoder. Read
// ends with io.EOF only at the container's checked end, with every decoded
// byte the size said (a download read as it arrives: once the cache entry
// is whole, checked and in place). A corrupt cache entry is dropped as in
// FlashAll. Read is for one goroutine.
type Decoded struct {
	src         *openedSource
	r           io.Reader
	closeStream func()
	n           int64
	err         error
}

// OpenDecoded opens src and its decoder for the cards targets, which it
// checks are not the image itself (nor its download, nor a loop device
// over it), as FlashAll does before any card is touched. forceRaw lets a
// stream that does not start like a disk through (the elevated child
// refuses it anyway).
//
// check, at most one (nil: none), is FlashOptions.CheckHead's check, run
// before OpenDecoded returns (before any card is touched, before the
// process that writes them is started): the decoded head, its size and,
// for an image file, the decoded image at any offset (nil for a stream).
// What it read through the image is compared with the decoded bytes as
// Read returns them: a difference is ErrImageChanged, before those bytes
// are returned.
func OpenDecoded(ctx context.Context, src Source, targets []string, forceRaw bool, progress ProgressFunc, check ...func(head []byte, size int64, image io.ReaderAt) error) (*Decoded, error) {
	if len(check) > 1 {
		return nil, errors.New("OpenDecoded: more than one check")
	}
	s, err := openSource(ctx, src, progress)
	if err != nil {
		return nil, err
	}
	stream, closeStream, err := decode(s, forceRaw)
	if err != nil {
		s.closer.Close()
		return nil, err
	}
	for _, name := range targets {
		if err := s.notTarget(name); err != nil {
			closeStream()
			s.closer.Close()
			return nil, err
		}
	}
	var fn func([]byte, int64, io.ReaderAt) error
	if len(check) == 1 {
		fn = check[0]
	}
	if stream, err = checkHead(stream, fn, s.size, newImageAt(s)); err != nil {
		closeStream()
		s.closer.Close()
		return nil, err
	}
	return &Decoded{src: s, r: stream, closeStream: closeStream}, nil
}

// Size is the decoded size the container declares, -1 unknown.
func (d *Decoded) Size() int64 { return d.src.size }

// Read reads the decoded image; its errors say what failed as FlashAll's
// do (the download, or corrupt data: ErrCorruptImage).
func (d *Decoded) Read(p []byte) (int, error) {
	if d.err != nil {
		return 0, d.err
	}
	n, err := d.r.Read(p)
	d.n += int64(n)
	switch {
	case err == io.EOF && d.src.size >= 0 && d.n != d.src.size:
		err = d.src.corrupt(fmt.Errorf("%w: decompressed %s, the %s image should give %s", ErrCorruptImage, humanbytes.Exact(d.n), d.src.format, humanbytes.Exact(d.src.size)))
	case errors.Is(err, ErrImageChanged):
		err = d.src.corrupt(fmt.Errorf("%w (after %s were sent)", err, humanbytes.Exact(d.n)))
	case err != nil && err != io.EOF:
		err = d.src.decodeErr(err)
	}
	d.err = err
	return n, err
}

// Close stops the decoder and closes the source (a download not finished
// stops, its partial kept).
func (d *Decoded) Close() error {
	d.closeStream()
	return d.src.closer.Close()
}
