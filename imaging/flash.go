package imaging

// FlashAll: the options, the per-card results and the sequence from source
// to verified cards (source.go, pipeline.go, verify.go).

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/talosflash/talosflash/internal/humanbytes"
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
	// Stream, when set, is the image itself, decoded, as another process
	// sends it (the elevated child's stdin: app/elevate, OpenDecoded in
	// the sender): raw bytes that must start like a disk; Path and URL are
	// ignored. StreamSize is its size as the sender declared it (-1
	// unknown). StreamSum, asked once the stream ended, is the SHA-256 the
	// sender computed of what it sent: a card whose bytes hash otherwise
	// fails before its first MiB (the partition table) is written.
	Stream     io.Reader
	StreamSize int64
	StreamSum  func() []byte
}

// FlashOptions configures FlashAll.
type FlashOptions struct {
	Source Source
	// Targets are the cards, block devices or regular files, written from
	// one read of the source and one decode (one card is a list of one).
	Targets []string
	// Open opens a target; size is the image's uncompressed size (-1 if
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
	// untouched (headcheck.go). image reads the decoded image at any
	// offset, writing nothing, when the source is a file (a local file or
	// a cache entry, in any format: raw read in place, xz by the blocks
	// covering the range, zstd and gzip decoded from the start up to the
	// range's end); nil for a stream (a first download read as it arrives,
	// NoCache, Source.Stream), whose bytes come once, in order. What
	// CheckHead reads through image is then compared with the flash's own
	// decode as it passes: a difference (the file changed) fails every
	// card with ErrImageChanged before its first MiB is written, so a card
	// gets the bytes that were checked.
	CheckHead func(head []byte, size int64, image io.ReaderAt) error
}

// CardResult is one target of a flash and how it ended: the one form of a
// card's result, from the pipeline through app/plan to the front ends and
// the elevated child's "result" event. A flash is a list of cards (one
// card is a list of one), in the order of its targets.
type CardResult struct {
	Target string // the path as given
	// Bytes and SHA256 are the decoded image written to the card (the same
	// for every card of a flash); 0 and "" when nothing was written.
	Bytes  int64
	SHA256 string
	// Written is the image's bytes this flash put on the card: the units
	// (runs.go) that differed from what it held. Skipped is what the card
	// already held, found by a direct read that is also its verification
	// (not read back): Written + Skipped = Bytes. Zeroed is the zeros
	// written first over the first MiB where the card held anything else
	// (that MiB is written last): writes beside Written, where the image
	// is not zero.
	Written, Skipped, Zeroed int64
	Verified                 bool
	// VerifyMode says how the read-back bypassed the page cache:
	// "O_DIRECT", "fadvise" (fsync + POSIX_FADV_DONTNEED), or "cached" for
	// targets without a file descriptor. Empty when not verified.
	VerifyMode string
	// Notes are what the user should know about the device afterwards
	// (what was unmounted, the warnings of its Close; a target's Notes
	// method), and what later steps add (app/plan: the node's META).
	Notes []string
	// Err says why this card failed (refused, failed to open, a write or
	// verify error, cancelled); nil: written and, unless not asked for,
	// verified.
	Err error
}

// OK says the card was written and ended without an error.
func (c *CardResult) OK() bool { return c.Err == nil && c.SHA256 != "" }

// noter is a target that has something to tell the user once closed
// (devices.Device: what it unmounted, its Close warnings).
type noter interface{ Notes() []string }

const (
	chunkSize = 4 << 20 // write and read-back unit
	poolSize  = 2       // chunks in flight (8 MiB): one decoded into, one written and hashed
	alignment = 4096    // O_DIRECT buffer/offset/size alignment
	// headSize is the start of the image written last: the MBR, the GPT
	// header and partition array (Talos's first partition starts at 1 MiB).
	headSize = 1 << 20
	crcBlock = 4096 // granularity of the mismatch offset
	// cancelGrace is how long a cancelled flash waits for a write in progress.
	cancelGrace = 5 * time.Second
)

// FlashAll writes the source image to every target of opts.Targets from
// one read of the source and one decode: each target has
// its own writer, fsync and read-back, and one that is refused, fails or is
// pulled out does not stop the others. The pipeline runs at the pace of the
// slowest card (they share the chunk pool), so N cards take about the time
// of the slowest alone. The error is for failures before any target was
// opened (source, format, an image that is not a disk); everything after
// is in the per-target results, in the order of the targets.
func FlashAll(ctx context.Context, opts FlashOptions) ([]CardResult, error) {
	names := opts.Targets
	if len(names) == 0 {
		return nil, errors.New("flash: no target")
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
	if stream, err = checkHead(stream, opts.CheckHead, src.size, newImageAt(src)); err != nil {
		return nil, err
	}

	// A target that is the source is a mistake in the command: refused
	// before any card is touched.
	for _, name := range names {
		if err := src.notTarget(name); err != nil {
			return nil, err
		}
	}
	// One target is one card, and nothing in use is a target.
	if err := checkTargets(names); err != nil {
		return nil, err
	}
	results := make([]CardResult, len(names))
	var cards []*card
	for i, name := range names {
		results[i].Target = name
		t, limit, notes, err := openTarget(opts, name, src.size)
		if err != nil {
			results[i].Err, results[i].Notes = err, notes
			continue
		}
		c := &card{idx: i, t: t, limit: limit, writeAt: positionalWriter(t)}
		if multi {
			c.name = name
		}
		cards = append(cards, c)
	}
	if len(cards) == 0 {
		return results, nil
	}
	defer closeCards(cards, results) // every card closed, its notes taken, before the results are returned

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
			c.verifyAndClose(ctx, w, opts, &results[c.idx])
		}()
	}
	wg.Wait()
	return results, nil
}

// closeCards closes what is still open (a card abandoned in a hung write
// is closed in the background, never waited for) and takes each closed
// target's notes into its result.
func closeCards(cards []*card, results []CardResult) {
	for _, c := range cards {
		if c.abandoned.Load() {
			// What its Open did (the mounts it unmounted) is known now; its
			// Close may hang like its write and is never waited for.
			results[c.idx].Notes = append(results[c.idx].Notes, notesOf(c.t)...)
			go c.t.Close()
			continue
		}
		if !c.closed {
			c.t.Close()
		}
		results[c.idx].Notes = append(results[c.idx].Notes, notesOf(c.t)...)
	}
}

// notesOf is what target t has to tell the user (nil: nothing).
func notesOf(t Target) []string {
	if n, ok := t.(noter); ok {
		return n.Notes()
	}
	return nil
}

// closeRefused closes a target opened and then refused, and returns its
// notes (what its Open did, e.g. unmounted the card).
func closeRefused(t Target) []string {
	t.Close()
	return notesOf(t)
}

// card is one target of a flash.
type card struct {
	idx   int
	name  string // reported in progress when there are several cards
	t     Target
	limit int64 // >0: most bytes the target takes
	// writeAt writes the image's first MiB last (zeros stand in for it
	// until the rest is written and synced); nil when the target can only
	// be written in order.
	writeAt func(p []byte, off int64) (int, error)
	// Runs (writeAt set, runs.go): each chunk is read from the card first
	// and only the units that differ are written. rbuf is that direct
	// read; held are the units it found already there (verified by it: not
	// read back); head is what the card held in the first MiB;
	// probeWait/probeGap back off reading first where the card keeps
	// holding other data (a card full of old data pays a few reads);
	// zerosFrom/zerosTo is a hole of a regular file, read as zeros.
	rbuf                []byte
	held                unitSet
	head                headState
	probeWait, probeGap int
	zerosFrom, zerosTo  int64
	written             atomic.Int64 // every byte written, zeroed included
	zeroed              atomic.Int64 // the head's zeros (zeroHead)
	sinceSync           int64
	regular, grow       bool  // a regular file; one to grow to the image's size at the end
	err                 error // set by the write stage (or the common failure)
	closed              bool
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
func (c *card) verifyAndClose(ctx context.Context, w *written, opts FlashOptions, res *CardResult) {
	res.Bytes, res.SHA256 = w.n, hex.EncodeToString(w.sum)
	// Every unit the card did not hold was written, by its data or, where
	// the image's head is zero, by the zeros written first: each image
	// byte once, however many writes it took.
	res.Skipped, res.Zeroed = c.held.heldBytes(w.n, writeUnit), c.zeroed.Load()
	res.Written = w.n - res.Skipped
	if opts.Verify {
		depth := 3 // chunks' worth of the write stage's pool in flight for this read-back
		if c.name != "" {
			depth = 2 // several cards share the pool's units
		}
		mode, err := verifyTarget(ctx, c.t, w, c.held, newMeter(opts.Progress, StageVerify, w.n, false).forTarget(c.name), depth)
		if err != nil {
			if errors.Is(err, errStalled) {
				c.abandoned.Store(true) // its Close may hang too: never waited for
			}
			res.Err = err
			return
		}
		res.Verified, res.VerifyMode = true, mode
	}
	c.closed = true
	if err := c.t.Close(); err != nil {
		res.Err = fmt.Errorf("close target: %w", err)
		return
	}
	newMeter(opts.Progress, StageDone, w.n, false).forTarget(c.name).update(w.n, true)
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
// does not fit is refused before anything is written; the notes are then
// those of the target opened and closed again.
func openTarget(opts FlashOptions, name string, size int64) (Target, int64, []string, error) {
	limit := opts.MaxSize
	if limit > 0 && size > limit {
		return nil, 0, nil, fmt.Errorf("%w: the image needs %s, the limit is %s", ErrTargetTooSmall, humanbytes.Exact(size), humanbytes.Exact(limit))
	}
	open := opts.Open
	if open == nil {
		open = OpenFile
	}
	t, err := open(name, size)
	if err != nil {
		return nil, 0, nil, err
	}
	capacity, ok, err := targetCapacity(t)
	if err != nil {
		return nil, 0, closeRefused(t), err
	}
	if ok && (limit <= 0 || capacity < limit) {
		limit = capacity
	}
	if limit > 0 && size > limit {
		return nil, 0, closeRefused(t), fmt.Errorf("%w: the image needs %s, %s holds %s", ErrTargetTooSmall, humanbytes.Exact(size), name, humanbytes.Exact(limit))
	}
	if free, ok := fileTargetFree(t); ok && size > free {
		return nil, 0, closeRefused(t), fmt.Errorf("%w: the image needs %s, the file system of %s has %s free", ErrTargetTooSmall, humanbytes.Exact(size), name, humanbytes.Exact(free))
	}
	return t, limit, nil, nil
}
