package imaging

// The write stage: decode into chunks -> hash, and one writer per card
// (the first MiB last, what the card already holds skipped), with the
// watchdog for cards that stop answering, cancellation and finish (the
// stream's end checked, every card synced).

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"github.com/talosflash/talosflash/internal/humanbytes"
)

type chunk struct {
	buf  []byte // chunkSize, aligned
	n    int
	off  int64
	refs atomic.Int32
	lost atomic.Bool // held by a write that was given up: never reused
	// zero: a whole chunk of zeros, buf the shared zeroChunk: it holds no
	// buffer of the pool, so the decoder goes on through an image's zero
	// runs while the cards still write what came before (queueDepth).
	zero bool
}

// queueDepth is how many chunks may wait for the hash and for each card:
// the pool's, and zero chunks, which cost no buffer (a few bytes each).
// Decoding runs ahead through zero runs by that much (256 MiB of the
// image) while a card is still busy with the data before them: the zeros
// then cost the card's pace nothing where it reads zeros (a file's hole,
// a zeroed card) instead of the decoder's time, which several images
// decoded at once share (docs/PERFORMANCE.md "Issue 32").
const queueDepth = 64

// zeroChunk is the buffer of every zero chunk (never written to), and
// zeroCRCs its blocks' CRCs.
var (
	zeroChunk = sync.OnceValue(func() []byte { return alignedBuf(chunkSize) })
	zeroCRCs  = sync.OnceValue(func() []uint32 {
		crcs := make([]uint32, chunkSize/crcBlock)
		sum := crc32.Checksum(zeroChunk()[:crcBlock], crcTable)
		for i := range crcs {
			crcs[i] = sum
		}
		return crcs
	})
)

// alignedBuf returns n bytes starting at an alignment boundary.
func alignedBuf(n int) []byte {
	b := make([]byte, n+alignment)
	shift := 0
	if r := int(uintptrOf(b) % alignment); r != 0 {
		shift = alignment - r
	}
	return b[shift : shift+n : shift+n]
}

// written is the outcome of the write stage.
type written struct {
	n   int64
	sum []byte
	// crcs are the CRC32C of each crcBlock, to locate a verify mismatch,
	// one slice a chunk (4 KiB each, however long the image: never
	// regrown and copied).
	crcs [][]uint32
	// units are the read-back's buffers, shared by every card: the write
	// stage's chunks, done with, cut into unit bytes each (readUnit).
	units chan *chunk
	unit  int
}

// crc is the CRC32C written for the crcBlock at off.
func (w *written) crc(off int64) uint32 {
	return w.crcs[off/chunkSize][off%chunkSize/crcBlock]
}

// readUnit is the read-back's read size: the whole chunk for one card;
// with several cards, whose read-backs share the pool, a quarter of it, so
// that memory does not grow with the cards and each still has reads in
// flight while it checks (1 MiB direct reads go as fast as 4 MiB ones:
// docs/PERFORMANCE.md).
func readUnit(cards int) int {
	if cards > 1 {
		return chunkSize / 4
	}
	return chunkSize
}

// recycle hands the pool's chunks, once every stage is done with them, to
// the read-back as units. Chunks come back as the writers of failed cards
// finish draining; it never blocks (units holds them all).
func (p *pipeline) recycle(w *written) {
	per := chunkSize / w.unit
	w.units = make(chan *chunk, poolSize*per)
	go func() {
		for range poolSize {
			c := <-p.free
			for i := range per {
				w.units <- &chunk{buf: c.buf[i*w.unit : (i+1)*w.unit : (i+1)*w.unit]}
			}
		}
	}()
}

// writeStream is the write stage: it runs the pipeline's goroutines (read,
// hash, one writer per card) and waits for them. Decoding runs ahead of the
// slowest card by at most the pool. Each card's own failure is in its err;
// the error returned is one they all share (decode, cancellation).
func writeStream(ctx context.Context, stream io.Reader, cards []*card, src *openedSource, progress ProgressFunc) (*written, error) {
	p := newPipeline(ctx, stream, cards, src, progress)
	go p.read()
	go p.hash()
	for _, c := range cards {
		go p.write(c)
	}
	if len(cards) > 1 {
		stopWatch := make(chan struct{})
		defer close(stopWatch)
		go p.watch(stopWatch)
	}
	if err := p.wait(); err != nil {
		return nil, err
	}
	return p.finish()
}

// cardStall is how long one 4 MiB write may take before a card among
// several is given up: a reader pulled out can hang in the kernel instead
// of failing, and the cards share the chunk pool, so it would stop them
// all. A slow card takes well under a second; one that pauses a minute is
// dead.
var cardStall = 60 * time.Second

// errAbandoned ends the writer of a card the watchdog gave up.
var errAbandoned = errors.New("card abandoned")

// Writer states (card.state).
const (
	cardIdle int32 = iota
	cardWriting
	cardAbandoned
)

// watch gives up a card whose write has been stuck for cardStall (only
// with several cards: one card is the user's to cancel).
func (p *pipeline) watch(stop <-chan struct{}) {
	t := time.NewTicker(cardStall / 4)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
		}
		for _, cd := range p.cards {
			if cd.state.Load() != cardWriting || time.Since(time.Unix(0, cd.since.Load())) < cardStall {
				continue
			}
			if cd.state.CompareAndSwap(cardWriting, cardAbandoned) {
				p.abandon(cd)
			}
		}
	}
}

// abandon takes over a stuck card's part: its chunk in the kernel's hands
// is replaced in the pool by a new one (the stuck write may still read
// it), its queue is drained so the other cards go on, and it fails.
func (p *pipeline) abandon(cd *card) {
	cd.current.lost.Store(true)
	p.release(cd.current)
	cd.abandoned.Store(true)
	p.cardDone(cd, &WriteError{Offset: cd.wrote.Load(), Err: fmt.Errorf("%w: a 4 MiB write (or the read before it) did not finish in %s (card pulled out or dead?)", errStalled, cardStall)})
	go func() {
		for c := range cd.in {
			p.release(c)
		}
	}()
}

// pipeline links the stages by bounded channels over a pool of chunks:
// read (decompress into chunks) -> one write per card (to its target) and
// hash (SHA-256 + block CRCs). A chunk returns to the pool when the hash and
// every card are done with it; a card that failed keeps draining its input
// so the others go on. Each stage's results are set by its goroutine before
// it closes the channel (or done channel) that the next reader waits on.
type pipeline struct {
	ctx        context.Context
	stream     io.Reader
	cards      []*card
	src        *openedSource
	compressed bool // the meters count compressed bytes (size unknown)

	free   chan *chunk   // the pool
	toHash chan *chunk   // closed by read, like every card's in
	stop   chan struct{} // closed when every card gave up: read stops
	alive  atomic.Int32  // cards still writing

	// read
	readN   int64
	readErr error
	// head is the image's first MiB, kept by read for the cards that write
	// it last (zeroBlock stands in for it meanwhile).
	head     []byte
	skipping bool // some card writes its first MiB last
	// hash
	hashDone chan struct{}
	sum      []byte
	crcs     [][]uint32
}

func newPipeline(ctx context.Context, stream io.Reader, cards []*card, src *openedSource, progress ProgressFunc) *pipeline {
	total, compressed := src.size, false
	if total < 0 {
		total, compressed = src.compressed, true
	}
	p := &pipeline{
		ctx: ctx, stream: stream, cards: cards, src: src, compressed: compressed,
		free:     make(chan *chunk, poolSize),
		toHash:   make(chan *chunk, queueDepth),
		stop:     make(chan struct{}),
		hashDone: make(chan struct{}),
	}
	p.alive.Store(int32(len(cards)))
	for _, c := range cards {
		c.in, c.done = make(chan *chunk, queueDepth), make(chan struct{})
		c.meter = newMeter(progress, StageWrite, total, compressed).forTarget(c.name)
		c.meter.update(0, true)
	}
	for range poolSize {
		p.free <- &chunk{buf: alignedBuf(chunkSize)}
	}
	for _, c := range cards {
		if c.writeAt != nil {
			p.skipping = true
			c.rbuf = alignedBuf(holdRead)
		}
	}
	return p
}

// zeroBlock is compared against to tell a zero chunk (memcmp speed), and
// written where the image's first MiB goes until it is written last
// (aligned for O_DIRECT). Never written to.
var zeroBlock = alignedBuf(64 << 10)

func allZero(b []byte) bool {
	for len(b) > 0 {
		n := min(len(b), len(zeroBlock))
		if !bytes.Equal(b[:n], zeroBlock[:n]) {
			return false
		}
		b = b[n:]
	}
	return true
}

// release returns c to the pool once its last consumer is done with it
// (a new chunk instead of one a stuck write may still read; a zero chunk
// was never the pool's).
func (p *pipeline) release(c *chunk) {
	if c.refs.Add(-1) == 0 && !c.zero {
		if c.lost.Load() {
			c = &chunk{buf: alignedBuf(chunkSize)}
		}
		p.free <- c
	}
}

// read fills whole chunks so every write but the last is 4 MiB. A whole
// chunk of zeros goes out as a zero chunk and its buffer is filled again
// (queueDepth).
func (p *pipeline) read() {
	var c *chunk // the pool's buffer being filled, kept while it reads zeros
	defer func() {
		if c != nil {
			p.free <- c // the pool whole again: the read-back takes it
		}
		close(p.toHash)
		for _, cd := range p.cards {
			close(cd.in)
		}
	}()
	var off int64
	for {
		if c == nil {
			select {
			case c = <-p.free:
			case <-p.stop:
				return
			}
		} else {
			select {
			case <-p.stop:
				return
			default:
			}
		}
		n, err := fill(p.stream, c.buf)
		if n > 0 && off == 0 && p.skipping {
			p.head = alignedBuf(min(n, headSize))
			copy(p.head, c.buf)
		}
		if n > 0 {
			send := c
			if n == chunkSize && allZero(c.buf) {
				send = &chunk{buf: zeroChunk(), zero: true} // c is filled again
			} else {
				c = nil
			}
			send.n, send.off = n, off
			off += int64(n)
			send.refs.Store(int32(1 + len(p.cards)))
			p.toHash <- send // the hash never waits for the cards
			for _, cd := range p.cards {
				cd.in <- send // a card that failed drains its queue
			}
		}
		if err == io.EOF {
			p.readN = off
			return
		}
		if err != nil {
			p.readN, p.readErr = off, err
			return
		}
	}
}

// fill reads until buf is full or the stream ends. Unlike io.ReadFull it
// keeps the stream's own end apart from a failure: io.EOF means the
// decoder reached and checked its container's end, anything else (the
// io.ErrUnexpectedEOF of a cut gzip or zstd stream included) is an error.
func fill(r io.Reader, buf []byte) (n int, err error) {
	for n < len(buf) && err == nil {
		var m int
		m, err = r.Read(buf[n:])
		n += m
	}
	if err == nil && n == len(buf) {
		return n, nil
	}
	return n, err
}

// hash runs off the write path.
func (p *pipeline) hash() {
	defer close(p.hashDone)
	h := sha256.New()
	for c := range p.toHash {
		b := c.buf[:c.n]
		h.Write(b)
		if c.zero {
			p.crcs = append(p.crcs, zeroCRCs()) // shared, read only
			p.release(c)
			continue
		}
		crcs := make([]uint32, 0, (len(b)+crcBlock-1)/crcBlock)
		for i := 0; i < len(b); i += crcBlock {
			crcs = append(crcs, crc32.Checksum(b[i:min(i+crcBlock, len(b))], crcTable))
		}
		p.crcs = append(p.crcs, crcs)
		p.release(c)
	}
	p.sum = h.Sum(nil)
}

// write runs one card in its own goroutine so cancellation can return even
// if a write is stuck in the kernel (a vanished USB reader). A card that
// fails drains (releases) the rest of its input: the other cards go on.
func (p *pipeline) write(cd *card) {
	err := p.writeCard(cd)
	if err == errAbandoned {
		return // the watchdog reported it and drains its queue
	}
	cd.rbuf = nil // only this goroutine reads into it; not needed by the read-back
	p.cardDone(cd, err)
	for c := range cd.in {
		p.release(c)
	}
}

// cardDone records a card's write outcome; exactly one of its writer and
// the watchdog calls it.
func (p *pipeline) cardDone(cd *card, err error) {
	cd.werr = err
	close(cd.done)
	if err != nil && p.alive.Add(-1) == 0 {
		close(p.stop)
	}
}

// writeSeq writes b in order (a target without positional writes).
func (p *pipeline) writeSeq(cd *card, b []byte, direct *bool) (int, error) {
	p.unalign(cd, len(b), direct)
	n, err := cd.t.Write(b)
	if err == nil && n < len(b) {
		err = io.ErrShortWrite
	}
	cd.written.Add(int64(n))
	return n, err
}

// unalign turns O_DIRECT off before an unaligned write (the tail), which
// it would refuse.
func (p *pipeline) unalign(cd *card, n int, direct *bool) {
	if *direct && n%alignment != 0 {
		if f, ok := cd.t.(fdTarget); ok && setDirect(f.Fd(), false) == nil {
			*direct = false
		}
	}
}

// skipHeld is off only in benchmarks: the write of every byte they compare
// with.
var skipHeld = true

// probe says whether to read the card before the next chunk it may hold.
func (cd *card) probe() bool {
	if cd.probeWait > 0 {
		cd.probeWait--
		return false
	}
	return true
}

// holdProbe is how much of a chunk is read first: a card that holds other
// data there costs this read, not the chunk's. The rest is read holdRead
// at a time (one buffer per card: three cards stay under 64 MiB).
const (
	holdProbe = 64 << 10
	holdRead  = 1 << 20
)

// put writes b at off through the card's positional writer.
func (cd *card) put(b []byte, off int64) (int, error) {
	n, err := cd.writeAt(b, off)
	if err == nil && n < len(b) {
		err = io.ErrShortWrite
	}
	cd.written.Add(int64(n))
	return n, err
}

func (p *pipeline) writeCard(cd *card) error {
	if cd.writeAt != nil {
		// A regular file reads zeros where it was never written: sized to
		// the image (up front when the size is known, else at the end),
		// its zero chunks need no write at all.
		cd.regular = isRegularFile(cd.t)
		if cd.regular && p.src.size > 0 {
			presizeFile(cd.t, p.src.size)
		}
	}
	direct := false
	if f, ok := cd.t.(fdTarget); ok && setDirect(f.Fd(), true) == nil {
		// O_DIRECT writes: no dirty page cache build-up, so progress
		// shows the card's real speed and fsync is quick.
		direct = true
		defer setDirect(f.Fd(), false)
	}
	for c := range cd.in {
		if p.ctx.Err() != nil {
			p.release(c)
			return p.ctx.Err()
		}
		b := c.buf[:c.n]
		if cd.limit > 0 && c.off+int64(len(b)) > cd.limit {
			// Found while writing (size unknown up front): the card is
			// partly written, so this is also an incomplete card.
			p.release(c)
			return fmt.Errorf("%w: the image exceeds %s; %w", ErrTargetTooSmall, humanbytes.Exact(cd.limit), ErrIncomplete)
		}
		cd.current = c
		cd.since.Store(time.Now().UnixNano())
		cd.state.Store(cardWriting)
		var n int
		var err error
		if cd.writeAt == nil {
			n, err = p.writeSeq(cd, b, &direct)
		} else {
			n, err = p.writeRuns(cd, c, &direct)
		}
		if !cd.state.CompareAndSwap(cardWriting, cardIdle) {
			return errAbandoned // c is the watchdog's now
		}
		cd.wrote.Add(int64(n))
		p.release(c)
		if err != nil {
			return &WriteError{Offset: c.off + int64(n), Err: err}
		}
		if p.compressed {
			cd.meter.updateDecoded(p.src.consumed.Load(), cd.wrote.Load(), false)
		} else {
			cd.meter.update(cd.wrote.Load(), false)
		}
	}
	return nil
}

// wait waits for every card's write stage to end. On cancellation it gives
// writes stuck in the kernel cancelGrace, syncs what was written (bounded
// too) and reports incomplete cards. With one card its own failure is
// returned, as it ends the flash.
func (p *pipeline) wait() error {
	all := make(chan struct{})
	go func() {
		for _, c := range p.cards {
			<-c.done
		}
		close(all)
	}()
	cancelled := false
	select {
	case <-all:
	case <-p.ctx.Done():
		cancelled = true
		select {
		case <-all:
		case <-time.After(cancelGrace):
		}
	}
	if !cancelled {
		for _, c := range p.cards {
			c.err = c.werr
		}
	}
	if cancelled || p.anyCancelled() {
		var wg sync.WaitGroup
		for _, c := range p.cards {
			wg.Add(1)
			go func() {
				defer wg.Done()
				done := c.wrote.Load()
				c.err = &InterruptedError{Done: done, SyncErr: syncBounded(c.t, cancelGrace), Cause: p.ctx.Err()}
			}()
		}
		wg.Wait()
		if len(p.cards) == 1 {
			return p.cards[0].err
		}
		return &InterruptedError{Done: -1, Cause: p.ctx.Err()}
	}
	if len(p.cards) == 1 {
		return p.cards[0].err
	}
	return nil
}

// anyCancelled says whether a card stopped because the context ended.
func (p *pipeline) anyCancelled() bool {
	for _, c := range p.cards {
		if errors.Is(c.err, context.Canceled) || errors.Is(c.err, context.DeadlineExceeded) {
			return true
		}
	}
	return false
}

// finish checks that the whole image was decoded, syncs the cards still
// good and returns what the verify stage compares against.
func (p *pipeline) finish() (*written, error) {
	<-p.hashDone
	if p.readErr != nil {
		if p.ctx.Err() != nil {
			return nil, &InterruptedError{Done: p.readN, Cause: p.ctx.Err()}
		}
		if errors.Is(p.readErr, ErrImageChanged) {
			// Not the bytes checked before the flash: no card gets its
			// partition table (a cache entry changed in place is dropped).
			return nil, p.src.corrupt(fmt.Errorf("%w (after %s were written, the partition table not: %w)", p.readErr, humanbytes.Exact(p.readN), ErrIncomplete))
		}
		return nil, fmt.Errorf("%w (after %s were written: %w)", p.src.decodeErr(p.readErr), humanbytes.Exact(p.readN), ErrIncomplete)
	}
	if p.alive.Load() == 0 {
		return nil, p.cards[0].err // every card failed on its own: nothing to check
	}
	if p.src.size >= 0 && p.readN != p.src.size {
		return nil, p.src.corrupt(fmt.Errorf("write stage: %w: decompressed %s, the %s image should give %s (%w)", ErrCorruptImage, humanbytes.Exact(p.readN), p.src.format, humanbytes.Exact(p.src.size), ErrIncomplete))
	}
	if p.src.streamSum != nil {
		// Sent by another process: what came is what it sent, or no card
		// gets its partition table.
		if want := p.src.streamSum(); !bytes.Equal(want, p.sum) {
			return nil, fmt.Errorf("%w: the image received (sha256 %x) is not the one sent (sha256 %x): the partition table was not written (%w)", ErrVerifyMismatch, p.sum, want, ErrIncomplete)
		}
	}
	var wg sync.WaitGroup
	for _, c := range p.cards {
		if c.err == nil && c.wrote.Load() != p.readN {
			// Every card takes every decoded byte; one that did not is
			// short, whatever its writer said.
			c.err = &WriteError{Offset: c.wrote.Load(), Err: fmt.Errorf("%s of the image's %s were written", humanbytes.Exact(c.wrote.Load()), humanbytes.Exact(p.readN))}
		}
		if c.err != nil {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if c.grow {
				presizeFile(c.t, p.readN)
			}
			err := syncBounded(c.t, cardStall)
			if err == nil && c.writeAt != nil && p.head != nil {
				// The rest is on the card: now the partition table.
				err = bounded(cardStall, func() error {
					if err := p.finishHead(c); err != nil {
						return fmt.Errorf("writing the first MiB last: %w", err)
					}
					return c.t.Sync()
				})
			}
			if err != nil {
				if errors.Is(err, errStalled) {
					c.abandoned.Store(true) // its Close may hang too: never waited for
					err = fmt.Errorf("%w: %w", err, ErrIncomplete)
				}
				c.err = &WriteError{Offset: p.readN, Err: fmt.Errorf("sync: %w", err)}
				return
			}
			if p.compressed {
				c.meter.setTotal(p.readN)
				c.meter.setCompressed(false)
			}
			c.meter.update(p.readN, true)
		}()
	}
	wg.Wait()
	w := &written{n: p.readN, sum: p.sum, crcs: p.crcs, unit: readUnit(len(p.cards))}
	p.recycle(w)
	return w, nil
}

// positionalWriter is how the first MiB of t is written last: its WriteAt,
// else a positional write on its descriptor (a devices.Device), else nil:
// a target written only in order gets the image in order.
func positionalWriter(t Target) func(p []byte, off int64) (int, error) {
	if w, ok := t.(io.WriterAt); ok {
		return w.WriteAt
	}
	if f, ok := t.(fdTarget); ok && havePwriteFd {
		return func(p []byte, off int64) (int, error) { return pwriteFd(f.Fd(), p, off) }
	}
	return nil
}

// errStalled marks a card that stopped answering (a pulled reader can
// hang in the kernel on a write, an fsync or a read).
var errStalled = errors.New("the card stopped answering")

// syncBounded syncs but gives up waiting after d (a dead device may hang).
func syncBounded(t Target, d time.Duration) error { return bounded(d, t.Sync) }

// bounded runs fn but gives up waiting for it after d.
func bounded(d time.Duration, fn func() error) error {
	done := make(chan error, 1)
	go func() { done <- fn() }()
	select {
	case err := <-done:
		return err
	case <-time.After(d):
		return fmt.Errorf("%w for %s", errStalled, d)
	}
}
