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
