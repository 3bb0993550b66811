// Package xzpar decodes xz streams with several LZMA2 decoders at once.
//
// Multi-threaded xz (xz -T0, as used for Image Factory images) cuts its input
// into independent blocks and records each block's compressed and
// uncompressed size in the block header. NewReader reads the stream
// sequentially, hands every such block to a worker goroutine and returns the
// decoded blocks in order, so the output is a plain stream identical to
// xz.NewReader's while decoding runs on all cores.
//
// Blocks without sizes in their header (single-threaded xz writes one such
// block for the whole file), and blocks too big for the memory budget, are
// decoded in order by the reading goroutine itself, streaming, with the same
// LZMA2 decoder ulikunitz/xz's Reader uses. That keeps one code path for the
// container checks (block check, sizes, index, footer) wherever such a block
// appears, instead of replaying the input into xz.NewReader. Filter chains
// other than LZMA2 alone (BCJ, delta) are rejected with an error; xz.NewReader
// does not support them either.
//
// Every structural problem is an error, reported in stream order after all
// data before it: a truncated or corrupt file never ends in io.EOF.
// Parallel blocks are verified before any of their bytes are returned;
// streamed blocks are verified at their end.
package xzpar

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash"
	"hash/crc32"
	"io"
	"runtime"
	"sync"
	"sync/atomic"

	"github.com/talosflash/talosflash/third_party/xz/lzma"
)

// DefaultMemoryLimit bounds the bytes held by blocks in flight (compressed
// input, decoded output and LZMA2 dictionaries). It is sized to what Image
// Factory serves, xz -0 -T0: 1 MiB blocks with a 256 KiB dictionary cost
// about 2.3 MiB each, and the job queue keeps about workers+3 of them in
// flight, far below this bound. Blocks costing more than the bound (xz -6
// -T0 writes 24 MiB blocks with an 8 MiB dictionary, ~57 MiB each) are
// decoded streaming on one core instead, so a flash stays within a few tens
// of MiB whatever the image (docs/PERFORMANCE.md).
const DefaultMemoryLimit = 32 << 20

// maxStreamDict caps the dictionary allocated for a streamed block whose
// size is unknown: twice the memory limit, at least 64 MiB (xz -9 uses
// 64 MiB; the format allows 4 GiB).
func maxStreamDict(memLimit int64) int64 { return max(64<<20, 2*memLimit) }

// inputBufSize is the read buffer on the input; large block payloads bypass it.
const inputBufSize = 256 << 10

// ErrClosed is returned by Read after Close.
var ErrClosed = errors.New("xzpar: reader closed")

// NewReader returns a reader of the data decompressed from the xz input r,
// decoding up to workers blocks at once (workers <= 0 means GOMAXPROCS).
// It reads and checks the first stream header before returning. The input is
// read through its own buffer, so r need not be buffered. Close releases the
// goroutines; it does not close r.
func NewReader(r io.Reader, workers int) (io.ReadCloser, error) {
	return newReader(r, workers, DefaultMemoryLimit)
}

func newReader(r io.Reader, workers int, memLimit int64) (*Reader, error) {
	if workers <= 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	in := &input{r: bufio.NewReaderSize(r, inputBufSize)}
	var hdr [streamHeaderLen]byte
	if err := in.readFull(hdr[:], "stream header"); err != nil {
		return nil, err
	}
	check, err := parseStreamHeader(hdr[:])
	if err != nil {
		return nil, err
	}
	x := &Reader{
		outBufs: make(chan []byte, workers+2),
		inBufs:  make(chan []byte, workers+2),
		jobs:    make(chan *job, workers),
		quit:    make(chan struct{}),
		mem:     newBudget(memLimit),
	}
	d := &dispatcher{
		in:       in,
		x:        x,
		work:     make(chan *job),
		memLimit: memLimit,
	}
	for i := 0; i < workers; i++ {
		go d.worker()
	}
	go d.run(check)
	return x, nil
}

// Reader is the decoded stream returned by NewReader.
type Reader struct {
	// outBufs and inBufs recycle decoded-block and compressed-payload
	// buffers: fresh allocations cost page faults and zeroing, measurably
	// slowing decode, and every dropped buffer is garbage that raises the
	// heap's peak (docs/PERFORMANCE.md). Kept apart so a small payload
	// buffer never stands in for an output buffer; each pool allocates at
	// the largest size it has seen, so after the first blocks every buffer
	// fits every block and nothing more is allocated.
	outBufs, inBufs  chan []byte
	maxOut, maxInput atomic.Int64
	jobs             chan *job // decoded blocks in stream order
	quit             chan struct{}
	mem              *budget

	cur    *job
	off    int
	err    error // sticky: io.EOF or a decode error; owned by the reading goroutine
	once   sync.Once
	closed atomic.Bool // Close may be called from another goroutine

	parallel, streamed atomic.Int64 // blocks per path, for tests
}

// getBuf returns a buffer of length n from pool, recycled when one is big
// enough, else allocated with the capacity of the largest seen (high tracks
// it). Its contents are arbitrary: callers overwrite it completely.
func getBuf(pool chan []byte, high *atomic.Int64, n int64) []byte {
	select {
	case b := <-pool:
		if int64(cap(b)) >= n {
			return b[:n]
		}
	default:
	}
	for {
		h := high.Load()
		if n <= h || high.CompareAndSwap(h, n) {
			return make([]byte, n, max(n, h))
		}
	}
}

func putBuf(pool chan []byte, b []byte) {
	if cap(b) == 0 {
		return
	}
	select {
	case pool <- b:
	default:
	}
}

// stats returns how many blocks were decoded in parallel and streamed.
func (x *Reader) stats() (parallel, streamed int) {
	return int(x.parallel.Load()), int(x.streamed.Load())
}

// job is one unit of output, in stream order.
type job struct {
	block   int    // 1-based block number, for messages
	payload []byte // parallel: compressed data + padding + check
	hdr     blockHeader
	check   byte

	out    []byte    // parallel: decoded data, valid after done
	stream io.Reader // streamed block: decoded by the consumer while reading
	err    error     // valid after done
	eof    bool      // end of input; everything was valid
	cost   int64     // bytes reserved in the budget
	done   chan struct{}
	// finished is closed by the consumer when a streamed block has been read
	// to its end (or failed); the dispatcher owns the input again then.
	finished chan struct{}
}

func closedJob(err error, eof bool) *job {
	j := &job{err: err, eof: eof, done: make(chan struct{})}
	close(j.done)
	return j
}

// next waits for the next job in order; it returns a non-nil error at the end.
func (x *Reader) next() error {
	var j *job
	select {
	case j = <-x.jobs:
	case <-x.quit:
		return ErrClosed
	}
	select {
	case <-j.done:
	case <-x.quit:
		return ErrClosed
	}
	if j.eof {
		return io.EOF
	}
	if j.err != nil {
		return j.err
	}
	x.cur, x.off = j, 0
	return nil
}

// finishCurrent releases the current job's memory and, for a streamed block,
// hands the input back to the dispatcher.
func (x *Reader) finishCurrent() {
	j := x.cur
	x.cur = nil
	if j.finished != nil {
		close(j.finished)
	}
	putBuf(x.outBufs, j.out)
	j.out = nil
	x.mem.release(j.cost)
}

// fail makes err sticky and stops the goroutines.
func (x *Reader) fail(err error) error {
	x.err = err
	x.shutdown()
	return err
}

func (x *Reader) shutdown() {
	x.once.Do(func() {
		close(x.quit)
		x.mem.close()
	})
}

// Read implements io.Reader.
func (x *Reader) Read(p []byte) (int, error) {
	if x.closed.Load() {
		return 0, ErrClosed
	}
	if x.err != nil {
		return 0, x.err
	}
	if len(p) == 0 {
		return 0, nil
	}
	for {
		if x.cur == nil {
			if err := x.next(); err != nil {
				return 0, x.fail(err)
			}
		}
		if s := x.cur.stream; s != nil {
			n, err := s.Read(p)
			if err == io.EOF {
				x.finishCurrent()
				if n > 0 {
					return n, nil
				}
				continue
			}
			if err != nil {
				x.finishCurrent()
				return n, x.fail(err)
			}
			return n, nil
		}
		n := copy(p, x.cur.out[x.off:])
		x.off += n
		if x.off == len(x.cur.out) {
			x.finishCurrent()
		}
		if n > 0 {
			return n, nil
		}
	}
}

// WriteTo implements io.WriterTo: io.Copy then writes whole decoded blocks
// without an intermediate copy.
func (x *Reader) WriteTo(w io.Writer) (int64, error) {
	var total int64
	var buf []byte
	for {
		if x.closed.Load() {
			return total, ErrClosed
		}
		if x.err != nil {
			if x.err == io.EOF {
				return total, nil
			}
			return total, x.err
		}
		if x.cur == nil {
			if err := x.next(); err != nil {
				x.fail(err)
				continue
			}
		}
		if x.cur.stream != nil {
			if buf == nil {
				buf = make([]byte, 1<<20)
			}
			n, err := x.Read(buf)
			if n > 0 {
				k, werr := w.Write(buf[:n])
				total += int64(k)
				if werr != nil {
					return total, werr
				}
			}
			if err != nil && err != io.EOF {
				return total, err
			}
			continue
		}
		k, werr := w.Write(x.cur.out[x.off:])
		total += int64(k)
		x.off += k
		if werr != nil {
			return total, werr
		}
		if x.off != len(x.cur.out) {
			return total, io.ErrShortWrite
		}
		x.finishCurrent()
	}
}

// Close stops decoding and releases the goroutines; a Read waiting for a
// block returns ErrClosed. It does not close the underlying reader. Close may
// be called from any goroutine, more than once.
func (x *Reader) Close() error {
	x.closed.Store(true)
	x.shutdown()
	return nil
}

// input is the buffered xz input with a position counter.
type input struct {
	r   *bufio.Reader
	pos int64
}

func (in *input) Read(p []byte) (int, error) {
	n, err := in.r.Read(p)
	in.pos += int64(n)
	return n, err
}

func (in *input) ReadByte() (byte, error) {
	b, err := in.r.ReadByte()
	if err == nil {
		in.pos++
	}
	return b, err
}

// readFull reads len(p) bytes; running out is a "truncated" error naming what.
func (in *input) readFull(p []byte, what string) error {
	n, err := io.ReadFull(in.r, p)
	in.pos += int64(n)
	return truncated(err, what)
}

func truncated(err error, what string) error {
	switch {
	case err == nil:
		return nil
	case err == io.EOF || err == io.ErrUnexpectedEOF:
		return fmt.Errorf("truncated xz stream: %s missing", what)
	default:
		return fmt.Errorf("reading xz input (%s): %w", what, err)
	}
}

// dispatcher parses the container and schedules blocks.
type dispatcher struct {
	in       *input
	x        *Reader
	work     chan *job
	streamLR blockReader // reused by streamed blocks, decoded one at a time
	memLimit int64
	blocks   int // blocks seen, over all streams
}

// errStopped ends the dispatcher without a further message: the consumer
// already has the error, or closed the reader.
var errStopped = errors.New("stopped")

// emit queues j for the consumer; false if the reader was closed.
func (d *dispatcher) emit(j *job) bool {
	select {
	case d.x.jobs <- j:
		return true
	case <-d.x.quit:
		return false
	}
}

func (d *dispatcher) run(check byte) {
	defer close(d.work)
	for {
		err := d.stream(check)
		if err == errStopped {
			return
		}
		if err != nil {
			d.emit(closedJob(err, false))
			return
		}
		var more bool
		more, check, err = d.afterStream()
		if err != nil {
			d.emit(closedJob(err, false))
			return
		}
		if !more {
			d.emit(closedJob(nil, true))
			return
		}
	}
}

// afterStream skips stream padding and reads the next stream header, if any.
func (d *dispatcher) afterStream() (more bool, check byte, err error) {
	for {
		var b [4]byte
		n, err := io.ReadFull(d.in, b[:])
		switch {
		case n == 0 && err == io.EOF:
			return false, 0, nil
		case err == io.ErrUnexpectedEOF:
			return false, 0, errors.New("xz: trailing garbage after stream (not a multiple of four bytes)")
		case err != nil:
			return false, 0, truncated(err, "stream padding")
		}
		if b == [4]byte{} {
			continue // stream padding
		}
		if !bytes.Equal(b[:], headerMagic[:4]) {
			return false, 0, errors.New("xz: trailing garbage after stream")
		}
		var hdr [streamHeaderLen]byte
		copy(hdr[:], b[:])
		if err := d.in.readFull(hdr[4:], "stream header"); err != nil {
			return false, 0, err
		}
		check, err := parseStreamHeader(hdr[:])
		if err != nil {
			return false, 0, err
		}
		return true, check, nil
	}
}

// stream decodes the blocks, index and footer of one stream whose header has
// been read.
func (d *dispatcher) stream(check byte) error {
	var records []record
	for {
		size, err := d.in.ReadByte()
		if err != nil {
			return truncated(err, "block header or index")
		}
		if size == 0 {
			return d.index(records, check)
		}
		d.blocks++
		n := d.blocks
		h := make([]byte, (int(size)+1)*4)
		h[0] = size
		if err := d.in.readFull(h[1:], fmt.Sprintf("block %d header", n)); err != nil {
			return err
		}
		bh, err := parseBlockHeader(h)
		if err != nil {
			return fmt.Errorf("xz block %d: %w", n, err)
		}
		j := &job{block: n, hdr: bh, check: check, done: make(chan struct{})}
		sized := bh.compressedSize >= 0 && bh.uncompressedSize >= 0
		var cost int64
		if sized {
			cost = bh.compressedSize + 3 + int64(checkSize(check)) +
				bh.uncompressedSize + min(bh.dictCap, max(bh.uncompressedSize, lzma.MinDictCap))
		}
		if !sized || cost > d.memLimit {
			d.x.streamed.Add(1)
			rec, ok := d.streamed(j)
			if !ok {
				return errStopped
			}
			records = append(records, rec)
			continue
		}
		if !d.x.mem.acquire(cost) {
			return errStopped
		}
		d.x.parallel.Add(1)
		j.cost = cost
		j.payload = getBuf(d.x.inBufs, &d.x.maxInput, bh.compressedSize+int64(padLen(bh.compressedSize)+checkSize(check)))
		if err := d.in.readFull(j.payload, fmt.Sprintf("block %d data", n)); err != nil {
			d.x.mem.release(cost)
			return err
		}
		if !d.emit(j) {
			return errStopped
		}
		select {
		case d.work <- j:
		case <-d.x.quit:
			return errStopped
		}
		records = append(records, record{
			unpaddedSize:     int64(bh.size) + bh.compressedSize + int64(checkSize(check)),
			uncompressedSize: bh.uncompressedSize,
		})
	}
}

// streamed hands block j to the consumer to decode from the input directly
// and waits until it is done. ok is false if decoding failed or was closed.
func (d *dispatcher) streamed(j *job) (rec record, ok bool) {
	s, err := newStreamBlock(d.in, j, d.memLimit, &d.streamLR)
	if err != nil {
		j.err = err
		close(j.done)
		d.emit(j)
		return rec, false
	}
	j.stream = s
	j.finished = make(chan struct{})
	close(j.done)
	if !d.emit(j) {
		return rec, false
	}
	select {
	case <-j.finished:
	case <-d.x.quit:
		return rec, false
	}
	return s.rec, s.ok
}

// index validates the index (its indicator byte already read) against the
// blocks decoded, then the stream footer.
func (d *dispatcher) index(records []record, check byte) error {
	crc := crc32.NewIEEE()
	crc.Write([]byte{0})
	size := int64(1)
	readVarint := func(what string) (uint64, error) {
		var buf [9]byte
		for i := range buf {
			b, err := d.in.ReadByte()
			if err != nil {
				return 0, truncated(err, "index")
			}
			buf[i] = b
			if b&0x80 == 0 {
				v, n, err := uvarint(buf[:i+1])
				if err != nil {
					return 0, fmt.Errorf("xz index %s: %w", what, err)
				}
				crc.Write(buf[:n])
				size += int64(n)
				return v, nil
			}
		}
		return 0, fmt.Errorf("xz index %s: bad multibyte integer", what)
	}
	count, err := readVarint("record count")
	if err != nil {
		return err
	}
	if count != uint64(len(records)) {
		return fmt.Errorf("xz index lists %d blocks, stream has %d", count, len(records))
	}
	for i, want := range records {
		u, err := readVarint("unpadded size")
		if err != nil {
			return err
		}
		c, err := readVarint("uncompressed size")
		if err != nil {
			return err
		}
		if int64(u) != want.unpaddedSize || int64(c) != want.uncompressedSize {
			return fmt.Errorf("xz index record %d (sizes %d/%d) does not match block (%d/%d)",
				i+1, u, c, want.unpaddedSize, want.uncompressedSize)
		}
	}
	tail := make([]byte, padLen(size)+4)
	if err := d.in.readFull(tail, "index"); err != nil {
		return err
	}
	pad := tail[:len(tail)-4]
	if !allZero(pad) {
		return errors.New("xz index: non-zero padding")
	}
	crc.Write(pad)
	if crc.Sum32() != binary.LittleEndian.Uint32(tail[len(tail)-4:]) {
		return errors.New("xz index: CRC32 mismatch")
	}
	size += int64(len(tail))

	var f [streamFooterLen]byte
	if err := d.in.readFull(f[:], "stream footer"); err != nil {
		return err
	}
	if !bytes.Equal(f[10:12], footerMagic) {
		return errors.New("xz stream footer: bad magic bytes")
	}
	if crc32.ChecksumIEEE(f[4:10]) != binary.LittleEndian.Uint32(f[0:4]) {
		return errors.New("xz stream footer: CRC32 mismatch")
	}
	if fc, err := parseStreamFlags(f[8:10]); err != nil || fc != check {
		return errors.New("xz stream footer: flags differ from stream header")
	}
	if backward := (int64(binary.LittleEndian.Uint32(f[4:8])) + 1) * 4; backward != size {
		return fmt.Errorf("xz stream footer: index size %d, actual %d", backward, size)
	}
	return nil
}

// worker decodes parallel blocks.
func (d *dispatcher) worker() {
	var lr blockReader
	for j := range d.work {
		select {
		case <-d.x.quit:
			close(j.done)
			continue
		default:
		}
		j.out, j.err = decodeBlock(j, getBuf(d.x.outBufs, &d.x.maxOut, j.hdr.uncompressedSize), &lr)
		putBuf(d.x.inBufs, j.payload)
		j.payload = nil
		close(j.done)
	}
}

// blockReader is a worker's LZMA2 reader, reset for each block with the
// same dictionary size (every block of a factory image) instead of
// allocating a new dictionary per block: 256 KiB of garbage per 1 MiB block
// otherwise, which makes the GC run far more often.
type blockReader struct {
	lr   *lzma.Reader2
	dict int64 // the reader's dictionary capacity
}

// open returns an LZMA2 reader of src with exactly dict bytes of dictionary
// (the block's own: a larger one would accept distances the block's header
// does not allow).
func (b *blockReader) open(src io.Reader, dict int64) (*lzma.Reader2, error) {
	if b.lr != nil && b.dict == dict {
		b.lr.Reset(src)
		return b.lr, nil
	}
	lr, err := lzma.Reader2Config{DictCap: int(dict)}.NewReader2(src)
	if err != nil {
		return nil, err
	}
	b.lr, b.dict = lr, dict
	return lr, nil
}

// decodeBlock decodes and verifies a block whose sizes are in its header.
// out has the block's uncompressed size; br is the worker's reader.
func decodeBlock(j *job, out []byte, br *blockReader) (_ []byte, err error) {
	defer func() {
		if r := recover(); r != nil { // malformed data must not crash the app
			br.lr = nil // its state is unknown: never reuse it
			err = fmt.Errorf("xz block %d: LZMA2 decoder failure: %v", j.block, r)
		}
	}()
	h := j.hdr
	comp := j.payload[:h.compressedSize]
	rest := j.payload[h.compressedSize:]
	pad, stored := rest[:padLen(h.compressedSize)], rest[padLen(h.compressedSize):]
	if !allZero(pad) {
		return nil, fmt.Errorf("xz block %d: non-zero block padding", j.block)
	}
	src := bytes.NewReader(comp)
	dict := min(h.dictCap, max(h.uncompressedSize, lzma.MinDictCap))
	lr, err := br.open(src, dict)
	if err != nil {
		return nil, fmt.Errorf("xz block %d: %w", j.block, err)
	}
	if _, err := io.ReadFull(lr, out); err != nil {
		if err == io.EOF || err == io.ErrUnexpectedEOF {
			return nil, fmt.Errorf("xz block %d: data ends before the uncompressed size in its header", j.block)
		}
		return nil, fmt.Errorf("xz block %d: %w", j.block, err)
	}
	var one [1]byte
	if n, err := lr.Read(one[:]); n > 0 || err == nil {
		return nil, fmt.Errorf("xz block %d: more data than the uncompressed size in its header", j.block)
	} else if err != io.EOF {
		return nil, fmt.Errorf("xz block %d: %w", j.block, err)
	}
	if src.Len() != 0 {
		return nil, fmt.Errorf("xz block %d: LZMA2 data ends %d bytes before the compressed size in its header", j.block, src.Len())
	}
	if sum := checkSum(j.check, out); !bytes.Equal(sum, stored) {
		return nil, fmt.Errorf("xz block %d: %s mismatch", j.block, checkName(j.check))
	}
	return out, nil
}

// streamBlock decodes one block directly from the input while the consumer
// reads it, then verifies its padding, check and sizes.
type streamBlock struct {
	in    *input
	j     *job
	br    *blockReader // the dispatcher's, which owns lr between blocks
	start int64        // input position of the compressed data
	lr    *lzma.Reader2
	sum   hash.Hash
	n     int64 // bytes decoded
	done  bool
	err   error
	rec   record
	ok    bool
}

func newStreamBlock(in *input, j *job, memLimit int64, br *blockReader) (*streamBlock, error) {
	h := j.hdr
	dict := h.dictCap
	if h.uncompressedSize >= 0 {
		dict = min(dict, max(h.uncompressedSize, lzma.MinDictCap))
	}
	if limit := maxStreamDict(memLimit); dict > limit {
		return nil, fmt.Errorf("xz block %d: LZMA2 dictionary of %d MiB is larger than supported (%d MiB)",
			j.block, dict>>20, limit>>20)
	}
	s := &streamBlock{in: in, j: j, br: br, start: in.pos, sum: newCheck(j.check)}
	var src io.Reader = in
	if h.compressedSize >= 0 {
		src = io.LimitReader(in, h.compressedSize)
	}
	lr, err := br.open(src, dict)
	if err != nil {
		return nil, fmt.Errorf("xz block %d: %w", j.block, err)
	}
	s.lr = lr
	return s, nil
}

func (s *streamBlock) Read(p []byte) (n int, err error) {
	if s.err != nil {
		return 0, s.err
	}
	if s.done {
		return 0, io.EOF
	}
	defer func() {
		if r := recover(); r != nil {
			s.br.lr = nil // its state is unknown: never reuse it
			n, err = 0, fmt.Errorf("xz block %d: LZMA2 decoder failure: %v", s.j.block, r)
		}
		if err != nil && err != io.EOF {
			s.err = err
		}
	}()
	if u := s.j.hdr.uncompressedSize; u >= 0 && int64(len(p)) > u-s.n {
		// Never hand out more than the header promises; one extra byte
		// detects a block that is longer.
		p = p[:u-s.n+1]
	}
	n, err = s.lr.Read(p)
	if u := s.j.hdr.uncompressedSize; u >= 0 && s.n+int64(n) > u {
		return 0, fmt.Errorf("xz block %d: more data than the uncompressed size in its header", s.j.block)
	}
	if s.sum != nil {
		s.sum.Write(p[:n])
	}
	s.n += int64(n)
	if err == io.EOF {
		if ferr := s.finish(); ferr != nil {
			return 0, ferr // the block's last bytes are withheld: they are unverified
		}
		return n, io.EOF
	}
	if err == io.ErrUnexpectedEOF {
		if c := s.j.hdr.compressedSize; c >= 0 && s.in.pos-s.start == c {
			return n, fmt.Errorf("xz block %d: LZMA2 data longer than the compressed size in its header", s.j.block)
		}
		return n, fmt.Errorf("truncated xz stream: block %d data missing", s.j.block)
	}
	if err != nil {
		return n, fmt.Errorf("xz block %d: %w", s.j.block, err)
	}
	return n, nil
}

// finish verifies the end of the block after the LZMA2 end marker.
func (s *streamBlock) finish() error {
	s.done = true
	h, b := s.j.hdr, s.j.block
	comp := s.in.pos - s.start
	if h.compressedSize >= 0 && comp != h.compressedSize {
		return fmt.Errorf("xz block %d: LZMA2 data ends %d bytes before the compressed size in its header", b, h.compressedSize-comp)
	}
	if h.uncompressedSize >= 0 && s.n != h.uncompressedSize {
		return fmt.Errorf("xz block %d: data ends before the uncompressed size in its header", b)
	}
	cs := checkSize(s.j.check)
	tail := make([]byte, padLen(comp)+cs)
	if err := s.in.readFull(tail, fmt.Sprintf("block %d check", b)); err != nil {
		return err
	}
	if !allZero(tail[:len(tail)-cs]) {
		return fmt.Errorf("xz block %d: non-zero block padding", b)
	}
	if !bytes.Equal(storedSum(s.j.check, s.sum), tail[len(tail)-cs:]) {
		return fmt.Errorf("xz block %d: %s mismatch", b, checkName(s.j.check))
	}
	s.rec = record{unpaddedSize: int64(h.size) + comp + int64(cs), uncompressedSize: s.n}
	s.ok = true
	return nil
}

// budget is a counting semaphore over bytes.
type budget struct {
	mu     sync.Mutex
	cond   *sync.Cond
	free   int64
	closed bool
}

func newBudget(n int64) *budget {
	b := &budget{free: n}
	b.cond = sync.NewCond(&b.mu)
	return b
}

// acquire waits for n bytes; false if the budget was closed.
func (b *budget) acquire(n int64) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	for b.free < n && !b.closed {
		b.cond.Wait()
	}
	if b.closed {
		return false
	}
	b.free -= n
	return true
}

func (b *budget) release(n int64) {
	if n == 0 {
		return
	}
	b.mu.Lock()
	b.free += n
	b.mu.Unlock()
	b.cond.Broadcast()
}

func (b *budget) close() {
	b.mu.Lock()
	b.closed = true
	b.mu.Unlock()
	b.cond.Broadcast()
}
