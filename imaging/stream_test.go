package imaging

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"
)

// gatedServer serves data, holding the second half until gate is closed
// (or cutting the connection there when cut is set).
func gatedServer(t *testing.T, data []byte, gate <-chan struct{}, cut bool) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", strconv.Itoa(len(data)))
		half := len(data) / 2
		w.Write(data[:half])
		w.(http.Flusher).Flush()
		if cut {
			panic(http.ErrAbortHandler) // the connection drops mid-body
		}
		select {
		case <-gate:
		case <-r.Context().Done():
			return
		}
		w.Write(data[half:])
	}))
	t.Cleanup(srv.Close)
	return srv
}

// dataTarget calls first on the first write of image data (past the
// zeros that stand in for the first MiB).
type dataTarget struct {
	*os.File
	first func()
}

func (d *dataTarget) WriteAt(p []byte, off int64) (int, error) {
	if off > 0 && d.first != nil {
		d.first()
	}
	return d.File.WriteAt(p, off)
}

func onFirstData(path string, first func()) func(string, int64) (Target, error) {
	return func(string, int64) (Target, error) {
		f, err := os.Create(path)
		return &dataTarget{File: f, first: first}, err
	}
}

// The first flash of an image writes the card while the download arrives
// (one read of the network), and the cache entry it fills is committed
// only once whole and checked.
func TestFirstFlashWritesWhileDownloading(t *testing.T) {
	raw := skipRaw(t)
	data := zstdBytes(t, raw)
	gate := make(chan struct{})
	srv := gatedServer(t, data, gate, false)
	c := &Cache{Dir: t.TempDir(), Retries: 1, RetryDelay: time.Millisecond, IdleTimeout: 20 * time.Second}
	key := CacheKey(testSchematic, testVersion, "metal-arm64.raw.zst")
	var once sync.Once
	var entryBefore bool
	dst := filepath.Join(t.TempDir(), "card.img")
	open := onFirstData(dst, func() {
		once.Do(func() {
			entryBefore = c.Has(key)
			close(gate) // the card is being written: let the rest come
		})
	})
	done := make(chan struct{})
	var res *CardResult
	var err error
	go func() {
		defer close(done)
		res, err = flashOne(context.Background(), FlashOptions{Source: Source{URL: srv.URL + "/img", Key: key, Cache: c, HTTPClient: srv.Client()}, Targets: []string{dst}, Verify: true, Open: open})
	}()
	select {
	case <-done:
	case <-time.After(2 * time.Minute): // backstop: a write that waits for the whole download never starts
		close(gate)
		<-done
		t.Fatal("nothing was written before the download was whole")
	}
	if err != nil || !res.Verified {
		t.Fatalf("%+v %v", res, err)
	}
	if entryBefore {
		t.Fatal("the cache entry was in place before the download was whole")
	}
	if got, _ := os.ReadFile(dst); !bytes.Equal(got, raw) {
		t.Fatal("the card is not the image")
	}
	if ok, err := c.Lookup(key); !ok || err != nil {
		t.Fatalf("the entry is not cached: %v", err)
	}
	p, _ := c.Path(key)
	if got, _ := os.ReadFile(p); !bytes.Equal(got, data) {
		t.Fatalf("the cache entry is not the download (%s)", p)
	}
}

// A download that drops mid-way leaves the card incomplete and no entry
// in the cache (a partial at most, for the next run to resume).
func TestFirstFlashDownloadCut(t *testing.T) {
	raw := skipRaw(t)
	data := zstdBytes(t, raw)
	srv := gatedServer(t, data, nil, true)
	c := &Cache{Dir: t.TempDir(), Retries: 1, RetryDelay: time.Millisecond, IdleTimeout: 20 * time.Second}
	key := CacheKey(testSchematic, testVersion, "metal-arm64.raw.zst")
	dst := filepath.Join(t.TempDir(), "card.img")
	_, err := flashOne(context.Background(), FlashOptions{Source: Source{URL: srv.URL + "/img", Key: key, Cache: c, HTTPClient: srv.Client()}, Targets: []string{dst}, Verify: true})
	if !errors.Is(err, ErrDownload) || errors.Is(err, ErrCorruptImage) {
		t.Fatalf("got %v, want a failed download", err)
	}
	if _, statErr := os.Stat(dst); statErr == nil && !errors.Is(err, ErrIncomplete) {
		t.Fatalf("card written, not reported incomplete: %v", err)
	}
	if ok, _ := c.Lookup(key); ok {
		t.Fatal("a cut download is in the cache as whole")
	}

	// Ctrl-C mid-download: incomplete card, no entry.
	gate := make(chan struct{})
	defer close(gate)
	srv2 := gatedServer(t, data, gate, false)
	ctx, cancel := context.WithCancel(context.Background())
	_, err = flashOne(ctx, FlashOptions{Source: Source{URL: srv2.URL + "/img", Key: key, Cache: c, HTTPClient: srv2.Client()}, Targets: []string{dst}, Verify: true,
		Open: onFirstData(dst, cancel)})
	if !errors.Is(err, context.Canceled) || !errors.Is(err, ErrIncomplete) {
		t.Fatalf("got %v, want an interrupted, incomplete card", err)
	}
	if ok, _ := c.Lookup(key); ok {
		t.Fatal("an interrupted download is in the cache as whole")
	}
}

// The elevated child's parent decodes a first download as it arrives
// (OpenDecoded): the decoded bytes end (io.EOF) only once the download is
// whole and in the cache; a cut download is an error, never an end.
func TestDecodedDownloadEndsWhole(t *testing.T) {
	raw := skipRaw(t)
	data := zstdBytes(t, raw)
	for _, cut := range []bool{false, true} {
		gate := make(chan struct{})
		srv := gatedServer(t, data, gate, cut)
		c := &Cache{Dir: t.TempDir(), Retries: 1, RetryDelay: time.Millisecond, IdleTimeout: 20 * time.Second}
		key := CacheKey(testSchematic, testVersion, "metal-arm64.raw.zst")
		d, err := OpenDecoded(context.Background(), Source{URL: srv.URL + "/img", Key: key, Cache: c, HTTPClient: srv.Client()}, nil, false, nil)
		if err != nil {
			t.Fatal(err)
		}
		first := make([]byte, 1<<20)
		if _, err := io.ReadFull(d, first); err != nil { // from the first half, before the rest is sent
			t.Fatal(err)
		}
		if ok, _ := c.Lookup(key); ok {
			t.Fatal("in the cache before the download is whole")
		}
		close(gate)
		rest, err := io.ReadAll(d)
		d.Close()
		if cut {
			if !errors.Is(err, ErrDownload) {
				t.Fatalf("cut download: got %v", err)
			}
			if ok, _ := c.Lookup(key); ok {
				t.Fatal("a cut download is in the cache as whole")
			}
			continue
		}
		if err != nil || !bytes.Equal(append(first, rest...), raw) {
			t.Fatalf("decoded %d bytes: %v", len(first)+len(rest), err)
		}
		if ok, _ := c.Lookup(key); !ok {
			t.Fatal("the decoded stream ended before the entry was in the cache")
		}
	}
}
