package imaging

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/talosflash/talosflash/imaging/imagetest"
)

// The invariant of every download a reader follows (the streamed first
// flash, the feed to the elevated child, --no-cache): what the reader
// receives is a prefix of exactly one server response body, or an error.
// A cut is retried (resumed where validators prove the content, else
// restarted from byte 0 with the re-sent prefix checked against what the
// reader already has): same bytes pass on unnoticed, other bytes under
// what the reader took fail as a splice.

// step is what the scripted server does for one request: serve body, cut
// (connection dropped) or stalled (headers and the bytes before, then
// nothing) at byte cut of the body; cut < 0 serves it whole.
type step struct {
	body  []byte
	cut   int
	stall bool
}

// scripted answers request i with steps[min(i, len-1)]. With validators
// each body has a strong ETag and a matching If-Range gets a 206; without,
// every answer is a 200 of the whole body (as the factory's direct path).
// Requests after the first wait for gate when it is set.
type scripted struct {
	steps      []step
	validators bool
	gate       <-chan struct{}
	n          atomic.Int32
	mu         sync.Mutex
	at         []time.Time // when each request arrived
	stalled    time.Time   // when a stalling step sent its last byte
}

func etagOf(b []byte) string {
	s := sha256.Sum256(b)
	return fmt.Sprintf(`"%x"`, s[:8])
}

func (s *scripted) start(t *testing.T) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		i := int(s.n.Add(1)) - 1
		s.mu.Lock()
		s.at = append(s.at, time.Now())
		s.mu.Unlock()
		if i > 0 && s.gate != nil {
			select {
			case <-s.gate:
			case <-r.Context().Done():
				return
			}
		}
		st := s.steps[min(i, len(s.steps)-1)]
		from := 0
		if s.validators {
			w.Header().Set("ETag", etagOf(st.body))
			if rg, ok := strings.CutPrefix(r.Header.Get("Range"), "bytes="); ok && r.Header.Get("If-Range") == etagOf(st.body) {
				from, _ = strconv.Atoi(strings.TrimSuffix(rg, "-"))
			}
		}
		w.Header().Set("Content-Length", strconv.Itoa(len(st.body)-from))
		if from > 0 {
			w.Header().Set("Content-Range", fmt.Sprintf("bytes %d-%d/%d", from, len(st.body)-1, len(st.body)))
			w.WriteHeader(http.StatusPartialContent)
		}
		end := len(st.body)
		if st.cut >= 0 && st.cut < end {
			end = max(st.cut, from)
		}
		w.Write(st.body[from:end])
		w.(http.Flusher).Flush()
		if end == len(st.body) {
			return
		}
		if st.stall {
			s.mu.Lock()
			s.stalled = time.Now()
			s.mu.Unlock()
			<-r.Context().Done()
			return
		}
		panic(http.ErrAbortHandler) // the connection drops mid-body
	}))
	t.Cleanup(srv.Close)
	return srv
}

func (s *scripted) requests() int { return int(s.n.Load()) }

func firstDiff(a, b []byte) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}

// cutImages is an image a, b (a's image with its last MiB changed: the
// same length, the compressed bytes share a long prefix with a's) and c
// (another image: it differs from a's early).
type cutImages struct {
	rawA, rawB []byte
	a, b, c    []byte
}

var (
	cutImagesOnce sync.Once
	cutImagesVal  cutImages
)

func cutFixture(t *testing.T) cutImages {
	cutImagesOnce.Do(func() {
		rawA, err := imagetest.Raw(4<<20, 11)
		if err != nil {
			t.Fatal(err)
		}
		rawC, err := imagetest.Raw(4<<20, 12)
		if err != nil {
			t.Fatal(err)
		}
		rawB := append([]byte(nil), rawA...)
		copy(rawB[len(rawB)-1<<20:], rawC[len(rawC)-1<<20:])
		cutImagesVal = cutImages{rawA: rawA, rawB: rawB, a: zstdBytes(t, rawA), b: zstdBytes(t, rawB), c: zstdBytes(t, rawC)}
	})
	return cutImagesVal
}

type cutCase struct {
	name       string
	validators bool
	next       []byte // the body of the requests after the cut
	cut        int    // where the first answer ends
	consumed   int    // bytes the reader has taken when the retry answers
}

func cutCases(t *testing.T) []cutCase {
	im := cutFixture(t)
	db := firstDiff(im.a, im.b)
	if db < len(im.a)/4 || db == len(im.a) {
		t.Fatalf("a and b share %d of %d bytes: the fixture does not test a late change", db, len(im.a))
	}
	var cases []cutCase
	for _, v := range []bool{false, true} {
		for _, next := range []struct {
			name string
			body []byte
		}{{"same", im.a}, {"changed-late", im.b}, {"changed-early", im.c}} {
			for _, cut := range []int{1, 4096, db - 1, db + 1, len(im.a) - 1} {
				for _, consumed := range []int{0, cut / 2, cut} {
					cases = append(cases, cutCase{
						name:       fmt.Sprintf("validators=%v/%s/cut=%d/consumed=%d", v, next.name, cut, consumed),
						validators: v, next: next.body, cut: cut, consumed: consumed,
					})
				}
			}
		}
	}
	return cases
}

// checkOutcome asserts the invariant: got is all of want (the body the
// download ended with), or err is a download error that says the bytes
// changed, which only happens when the reader had taken a byte that
// differs (taken > d).
func checkOutcome(t *testing.T, got []byte, err error, old, want []byte, taken int) {
	t.Helper()
	d := firstDiff(old, want)
	mustSplice := !bytes.Equal(old, want) && d < taken
	if err != nil {
		if !errors.Is(err, ErrDownload) || !errors.Is(err, errSpliced) {
			t.Fatalf("failed with %v, want a splice refusal (a download error)", err)
		}
		if !mustSplice {
			t.Fatalf("refused as a splice although the reader's %d bytes are the new body's prefix (first difference at %d): %v", taken, d, err)
		}
		if len(got) > len(old) || !bytes.Equal(got, old[:len(got)]) {
			t.Fatalf("the reader got %d bytes that are not the old body's prefix before the refusal", len(got))
		}
		return
	}
	if mustSplice {
		t.Fatalf("the reader took %d bytes of the old body, the new one differs at %d, and it ended without an error", taken, d)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("the reader got %d bytes that are not the body (%d bytes; first difference at %d)", len(got), len(want), firstDiff(got, want))
	}
}

// The streamed first flash's reader (fetchStream) across cut points, with
// and without validators, on unchanged and changed content.
func TestStreamedCutInvariant(t *testing.T) {
	im := cutFixture(t)
	for _, c := range cutCases(t) {
		t.Run(c.name, func(t *testing.T) {
			gate := make(chan struct{})
			s := &scripted{steps: []step{{body: im.a, cut: c.cut}, {body: c.next, cut: -1}}, validators: c.validators, gate: gate}
			srv := s.start(t)
			cache := &Cache{Dir: t.TempDir(), Retries: 2, RetryDelay: time.Millisecond, IdleTimeout: 5 * time.Second}
			key := CacheKey(testSchematic, testVersion, "metal-arm64.raw.zst")
			fr := cache.fetchStream(context.Background(), srv.Client(), srv.URL+"/img", key, nil)
			defer fr.Close()
			got := make([]byte, c.consumed)
			if _, err := io.ReadFull(fr, got); err != nil {
				t.Fatal(err)
			}
			close(gate)
			<-fr.wait // the download's retry is over before the reader goes on
			rest, err := io.ReadAll(fr)
			got = append(got, rest...)
			checkOutcome(t, got, err, im.a, c.next, c.consumed)
			if s.requests() < 2 {
				t.Fatalf("%d requests: the cut was not retried", s.requests())
			}
			// The cache holds one body whole, never a mixture.
			p, _ := cache.Path(key)
			if entry, rerr := os.ReadFile(p); rerr == nil && !bytes.Equal(entry, c.next) {
				t.Fatalf("the cache entry (%d bytes) is not the body the download ended with", len(entry))
			}
		})
	}
}

// --no-cache: the stream hands its reader every byte up to the cut before
// it retries, so what it already gave is the whole cut prefix.
func TestNoCacheCutInvariant(t *testing.T) {
	im := cutFixture(t)
	for _, c := range cutCases(t) {
		if c.consumed != c.cut {
			continue // the stream's reader always has the cut prefix
		}
		t.Run(c.name, func(t *testing.T) {
			s := &scripted{steps: []step{{body: im.a, cut: c.cut}, {body: c.next, cut: -1}}, validators: c.validators}
			srv := s.start(t)
			f := newFetcher(&Cache{Retries: 2, RetryDelay: time.Millisecond, IdleTimeout: 5 * time.Second}, srv.Client(), srv.URL+"/img")
			st := newHTTPStream(context.Background(), f)
			defer st.Close()
			got, err := io.ReadAll(st)
			checkOutcome(t, got, err, im.a, c.next, c.cut)
		})
	}
}

// The first flash, end to end onto a file target: a server without
// validators cut once mid-body (the factory's direct path) gives a card
// that is the image, from the cache and from --no-cache alike; changed
// content never gives a card that is not one image.
func TestFirstFlashSurvivesCut(t *testing.T) {
	im := cutFixture(t)
	for _, noCache := range []bool{false, true} {
		for _, next := range [][]byte{im.a, im.c} {
			s := &scripted{steps: []step{{body: im.a, cut: len(im.a) / 2}, {body: next, cut: -1}}}
			srv := s.start(t)
			cache := &Cache{Dir: t.TempDir(), Retries: 2, RetryDelay: time.Millisecond, IdleTimeout: 5 * time.Second}
			key := CacheKey(testSchematic, testVersion, "metal-arm64.raw.zst")
			dst := filepath.Join(t.TempDir(), "card.img")
			res, err := flashOne(context.Background(), FlashOptions{Source: Source{URL: srv.URL + "/img", Key: key, Cache: cache, HTTPClient: srv.Client(), NoCache: noCache},
				Targets: []string{dst}, Verify: true})
			card, _ := os.ReadFile(dst)
			if bytes.Equal(next, im.a) {
				if err != nil || !res.Verified || !bytes.Equal(card, im.rawA) {
					t.Fatalf("no-cache=%v: a cut of unchanged content: %+v %v (card is the image: %v)", noCache, res, err, bytes.Equal(card, im.rawA))
				}
				continue
			}
			if err == nil {
				t.Fatalf("no-cache=%v: changed content under the reader's bytes ended in a card: %+v", noCache, res)
			}
			if !errors.Is(err, errSpliced) || !errors.Is(err, ErrDownload) {
				t.Fatalf("no-cache=%v: changed content: %v, want the splice refusal", noCache, err)
			}
		}
	}
}

// A server that sends headers and some bytes, then nothing: the stall is
// found within the idle timeout and retried, for the cache and --no-cache.
func TestStreamedStallDetectedWithinTimeout(t *testing.T) {
	im := cutFixture(t)
	const idle = 200 * time.Millisecond
	for _, tc := range []struct {
		noCache bool
		cut     int // 0: headers, then nothing
	}{{false, 0}, {false, len(im.a) / 3}, {true, 0}, {true, len(im.a) / 3}} {
		noCache := tc.noCache
		s := &scripted{steps: []step{{body: im.a, cut: tc.cut, stall: true}, {body: im.a, cut: -1}}}
		srv := s.start(t)
		cache := &Cache{Dir: t.TempDir(), Retries: 2, RetryDelay: time.Millisecond, IdleTimeout: idle}
		key := CacheKey(testSchematic, testVersion, "metal-arm64.raw.zst")
		dst := filepath.Join(t.TempDir(), "card.img")
		res, err := flashOne(context.Background(), FlashOptions{Source: Source{URL: srv.URL + "/img", Key: key, Cache: cache, HTTPClient: srv.Client(), NoCache: noCache},
			Targets: []string{dst}, Verify: true})
		if err != nil || !res.Verified {
			t.Fatalf("no-cache=%v: %+v %v", noCache, res, err)
		}
		s.mu.Lock()
		waited := s.at[1].Sub(s.stalled)
		s.mu.Unlock()
		// The server notes the stall after its last write, the client's idle
		// clock starts at its last read, a little earlier: the retry may come
		// a hair under idle after the server's mark (199.97 ms was seen). Not
		// at once is what the floor checks; within the timeout the ceiling.
		if waited < idle/2 || waited > idle+time.Second {
			t.Fatalf("no-cache=%v cut=%d: the retry came %v after the stall, want the idle timeout %v", noCache, tc.cut, waited, idle)
		}
	}
}

// Every try failing is a download failure (the CLI's exit 3) that says how
// many tries it made; the card is incomplete.
func TestStreamedEveryTryFails(t *testing.T) {
	im := cutFixture(t)
	for _, noCache := range []bool{false, true} {
		for _, stall := range []bool{false, true} {
			s := &scripted{steps: []step{{body: im.a, cut: len(im.a) / 2, stall: stall}}}
			srv := s.start(t)
			cache := &Cache{Dir: t.TempDir(), Retries: 2, RetryDelay: time.Millisecond, IdleTimeout: 100 * time.Millisecond}
			key := CacheKey(testSchematic, testVersion, "metal-arm64.raw.zst")
			dst := filepath.Join(t.TempDir(), "card.img")
			_, err := flashOne(context.Background(), FlashOptions{Source: Source{URL: srv.URL + "/img", Key: key, Cache: cache, HTTPClient: srv.Client(), NoCache: noCache},
				Targets: []string{dst}, Verify: true})
			if !errors.Is(err, ErrDownload) || errors.Is(err, errSpliced) || !strings.Contains(err.Error(), "3 attempts") {
				t.Fatalf("no-cache=%v stall=%v: %v, want a download failure after 3 attempts", noCache, stall, err)
			}
			if s.requests() != 3 {
				t.Fatalf("no-cache=%v stall=%v: %d requests, want 3", noCache, stall, s.requests())
			}
		}
	}
}
