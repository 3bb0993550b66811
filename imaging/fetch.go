package imaging

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"hash"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/talosflash/talosflash/internal/humanbytes"
)

// ErrNotFound is matched (errors.Is) by an *HTTPError for a 404.
var ErrNotFound = errors.New("image not found")

// errStall is returned when no byte arrived within the idle timeout.
var errStall = errors.New("download stalled")

// ErrDownload is matched by every download failure that is the network's or
// the server's (retries exhausted, stall, reset, refused, HTTP error), as
// opposed to a cancel or a corrupt image: the CLI maps it to its network
// exit code.
var ErrDownload = errors.New("image download failed")

// errRestart asks for a download to start again from byte 0: the server
// could not prove that what it would send continues the partial copy (no
// validator, a different one, 416, a size that does not fit).
var errRestart = errors.New("the partial download cannot be resumed")

// ErrTooLarge is matched when a download exceeds the cache's size bound or
// the free space of the cache's file system.
var ErrTooLarge = errors.New("download too large")

// downloadFailed marks err as a download failure, keeping its chain.
func downloadFailed(err error) error {
	if err == nil || errors.Is(err, ErrDownload) || errors.Is(err, ErrCache) || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	return fmt.Errorf("%w: %w", ErrDownload, err)
}

// HTTPError is a non-success HTTP answer from the image server.
type HTTPError struct {
	URL        string
	StatusCode int
	Status     string
	Body       string // the start of the server's plain-text answer, one line
}

func (e *HTTPError) Error() string {
	said := ""
	if e.Body != "" {
		said = ": " + e.Body
	}
	if e.StatusCode == http.StatusNotFound {
		if id, version, file, ok := splitImageURL(e.URL); ok {
			return fmt.Sprintf("Image Factory has no %s for schematic %s, Talos %s (HTTP 404 from %s%s)", file, id, version, e.URL, said)
		}
		return fmt.Sprintf("image not found (HTTP 404 from %s%s)", e.URL, said)
	}
	return fmt.Sprintf("download %s: server answered %s%s", e.URL, e.Status, said)
}

// maxErrorBody bounds how much of an error answer is read and shown.
const maxErrorBody = 200

// errorBody is the start of an error answer as one printable line.
func errorBody(r io.Reader) string {
	b, _ := io.ReadAll(io.LimitReader(r, maxErrorBody))
	line := strings.Join(strings.Fields(strings.ToValidUTF8(string(b), "?")), " ")
	return strings.Map(func(c rune) rune {
		if c < ' ' || c == 0x7f {
			return '?'
		}
		return c
	}, line)
}

// Is makes a 404 match ErrNotFound.
func (e *HTTPError) Is(target error) bool {
	return target == ErrNotFound && e.StatusCode == http.StatusNotFound
}

// splitImageURL extracts schematic ID, version and file from an Image
// Factory URL .../image/<id>/<version>/<file>.
func splitImageURL(raw string) (id, version, file string, ok bool) {
	u, err := url.Parse(raw)
	if err != nil {
		return "", "", "", false
	}
	parts := strings.Split(strings.Trim(u.Path, "/"), "/")
	if len(parts) < 4 || parts[len(parts)-4] != "image" {
		return "", "", "", false
	}
	n := len(parts)
	return parts[n-3], parts[n-2], parts[n-1], true
}

// permanentError marks a failure that retrying cannot fix.
type permanentError struct{ err error }

func (e permanentError) Error() string { return e.err.Error() }
func (e permanentError) Unwrap() error { return e.err }

func permanent(err error) error { return permanentError{err} }

// retryable reports whether a failed attempt may succeed when repeated:
// network errors, stalls, truncated bodies and 5xx, but not 4xx, local
// I/O failures or corrupt data.
func retryable(err error) bool {
	var pe permanentError
	var he *HTTPError
	switch {
	case err == nil, errors.As(err, &pe), errors.Is(err, ErrCorruptImage), errors.Is(err, ErrTooLarge), errors.Is(err, ErrCache),
		errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return false
	case errors.As(err, &he):
		return he.StatusCode >= 500
	}
	return true
}

// Download tuning defaults (Cache fields override them).
const (
	DefaultRetries     = 5
	DefaultRetryDelay  = time.Second
	DefaultIdleTimeout = 30 * time.Second
	maxRetryDelay      = 30 * time.Second

	// DefaultMaxDownload bounds a download (and what a server may announce):
	// Talos images are 0.3 GiB compressed, 1.3 GiB raw.
	DefaultMaxDownload = 4 << 30
	// DefaultBuildTimeout bounds the wait for response headers: Image
	// Factory builds a new image before it answers, which takes minutes.
	DefaultBuildTimeout = 30 * time.Minute
)

// buildNotice is how long headers may take before progress says the
// factory is building the image (a variable for tests).
var buildNotice = 2 * time.Second

// fetcher issues (range) GETs for one URL and remembers the validators of
// the first answer so resumed requests ask for the same content.
type fetcher struct {
	client   *http.Client
	url      string
	idle     time.Duration
	retries  int
	delay    time.Duration
	etag     string
	modified string
	total    int64 // full size, -1 unknown
	max      int64 // most bytes accepted
	build    time.Duration
	building func() // called once per request when headers are late
}

func newFetcher(c *Cache, hc *http.Client, url string) *fetcher {
	if hc == nil {
		hc = http.DefaultClient
	}
	f := &fetcher{client: hc, url: url, idle: DefaultIdleTimeout, retries: DefaultRetries, delay: DefaultRetryDelay, total: -1,
		max: DefaultMaxDownload, build: DefaultBuildTimeout}
	if c != nil {
		if c.MaxDownload > 0 {
			f.max = c.MaxDownload
		}
		if c.BuildTimeout > 0 {
			f.build = c.BuildTimeout
		}
		if c.IdleTimeout > 0 {
			f.idle = c.IdleTimeout
		}
		if c.Retries > 0 {
			f.retries = c.Retries
		} else if c.Retries < 0 {
			f.retries = 0
		}
		if c.RetryDelay > 0 {
			f.delay = c.RetryDelay
		}
	}
	return f
}

// backoff waits before retry attempt n (1-based), or returns ctx's error.
func (f *fetcher) backoff(ctx context.Context, n int) error {
	d := f.delay << (n - 1)
	if d > maxRetryDelay || d <= 0 {
		d = maxRetryDelay
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// response is an open body positioned at start.
type response struct {
	body  io.ReadCloser
	start int64 // offset of the first body byte in the file
	total int64 // full file size, -1 unknown
}

// get asks for the file from offset off. The server may answer 206 (start
// == off) or 200 (start == 0, e.g. the file changed or Range unsupported).
// A 206 is only accepted when it carries the validator the copy was saved
// with; otherwise, and for a 416, get returns errRestart. Headers may take
// up to the build timeout (the factory builds a new image first); the body
// is then guarded by the idle timeout.
func (f *fetcher) get(ctx context.Context, off int64) (*response, error) {
	if off > 0 && f.validator() == "" {
		return nil, errRestart // nothing to prove a 206 continues our copy
	}
	ctx, cancel := context.WithCancel(ctx)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, f.url, nil)
	if err != nil {
		cancel()
		return nil, permanent(fmt.Errorf("download %s: %w", f.url, err))
	}
	// identity: byte counts and ranges must refer to the file itself.
	req.Header.Set("Accept-Encoding", "identity")
	if off > 0 {
		req.Header.Set("Range", "bytes="+strconv.FormatInt(off, 10)+"-")
		req.Header.Set("If-Range", f.validator())
	}
	idle := &idleBody{cancel: cancel}
	idle.timer = time.AfterFunc(f.build, idle.fire)
	idle.d = f.idle
	var notice *time.Timer
	if f.building != nil {
		notice = time.AfterFunc(buildNotice, f.building)
	}
	resp, err := f.client.Do(req)
	if notice != nil {
		notice.Stop()
	}
	if err != nil {
		idle.stop()
		if idle.stalled.Load() {
			err = fmt.Errorf("%w: no answer within %v", errStall, f.build)
		}
		return nil, fmt.Errorf("download %s: %w", f.url, err)
	}
	idle.timer.Reset(f.idle) // the body flows: from now on, the idle timeout
	idle.body = resp.Body
	r := &response{body: idle, total: -1}
	switch resp.StatusCode {
	case http.StatusOK:
		r.total = resp.ContentLength
	case http.StatusPartialContent:
		start, total, ok := parseContentRange(resp.Header.Get("Content-Range"))
		if !ok || start != off || off == 0 {
			idle.Close()
			return nil, fmt.Errorf("download %s: asked for bytes from %d, got Content-Range %q: %w", f.url, off, resp.Header.Get("Content-Range"), errRestart)
		}
		if !f.sameValidator(resp.Header) {
			idle.Close()
			return nil, fmt.Errorf("download %s: the server's answer does not carry the validator the partial copy was saved with: %w", f.url, errRestart)
		}
		r.start, r.total = start, total
		if resp.ContentLength >= 0 && total >= 0 && resp.ContentLength != total-start {
			idle.Close()
			return nil, fmt.Errorf("download %s: Content-Length %d does not match Content-Range %q", f.url, resp.ContentLength, resp.Header.Get("Content-Range"))
		}
	case http.StatusRequestedRangeNotSatisfiable:
		idle.Close()
		// Whatever the partial copy is, the server does not have it.
		return nil, fmt.Errorf("download %s: server refused range from %d (%s): %w", f.url, off, resp.Status, errRestart)
	default:
		body := errorBody(idle)
		idle.Close()
		return nil, &HTTPError{URL: f.url, StatusCode: resp.StatusCode, Status: resp.Status, Body: body}
	}
	if r.total > f.max {
		idle.Close()
		return nil, permanent(fmt.Errorf("download %s: the server announces %s, more than the %s a Talos image can be: %w", f.url, humanbytes.Exact(r.total), humanbytes.Exact(f.max), ErrTooLarge))
	}
	if r.start == 0 {
		f.etag, f.modified = resp.Header.Get("ETag"), resp.Header.Get("Last-Modified")
	} else if f.total >= 0 && r.total >= 0 && r.total != f.total {
		idle.Close()
		return nil, fmt.Errorf("download %s: file size changed from %d to %d: %w", f.url, f.total, r.total, errRestart)
	}
	f.total = r.total
	return r, nil
}

// validator is what a resumed request sends in If-Range: a strong ETag,
// else Last-Modified; "" when the copy was saved without either.
func (f *fetcher) validator() string {
	switch {
	case f.etag != "" && !strings.HasPrefix(f.etag, "W/"):
		return f.etag
	case f.modified != "":
		return f.modified
	}
	return ""
}

// sameValidator reports whether a 206 carries the validator sent in If-Range.
func (f *fetcher) sameValidator(h http.Header) bool {
	if f.etag != "" && !strings.HasPrefix(f.etag, "W/") {
		return h.Get("ETag") == f.etag
	}
	return f.modified != "" && h.Get("Last-Modified") == f.modified
}

func parseContentRange(v string) (start, total int64, ok bool) {
	// bytes START-END/TOTAL (TOTAL may be *)
	v, found := strings.CutPrefix(v, "bytes ")
	if !found {
		return 0, 0, false
	}
	rng, tot, found := strings.Cut(v, "/")
	if !found {
		return 0, 0, false
	}
	s, e, found := strings.Cut(rng, "-")
	if !found {
		return 0, 0, false
	}
	start, err1 := strconv.ParseInt(s, 10, 64)
	end, err2 := strconv.ParseInt(e, 10, 64)
	if err1 != nil || err2 != nil || end < start {
		return 0, 0, false
	}
	total = -1
	if tot != "*" {
		t, err := strconv.ParseInt(tot, 10, 64)
		if err != nil || t <= end {
			return 0, 0, false
		}
		total = t
	}
	return start, total, true
}

// idleBody cancels its request when no data arrived for d, and reports
// that as errStall rather than a context error.
type idleBody struct {
	body    io.ReadCloser
	timer   *time.Timer
	d       time.Duration
	cancel  context.CancelFunc
	stalled atomic.Bool
}

func (b *idleBody) fire() {
	b.stalled.Store(true)
	b.cancel()
}

func (b *idleBody) stop() {
	b.timer.Stop()
	b.cancel()
}

func (b *idleBody) Read(p []byte) (int, error) {
	n, err := b.body.Read(p)
	if n > 0 {
		b.timer.Reset(b.d)
	}
	if err != nil && err != io.EOF && b.stalled.Load() {
		err = fmt.Errorf("%w: no data for %v", errStall, b.d)
	}
	return n, err
}

func (b *idleBody) Close() error {
	b.stop()
	if b.body == nil {
		return nil
	}
	return b.body.Close()
}

// httpStream is a read-once stream of a remote file for --no-cache mode:
// on transient failures it reconnects with a Range request and continues
// where it left off (a 206 carrying the first answer's validator); when
// the server answers 200 instead (no validator, or the content changed)
// the restarted body's first bytes must hash as the ones already
// delivered, else the stream fails as a splice: its reader receives a
// prefix of exactly one answer's body, or an error.
//
// Read is called by one goroutine (the decoder's); Close may come from
// another while a Read is blocked: it cancels the stream's context, so the
// Read ends at once and does not reconnect.
type httpStream struct {
	ctx      context.Context
	cancel   context.CancelFunc
	f        *fetcher
	mu       sync.Mutex // held by Read; guards resp against Close
	resp     *response
	off      int64
	failures int
	noRange  bool      // the server can't resume: ask from 0 and skip
	sum      hash.Hash // of the off bytes delivered
}

func newHTTPStream(ctx context.Context, f *fetcher) *httpStream {
	ctx, cancel := context.WithCancel(ctx)
	return &httpStream{ctx: ctx, cancel: cancel, f: f, sum: sha256.New()}
}

func (s *httpStream) Read(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for {
		if s.resp == nil {
			if err := s.open(); err != nil {
				return 0, err
			}
		}
		n, err := s.resp.body.Read(p)
		s.off += int64(n)
		s.sum.Write(p[:n])
		if err == nil || n > 0 && err != io.EOF {
			return n, nil
		}
		if err == io.EOF {
			if s.resp.total >= 0 && s.off < s.resp.total {
				err = fmt.Errorf("download %s: %w after %s of %s", s.f.url, io.ErrUnexpectedEOF, humanbytes.Exact(s.off), humanbytes.Exact(s.resp.total))
			} else {
				return n, io.EOF
			}
		}
		s.resp.body.Close()
		s.resp = nil
		if err := s.retry(err); err != nil {
			return n, err
		}
		if n > 0 {
			return n, nil
		}
	}
}

func (s *httpStream) retry(err error) error {
	if s.ctx.Err() != nil {
		return s.ctx.Err()
	}
	if !retryable(err) || s.failures >= s.f.retries {
		if !strings.Contains(err.Error(), s.f.url) {
			err = fmt.Errorf("download %s: %w", s.f.url, err)
		}
		if s.failures > 0 {
			err = fmt.Errorf("%w (gave up after %d attempts)", err, s.failures+1)
		}
		return downloadFailed(err)
	}
	s.failures++
	return s.f.backoff(s.ctx, s.failures)
}

func (s *httpStream) open() error {
	for {
		from := s.off
		if s.noRange {
			from = 0
		}
		resp, err := s.f.get(s.ctx, from)
		if errors.Is(err, errRestart) && !s.noRange {
			s.noRange = true
			continue
		}
		if err == nil && resp.start < s.off {
			// 200 to a range request: pass over what was delivered, if
			// it is the same bytes.
			err = s.skipDelivered(resp)
		}
		if err == nil {
			s.resp = resp
			return nil
		}
		if err := s.retry(err); err != nil {
			return err
		}
	}
}

// skipDelivered reads the off bytes already delivered from a restarted
// answer: the same bytes (by hash) continue the stream after them; other
// bytes are a splice (permanent: another try would not unsend them).
func (s *httpStream) skipDelivered(resp *response) error {
	h := sha256.New()
	if _, err := io.CopyN(h, resp.body, s.off); err != nil {
		resp.body.Close()
		if err == io.EOF {
			err = io.ErrUnexpectedEOF // the restart ends before what was delivered
		}
		return fmt.Errorf("download %s: restarted from byte 0: %w", s.f.url, err)
	}
	if !bytes.Equal(h.Sum(nil), s.sum.Sum(nil)) {
		resp.body.Close()
		return permanent(fmt.Errorf("%w (the first %s, already written, are not the restarted download's)", errSpliced, humanbytes.Exact(s.off)))
	}
	resp.start = s.off
	return nil
}

func (s *httpStream) Close() error {
	s.cancel() // first: unblocks a Read in progress
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.resp != nil {
		err := s.resp.body.Close()
		s.resp = nil
		return err
	}
	return nil
}
