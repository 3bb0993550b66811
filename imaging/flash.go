package imaging

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"net/http"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/talosflash/talosflash/imaging/xzpar"
)

// Source is what to flash: a local file (Path) or a remote .raw.xz (URL).
type Source struct {
	// Path is a local .raw.xz or .raw file (detected by its magic bytes).
	// If set, URL is ignored. A local file is never deleted, even if corrupt.
	Path string

	// URL of a .raw.xz; fetched into Cache under Key first, unless NoCache.
	URL        string
	Key        string       // cache key, see CacheKey
	Cache      *Cache       // nil -> DefaultCache(); with NoCache only its download tuning is used
	NoCache    bool         // stream from HTTP straight into the decompressor
	HTTPClient *http.Client // nil -> http.DefaultClient
}

// FlashOptions configures Flash.
type FlashOptions struct {
	Source Source
	Target string // block device or regular file path
	// Targets are several cards written from one decode (FlashAll); when
	// set, Target is ignored.
	Targets []string
	// Open opens Target; size is the image's uncompressed size (-1 if
	// unknown). nil -> OpenFile (imaging/devices supplies the safe one).
	Open   func(path string, size int64) (Target, error)
	Verify bool
	// MaxSize, if > 0, is the most bytes the target may take (checked before
	// writing when the image size is known, and while writing otherwise), in
	// addition to the capacity the target itself reports.
	MaxSize  int64
	Progress ProgressFunc
	// ForceRaw writes a decoded stream that does not start like a disk (no
	// MBR signature, no GPT header); without it such a stream is refused
	// with ErrUnsupportedImage before the target is opened.
	ForceRaw bool
	// CheckHead, when set, sees the start of the decoded image (HeadSize
	// bytes, fewer if it is shorter) and its decoded size (-1: unknown)
	// before any target is opened: its error refuses the flash, every card
	// untouched (headcheck.go).
	CheckHead func(head []byte, size int64) error
}

// Result describes a completed flash.
type Result struct {
	Bytes    int64  // decompressed bytes written
	SHA256   string // hex SHA-256 of the decompressed stream
	Verified bool
	// VerifyMode says how the read-back bypassed the page cache:
	// "O_DIRECT", "fadvise" (fsync + POSIX_FADV_DONTNEED), or "cached" for
	// targets without a file descriptor. Empty when not verified.
	VerifyMode string
	Path       string // the local file that was flashed ("" for --no-cache)
}

// newDecompressor is the one place xz decoding is chosen. The reader must
// verify the xz checks. xzpar decodes the blocks of multi-block files (as
// Image Factory serves them: xz -0, 1 MiB blocks) on several cores with the
// patched decoder of third_party/xz, and streams single-block files or
// blocks over its memory budget; on 2 cores it decodes the factory's image
// in 0.79x the time of `xz -dc` (docs/PERFORMANCE.md). The returned reader
// is closed when the flash ends.
var newDecompressor = func(r io.Reader) (io.Reader, error) {
	return xzpar.NewReader(r, decodeWorkers())
}

// decodeWorkers is one decoder per core, capped: each holds a block in
// memory (~2.3 MiB in flight for the factory's 1 MiB blocks, within
// xzpar.DefaultMemoryLimit), and a card is slower than 4 cores decode.
func decodeWorkers() int { return min(runtime.NumCPU(), 4) }

const (
	chunkSize = 4 << 20 // write and read-back unit
	poolSize  = 4       // chunks in flight: bounds memory to ~16 MiB
	alignment = 4096    // O_DIRECT buffer/offset/size alignment
	crcBlock  = 4096    // granularity of the mismatch offset
	// cancelGrace is how long a cancelled flash waits for a write in progress.
	cancelGrace = 5 * time.Second
)

var crcTable = crc32.MakeTable(crc32.Castagnoli)

// openedSource is the byte stream to decompress (or copy) and what is known
// about its size.
type openedSource struct {
	r          io.Reader // compressed (xz) or raw bytes
	closer     io.Closer
	xz         bool   // format == FormatXZ
	format     Format // told by the content, not the name
	size       int64  // uncompressed size, -1 unknown
	compressed int64  // compressed size, -1 unknown
	consumed   *atomic.Int64
	path       string // local file
	cachePath  string // set when the file is a cache entry (deleted if corrupt)
	cache      *Cache // the entry's cache and key, to open it through the cache's walk
	cacheKey   string
	err        error // last error from the underlying source (not the decoder)
	mu         sync.Mutex
}

func (s *openedSource) Read(p []byte) (int, error) {
	n, err := s.r.Read(p)
	s.consumed.Add(int64(n))
	if err != nil && err != io.EOF {
		s.mu.Lock()
		s.err = err
		s.mu.Unlock()
	}
	return n, err
}

func (s *openedSource) sourceErr() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err
}

func openSource(ctx context.Context, src Source, progress ProgressFunc) (*openedSource, error) {
	s := &openedSource{size: -1, compressed: -1, consumed: new(atomic.Int64)}
	path := src.Path
	if path == "" {
		if src.URL == "" {
			return nil, errors.New("no image source: give a file or URL")
		}
		if src.NoCache {
			f := newFetcher(src.Cache, src.HTTPClient, src.URL)
			stream := newHTTPStream(ctx, f)
			if err := stream.open(); err != nil {
				stream.cancel()
				return nil, downloadFailed(err)
			}
			br := bufio.NewReaderSize(stream, 1<<20)
			s.r, s.closer, s.compressed = br, stream, stream.resp.total
			head, err := br.Peek(sniffHeadSize)
			if err != nil && err != io.EOF {
				stream.Close()
				return nil, downloadFailed(err)
			}
			if err := s.setFormat(head, -1); err != nil {
				stream.Close()
				return nil, err
			}
			return s, nil
		}
		cache := src.Cache
		if cache == nil {
			var err error
			if cache, err = DefaultCache(); err != nil {
				return nil, err
			}
		}
		if src.Key == "" {
			return nil, errors.New("image cache: no cache key given")
		}
		p, err := cache.Fetch(ctx, src.HTTPClient, src.URL, src.Key, progress)
		if err != nil {
			return nil, err
		}
		path, s.cachePath = p, p
		s.cache, s.cacheKey = cache, src.Key
	}
	// Non-blocking: a FIFO named as the image is refused below instead of
	// hanging the open (regular files ignore the flag).
	open := func(p string) (*os.File, error) { return os.OpenFile(p, os.O_RDONLY|syscall.O_NONBLOCK, 0) }
	if s.cachePath != "" {
		// Through the cache's own walk (directory descriptors, O_NOFOLLOW
		// at every level): never a symlink planted anywhere in the cache.
		open = func(string) (*os.File, error) { return s.cache.Open(s.cacheKey) }
	}
	f, err := open(path)
	if err != nil {
		return nil, fmt.Errorf("open image: %w", err)
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("open image: %w", err)
	}
	if !st.Mode().IsRegular() {
		f.Close()
		return nil, fmt.Errorf("image %s: %w: it is not a regular file (%v)", path, ErrUnsupportedImage, st.Mode().Type())
	}
	head := make([]byte, sniffHeadSize)
	n, err := f.ReadAt(head, 0)
	if err != nil && err != io.EOF {
		f.Close()
		return nil, fmt.Errorf("read image %s: %w", path, err)
	}
	s.path, s.closer, s.compressed = path, f, st.Size()
	s.r = bufio.NewReaderSize(f, 1<<20)
	if err := s.setFormat(head[:n], st.Size()); err != nil {
		f.Close()
		return nil, s.corrupt(fmt.Errorf("image %s: %w", path, err))
	}
	var size int64
	switch s.format {
	case FormatXZ:
		size, err = XZUncompressedSize(f, st.Size())
	case FormatZstd:
		size, err = zstdFileSize(f, st.Size()) // every frame, not just the first
	default:
		size = s.size
	}
	if err != nil {
		f.Close()
		return nil, s.corrupt(fmt.Errorf("image %s: %w", path, err))
	}
	s.size = size
	return s, nil
}

// setFormat sniffs the source's format from its first bytes and sets what
// the header tells of the decoded size (fileSize: the raw file's, or -1).
func (s *openedSource) setFormat(head []byte, fileSize int64) error {
	format, err := sniffFormat(head)
	if err != nil {
		return err
	}
	s.format, s.xz = format, format == FormatXZ
	switch format {
	case FormatZstd:
		// A stream may hold more frames than the first header tells of:
		// its size stays unknown (files are walked frame by frame).
		if _, err := zstdContentSize(head); err != nil {
			return err
		}
	case FormatRaw:
		s.size = fileSize
	}
	return nil
}

// notTarget refuses a target that is the source file itself, or a loop
// device over it: writing would destroy the image while it is being read.
func (s *openedSource) notTarget(target string) error {
	from := s.path
	if from == "" {
		from = s.cachePath
	}
	if from == "" {
		return nil // streamed (--no-cache): no file to destroy
	}
	si, err := os.Stat(from)
	if err != nil {
		return nil
	}
	if ti, err := os.Stat(target); err == nil && os.SameFile(si, ti) {
		return fmt.Errorf("%w: %s is %s", ErrTargetIsSource, target, from)
	}
	if back := loopBacking(target); back != "" {
		if bi, err := os.Stat(back); err == nil && os.SameFile(si, bi) {
			return fmt.Errorf("%w: %s is a loop device over %s", ErrTargetIsSource, target, from)
		}
	}
	return nil
}

// corrupt deletes the cache entry the data came from and explains.
func (s *openedSource) corrupt(err error) error {
	if s.cachePath == "" {
		return err
	}
	if rmErr := s.cache.Remove(s.cacheKey); rmErr != nil {
		return fmt.Errorf("%w; removing the cache entry also failed: %v", err, rmErr)
	}
	return fmt.Errorf("%w; removed it from the cache, run again to download it anew", err)
}

// Flash writes the source image to the target: read -> decompress -> write
// (with SHA-256 computed on the side) -> fsync -> verify. Memory use is
// bounded (a few 4 MiB chunks); no temporary file is made.
func Flash(ctx context.Context, opts FlashOptions) (*Result, error) {
	if len(opts.Targets) > 1 {
		return nil, errors.New("flash: several targets: use FlashAll")
	}
	if len(opts.Targets) == 1 {
		opts.Target = opts.Targets[0]
	}
	opts.Targets = nil
	cards, err := FlashAll(ctx, opts)
	if err != nil {
		return nil, err
	}
	return cards[0].Result, cards[0].Err
}

// TargetResult is one target of FlashAll: Result is set once the image was
// written (also when the verify then failed), Err says why this card failed.
type TargetResult struct {
	Target string
	Result *Result
	Err    error
}

// FlashAll writes the source image to every target of opts.Targets (or to
// opts.Target) from one read of the source and one decode: each target has
// its own writer, fsync and read-back, and one that is refused, fails or is
// pulled out does not stop the others. The pipeline runs at the pace of the
// slowest card (they share the chunk pool), so N cards take about the time
// of the slowest alone. The error is for failures before any target was
// opened (source, format, an image that is not a disk); everything after
// is in the per-target results, in the order of the targets.
func FlashAll(ctx context.Context, opts FlashOptions) ([]TargetResult, error) {
	names := opts.Targets
	if len(names) == 0 {
		names = []string{opts.Target}
	}
	multi := len(names) > 1
	if multi {
		opts.Progress = serialized(opts.Progress)
	}
	src, err := openSource(ctx, opts.Source, opts.Progress)
	if err != nil {
		return nil, err
	}
	defer src.closer.Close()

	// Decode (and look at the start of the decoded data) before the target
	// is touched: what is not a disk image is refused with the card intact.
	stream, closeStream, err := decode(src, opts.ForceRaw)
	if err != nil {
		return nil, err
	}
	defer closeStream() // stops decoder goroutines on cancel or write error
	if stream, err = checkHead(stream, opts.CheckHead, src.size); err != nil {
		return nil, err
	}

	// A target that is the source is a mistake in the command: refused
	// before any card is touched.
	for _, name := range names {
		if err := src.notTarget(name); err != nil {
			return nil, err
		}
	}
	results := make([]TargetResult, len(names))
	var cards []*card
	for i, name := range names {
		results[i].Target = name
		t, limit, err := openTarget(opts, name, src.size)
		if err != nil {
			results[i].Err = err
			continue
		}
		c := &card{idx: i, t: t, limit: limit}
		if multi {
			c.name = name
		}
		cards = append(cards, c)
	}
	if len(cards) == 0 {
		return results, nil
	}
	defer func() {
		for _, c := range cards {
			switch {
			case c.abandoned.Load():
				go c.t.Close() // may hang like its write: never waited for
			case !c.closed:
				c.t.Close()
			}
		}
	}()

	w, err := writeStream(ctx, stream, cards, src, opts.Progress)
	if err != nil {
		// Nothing was decoded completely (or it was cancelled): every card
		// still writing shares this failure.
		for _, c := range cards {
			if c.err == nil {
				c.err = err
			}
		}
	}
	var wg sync.WaitGroup
	for _, c := range cards {
		if c.err != nil {
			results[c.idx].Err = c.err
			continue
		}
		wg.Add(1)
		go func() { // each card verifies at its own read speed
			defer wg.Done()
			results[c.idx].Result, results[c.idx].Err = c.verifyAndClose(ctx, w, src, opts)
		}()
	}
	wg.Wait()
	return results, nil
}

// card is one target of a flash.
type card struct {
	idx    int
	name   string // reported in progress when there are several cards
	t      Target
	limit  int64 // >0: most bytes the target takes
	err    error // set by the write stage (or the common failure)
	closed bool
	// write stage
	in   chan *chunk // closed by read
	done chan struct{}
	werr error // the writer's own outcome, read after done
	// the watchdog (several cards): the write in progress and since when
	state     atomic.Int32 // cardIdle, cardWriting, cardAbandoned
	since     atomic.Int64 // unix nanoseconds
	current   *chunk       // set before state turns cardWriting
	abandoned atomic.Bool
	wrote     atomic.Int64
	meter     *meter
}

// verifyAndClose is a written card's last steps: read-back, close, "done".
func (c *card) verifyAndClose(ctx context.Context, w *written, src *openedSource, opts FlashOptions) (*Result, error) {
	res := &Result{Bytes: w.n, SHA256: hex.EncodeToString(w.sum), Path: src.path}
	if opts.Verify {
		depth := 3
		if c.name != "" {
			depth = 2 // several cards: 8 MiB of read-back buffers each
		}
		mode, err := verifyTarget(ctx, c.t, w, newMeter(opts.Progress, StageVerify, w.n, false).forTarget(c.name), depth)
		if err != nil {
			if errors.Is(err, errStalled) {
				c.abandoned.Store(true) // its Close may hang too: never waited for
			}
			return res, err
		}
		res.Verified, res.VerifyMode = true, mode
	}
	c.closed = true
	if err := c.t.Close(); err != nil {
		return res, fmt.Errorf("close target: %w", err)
	}
	newMeter(opts.Progress, StageDone, w.n, false).forTarget(c.name).update(w.n, true)
	return res, nil
}

// serialized makes one ProgressFunc safe for several cards' meters.
func serialized(fn ProgressFunc) ProgressFunc {
	if fn == nil {
		return nil
	}
	var mu sync.Mutex
	return func(p Progress) {
		mu.Lock()
		defer mu.Unlock()
		fn(p)
	}
}

// openTarget opens the target for an image of size bytes (-1 unknown) and
// returns the most bytes it may take (0: no known limit). A known size that
// does not fit is refused before anything is written.
func openTarget(opts FlashOptions, name string, size int64) (Target, int64, error) {
	limit := opts.MaxSize
	if limit > 0 && size > limit {
		return nil, 0, fmt.Errorf("%w: image needs %d bytes, limit is %d", ErrTargetTooSmall, size, limit)
	}
	open := opts.Open
	if open == nil {
		open = OpenFile
	}
	t, err := open(name, size)
	if err != nil {
		return nil, 0, err
	}
	capacity, ok, err := targetCapacity(t)
	if err != nil {
		t.Close()
		return nil, 0, err
	}
	if ok && (limit <= 0 || capacity < limit) {
		limit = capacity
	}
	if limit > 0 && size > limit {
		t.Close()
		return nil, 0, fmt.Errorf("%w: image needs %d bytes, %s holds %d", ErrTargetTooSmall, size, name, limit)
	}
	if free, ok := fileTargetFree(t); ok && size > free {
		t.Close()
		return nil, 0, fmt.Errorf("%w: image needs %d bytes, the file system of %s has %d free", ErrTargetTooSmall, size, name, free)
	}
	return t, limit, nil
}

// decode is the source's uncompressed stream, in the format its content
// says (xz, zstd, gzip or raw), checked to start like a disk (MBR or GPT)
// unless forceRaw. close stops the decoder's goroutines.
func decode(src *openedSource, forceRaw bool) (r io.Reader, close func(), err error) {
	dec, err := decoderFor(src.format, src)
	if err != nil {
		return nil, nil, src.decodeErr(err)
	}
	close = func() {}
	if c, ok := dec.(io.Closer); ok && dec != io.Reader(src) {
		close = func() { c.Close() }
	}
	r, err = peekDisk(dec, forceRaw)
	if err != nil {
		close()
		if errors.Is(err, ErrUnsupportedImage) {
			// A cache entry the factory served is dropped: it is not what
			// was asked for (the elevated child's parent does the same).
			return nil, nil, src.corrupt(fmt.Errorf("image %s: %w", src.name(), err))
		}
		return nil, nil, src.decodeErr(err)
	}
	return r, close, nil
}

// decodeErr tells a failing download apart from corrupt data.
func (s *openedSource) decodeErr(err error) error {
	if serr := s.sourceErr(); serr != nil {
		return fmt.Errorf("write stage: reading image: %w", serr)
	}
	return s.corrupt(fmt.Errorf("write stage: decompressing %s: %w: %v", s.name(), ErrCorruptImage, err))
}

func (s *openedSource) name() string {
	if s.path == "" {
		return "downloaded stream"
	}
	return s.path
}

type chunk struct {
	buf  []byte // chunkSize, aligned
	n    int
	off  int64
	refs atomic.Int32
	lost atomic.Bool // held by a write that was given up: never reused
}

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
	n    int64
	sum  []byte
	crcs []uint32 // CRC32C per crcBlock, to locate a verify mismatch
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
	p.cardDone(cd, &WriteError{Offset: cd.wrote.Load(), Err: fmt.Errorf("a 4 MiB write did not finish in %s (card pulled out or dead?)", cardStall)})
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
	// hash
	hashDone chan struct{}
	sum      []byte
	crcs     []uint32
}

func newPipeline(ctx context.Context, stream io.Reader, cards []*card, src *openedSource, progress ProgressFunc) *pipeline {
	total, compressed := src.size, false
	if total < 0 {
		total, compressed = src.compressed, true
	}
	p := &pipeline{
		ctx: ctx, stream: stream, cards: cards, src: src, compressed: compressed,
		free:     make(chan *chunk, poolSize),
		toHash:   make(chan *chunk, poolSize),
		stop:     make(chan struct{}),
		hashDone: make(chan struct{}),
	}
	p.alive.Store(int32(len(cards)))
	for _, c := range cards {
		c.in, c.done = make(chan *chunk, poolSize), make(chan struct{})
		c.meter = newMeter(progress, StageWrite, total, compressed).forTarget(c.name)
		c.meter.update(0, true)
	}
	for range poolSize {
		p.free <- &chunk{buf: alignedBuf(chunkSize)}
	}
	return p
}

// release returns c to the pool once its last consumer is done with it
// (a new chunk instead of one a stuck write may still read).
func (p *pipeline) release(c *chunk) {
	if c.refs.Add(-1) == 0 {
		if c.lost.Load() {
			c = &chunk{buf: alignedBuf(chunkSize)}
		}
		p.free <- c
	}
}

// read fills whole chunks so every write but the last is 4 MiB.
func (p *pipeline) read() {
	defer func() {
		close(p.toHash)
		for _, c := range p.cards {
			close(c.in)
		}
	}()
	var off int64
	for {
		var c *chunk
		select {
		case c = <-p.free:
		case <-p.stop:
			return
		}
		n, err := io.ReadFull(p.stream, c.buf)
		if n > 0 {
			c.n, c.off = n, off
			off += int64(n)
			c.refs.Store(int32(1 + len(p.cards)))
			p.toHash <- c // never blocks: at most poolSize chunks exist
			for _, cd := range p.cards {
				cd.in <- c
			}
		} else {
			p.free <- c
		}
		if err == io.EOF || err == io.ErrUnexpectedEOF {
			p.readN = off
			return
		}
		if err != nil {
			p.readN, p.readErr = off, err
			return
		}
	}
}

// hash runs off the write path.
func (p *pipeline) hash() {
	defer close(p.hashDone)
	h := sha256.New()
	for c := range p.toHash {
		b := c.buf[:c.n]
		h.Write(b)
		for i := 0; i < len(b); i += crcBlock {
			p.crcs = append(p.crcs, crc32.Checksum(b[i:min(i+crcBlock, len(b))], crcTable))
		}
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

func (p *pipeline) writeCard(cd *card) error {
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
			return fmt.Errorf("%w: image exceeds %d bytes; %w", ErrTargetTooSmall, cd.limit, ErrIncomplete)
		}
		if direct && len(b)%alignment != 0 {
			// Unaligned tail: O_DIRECT would refuse it.
			if f, ok := cd.t.(fdTarget); ok && setDirect(f.Fd(), false) == nil {
				direct = false
			}
		}
		cd.current = c
		cd.since.Store(time.Now().UnixNano())
		cd.state.Store(cardWriting)
		n, err := cd.t.Write(b)
		if !cd.state.CompareAndSwap(cardWriting, cardIdle) {
			return errAbandoned // c is the watchdog's now
		}
		cd.wrote.Add(int64(n))
		if err == nil && n < len(b) {
			err = io.ErrShortWrite
		}
		p.release(c)
		if err != nil {
			return &WriteError{Offset: c.off + int64(n), Err: err}
		}
		if p.compressed {
			cd.meter.update(p.src.consumed.Load(), false)
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
				if syncErr := syncBounded(c.t, cancelGrace); syncErr != nil {
					c.err = fmt.Errorf("flash interrupted after %d bytes (%w), and syncing them failed: %v: %w", done, p.ctx.Err(), syncErr, ErrIncomplete)
				} else {
					c.err = fmt.Errorf("flash interrupted after %d bytes (%w): %w", done, p.ctx.Err(), ErrIncomplete)
				}
			}()
		}
		wg.Wait()
		if len(p.cards) == 1 {
			return p.cards[0].err
		}
		return fmt.Errorf("flash interrupted (%w): %w", p.ctx.Err(), ErrIncomplete)
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
			return nil, fmt.Errorf("flash interrupted after %d bytes (%w): %w", p.readN, p.ctx.Err(), ErrIncomplete)
		}
		return nil, fmt.Errorf("%w (after %d bytes were written: %w)", p.src.decodeErr(p.readErr), p.readN, ErrIncomplete)
	}
	if p.alive.Load() == 0 {
		return nil, p.cards[0].err // every card failed on its own: nothing to check
	}
	if p.src.size >= 0 && p.readN != p.src.size {
		return nil, p.src.corrupt(fmt.Errorf("write stage: %w: decompressed %d bytes, the %s image should give %d (%w)", ErrCorruptImage, p.readN, p.src.format, p.src.size, ErrIncomplete))
	}
	var wg sync.WaitGroup
	for _, c := range p.cards {
		if c.err != nil {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := syncBounded(c.t, cardStall); err != nil {
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
	return &written{n: p.readN, sum: p.sum, crcs: p.crcs}, nil
}

// errStalled marks a card that stopped answering (a pulled reader can
// hang in the kernel on a write, an fsync or a read).
var errStalled = errors.New("the card stopped answering")

// syncBounded syncs but gives up waiting after d (a dead device may hang).
func syncBounded(t Target, d time.Duration) error {
	done := make(chan error, 1)
	go func() { done <- t.Sync() }()
	select {
	case err := <-done:
		return err
	case <-time.After(d):
		return fmt.Errorf("%w for %s", errStalled, d)
	}
}

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
func verifyTarget(ctx context.Context, t Target, w *written, meter *meter, depth int) (string, error) {
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

	free := make(chan *chunk, depth)
	for range depth {
		free <- &chunk{buf: alignedBuf(chunkSize)}
	}
	full := make(chan *chunk, depth)
	stop := make(chan struct{})
	defer close(stop)
	var readErr error
	go func() {
		defer close(full)
		for off := int64(0); off < w.n; off += chunkSize {
			var c *chunk
			select {
			case c = <-free:
			case <-stop:
				return
			}
			if ctx.Err() != nil {
				readErr = ctx.Err()
				return
			}
			want := int(min(chunkSize, w.n-off))
			// O_DIRECT needs aligned lengths; read a little more at the end.
			n, err := t.ReadAt(c.buf[:(want+alignment-1)/alignment*alignment], off)
			if n >= want {
				err = nil
			} else if err == nil || err == io.EOF {
				err = fmt.Errorf("target ends at byte %d, expected %d bytes", off+int64(n), w.n)
			}
			if err != nil {
				// The card shrank, vanished or fails to read: it can't be
				// trusted to hold the image.
				readErr = fmt.Errorf("verify: read target at byte %d: %w; %w", off+int64(n), err, ErrIncomplete)
				return
			}
			c.n, c.off = want, off
			select {
			case full <- c:
			case <-stop:
				return
			}
		}
	}()

	h := sha256.New()
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
		h.Write(b)
		for i := 0; i < len(b); i += crcBlock {
			idx := (c.off + int64(i)) / crcBlock
			if crc32.Checksum(b[i:min(i+crcBlock, len(b))], crcTable) != w.crcs[idx] {
				return mode, &VerifyError{Offset: idx * crcBlock, Want: hex.EncodeToString(w.sum)}
			}
		}
		meter.update(c.off+int64(c.n), false)
		free <- c
	}
	if readErr != nil {
		if ctx.Err() != nil {
			return mode, fmt.Errorf("verify interrupted (%w); the image was written completely", ctx.Err())
		}
		return mode, readErr
	}
	if !bytes.Equal(h.Sum(nil), w.sum) {
		return mode, &VerifyError{Offset: -1, Want: hex.EncodeToString(w.sum)}
	}
	meter.update(w.n, true)
	return mode, nil
}
