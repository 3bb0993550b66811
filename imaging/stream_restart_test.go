package imaging

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/talosflash/talosflash/imaging/imagetest"
)

// changingServer serves old (ETag "a") cut half-way on the first request;
// from then on (once taken is closed: the reader has the old first bytes)
// the image has changed: new (ETag "b"), whole, with 200 to the If-Range
// resume that names "a".
func changingServer(t *testing.T, old, new []byte, taken <-chan struct{}) *httptest.Server {
	var n atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if n.Add(1) > 1 {
			select {
			case <-taken:
			case <-r.Context().Done():
				return
			}
		} else {
			w.Header().Set("ETag", `"a"`)
			w.Header().Set("Content-Length", strconv.Itoa(len(old)))
			w.Write(old[:len(old)/2])
			w.(http.Flusher).Flush()
			panic(http.ErrAbortHandler)
		}
		w.Header().Set("ETag", `"b"`)
		w.Header().Set("Content-Length", strconv.Itoa(len(new)))
		w.Write(new)
	}))
	t.Cleanup(srv.Close)
	return srv
}

// A streamed download that restarts from byte 0 on other content (the
// resume's validator no longer matches) must not hand its reader the old
// content's first half followed by the new content's second half: what
// the reader got is either exactly the committed entry, or an error.
func TestStreamedDownloadRestartIsNotSpliced(t *testing.T) {
	rawA, err := imagetest.Raw(8<<20, 1)
	if err != nil {
		t.Fatal(err)
	}
	rawB, err := imagetest.Raw(8<<20, 2)
	if err != nil {
		t.Fatal(err)
	}
	a, b := zstdBytes(t, rawA), zstdBytes(t, rawB)
	taken := make(chan struct{})
	srv := changingServer(t, a, b, taken)
	c := &Cache{Dir: t.TempDir(), Retries: 2, RetryDelay: time.Millisecond, IdleTimeout: 20 * time.Second}
	key := CacheKey(testSchematic, testVersion, "metal-arm64.raw.zst")
	fr := c.fetchStream(context.Background(), srv.Client(), srv.URL+"/img", key, nil)
	defer fr.Close()
	first := make([]byte, 4096)
	if _, err := io.ReadFull(fr, first); err != nil {
		t.Fatal(err)
	}
	close(taken)
	rest, rerr := io.ReadAll(fr)
	if rerr != nil {
		if !errors.Is(rerr, ErrDownload) {
			t.Fatalf("refused with %v, want a download error", rerr)
		}
		return // refused: nothing spliced reaches the card
	}
	got := append(first, rest...)
	p, _ := c.Path(key)
	entry, err := os.ReadFile(p)
	if err != nil {
		t.Fatalf("the reader ended cleanly but there is no entry: %v", err)
	}
	if !bytes.Equal(got, entry) {
		t.Fatalf("the reader got %d bytes that are not the committed entry (%d bytes; old prefix + new rest: %v)",
			len(got), len(entry), bytes.Equal(got[:len(a)/2], a[:len(a)/2]))
	}
}

// The same through the feed to another process (the elevated child): the
// child, given the old first bytes, is told the download failed; it never
// reads the new content's rest after them.
func TestFedDownloadRestartIsNotSpliced(t *testing.T) {
	rawA, err := imagetest.Raw(8<<20, 1)
	if err != nil {
		t.Fatal(err)
	}
	rawB, err := imagetest.Raw(8<<20, 2)
	if err != nil {
		t.Fatal(err)
	}
	a, b := zstdBytes(t, rawA), zstdBytes(t, rawB)
	taken := make(chan struct{})
	srv := changingServer(t, a, b, taken)
	c := &Cache{Dir: t.TempDir(), Retries: 2, RetryDelay: time.Millisecond, IdleTimeout: 20 * time.Second}
	key := CacheKey(testSchematic, testVersion, "metal-arm64.raw.zst")
	dl := c.StartDownload(context.Background(), srv.Client(), srv.URL+"/img", key, nil)
	defer dl.Cancel()
	partial, growing, err := dl.Partial()
	if err != nil || !growing {
		t.Fatalf("partial %q %v %v", partial, growing, err)
	}
	pr, pw := io.Pipe()
	go func() { dl.WriteFeed(pw); pw.Close() }()
	g := NewGrowing()
	go g.ReadFeed(pr)
	f, err := os.Open(partial)
	if err != nil {
		t.Fatal(err)
	}
	g.g.attach(f)
	done := make(chan struct{})
	close(done)
	fr := &follower{g: g.g, cancel: func() {}, wait: done}
	defer fr.Close()
	first := make([]byte, 4096)
	if _, err := io.ReadFull(fr, first); err != nil {
		t.Fatal(err)
	}
	close(taken)
	rest, rerr := io.ReadAll(fr)
	if rerr != nil {
		if !errors.Is(rerr, ErrDownload) {
			t.Fatalf("refused with %v, want a download error", rerr)
		}
		return
	}
	got := append(first, rest...)
	whole, err := dl.Wait()
	if err != nil {
		t.Fatal(err)
	}
	entry, _ := os.ReadFile(whole)
	if !bytes.Equal(got, entry) {
		t.Fatalf("the child read %d bytes that are not the committed entry (%d bytes; old prefix: %v)", len(got), len(entry), bytes.Equal(got[:len(a)/2], a[:len(a)/2]))
	}
}
