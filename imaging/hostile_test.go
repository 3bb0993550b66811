package imaging

import (
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/talosflash/talosflash/factory/factorytest"
)

// hostile is a loopback server whose answers a test scripts per request
// number (0-based); it records the Range header of each request.
type hostile struct {
	srv    *httptest.Server
	mu     sync.Mutex
	ranges []string
	n      atomic.Int64
}

func newHostile(t *testing.T, handle func(n int, w http.ResponseWriter, r *http.Request)) *hostile {
	t.Helper()
	h := &hostile{}
	h.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.mu.Lock()
		h.ranges = append(h.ranges, r.Header.Get("Range"))
		h.mu.Unlock()
		handle(int(h.n.Add(1)-1), w, r)
	}))
	t.Cleanup(h.srv.Close)
	return h
}

func (h *hostile) url() string {
	return h.srv.URL + factorytest.ImagePath(testSchematic, testVersion, testFile)
}

func (h *hostile) requests() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]string(nil), h.ranges...)
}

func (h *hostile) fetch(t *testing.T, c *Cache) (string, error) {
	t.Helper()
	return c.Fetch(context.Background(), h.srv.Client(), h.url(), CacheKey(testSchematic, testVersion, testFile), nil)
}

// cut sends the first n bytes of data announcing all of it, then hangs up.
func cut(w http.ResponseWriter, data []byte, n int, hdr map[string]string) {
	for k, v := range hdr {
		w.Header().Set(k, v)
	}
	w.Header().Set("Content-Length", strconv.Itoa(len(data)))
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(data[:n])
	if hj, ok := w.(http.Hijacker); ok {
		if conn, buf, err := hj.Hijack(); err == nil {
			_ = buf.Flush()
			conn.Close()
		}
	}
}

// partialContent answers 206 with data[from:] and the given headers.
func partialContent(w http.ResponseWriter, data []byte, from int, hdr map[string]string) {
	for k, v := range hdr {
		w.Header().Set(k, v)
	}
	w.Header().Set("Content-Range", fmt.Sprintf("bytes %d-%d/%d", from, len(data)-1, len(data)))
	w.Header().Set("Content-Length", strconv.Itoa(len(data)-from))
	w.WriteHeader(http.StatusPartialContent)
	_, _ = w.Write(data[from:])
}

func whole(w http.ResponseWriter, data []byte, hdr map[string]string) {
	for k, v := range hdr {
		w.Header().Set(k, v)
	}
	w.Header().Set("Content-Length", strconv.Itoa(len(data)))
	_, _ = w.Write(data)
}

// sameSizePair is two valid images of the same length that differ only in
// their first bytes (gzip headers with other times): a's first half spliced
// onto b's second half is a, so a splice can't hide behind a size change or
// a failed container check.
func sameSizePair(t *testing.T) (a, b []byte) {
	t.Helper()
	raw := testImage(t).Raw
	gz := func(sec int64) []byte {
		var out bytes.Buffer
		zw := gzip.NewWriter(&out)
		zw.ModTime = time.Unix(sec, 0)
		if _, err := zw.Write(raw); err != nil {
			t.Fatal(err)
		}
		zw.Close()
		return out.Bytes()
	}
	a, b = gz(1e9), gz(2e9)
	if len(a) != len(b) || bytes.Equal(a, b) {
		t.Fatal("gzip pair differs in length or not at all")
	}
	return a, b
}

func hostileCache(t *testing.T) *Cache {
	return &Cache{Dir: t.TempDir(), Retries: 3, RetryDelay: time.Millisecond, IdleTimeout: 2 * time.Second}
}

// A cut download without validators, then a 206 of another file: the cache
// must never hold the splice of the two.
func TestFetchNeverSplicesWithoutValidator(t *testing.T) {
	a, b := sameSizePair(t)
	h := newHostile(t, func(n int, w http.ResponseWriter, r *http.Request) {
		switch {
		case n == 0:
			cut(w, a, len(a)/2, nil)
		case r.Header.Get("Range") != "":
			partialContent(w, b, len(a)/2, nil) // ignores what was asked
		default:
			whole(w, b, nil)
		}
	})
	p, err := h.fetch(t, hostileCache(t))
	if err != nil {
		t.Fatal(err)
	}
	assertFile(t, p, b)
	if rs := h.requests(); len(rs) != 2 || rs[1] != "" {
		t.Fatalf("requests' Range %q: want a restart from 0 (no validator to resume with)", rs)
	}
}

// A partial saved with an ETag, then a 206 with a different ETag (or none,
// or starting elsewhere): restart from 0 once, never splice, never stick.
func TestFetchResumeNeedsSameValidatorAndStart(t *testing.T) {
	a, b := sameSizePair(t)
	for name, bad := range map[string]func(w http.ResponseWriter){
		"other etag": func(w http.ResponseWriter) { partialContent(w, b, len(a)/2, map[string]string{"ETag": `"b"`}) },
		"no etag":    func(w http.ResponseWriter) { partialContent(w, b, len(a)/2, nil) },
		"wrong start": func(w http.ResponseWriter) {
			partialContent(w, a, len(a)/2-1000, map[string]string{"ETag": `"a"`})
		},
		"416": func(w http.ResponseWriter) {
			w.Header().Set("Content-Range", fmt.Sprintf("bytes */%d", len(a)))
			w.WriteHeader(http.StatusRequestedRangeNotSatisfiable)
		},
	} {
		t.Run(name, func(t *testing.T) {
			want := b
			if name == "wrong start" || name == "416" {
				want = a
			}
			h := newHostile(t, func(n int, w http.ResponseWriter, r *http.Request) {
				switch {
				case n == 0:
					cut(w, a, len(a)/2, map[string]string{"ETag": `"a"`})
				case r.Header.Get("Range") != "":
					bad(w)
				default:
					whole(w, want, map[string]string{"ETag": `"new"`})
				}
			})
			c := hostileCache(t)
			c.Retries = -1
			if _, err := h.fetch(t, c); err == nil {
				t.Fatal("the cut download succeeded")
			}
			p, err := h.fetch(t, c) // a new run: resume attempt, then restart
			if err != nil {
				t.Fatal(err)
			}
			assertFile(t, p, want)
			rs := h.requests()
			if len(rs) != 3 || rs[1] == "" || rs[2] != "" {
				t.Fatalf("requests' Range %q: want cut, one resume attempt, one restart from 0", rs)
			}
		})
	}
}

// A partial larger than the size the server announced is dropped.
func TestFetchDropsPartialLargerThanAnnounced(t *testing.T) {
	a := testImage(t).XZ
	h := newHostile(t, func(n int, w http.ResponseWriter, r *http.Request) {
		whole(w, a, map[string]string{"ETag": `"a"`})
	})
	c := hostileCache(t)
	final, _ := c.Path(CacheKey(testSchematic, testVersion, testFile))
	d, name, err := c.entryDir(CacheKey(testSchematic, testVersion, testFile), true)
	if err != nil {
		t.Fatal(err)
	}
	defer d.close()
	big := make([]byte, len(a)+4096)
	copy(big, a)
	writeFile(t, final+partialSuffix, big)
	if err := saveMeta(d, name+metaSuffix, partialMeta{URL: h.url(), ETag: `"a"`, Size: int64(len(a))}); err != nil {
		t.Fatal(err)
	}
	p, err := h.fetch(t, c)
	if err != nil {
		t.Fatal(err)
	}
	assertFile(t, p, a)
}

// No Content-Length and an endless body: capped, nothing left to fill the
// disk, and a clear error.
func TestFetchWithoutLengthIsCapped(t *testing.T) {
	var sent atomic.Int64
	h := newHostile(t, func(n int, w http.ResponseWriter, r *http.Request) {
		buf := make([]byte, 64<<10)
		// Bounded on the server side too: at most 64 MiB.
		for i := 0; i < 1024 && r.Context().Err() == nil; i++ {
			if _, err := w.Write(buf); err != nil {
				return
			}
			sent.Add(int64(len(buf)))
		}
	})
	c := hostileCache(t)
	c.MaxDownload = 4 << 20
	_, err := h.fetch(t, c)
	if !errors.Is(err, ErrTooLarge) || !errors.Is(err, ErrDownload) {
		t.Fatalf("got %v, want ErrTooLarge (a download failure)", err)
	}
	final, _ := c.Path(CacheKey(testSchematic, testVersion, testFile))
	if st, err := os.Stat(final + partialSuffix); err == nil && st.Size() > 0 {
		t.Fatalf("a %d-byte partial was kept", st.Size())
	}
	if len(h.requests()) != 1 {
		t.Fatalf("%d requests: a capped download must not be retried", len(h.requests()))
	}
}

// A server announcing more than the cap is refused before any byte is stored.
func TestFetchRefusesAnnouncedOversize(t *testing.T) {
	h := newHostile(t, func(n int, w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", strconv.Itoa(8<<20))
		w.WriteHeader(http.StatusOK)
		_, _ = w.Write(make([]byte, 1<<20))
	})
	c := hostileCache(t)
	c.MaxDownload = 4 << 20
	if _, err := h.fetch(t, c); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("got %v, want ErrTooLarge", err)
	}
}

// The factory builds a new image before answering: headers later than the
// idle timeout are not a stall, and progress says what is going on.
func TestFetchWaitsForBuild(t *testing.T) {
	img := testImage(t)
	srv, path, c := newFactory(t, img.XZ)
	c.IdleTimeout = 200 * time.Millisecond
	srv.SetBuildDelay(time.Second)
	old := buildNotice
	buildNotice = 100 * time.Millisecond
	t.Cleanup(func() { buildNotice = old })
	var log progressLog
	p, err := c.Fetch(context.Background(), srv.Client(), srv.ImageURL(testSchematic, testVersion, testFile),
		CacheKey(testSchematic, testVersion, testFile), log.fn)
	if err != nil {
		t.Fatalf("a build longer than the idle timeout failed the download: %v", err)
	}
	assertFile(t, p, img.XZ)
	if _, n := log.last(StageBuild); n == 0 {
		t.Fatal("no build notice while the factory was building")
	}
	// Once building is reported, nothing says "download 0 B" until bytes flow.
	log.mu.Lock()
	seenBuild := false
	for _, p := range log.reps {
		switch {
		case p.Stage == StageBuild:
			seenBuild = true
		case seenBuild && p.Stage == StageDownload && p.Done == 0 && p.Total == 0:
			t.Errorf("a zero download report interleaved with the build notice: %+v", log.reps)
		}
	}
	log.mu.Unlock()
	if n := len(srv.RequestsTo(path)); n != 1 {
		t.Fatalf("%d requests, want 1", n)
	}
}

func writeFile(t *testing.T, p string, data []byte) {
	t.Helper()
	if err := os.WriteFile(p, data, 0o600); err != nil {
		t.Fatal(err)
	}
}

// The factory's plain-text error answer is shown, bounded and on one line.
func TestFetchErrorShowsFactoryAnswer(t *testing.T) {
	srv, _, c := newFactory(t, testImage(t).XZ)
	url := srv.ImageURL(testSchematic, "v9.9.9", testFile)
	_, err := c.Fetch(context.Background(), srv.Client(), url, CacheKey(testSchematic, "v9.9.9", testFile), nil)
	if !errors.Is(err, ErrNotFound) || !strings.Contains(err.Error(), "version v9.9.9 is not available") {
		t.Fatalf("got %v", err)
	}
	h := newHostile(t, func(n int, w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusBadRequest)
		_, _ = w.Write(bytes.Repeat([]byte("bad\n\x1b[2J"), 10_000))
	})
	_, err = h.fetch(t, hostileCache(t))
	if err == nil || len(err.Error()) > 600 || strings.ContainsAny(err.Error(), "\n\x1b") {
		t.Fatalf("error answer not bounded to one clean line: %q", err)
	}
}
