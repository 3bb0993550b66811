package imaging

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"sync"

	"github.com/talosflash/talosflash/internal/humanbytes"
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
	// taken is how far the reader has been given the file; a restart that rewrites below it would
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
		g.spliced = fmt.Errorf("%w (from byte %d; %s were already given)", errSpliced, n, humanbytes.Exact(g.taken))
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
}

// errShortImage: the file ends before the bytes its download announced
// (truncated under us): never waited on, it would not grow.
var errShortImage = fmt.Errorf("%w: the image file is shorter than its download announced", ErrDownload)

func (r *follower) Read(p []byte) (int, error) {
	g := r.g
	g.mu.Lock()
	for !g.done && (g.f == nil || r.off >= g.size) {
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
			rerr = fmt.Errorf("%w (%s read, %s announced)", errShortImage, humanbytes.Exact(r.off), humanbytes.Exact(size))
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
