package imaging

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
)

// growing is a cache entry being downloaded, read while it grows: the
// first flash of an image writes the card as the bytes arrive, from one
// read of the network that also fills the cache. The reader follows the
// partial file (one inode from its creation to its rename into place:
// resumes and restarts rewrite it in place) and ends only when the
// download is whole, checked and committed (io.EOF), or failed (its
// error): a cache entry is never trusted before it is whole, and a card
// is never finished from less.
type growing struct {
	mu    sync.Mutex
	cond  *sync.Cond
	f     *os.File // the partial (then the entry), read-only
	size  int64    // bytes of f that hold what the server sent
	total int64    // the download's size once announced, else -1
	done  bool
	err   error // the download's failure, when done
	// taken is how far a reader (or the feed to another process's reader)
	// has been given the file; a restart that rewrites below it would
	// splice the old content's start onto the new one's rest: spliced.
	taken   int64
	spliced error // errSpliced with where, once a rewrite went below taken
}

// errSpliced: a restarted download sent other bytes than the first
// answer where its reader had already taken them (the image changed on
// the server): the reader's bytes and the rest would not be one image.
var errSpliced = fmt.Errorf("%w: the image changed on the server during the download: the restarted download differs from the bytes already written: run the flash again", ErrDownload)

func newGrowing() *growing {
	g := &growing{total: -1}
	g.cond = sync.NewCond(&g.mu)
	return g
}

// attach sets the file that grows (Fetch, once the partial is open).
func (g *growing) attach(f *os.File) {
	g.mu.Lock()
	g.f = f
	g.mu.Unlock()
	g.cond.Broadcast()
}

// advance says the file holds n bytes from its start (a restart from 0
// shrinks it: the reader then waits until the file passes it again).
func (g *growing) advance(n, total int64) {
	g.mu.Lock()
	if n < g.taken && g.spliced == nil {
		g.spliced = fmt.Errorf("%w (from byte %d; %d bytes were already given)", errSpliced, n, g.taken)
	}
	g.size = n
	if total >= 0 {
		g.total = total
	}
	g.mu.Unlock()
	g.cond.Broadcast()
}

// finish ends the download: err nil means whole, checked and committed.
func (g *growing) finish(err error) {
	g.mu.Lock()
	g.done, g.err = true, err
	g.mu.Unlock()
	g.cond.Broadcast()
}

func (g *growing) announced() int64 {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.total
}

// follower reads a growing download from its start.
type follower struct {
	g      *growing
	off    int64
	cancel context.CancelFunc // stops the download (Close before the end)
	wait   chan struct{}      // closed when the download returned
	path   string             // the entry once committed
	// ctx, when set, ends a Read waiting for bytes (the elevated child's
	// feed may stall for ever; its cancel must still stop the flash).
	ctx context.Context
}

// errShortImage: the file ends before the bytes its download announced
// (truncated, or a feed that lies): never waited on, it would not grow.
var errShortImage = fmt.Errorf("%w: the image file is shorter than its download announced", ErrDownload)

// watch wakes r's waits when its context ends; stop releases it.
func (r *follower) watch() (stop func() bool) {
	if r.ctx == nil {
		return func() bool { return false }
	}
	g := r.g
	return context.AfterFunc(r.ctx, func() {
		// Under the lock: a waiter between its check and Wait sees it.
		g.mu.Lock()
		g.cond.Broadcast()
		g.mu.Unlock()
	})
}

func (r *follower) ctxErr() error {
	if r.ctx == nil {
		return nil
	}
	return r.ctx.Err()
}

func (r *follower) Read(p []byte) (int, error) {
	if err := r.ctxErr(); err != nil {
		return 0, err
	}
	g := r.g
	stop := r.watch()
	defer stop()
	g.mu.Lock()
	for !g.done && (g.f == nil || r.off >= g.size) {
		if err := r.ctxErr(); err != nil {
			g.mu.Unlock()
			return 0, err
		}
		g.cond.Wait()
	}
	if g.spliced != nil {
		err := g.spliced
		g.mu.Unlock()
		return 0, err
	}
	f, size, done, err := g.f, g.size, g.done, g.err
	if r.off < size && f != nil {
		g.taken = max(g.taken, min(size, r.off+int64(len(p))))
	}
	g.mu.Unlock()
	if r.off >= size || f == nil {
		if done && err == nil {
			return 0, io.EOF
		}
		return 0, err
	}
	n, rerr := f.ReadAt(p[:min(int64(len(p)), size-r.off)], r.off)
	g.mu.Lock()
	spliced := g.spliced // rewritten while we read it
	g.mu.Unlock()
	if spliced != nil {
		return 0, spliced
	}
	r.off += int64(n)
	if rerr == io.EOF {
		// Only the download says where the file ends, but it said the
		// file holds size bytes: fewer is an error, not a wait (the
		// bytes were written before they were announced).
		rerr = nil
		if n == 0 {
			rerr = fmt.Errorf("%w (%d bytes read, %d announced)", errShortImage, r.off, size)
		}
	}
	return n, rerr
}

// Close stops a download the flash no longer reads (the partial stays,
// resumable) and waits for it to return.
func (r *follower) Close() error {
	r.cancel()
	<-r.wait
	r.g.mu.Lock()
	f := r.g.f
	r.g.mu.Unlock()
	if f != nil {
		f.Close()
	}
	return nil
}

// FetchStream is Fetch read while it downloads: the returned reader yields
// the entry's bytes as they arrive and ends (io.EOF) only once the entry
// is whole, checked and in place; path is then its path. A cached entry
// is simply read. Close stops the download if it is still running.
func (c *Cache) fetchStream(ctx context.Context, httpClient *http.Client, url, key string, progress ProgressFunc) *follower {
	ctx, cancel := context.WithCancel(ctx)
	g := newGrowing()
	r := &follower{g: g, cancel: cancel, wait: make(chan struct{})}
	go func() {
		defer close(r.wait)
		path, err := c.fetch(ctx, httpClient, url, key, progress, g)
		if err == nil && g.f == nil {
			// Found whole in the cache (or finished by another process).
			f, oerr := c.Open(key)
			if oerr == nil {
				st, serr := f.Stat()
				if serr == nil {
					g.attach(f)
					g.advance(st.Size(), st.Size())
				} else {
					f.Close()
					oerr = serr
				}
			}
			err = oerr
		}
		r.path = path
		g.finish(err)
	}()
	return r
}

// Growing is an image file another process is still downloading (the
// elevated child reads what the user's process downloads): Source.Growing
// with Source.Path reads the file as it grows and ends only when Finish
// says it is whole. The feed of sizes comes from the downloading process
// (WriteFeed there, ReadFeed here).
type Growing struct{ g *growing }

// NewGrowing is a file of which nothing is known to be there yet.
func NewGrowing() *Growing { return &Growing{g: newGrowing()} }

// ReadFeed applies the feed lines of r ("size N", then "done" or
// "failed: why") until it ends. A feed that ends without "done" finishes
// the file with an error (the download, or its process, stopped); it
// returns whether the feed said "done".
func (g *Growing) ReadFeed(r io.Reader) bool {
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "size "):
			n, err := strconv.ParseInt(strings.TrimPrefix(line, "size "), 10, 64)
			if err == nil && n >= 0 {
				g.g.advance(n, -1)
			}
		case line == "done":
			g.g.finish(nil)
			return true
		case strings.HasPrefix(line, "failed: "):
			g.g.finish(fmt.Errorf("%w: %s", ErrDownload, strings.TrimPrefix(line, "failed: ")))
			return false
		}
	}
	g.g.finish(fmt.Errorf("%w: the download stopped before the image was whole", ErrDownload))
	return false
}

// Download is a cache entry being fetched in the background, for a reader
// in another process (the elevated child): StartDownload, Partial (the
// file to give it), WriteFeed (its sizes as they grow), Wait.
type Download struct {
	g       *growing
	cancel  context.CancelFunc
	done    chan struct{}
	path    string
	err     error
	partial string
}

// StartDownload fetches key as Fetch does, in the background.
func (c *Cache) StartDownload(ctx context.Context, httpClient *http.Client, url, key string, progress ProgressFunc) *Download {
	ctx, cancel := context.WithCancel(ctx)
	d := &Download{g: newGrowing(), cancel: cancel, done: make(chan struct{})}
	if p, err := c.Path(key); err == nil {
		d.partial = p + partialSuffix
	}
	go func() {
		defer close(d.done)
		d.path, d.err = c.fetch(ctx, httpClient, url, key, progress, d.g)
		d.g.finish(d.err)
	}()
	return d
}

// Partial waits until the download has its file and returns its path, to
// be read as it grows; growing is false when the entry was found whole in
// the cache (the path is then the entry's, nothing to follow).
func (d *Download) Partial() (path string, growing bool, err error) {
	g := d.g
	g.mu.Lock()
	for g.f == nil && !g.done {
		g.cond.Wait()
	}
	attached, done := g.f != nil, g.done
	g.mu.Unlock()
	if attached {
		return d.partial, true, nil
	}
	<-d.done
	if done && d.err == nil {
		return d.path, false, nil
	}
	return "", false, d.err
}

// WriteFeed writes the download's sizes to w as they grow, then "done"
// once the entry is whole, checked and committed (or "failed: ..."); it
// returns the download's outcome. A write error (the reader is gone)
// stops the feed, not the download: the caller Waits or Cancels.
func (d *Download) WriteFeed(w io.Writer) (string, error) {
	g := d.g
	var sent int64 = -1
	for {
		g.mu.Lock()
		for !g.done && g.size == sent {
			g.cond.Wait()
		}
		size, done, spliced := g.size, g.done, g.spliced
		if size > g.taken {
			g.taken = size // the reader may take all of it
		}
		g.mu.Unlock()
		if spliced != nil {
			fmt.Fprintf(w, "failed: %s\n", spliced)
			return "", spliced
		}
		if size != sent {
			if _, err := fmt.Fprintf(w, "size %d\n", size); err != nil {
				return "", err
			}
			sent = size
		}
		if done {
			break
		}
	}
	<-d.done
	if d.err != nil {
		fmt.Fprintf(w, "failed: %s\n", strings.ReplaceAll(d.err.Error(), "\n", " "))
		return "", d.err
	}
	fmt.Fprintf(w, "done\n")
	return d.path, nil
}

// Wait waits for the download: the entry's path once whole, checked and
// in place, or its failure.
func (d *Download) Wait() (string, error) {
	<-d.done
	return d.path, d.err
}

// Cancel stops the download (the partial stays, resumable).
func (d *Download) Cancel() { d.cancel(); <-d.done }
