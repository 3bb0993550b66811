package elevate

// The images reach the child on its stdin, never as paths the child
// opens: the parent (the user's process) opens, downloads and decodes them
// with the user's rights and sends the decoded bytes; the root child parses
// only this framing and then the disk images themselves. stdin is the one
// channel there is: pkexec marks every descriptor above 2 close-on-exec
// before it runs the child (polkit, src/programs/pkexec.c), so no other
// descriptor reaches it.
//
// The stream, one image or several (a run that flashes a control plane's
// card and workers' cards) interleaved: the 8 bytes "TFIMAGE2", the count
// of images (uint32, 1 to MaxImages, as many as the child was told) and
// each one's decoded size as its sender knows it (int64, big-endian, -1
// unknown); then records, each the image's index (uint32) and a length
// (uint32, big-endian): 1 to FrameSize and that many bytes of that image,
// every frame of an image but its last FrameSize long; zero and that
// image's end: the SHA-256 of every byte sent of it (32 bytes) and their
// count (uint64); or frameFailed: the sender could not go on with that
// image (its download or decode failed: the parent says why), no more of
// it comes. The stream ends when every image has ended or failed; stdin
// then stays open while the child writes and verifies: its EOF, at any
// point, cancels it. Each image is read by its own Received: an image's
// end ends its reader at once, whatever the others do.

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

// FrameSize is the most bytes one frame carries (every frame of an image
// but its last carries this many).
const FrameSize = 1 << 20

// MaxImages is the most images one stream carries.
const MaxImages = 8

const (
	streamMagic = "TFIMAGE2"
	frameFailed = 0xFFFFFFFF // an image the sender could not go on with
	recordLen   = 8          // a record's image index and length
	endLen      = sha256.Size + 8
	// recvBuffers is how many frames the child holds per image: one read
	// from stdin while one or two are copied into the pipeline.
	recvBuffers = 3
)

// headerLen is the stream's start for n images.
func headerLen(n int) int { return len(streamMagic) + 4 + 8*n }

// StreamLength is how many bytes SendImages writes for images of these
// sizes, whole (a test's stand-in child reads that many before it
// answers).
func StreamLength(sizes ...int64) int64 {
	total := int64(headerLen(len(sizes)))
	for _, n := range sizes {
		frames := (n + FrameSize - 1) / FrameSize
		total += frames*recordLen + n + recordLen + endLen
	}
	return total
}

// Sent is what SendImages sent of one image: the bytes and their SHA-256
// (hex), and whether the image's end went out too. The child's result for
// a card counts only when it names exactly these bytes.
type Sent struct {
	Bytes    int64
	SHA256   string
	Complete bool
}

// SendImages writes the images (their decoded bytes; sizes as known, -1
// unknown) to w, the child's stdin, framed as above and interleaved as
// their frames come: each image read on a goroutine of its own (its next
// frame decoded while this one is hashed and written), so that each goes
// at the pace its cards take it. One Sent and one error per image: an
// image's error is its reader's (its download or decode failed), sent to
// the child as that image's failure while the others go on. A write error
// means the child stopped reading (it failed, or exited): every image ends
// there, no error, Complete false; the child's own report says why. The
// readers are never read after SendImages returned.
func SendImages(w io.Writer, images []io.Reader, sizes []int64) ([]Sent, []error) {
	k := len(images)
	sent, errs := make([]Sent, k), make([]error, k)
	hdr := make([]byte, 0, headerLen(k))
	hdr = append(hdr, streamMagic...)
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
			frees[i] <- make([]byte, recordLen+FrameSize)
		}
		readers.Go(func() {
			for {
				var buf []byte
				select {
				case buf = <-frees[i]:
				case <-stop:
					return
				}
				n, err := fill(r, buf[recordLen:])
				binary.BigEndian.PutUint32(buf, uint32(i))
				binary.BigEndian.PutUint32(buf[4:], uint32(n))
				full <- frame{i, buf[:recordLen+n], err} // never blocks: there are bufs*k buffers
				if err != nil {
					return
				}
			}
		})
	}
	defer func() { close(stop); readers.Wait() }()
	hashes := make([]hash.Hash, k)
	for i := range hashes {
		hashes[i] = sha256.New()
	}
	for open := k; open > 0; {
		f := <-full
		i := f.img
		if len(f.buf) > recordLen {
			hashes[i].Write(f.buf[recordLen:])
			if _, err := w.Write(f.buf); err != nil {
				return sent, errs
			}
			sent[i].Bytes += int64(len(f.buf) - recordLen)
		}
		frees[i] <- f.buf[:cap(f.buf)]
		switch {
		case f.err == io.EOF:
			sum := hashes[i].Sum(nil)
			end := binary.BigEndian.AppendUint32(make([]byte, 0, recordLen+endLen), uint32(i))
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
			rec := binary.BigEndian.AppendUint32(make([]byte, 0, recordLen), uint32(i))
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
// one SendImages wrote: the wrong start, another count of images than the
// child was told, a record for no image or one that ended, a frame too
// long, more bytes than an image announced, an end that does not count
// what came.
var ErrImageStream = errors.New("the image stream from talosflash is malformed")

// errStreamCut: stdin ended before the images did (the parent stopped:
// it cancelled, or it failed and says so itself).
var errStreamCut = errors.New("the image stream ended before the image did (the parent stopped sending)")

// ErrImageFailed: the sender could not go on with this image (its
// download or decode failed in the parent, which says why); the other
// images of the stream go on.
var ErrImageFailed = errors.New("the image stream from talosflash stopped: the parent could not produce this image")

// Received is an image the child reads from its stdin (ReceiveImages):
// an io.Reader of the decoded bytes that ends with io.EOF only after the
// image's whole stream, its end counted; the sender's declared size
// (Size) and SHA-256 (SHA256, once the image has ended). Read is for one
// goroutine.
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
	err       error  // io.EOF for a whole image, else why it ended
	sum       []byte
	ended     sync.Once
	gone      chan struct{} // closed by Close: its frames are dropped
	closeOnce sync.Once
	scratch   []byte // the receiver's buffer for dropped frames
}

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

// ReceiveImages starts reading a stream of n images (1 to MaxImages) from
// stdin, which it owns from now on: one Received each, in the sender's
// order. A stream with another count of images is refused
// (ErrImageStream). stdin's EOF, before, during or after the stream,
// calls cancel: the parent cancels the child by closing it (a signal from
// the user to a root process is refused). Reads end with ctx.
func ReceiveImages(ctx context.Context, stdin io.Reader, cancel context.CancelFunc, n int) []*Received {
	rs := make([]*Received, n)
	for i := range rs {
		rs[i] = newReceived(ctx)
	}
	go func() {
		defer cancel()
		err := receive(stdin, rs)
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

// SHA256 is the sender's hash of the image, once it ended (nil before).
func (r *Received) SHA256() []byte { return r.sum }

// receive reads the stream into rs (one each, in order) until every image
// has ended or failed; each ends its reader as soon as its own end (or
// failure) comes.
func receive(in io.Reader, rs []*Received) error {
	hdr := make([]byte, len(streamMagic)+4)
	if _, err := io.ReadFull(in, hdr); err != nil {
		return cut(err)
	}
	if string(hdr[:len(streamMagic)]) != streamMagic {
		return fmt.Errorf("%w: it does not start with %q", ErrImageStream, streamMagic)
	}
	if k := binary.BigEndian.Uint32(hdr[len(streamMagic):]); k != uint32(len(rs)) || k < 1 || k > MaxImages {
		return fmt.Errorf("%w: %d images, the write was told of %d (1 to %d)", ErrImageStream, k, len(rs), MaxImages)
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
	var rec [recordLen]byte
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
			end := make([]byte, endLen)
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
