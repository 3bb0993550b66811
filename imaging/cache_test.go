package imaging

import (
	"context"
	"errors"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/talosflash/talosflash/factory/factorytest"
	"github.com/talosflash/talosflash/imaging/imagetest"
)

const (
	testSchematic = "376567988ad370138ad8b2698212367b8edcb69b5fd68c80be1f2ec7d603b4ba"
	testVersion   = "v1.14.5"
	testFile      = "metal-arm64.raw.xz"
)

// newFactory serves the test image; returns the server, its URL path and
// a cache with fast retries.
func newFactory(t *testing.T, data []byte) (*factorytest.Server, string, *Cache) {
	t.Helper()
	srv := factorytest.New(t)
	srv.AddImage(testSchematic, testVersion, testFile, data)
	c := &Cache{Dir: t.TempDir(), Retries: 3, RetryDelay: time.Millisecond, IdleTimeout: 300 * time.Millisecond}
	return srv, factorytest.ImagePath(testSchematic, testVersion, testFile), c
}

// newStorageFactory is newFactory in object-storage mode, where a download
// can be resumed; it returns the path that serves the bytes.
func newStorageFactory(t *testing.T, data []byte) (*factorytest.Server, string, *Cache) {
	t.Helper()
	srv, path, c := newFactory(t, data)
	srv.SetObjectStorage(true)
	return srv, path, c
}

func fetch(t *testing.T, srv *factorytest.Server, c *Cache) (string, error) {
	t.Helper()
	return c.Fetch(context.Background(), srv.Client(), srv.ImageURL(testSchematic, testVersion, testFile),
		CacheKey(testSchematic, testVersion, testFile), nil)
}

func finalPath(t *testing.T, c *Cache) string {
	t.Helper()
	p, err := c.Path(CacheKey(testSchematic, testVersion, testFile))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func assertFile(t *testing.T, path string, want []byte) {
	t.Helper()
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if sha256Hex(got) != sha256Hex(want) {
		t.Fatalf("%s: %d bytes that differ from the %d expected", path, len(got), len(want))
	}
}

func assertNoEntry(t *testing.T, c *Cache) {
	t.Helper()
	if _, err := os.Stat(finalPath(t, c)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("final cache entry exists after a failed download (%v)", err)
	}
}

func TestFetchCachesAndReuses(t *testing.T) {
	img := testImage(t)
	srv, _, c := newFactory(t, img.XZ)
	var log progressLog
	p, err := c.Fetch(context.Background(), srv.Client(), srv.ImageURL(testSchematic, testVersion, testFile),
		CacheKey(testSchematic, testVersion, testFile), log.fn)
	if err != nil {
		t.Fatal(err)
	}
	assertFile(t, p, img.XZ)
	if !strings.HasPrefix(p, c.Dir) || srv.BytesServed() != int64(len(img.XZ)) {
		t.Fatalf("path %s, served %d", p, srv.BytesServed())
	}
	if last, _ := log.last(StageDownload); last.Done != int64(len(img.XZ)) || last.Total != int64(len(img.XZ)) {
		t.Fatalf("last download progress %+v", last)
	}
	if _, err := os.Stat(p + partialSuffix); !errors.Is(err, os.ErrNotExist) {
		t.Fatal("partial file left behind")
	}
	if _, err := fetch(t, srv, c); err != nil {
		t.Fatal(err)
	}
	if srv.BytesServed() != int64(len(img.XZ)) {
		t.Fatalf("second fetch downloaded again (%d bytes served)", srv.BytesServed())
	}
}

func TestFetchResumesOnlyMissingRange(t *testing.T) {
	img := testImage(t)
	srv, path, c := newStorageFactory(t, img.XZ)
	const first = 300_000
	srv.ResetAfter(path, first)
	noRetry := *c
	noRetry.Retries = -1
	if _, err := fetch(t, srv, &noRetry); err == nil {
		t.Fatal("want an error from a reset download without retries")
	}
	assertNoEntry(t, c)
	st, err := os.Stat(finalPath(t, c) + partialSuffix)
	if err != nil || st.Size() == 0 || st.Size() > first {
		t.Fatalf("partial: %v, %v", st, err)
	}
	have := st.Size()
	before := srv.BytesServed()
	p, err := fetch(t, srv, c)
	if err != nil {
		t.Fatal(err)
	}
	assertFile(t, p, img.XZ)
	if got, want := srv.BytesServed()-before, int64(len(img.XZ))-have; got != want {
		t.Fatalf("resume served %d bytes, want only the missing %d", got, want)
	}
	reqs := srv.RequestsTo(factorytest.StoragePrefix + path)
	last := reqs[len(reqs)-1].Header
	if last.Get("Range") != "bytes="+strconv.FormatInt(have, 10)+"-" || last.Get("If-Range") == "" {
		t.Fatalf("resume request Range %q If-Range %q", last.Get("Range"), last.Get("If-Range"))
	}
}

// Object storage: a cut download resumes where it stopped.
func TestFetchRetriesResetAndStall(t *testing.T) {
	img := testImage(t)
	for _, kind := range []factorytest.FaultKind{factorytest.FaultReset, factorytest.FaultStall, factorytest.FaultShortBody} {
		srv, path, c := newStorageFactory(t, img.XZ)
		srv.Inject(path, factorytest.Fault{Kind: kind, After: 200_000, Times: 1})
		p, err := fetch(t, srv, c)
		if err != nil {
			t.Fatalf("fault %d: %v", kind, err)
		}
		assertFile(t, p, img.XZ)
		reqs := srv.RequestsTo(factorytest.StoragePrefix + path)
		if len(reqs) != 2 || !strings.HasPrefix(reqs[1].Header.Get("Range"), "bytes=") || reqs[1].Header.Get("If-Range") == "" {
			t.Fatalf("fault %d: %d requests, second Range %q; want one resumed retry", kind, len(reqs), reqs[len(reqs)-1].Header.Get("Range"))
		}
	}
}

// The real factory's direct path has no validator and ignores Range: a cut
// download restarts cleanly from byte 0 (no Range asked, nothing spliced).
func TestFetchDirectPathRestartsFromZero(t *testing.T) {
	img := testImage(t)
	for _, kind := range []factorytest.FaultKind{factorytest.FaultReset, factorytest.FaultStall, factorytest.FaultShortBody} {
		srv, path, c := newFactory(t, img.XZ)
		srv.Inject(path, factorytest.Fault{Kind: kind, After: 200_000, Times: 1})
		p, err := fetch(t, srv, c)
		if err != nil {
			t.Fatalf("fault %d: %v", kind, err)
		}
		assertFile(t, p, img.XZ)
		reqs := srv.RequestsTo(path)
		if len(reqs) != 2 || reqs[1].Header.Get("Range") != "" {
			t.Fatalf("fault %d: %d requests, second Range %q; want a plain retry from 0", kind, len(reqs), reqs[len(reqs)-1].Header.Get("Range"))
		}
		if got, want := srv.BytesServed(), int64(200_000+len(img.XZ)); got != want {
			t.Fatalf("fault %d: served %d bytes, want %d (cut + one whole file)", kind, got, want)
		}
	}
}

func TestFetchStallBounded(t *testing.T) {
	img := testImage(t)
	srv, path, c := newFactory(t, img.XZ)
	srv.Inject(path, factorytest.Fault{Kind: factorytest.FaultStall, After: 1000})
	start := time.Now()
	_, err := fetch(t, srv, c)
	if err == nil || !strings.Contains(err.Error(), "stalled") {
		t.Fatalf("got %v, want a stall error", err)
	}
	if n := len(srv.RequestsTo(path)); n != c.Retries+1 {
		t.Fatalf("%d requests, want %d (bounded retries)", n, c.Retries+1)
	}
	if time.Since(start) > 5*time.Second {
		t.Fatalf("took %v", time.Since(start))
	}
	assertNoEntry(t, c)
}

func TestFetchRangeAnsweredWith200Restarts(t *testing.T) {
	img := testImage(t)
	newer := imagetest.New(t, 1<<20, 77, 0) // the file changed on the server
	srv, path, c := newStorageFactory(t, img.XZ)
	srv.ResetAfter(path, 500_000)
	srv.Inject(path, factorytest.Fault{Kind: factorytest.FaultContent, Data: newer.XZ, Times: 1})
	p, err := fetch(t, srv, c)
	if err != nil {
		t.Fatal(err)
	}
	assertFile(t, p, newer.XZ) // not a splice of old prefix + new tail
	reqs := srv.RequestsTo(factorytest.StoragePrefix + path)
	if len(reqs) != 2 || reqs[1].Header.Get("If-Range") == "" {
		t.Fatalf("%d requests; want 2 with If-Range on the second", len(reqs))
	}
}

func TestFetchCorruptOrTruncatedLeavesNoEntry(t *testing.T) {
	img := testImage(t)
	// Every response truncated: bounded retries, then a clear error.
	srv, path, c := newFactory(t, img.XZ)
	srv.Inject(path, factorytest.Fault{Kind: factorytest.FaultShortBody, After: 100_000})
	_, err := fetch(t, srv, c)
	if err == nil || !strings.Contains(err.Error(), "unexpected EOF") {
		t.Fatalf("truncated: got %v", err)
	}
	assertNoEntry(t, c)

	// Bytes corrupted in transit: container check fails, nothing kept.
	srv, path, c = newFactory(t, img.XZ)
	srv.Inject(path, factorytest.Fault{Kind: factorytest.FaultCorrupt, After: int64(len(img.XZ) - 100)})
	_, err = fetch(t, srv, c)
	if !errors.Is(err, ErrCorruptImage) {
		t.Fatalf("corrupt: got %v, want ErrCorruptImage", err)
	}
	assertNoEntry(t, c)
	if _, err := os.Stat(finalPath(t, c) + partialSuffix); !errors.Is(err, os.ErrNotExist) {
		t.Fatal("corrupt partial kept")
	}
}

func TestFetchHTTPErrors(t *testing.T) {
	img := testImage(t)
	srv, path, c := newFactory(t, img.XZ)
	_, err := c.Fetch(context.Background(), srv.Client(), srv.ImageURL(testSchematic, "v9.9.9", testFile), "k/v9.9.9/"+testFile, nil)
	if !errors.Is(err, ErrNotFound) || !strings.Contains(err.Error(), testSchematic) || !strings.Contains(err.Error(), "v9.9.9") {
		t.Fatalf("404: got %v, want ErrNotFound naming schematic and version", err)
	}
	if n := len(srv.RequestsTo(factorytest.ImagePath(testSchematic, "v9.9.9", testFile))); n != 1 {
		t.Fatalf("404 requested %d times, want no retries", n)
	}

	srv.FailPath(path, http.StatusServiceUnavailable, "busy")
	_, err = fetch(t, srv, c)
	var he *HTTPError
	if !errors.As(err, &he) || he.StatusCode != 503 || len(srv.RequestsTo(path)) != c.Retries+1 {
		t.Fatalf("503: got %v after %d requests, want %d", err, len(srv.RequestsTo(path)), c.Retries+1)
	}

	srv.ClearFaults()
	srv.Inject(path, factorytest.Fault{Kind: factorytest.FaultStatus, Status: 502, Times: 1})
	p, err := fetch(t, srv, c)
	if err != nil {
		t.Fatalf("transient 502: %v", err)
	}
	assertFile(t, p, img.XZ)
}

func TestCachePathStaysInside(t *testing.T) {
	c := &Cache{Dir: t.TempDir()}
	for _, key := range []string{"../../etc/passwd", "a/../../b", "", "a//b", "x/y/z.partial", "/abs"} {
		p, err := c.Path(key)
		if err == nil {
			rel, _ := filepath.Rel(c.Dir, p)
			if !filepath.IsLocal(rel) {
				t.Errorf("key %q escapes the cache: %s", key, p)
			}
			continue
		}
	}
	if _, err := c.Path(".."); err == nil {
		t.Error(`key ".." accepted`)
	}
	if got := CacheKey("id/../x", "v1", "f"); strings.Contains(got, "/../") {
		t.Errorf("CacheKey kept a traversal: %s", got)
	}
}

func TestDamagedCacheEntryRefetched(t *testing.T) {
	img := testImage(t)
	srv, _, c := newFactory(t, img.XZ)
	final := finalPath(t, c)
	os.MkdirAll(filepath.Dir(final), 0o755)
	os.WriteFile(final, img.XZ[:len(img.XZ)/2], 0o644) // truncated entry
	p, err := fetch(t, srv, c)
	if err != nil {
		t.Fatal(err)
	}
	assertFile(t, p, img.XZ)
	if srv.BytesServed() != int64(len(img.XZ)) {
		t.Fatalf("served %d", srv.BytesServed())
	}
}

func TestFlashFromFactoryCached(t *testing.T) {
	img := testImage(t)
	srv, _, c := newFactory(t, img.XZ)
	src := Source{URL: srv.ImageURL(testSchematic, testVersion, testFile), Key: CacheKey(testSchematic, testVersion, testFile), Cache: c, HTTPClient: srv.Client()}
	dst := filepath.Join(t.TempDir(), "card.img")
	var log progressLog
	res, err := flashOne(context.Background(), FlashOptions{Source: src, Targets: []string{dst}, Verify: true, Progress: log.fn})
	if err != nil || res.SHA256 != img.SHA256 || imagetest.FileSHA256(t, dst, img.Size) != img.SHA256 {
		t.Fatalf("%+v, %v", res, err)
	}
	if _, n := log.last(StageDownload); n == 0 {
		t.Error("no download progress")
	}
}

func TestFlashCorruptCacheEntryDeleted(t *testing.T) {
	img := testImage(t)
	srv, _, c := newFactory(t, img.XZ)
	final := finalPath(t, c)
	os.MkdirAll(filepath.Dir(final), 0o755)
	bad := append([]byte{}, img.XZ...)
	bad[len(bad)/2] ^= 0xFF // passes the container check, fails the decode
	os.WriteFile(final, bad, 0o644)
	src := Source{URL: srv.ImageURL(testSchematic, testVersion, testFile), Key: CacheKey(testSchematic, testVersion, testFile), Cache: c, HTTPClient: srv.Client()}
	_, err := flashOne(context.Background(), FlashOptions{Source: src, Targets: []string{filepath.Join(t.TempDir(), "card.img")}})
	if !errors.Is(err, ErrCorruptImage) || !strings.Contains(err.Error(), "write stage") || !strings.Contains(err.Error(), "removed it from the cache") {
		t.Fatalf("got %v", err)
	}
	if srv.BytesServed() != 0 {
		t.Fatal("a present entry should have been used without downloading")
	}
	assertNoEntry(t, c)
	// The next run downloads it again and succeeds.
	if _, err := flashOne(context.Background(), FlashOptions{Source: src, Targets: []string{filepath.Join(t.TempDir(), "card.img")}, Verify: true}); err != nil {
		t.Fatal(err)
	}
	if srv.BytesServed() != int64(len(img.XZ)) {
		t.Fatalf("served %d", srv.BytesServed())
	}
}

// --no-cache: with object storage the stream resumes with Range; on the
// direct path it asks again from 0 and skips what it already delivered.
func TestFlashNoCacheStreamsAndResumes(t *testing.T) {
	img := testImage(t)
	for _, storage := range []bool{true, false} {
		srv, path, c := newFactory(t, img.XZ)
		srv.SetObjectStorage(storage)
		srv.ResetAfter(path, 400_000)
		src := Source{URL: srv.ImageURL(testSchematic, testVersion, testFile), NoCache: true, Cache: c, HTTPClient: srv.Client()}
		dst := filepath.Join(t.TempDir(), "card.img")
		var log progressLog
		res, err := flashOne(context.Background(), FlashOptions{Source: src, Targets: []string{dst}, Verify: true, Progress: log.fn})
		if err != nil || res.SHA256 != img.SHA256 || imagetest.FileSHA256(t, dst, img.Size) != img.SHA256 {
			t.Fatalf("storage %v: %+v, %v", storage, res, err)
		}
		served := path
		if storage {
			served = factorytest.StoragePrefix + path
		}
		reqs := srv.RequestsTo(served)
		if len(reqs) != 2 || (reqs[1].Header.Get("Range") != "") != storage {
			t.Fatalf("storage %v: %d requests, second Range %q", storage, len(reqs), reqs[len(reqs)-1].Header.Get("Range"))
		}
		if entries, _ := os.ReadDir(c.Dir); len(entries) != 0 {
			t.Fatalf("--no-cache wrote %d entries to the cache dir", len(entries))
		}
		if p, n := log.last(StageWrite); n == 0 || p.Done != img.Size {
			t.Fatalf("last write progress %+v", p)
		}
	}
}

func TestFlashNoCacheCorruptStream(t *testing.T) {
	img := testImage(t)
	srv, path, c := newFactory(t, img.XZ)
	srv.Inject(path, factorytest.Fault{Kind: factorytest.FaultCorrupt, After: int64(len(img.XZ) / 2)})
	src := Source{URL: srv.ImageURL(testSchematic, testVersion, testFile), NoCache: true, Cache: c, HTTPClient: srv.Client()}
	dst := filepath.Join(t.TempDir(), "card.img")
	_, err := flashOne(context.Background(), FlashOptions{Source: src, Targets: []string{dst}})
	if !errors.Is(err, ErrCorruptImage) {
		t.Fatalf("got %v, want ErrCorruptImage", err)
	}
	// The parallel decoder may find the bad block before the first write
	// (then the target is never opened) or after (then it is incomplete).
	if _, statErr := os.Stat(dst); statErr == nil && !errors.Is(err, ErrIncomplete) {
		t.Fatalf("target was opened but the error does not say it is incomplete: %v", err)
	}
}

// Close of a --no-cache stream (a flash that failed) ends a Read that
// waits to reconnect after a reset, and no new request is made.
func TestHTTPStreamCloseEndsBackoff(t *testing.T) {
	img := testImage(t)
	srv, path, c := newFactory(t, img.XZ)
	c.RetryDelay = 10 * time.Second
	srv.ResetAfter(path, 1000)
	s := newHTTPStream(context.Background(), newFetcher(c, srv.Client(), srv.ImageURL(testSchematic, testVersion, testFile)))
	if err := s.open(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := io.Copy(io.Discard, s) // reads up to the reset, then backs off
		done <- err
	}()
	time.Sleep(300 * time.Millisecond)
	s.Close()
	select {
	case err := <-done:
		if err == nil {
			t.Fatal("Read after Close succeeded")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Close did not end the Read waiting to reconnect")
	}
	if n := len(srv.RequestsTo(path)); n != 1 {
		t.Fatalf("%d requests, want 1 (no reconnect after Close)", n)
	}
}

// Every way a download can fail on the network's or server's side matches
// ErrDownload (the CLI's network exit code); a cancel does not.
func TestDownloadFailuresMatchErrDownload(t *testing.T) {
	img := testImage(t)
	for _, tc := range []struct {
		name  string
		fault func(srv *factorytest.Server, path string)
	}{
		{"stall", func(srv *factorytest.Server, path string) {
			srv.Inject(path, factorytest.Fault{Kind: factorytest.FaultStall, After: 1000})
		}},
		{"reset", func(srv *factorytest.Server, path string) {
			srv.Inject(path, factorytest.Fault{Kind: factorytest.FaultReset, After: 1000})
		}},
		{"503", func(srv *factorytest.Server, path string) { srv.FailPath(path, http.StatusServiceUnavailable, "busy") }},
		{"404", func(srv *factorytest.Server, path string) { srv.FailPath(path, http.StatusNotFound, "no such image") }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv, path, c := newFactory(t, img.XZ)
			c.Retries = 1
			tc.fault(srv, path)
			_, err := fetch(t, srv, c)
			if !errors.Is(err, ErrDownload) {
				t.Fatalf("err = %v, want ErrDownload", err)
			}
		})
	}
	srv, _, c := newFactory(t, img.XZ)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := c.Fetch(ctx, srv.Client(), srv.ImageURL(testSchematic, testVersion, testFile), CacheKey(testSchematic, testVersion, testFile), nil)
	if errors.Is(err, ErrDownload) || !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled fetch: %v, want context.Canceled only", err)
	}
}

// While a download stalls (before the idle timeout gives up), progress keeps
// coming once a second with a zero rate instead of freezing on the last
// figure: the user sees it is stuck, not slow.
func TestStallShowsZeroRate(t *testing.T) {
	img := testImage(t)
	srv, path, c := newFactory(t, img.XZ)
	c.IdleTimeout = 4 * time.Second
	srv.Inject(path, factorytest.Fault{Kind: factorytest.FaultStall, After: 200_000, Times: 1})
	var mu sync.Mutex
	var duringStall int
	// The stall is timed from the last byte that came, not from the
	// start: a loaded machine may take a second to get there.
	var lastDone int64 = -1
	var lastChange time.Time
	progress := func(p Progress) {
		mu.Lock()
		defer mu.Unlock()
		if p.Done != lastDone {
			lastDone, lastChange = p.Done, time.Now()
			return
		}
		if time.Since(lastChange) > 1500*time.Millisecond && p.Rate == 0 && p.Done < int64(len(img.XZ)) {
			duringStall++
		}
	}
	p, err := c.Fetch(context.Background(), srv.Client(), srv.ImageURL(testSchematic, testVersion, testFile),
		CacheKey(testSchematic, testVersion, testFile), progress)
	if err != nil {
		t.Fatal(err)
	}
	assertFile(t, p, img.XZ)
	mu.Lock()
	defer mu.Unlock()
	if duringStall < 2 {
		t.Fatalf("%d zero-rate reports during the stall, want one a second", duringStall)
	}
}

// The factory is part of the key: the public factory keeps a readable
// segment however its URL is spelled; any other gets its host, port and a
// hash of its origin (scheme, host, port, path prefix), never userinfo.
func TestFactoryCacheKey(t *testing.T) {
	const tail = "/" + testSchematic + "/" + testVersion + "/" + testFile
	for _, u := range []string{"https://factory.talos.dev", "https://factory.talos.dev/", "https://FACTORY.talos.dev:443",
		"https://factory.talos.dev/image/" + testSchematic + "/" + testVersion + "/" + testFile} {
		if got := FactoryCacheKey(u, testSchematic, testVersion, testFile); got != "factory.talos.dev"+tail {
			t.Errorf("%s: key %q", u, got)
		}
	}
	if CacheKey(testSchematic, testVersion, testFile) != "factory.talos.dev"+tail {
		t.Errorf("CacheKey %q", CacheKey(testSchematic, testVersion, testFile))
	}
	seen := map[string]string{}
	for _, u := range []string{"http://factory.talos.dev", "https://factory.talos.dev:8443", "https://factory.talos.dev/mirror",
		"http://127.0.0.1:8080", "http://127.0.0.1:8081", "https://127.0.0.1:8080", "http://[::1]:8080", "not a url"} {
		seg, _, _ := strings.Cut(FactoryCacheKey(u, testSchematic, testVersion, testFile), "/")
		if prev, dup := seen[seg]; dup {
			t.Errorf("%s and %s share the segment %q", prev, u, seg)
		}
		seen[seg] = u
		if seg == "factory.talos.dev" || sanitizeSegment(seg) != seg {
			t.Errorf("%s: segment %q", u, seg)
		}
	}
	if seg, _, _ := strings.Cut(FactoryCacheKey("http://127.0.0.1:8080/image/x/v1/f", "x", "v1", "f"), "/"); !strings.HasPrefix(seg, "127.0.0.1_8080-") {
		t.Errorf("loopback segment %q", seg)
	}
	// Same factory, with or without credentials and query: same key, no secret in it.
	a := FactoryCacheKey("https://user:s3cret@f.example.com/?token=s3cret", testSchematic, testVersion, testFile)
	b := FactoryCacheKey("https://f.example.com", testSchematic, testVersion, testFile)
	if a != b || strings.Contains(a, "s3cret") || strings.Contains(a, "user") {
		t.Errorf("keys %q and %q", a, b)
	}
}
