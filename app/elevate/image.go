package elevate

// The image reaches the child on its stdin, never as a path the child
// opens: the parent (the user's process) opens, downloads and decodes it
// with the user's rights and sends the decoded bytes; the root child parses
// only this framing and then the disk image itself. stdin is the one
// channel there is: pkexec marks every descriptor above 2 close-on-exec
// before it runs the child (polkit, src/programs/pkexec.c), so no other
// descriptor reaches it.
//
// The stream: the 8 bytes "TFIMAGE1" and the image's decoded size as its
// sender knows it (int64, big-endian, -1 unknown); frames, each a uint32
// big-endian length (1 to FrameSize) and that many bytes, every frame but
// the last FrameSize long; the end: a zero length, the SHA-256 of every
// byte sent (32 bytes) and their count (uint64). stdin then stays open
// while the child writes and verifies: its EOF, at any point, cancels it.
//
// Several images (a run that flashes a control plane's card and workers'
// cards, SendImages and ReceiveImages) go on the one stdin interleaved:
// "TFIMAGE2", their count (uint32, 2 to MaxImages) and each one's size
// (int64, -1 unknown); then records, each the image's index (uint32) and a
// length (uint32): 1 to FrameSize and that many bytes of that image; zero
// and that image's end (SHA-256 and count, as above); or frameFailed: the
// sender could not go on with that image (its download or decode failed:
// the parent says why), no more of it comes. The stream ends when every
// image has ended or failed. Each image is read by its own Received: an
// image's end ends its reader at once, whatever the others do.

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"sync"
)

// FrameSize is the most bytes one frame carries (every frame but the
// last carries this many).
const FrameSize = 1 << 20

// MaxImages is the most images one stream carries.
const MaxImages = 8

const (
	streamMagic  = "TFIMAGE1"
	streamsMagic = "TFIMAGE2" // several images (SendImages)
	frameFailed  = 0xFFFFFFFF // an image the sender could not go on with
	headerLen    = len(streamMagic) + 8
	trailerLen   = 4 + sha256.Size + 8
	// recvBuffers is how many frames the child holds: one read from
	// stdin while one or two are copied into the pipeline.
	recvBuffers = 3
)

// StreamLength is how many bytes SendImage writes for an image of n bytes
// (a test's stand-in child reads that many before it answers).
func StreamLength(n int64) int64 {
	frames := (n + FrameSize - 1) / FrameSize
	return int64(headerLen) + frames*4 + n + int64(trailerLen)
}

// Sent is what SendImage sent: the bytes and their SHA-256 (hex), and
// whether the stream's end went out too. The child's result for a card
// counts only when it names exactly these bytes.
type Sent struct {
	Bytes    int64
	SHA256   string
	Complete bool
}

// SendImage writes the image read from r (its decoded bytes; size as
// known, -1 unknown) to w, the child's stdin, framed as above. The error
// is r's: the image failed (a download, a corrupt image), and the caller
// should close w so the child stops. A write error means the child stopped
// reading (it failed, or exited): the sending ends without an error and
// Sent.Complete stays false; the child's own report says why. r is read on
// a goroutine of its own (the decoder's next frame while this one is
// hashed and written), never after SendImage returned.
func SendImage(w io.Writer, r io.Reader, size int64) (Sent, error) {
	var sent Sent
	hdr := make([]byte, headerLen)
	copy(hdr, streamMagic)
	binary.BigEndian.PutUint64(hdr[len(streamMagic):], uint64(size))
	if _, err := w.Write(hdr); err != nil {
		return sent, nil
	}
	type frame struct {
		buf []byte // the length, then the bytes
		err error
	}
	const bufs = 3
	free, full := make(chan []byte, bufs), make(chan frame, bufs)
	stop, readerDone := make(chan struct{}), make(chan struct{})
	for range bufs {
		free <- make([]byte, 4+FrameSize)
	}
	go func() {
		defer close(readerDone)
		for {
			var buf []byte
			select {
			case buf = <-free:
			case <-stop:
				return
			}
			n, err := fill(r, buf[4:])
			binary.BigEndian.PutUint32(buf, uint32(n))
			full <- frame{buf[:4+n], err} // never blocks: there are bufs buffers
			if err != nil {
				return
			}
		}
	}()
	defer func() { close(stop); <-readerDone }()
	h := sha256.New()
	for f := range full {
		if len(f.buf) > 4 {
			h.Write(f.buf[4:])
			if _, err := w.Write(f.buf); err != nil {
				return sent, nil
			}
			sent.Bytes += int64(len(f.buf) - 4)
		}
		free <- f.buf[:cap(f.buf)]
		if f.err == io.EOF {
			break
		}
		if f.err != nil {
			return sent, f.err
		}
	}
	sum := h.Sum(nil)
	sent.SHA256 = hex.EncodeToString(sum)
	end := make([]byte, 4, trailerLen)
	end = append(end, sum...)
	end = binary.BigEndian.AppendUint64(end, uint64(sent.Bytes))
	if _, err := w.Write(end); err != nil {
		return sent, nil
	}
	sent.Complete = true
	return sent, nil
}

// SendImages writes several images to w, the child's stdin, interleaved
// as their frames come (the stream of several images above): each image
// read on a goroutine of its own, so that each goes at the pace its cards
// take it. One Sent and one error per image: an image's error is its
// reader's (its download or decode failed), sent to the child as that
// image's failure while the others go on. A write error means the child
// stopped reading: every image ends there, no error, Complete false. The
// readers are never read after SendImages returned.
func SendImages(w io.Writer, images []io.Reader, sizes []int64) ([]Sent, []error) {
	k := len(images)
	sent, errs := make([]Sent, k), make([]error, k)
	hdr := make([]byte, 0, len(streamsMagic)+4+8*k)
	hdr = append(hdr, streamsMagic...)
	hdr = binary.BigEndian.AppendUint32(hdr, uint32(k))
	for _, n := range sizes {
		hdr = binary.BigEndian.AppendUint64(hdr, uint64(n))
	}
	if _, err := w.Write(hdr); err != nil {
		return sent, errs
	}
	type frame struct {
		img int
		buf []byte // the record's index and length, then the bytes
		err error
	}
	const bufs = 3 // per image
	full := make(chan frame, bufs*k)
	stop := make(chan struct{})
	var readers sync.WaitGroup
	frees := make([]chan []byte, k)
	for i, r := range images {
		frees[i] = make(chan []byte, bufs)
		for range bufs {
			frees[i] <- make([]byte, 8+FrameSize)
		}
		readers.Add(1)
		go func() {
			defer readers.Done()
			for {
				var buf []byte
				select {
				case buf = <-frees[i]:
				case <-stop:
					return
				}
				n, err := fill(r, buf[8:])
				binary.BigEndian.PutUint32(buf, uint32(i))
				binary.BigEndian.PutUint32(buf[4:], uint32(n))
				full <- frame{i, buf[:8+n], err} // never blocks: there are bufs*k buffers
				if err != nil {
					return
				}
			}
		}()
	}
	defer func() { close(stop); readers.Wait() }()
	hashes := make([]hash.Hash, k)
	for i := range hashes {
		hashes[i] = sha256.New()
	}
	for open := k; open > 0; {
		f := <-full
		i := f.img
		if len(f.buf) > 8 {
			hashes[i].Write(f.buf[8:])
			if _, err := w.Write(f.buf); err != nil {
				return sent, errs
			}
			sent[i].Bytes += int64(len(f.buf) - 8)
		}
		frees[i] <- f.buf[:cap(f.buf)]
		switch {
		case f.err == io.EOF:
			sum := hashes[i].Sum(nil)
			end := binary.BigEndian.AppendUint32(make([]byte, 0, 8+sha256.Size+8), uint32(i))
			end = binary.BigEndian.AppendUint32(end, 0)
			end = append(end, sum...)
			end = binary.BigEndian.AppendUint64(end, uint64(sent[i].Bytes))
			if _, err := w.Write(end); err != nil {
				return sent, errs
			}
			sent[i].SHA256, sent[i].Complete = hex.EncodeToString(sum), true
			open--
		case f.err != nil:
			errs[i] = f.err
			rec := binary.BigEndian.AppendUint32(make([]byte, 0, 8), uint32(i))
			rec = binary.BigEndian.AppendUint32(rec, frameFailed)
			if _, err := w.Write(rec); err != nil {
				return sent, errs
			}
			open--
		}
	}
	return sent, errs
}

// fill reads until buf is full or r ends; io.EOF only for r's own end.
func fill(r io.Reader, buf []byte) (n int, err error) {
	for n < len(buf) && err == nil {
		var m int
		m, err = r.Read(buf[n:])
		n += m
	}
	return n, err
}

// ErrImageStream marks an image stream on the child's stdin that is not
// one SendImage wrote: the wrong start, a frame too long, more bytes than
// it announced, an end that does not count what came.
var ErrImageStream = errors.New("the image stream from talosflash is malformed")

// errStreamCut: stdin ended before the image did (the parent stopped: it
// cancelled, or its download or decoder failed and it says so itself).
var errStreamCut = errors.New("the image stream ended before the image did (the parent stopped sending)")

// Received is the image the child reads from its stdin (ReceiveImage): an
// io.Reader of the decoded bytes that ends with io.EOF only after a whole
// stream, its end counted; the sender's declared size (Size) and SHA-256
// (SHA256, once the stream has ended). Read is for one goroutine.
type Received struct {
	ctx       context.Context
	header    chan struct{} // closed once size or headerErr is set
	once      sync.Once
	size      int64
	headerErr error
	frames    chan []byte // closed after err and sum are set
	free      chan []byte
	cur       []byte // the unread part of the frame being read
	buf       []byte // that frame's buffer
	err       error  // io.EOF for a whole stream, else why it ended
	sum       []byte
	ended     sync.Once
	gone      chan struct{} // closed by Close: its frames are dropped
	closeOnce sync.Once
	scratch   []byte // the receiver's buffer for dropped frames
}

// ErrImageFailed: the sender could not go on with this image (its
// download or decode failed in the parent, which says why); the other
// images of the stream go on.
var ErrImageFailed = errors.New("the image stream from talosflash stopped: the parent could not produce this image")

func newReceived(ctx context.Context) *Received {
	r := &Received{
		ctx: ctx, header: make(chan struct{}), size: -1,
		frames: make(chan []byte, recvBuffers-1), free: make(chan []byte, recvBuffers),
		gone: make(chan struct{}),
	}
	for range recvBuffers {
		r.free <- make([]byte, FrameSize)
	}
	return r
}

// finish ends the reader: err is io.EOF for a whole image, else why not.
// Only the receiving goroutine calls it (it alone sends frames).
func (r *Received) finish(err error) {
	r.ended.Do(func() {
		r.err = err
		r.headerDone(err)
		close(r.frames)
	})
}

// Close says this image is no longer read (its cards are done or failed):
// the rest of it is read from stdin and dropped, so that the other images
// of the stream do not wait for a reader that is gone.
func (r *Received) Close() error {
	r.closeOnce.Do(func() { close(r.gone) })
	return nil
}

// take is a buffer for the next frame (a scratch one once the reader is
// gone).
func (r *Received) take() ([]byte, error) {
	select {
	case b := <-r.free:
		return b, nil
	case <-r.gone:
		if r.scratch == nil {
			r.scratch = make([]byte, FrameSize)
		}
		return r.scratch, nil
	case <-r.ctx.Done():
		return nil, r.ctx.Err()
	}
}

// deliver hands a frame to the reader (dropped once it is gone).
func (r *Received) deliver(b []byte) error {
	select {
	case r.frames <- b:
		return nil
	case <-r.gone:
		return nil
	case <-r.ctx.Done():
		return r.ctx.Err()
	}
}

// ReceiveImage starts reading the image from stdin, which it owns from
// now on. stdin's EOF, before, during or after the image, calls cancel:
// the parent cancels the child by closing it (a signal from the user to a
// root process is refused). Reads end with ctx.
func ReceiveImage(ctx context.Context, stdin io.Reader, cancel context.CancelFunc) *Received {
	return ReceiveImages(ctx, stdin, cancel, 1)[0]
}

// ReceiveImages is ReceiveImage for a stream of n images (SendImages; one
// is SendImage's stream): one Received each, in the sender's order. A
// stream with another count of images is refused (ErrImageStream).
func ReceiveImages(ctx context.Context, stdin io.Reader, cancel context.CancelFunc, n int) []*Received {
	rs := make([]*Received, n)
	for i := range rs {
		rs[i] = newReceived(ctx)
	}
	go func() {
		defer cancel()
		var err error
		if n == 1 {
			err = rs[0].receive(stdin)
		} else {
			err = receiveAll(stdin, rs)
		}
		if errors.Is(err, errStreamCut) {
			cancel() // stdin's end is the parent's cancel, before the reader hears of it
		}
		for _, r := range rs {
			r.finish(err) // those not ended already
		}
		_, _ = io.Copy(io.Discard, stdin) // to the EOF that cancels
	}()
	return rs
}

func (r *Received) headerDone(err error) {
	r.once.Do(func() {
		r.headerErr = err
		close(r.header)
	})
}

// Size waits for the stream's start and returns the size its sender
// declared (-1: unknown).
func (r *Received) Size() (int64, error) {
	select {
	case <-r.header:
	case <-r.ctx.Done():
		select {
		case <-r.header: // both: it came
		default:
			return -1, r.ctx.Err()
		}
	}
	return r.size, r.headerErr
}

// SHA256 is the sender's hash of the stream, once it ended (nil before).
func (r *Received) SHA256() []byte { return r.sum }

func (r *Received) receive(in io.Reader) error {
	hdr := make([]byte, headerLen)
	if _, err := io.ReadFull(in, hdr); err != nil {
		return cut(err)
	}
	if string(hdr[:len(streamMagic)]) != streamMagic {
		return fmt.Errorf("%w: it does not start with %q", ErrImageStream, streamMagic)
	}
	size := int64(binary.BigEndian.Uint64(hdr[len(streamMagic):]))
	if size < -1 {
		return fmt.Errorf("%w: size %d", ErrImageStream, size)
	}
	r.size = size
	r.headerDone(nil)
	var got int64
	var l [4]byte
	for {
		if _, err := io.ReadFull(in, l[:]); err != nil {
			return cut(err)
		}
		n := binary.BigEndian.Uint32(l[:])
		if n == 0 {
			break
		}
		if n > FrameSize {
			return fmt.Errorf("%w: a frame of %d bytes (at most %d)", ErrImageStream, n, FrameSize)
		}
		if size >= 0 && got+int64(n) > size {
			return fmt.Errorf("%w: more than the %d bytes it announced", ErrImageStream, size)
		}
		buf, err := r.take()
		if err != nil {
			return err
		}
		if _, err := io.ReadFull(in, buf[:n]); err != nil {
			return cut(err)
		}
		if err := r.deliver(buf[:n]); err != nil {
			return err
		}
		got += int64(n)
	}
	end := make([]byte, trailerLen-4)
	if _, err := io.ReadFull(in, end); err != nil {
		return cut(err)
	}
	if count := int64(binary.BigEndian.Uint64(end[sha256.Size:])); count != got {
		return fmt.Errorf("%w: its end counts %d bytes, %d came", ErrImageStream, count, got)
	}
	r.sum = end[:sha256.Size]
	return io.EOF
}

// receiveAll reads a stream of several images into rs (one each, in
// order) until every image has ended or failed; each ends its reader as
// soon as its own end (or failure) comes.
func receiveAll(in io.Reader, rs []*Received) error {
	hdr := make([]byte, len(streamsMagic)+4)
	if _, err := io.ReadFull(in, hdr); err != nil {
		return cut(err)
	}
	if string(hdr[:len(streamsMagic)]) != streamsMagic {
		return fmt.Errorf("%w: it does not start with %q", ErrImageStream, streamsMagic)
	}
	if k := binary.BigEndian.Uint32(hdr[len(streamsMagic):]); k != uint32(len(rs)) {
		return fmt.Errorf("%w: %d images, the write was told of %d", ErrImageStream, k, len(rs))
	}
	sizes := make([]byte, 8*len(rs))
	if _, err := io.ReadFull(in, sizes); err != nil {
		return cut(err)
	}
	for i, r := range rs {
		size := int64(binary.BigEndian.Uint64(sizes[8*i:]))
		if size < -1 {
			return fmt.Errorf("%w: size %d", ErrImageStream, size)
		}
		r.size = size
		r.headerDone(nil)
	}
	got := make([]int64, len(rs))
	ended := make([]bool, len(rs))
	var rec [8]byte
	for left := len(rs); left > 0; {
		if _, err := io.ReadFull(in, rec[:]); err != nil {
			return cut(err)
		}
		i, n := binary.BigEndian.Uint32(rec[:4]), binary.BigEndian.Uint32(rec[4:])
		if i >= uint32(len(rs)) || ended[i] {
			return fmt.Errorf("%w: a record for image %d", ErrImageStream, i)
		}
		r := rs[i]
		switch {
		case n == frameFailed:
			ended[i], left = true, left-1
			r.finish(ErrImageFailed)
		case n == 0:
			end := make([]byte, trailerLen-4)
			if _, err := io.ReadFull(in, end); err != nil {
				return cut(err)
			}
			if count := int64(binary.BigEndian.Uint64(end[sha256.Size:])); count != got[i] {
				return fmt.Errorf("%w: image %d's end counts %d bytes, %d came", ErrImageStream, i, count, got[i])
			}
			r.sum = end[:sha256.Size]
			ended[i], left = true, left-1
			r.finish(io.EOF)
		case n > FrameSize:
			return fmt.Errorf("%w: a frame of %d bytes (at most %d)", ErrImageStream, n, FrameSize)
		case r.size >= 0 && got[i]+int64(n) > r.size:
			return fmt.Errorf("%w: image %d: more than the %d bytes it announced", ErrImageStream, i, r.size)
		default:
			buf, err := r.take()
			if err != nil {
				return err
			}
			if _, err := io.ReadFull(in, buf[:n]); err != nil {
				return cut(err)
			}
			if err := r.deliver(buf[:n]); err != nil {
				return err
			}
			got[i] += int64(n)
		}
	}
	return io.EOF
}

// cut is a read of stdin that ended early.
func cut(err error) error {
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return errStreamCut
	}
	return fmt.Errorf("reading the image from stdin: %w", err)
}

// Read reads the image's bytes.
func (r *Received) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	if len(r.cur) == 0 {
		if r.buf != nil {
			r.free <- r.buf[:FrameSize] // never blocks: it holds every buffer
			r.buf = nil
		}
		var b []byte
		ok := true
		select {
		case b, ok = <-r.frames:
		case <-r.ctx.Done():
			select {
			case b, ok = <-r.frames: // the stream's own end (or bytes) first
			default:
				return 0, r.ctx.Err()
			}
		}
		if !ok {
			return 0, r.err
		}
		r.cur, r.buf = b, b
	}
	n := copy(p, r.cur)
	r.cur = r.cur[n:]
	return n, nil
}
