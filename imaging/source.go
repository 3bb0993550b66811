package imaging

// The source: a local file, a cache entry, a download read as it arrives
// (openDownload) or streamed (--no-cache); its format, declared sizes and
// decoder (decode), and the checks that it is not one of the targets.

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"

	"github.com/talosflash/talosflash/imaging/xzpar"
)

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

// openedSource is the byte stream to decompress (or copy) and what is known
// about its size.
type openedSource struct {
	r          io.Reader // compressed (xz) or raw bytes
	closer     io.Closer
	xz         bool   // format == FormatXZ
	format     Format // told by the content, not the name
	size       int64  // uncompressed size, -1 unknown
	zstdWindow uint64 // the largest window of a zstd file's frames, 0 unknown (a stream)
	compressed int64  // compressed size, -1 unknown
	consumed   *atomic.Int64
	path       string // local file
	// file is the local file or cache entry opened (nil: a stream or a
	// download read as it arrives): read at any offset by imageAt.
	file      *os.File
	cachePath string // set when the file is a cache entry (deleted if corrupt)
	cache     *Cache // the entry's cache and key, to open it through the cache's walk
	cacheKey  string
	follow    *follower // a download read as it arrives (openDownload)
	// growingEntry is the cache entry a download read as it arrives will
	// be (its partial is read now): neither name may be a target.
	growingEntry string
	// streamSum, for a stream another process sends, is the SHA-256 the
	// sender computed, known once the stream ended (nil: not sent).
	streamSum func() []byte
	err       error // last error from the underlying source (not the decoder)
	mu        sync.Mutex
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
	if src.Stream != nil {
		return s.openStream(src)
	}
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
		if cached, err := cache.Lookup(src.Key); err != nil {
			return nil, err
		} else if !cached {
			return s.openDownload(ctx, cache, src, progress)
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
	s.path, s.closer, s.compressed, s.file = path, f, st.Size(), f
	// The decoders read a block at a time (zstd: at most 128 KiB, which
	// passes the buffer by; its 3-byte block headers do not).
	s.r = bufio.NewReaderSize(f, 256<<10)
	if err := s.setFormat(head[:n], st.Size()); err != nil {
		f.Close()
		return nil, s.corrupt(fmt.Errorf("image %s: %w", path, err))
	}
	var size int64
	switch s.format {
	case FormatXZ:
		size, err = XZUncompressedSize(f, st.Size())
	case FormatZstd:
		size, s.zstdWindow, err = zstdFrames(f, st.Size()) // every frame, not just the first
	default:
		size, err = s.size, nil // not the io.EOF of a file shorter than the head
	}
	if err != nil {
		f.Close()
		return nil, s.corrupt(fmt.Errorf("image %s: %w", path, err))
	}
	s.size = size
	return s, nil
}

// openDownload is the first flash of an image: the card is written as the
// download arrives, and the same bytes fill the cache (fetchStream). Its
// sizes are what the headers tell (as for --no-cache): the xz index is at
// the end of the file.
func (s *openedSource) openDownload(ctx context.Context, cache *Cache, src Source, progress ProgressFunc) (*openedSource, error) {
	final, err := cache.Path(src.Key)
	if err != nil {
		return nil, err
	}
	fr := cache.fetchStream(ctx, src.HTTPClient, src.URL, src.Key, progress)
	br := bufio.NewReaderSize(fr, 1<<20)
	s.r, s.closer, s.follow = br, fr, fr
	s.path, s.cachePath, s.cache, s.cacheKey = final, final, cache, src.Key
	s.growingEntry = final
	head, err := br.Peek(sniffHeadSize) // waits for the first bytes (and the factory's build)
	if err != nil && err != io.EOF {
		fr.Close()
		return nil, err
	}
	if err := s.setFormat(head, -1); err != nil {
		fr.Close()
		return nil, s.corrupt(fmt.Errorf("downloaded %s: %w", src.URL, err))
	}
	if s.format == FormatRaw {
		fr.Close()
		return nil, s.corrupt(fmt.Errorf("downloaded %s: %w: the download is not compressed (xz, zstd or gzip expected)", src.URL, ErrCorruptImage))
	}
	s.compressed = fr.g.announced()
	return s, nil
}

// openStream is the decoded image another process sends (the elevated
// child's stdin): raw bytes of the size the sender declared, which must
// start like a disk as any image does (decode). Compressed data is refused:
// the decoders run in the sender, with the user's rights.
func (s *openedSource) openStream(src Source) (*openedSource, error) {
	br := bufio.NewReaderSize(src.Stream, sniffHeadSize)
	s.r, s.closer, s.streamSum = br, io.NopCloser(nil), src.StreamSum
	head, err := br.Peek(sniffHeadSize)
	if err != nil && err != io.EOF {
		return nil, fmt.Errorf("read image: %w", err)
	}
	if err := s.setFormat(head, src.StreamSize); err != nil {
		return nil, err
	}
	if s.format != FormatRaw {
		return nil, fmt.Errorf("%w: the image sent is %s, not the decoded disk image", ErrUnsupportedImage, s.format)
	}
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
	if s.growingEntry != "" {
		// Streamed through the cache: the entry is not there yet and the
		// partial is what is read; neither may be a card, existing or not.
		for _, p := range []string{s.growingEntry, s.growingEntry + partialSuffix} {
			if sameName(p, target) {
				return fmt.Errorf("%w: %s is the cache's download of the image", ErrTargetIsSource, target)
			}
		}
	}
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

// sameName says whether a and b name the same file, existing or to be
// created (the same directory, the same name in it).
func sameName(a, b string) bool {
	ai, aerr := os.Stat(a)
	bi, berr := os.Stat(b)
	if aerr == nil && berr == nil {
		return os.SameFile(ai, bi)
	}
	if filepath.Base(a) != filepath.Base(b) {
		return false
	}
	ad, aerr := os.Stat(filepath.Dir(a))
	bd, berr := os.Stat(filepath.Dir(b))
	return aerr == nil && berr == nil && os.SameFile(ad, bd)
}

// corrupt deletes the cache entry the data came from and explains.
func (s *openedSource) corrupt(err error) error {
	if s.cachePath == "" {
		return err
	}
	if s.follow != nil {
		s.follow.Close() // the download holds the entry: stopped first
	}
	if rmErr := s.cache.Remove(s.cacheKey); rmErr != nil {
		return fmt.Errorf("%w; removing the cache entry also failed: %v", err, rmErr)
	}
	return fmt.Errorf("%w; removed it from the cache, run again to download it anew", err)
}

// decode is the source's uncompressed stream, in the format its content
// says (xz, zstd, gzip or raw), checked to start like a disk (MBR or GPT)
// unless forceRaw. close stops the decoder's goroutines.
func decode(src *openedSource, forceRaw bool) (r io.Reader, close func(), err error) {
	dec, err := decoderFor(src.format, src, src.zstdWindow)
	if err != nil {
		return nil, nil, src.decodeErr(err)
	}
	close = func() {}
	if c, ok := dec.(io.Closer); ok && dec != io.Reader(src) {
		rel := &releasing{r: dec, c: c}
		dec, close = rel, rel.close
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

// releasing closes and lets go of the decoder as soon as it reports the
// stream's checked end: its window and buffers (~9 MiB for the factory's
// zstd -18) are not held through the read-back. Read is called by one
// goroutine at a time; close may come from another (cancellation), and
// then waits for no Read: a decoder closed during its Read crashed
// (klauspost/compress's zstd frees its state in Close), so a close that
// comes while a Read runs is done by that Read once it returns, and a
// Read after a close reads nothing.
type releasing struct {
	r       io.Reader // nil after the end (the reading goroutine's alone)
	mu      sync.Mutex
	c       io.Closer // nil once closed
	reading bool      // a Read is in the decoder
	closing bool      // close came during that Read: the Read closes
}

// errDecoderClosed is a Read after the decoder was closed (cancelled).
var errDecoderClosed = errors.New("the image decoder was closed")

func (d *releasing) Read(p []byte) (int, error) {
	if d.r == nil {
		return 0, io.EOF
	}
	d.mu.Lock()
	if d.c == nil {
		d.mu.Unlock()
		return 0, errDecoderClosed
	}
	d.reading = true
	d.mu.Unlock()
	n, err := d.r.Read(p)
	d.mu.Lock()
	d.reading = false
	closing := d.closing
	d.mu.Unlock()
	if err == io.EOF || closing {
		d.close()
	}
	if err == io.EOF {
		d.r = nil
	}
	return n, err
}

func (d *releasing) close() {
	d.mu.Lock()
	if d.reading {
		d.closing = true
		d.mu.Unlock()
		return
	}
	c := d.c
	d.c = nil
	d.mu.Unlock()
	if c != nil {
		c.Close()
	}
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
