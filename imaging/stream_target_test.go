package imaging

import (
	"bytes"
	"context"
	"errors"
	"os"
	"testing"
	"time"
)

// The first flash of an image streams its download through the cache:
// the cache's partial and its entry are the source, never a target (a
// card named as the partial was written into the file the download
// appends to; one named as the entry was replaced by the rename).
func TestStreamedSourceIsNotATarget(t *testing.T) {
	raw := skipRaw(t)
	data := zstdBytes(t, raw)
	for _, which := range []string{"entry", "partial"} {
		t.Run(which, func(t *testing.T) {
			gate := make(chan struct{})
			close(gate)
			srv := gatedServer(t, data, gate, false)
			c := &Cache{Dir: t.TempDir(), Retries: 1, RetryDelay: time.Millisecond, IdleTimeout: 20 * time.Second}
			key := CacheKey(testSchematic, testVersion, "metal-arm64.raw.zst")
			dst, err := c.Path(key)
			if err != nil {
				t.Fatal(err)
			}
			if which == "partial" {
				dst += partialSuffix
			}
			_, err = flashOne(context.Background(), FlashOptions{Source: Source{URL: srv.URL + "/img", Key: key, Cache: c, HTTPClient: srv.Client()}, Targets: []string{dst}, Verify: true})
			if !errors.Is(err, ErrTargetIsSource) {
				t.Errorf("target %s (the cache's %s): got %v, want ErrTargetIsSource", dst, which, err)
			}
			if p, _ := c.Path(key); c.Has(key) {
				if got, _ := os.ReadFile(p); !bytes.Equal(got, data) {
					t.Error("the cache entry is not the download")
				}
			}
		})
	}
}

// The same in the elevated child, which follows the parent's download: the
// entry it will become is not a target either.
func TestFollowedSourceIsNotATarget(t *testing.T) {
	raw := skipRaw(t)
	data := zstdBytes(t, raw)
	gate := make(chan struct{})
	srv := gatedServer(t, data, gate, false)
	c := &Cache{Dir: t.TempDir(), Retries: 1, RetryDelay: time.Millisecond, IdleTimeout: 20 * time.Second}
	key := CacheKey(testSchematic, testVersion, "metal-arm64.raw.zst")
	dl := c.StartDownload(context.Background(), srv.Client(), srv.URL+"/img", key, nil)
	defer dl.Cancel()
	partial, growing, err := dl.Partial()
	if err != nil || !growing {
		t.Fatalf("partial %q %v %v", partial, growing, err)
	}
	entry, _ := c.Path(key)
	g := NewGrowing()
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(time.Millisecond) { // the first half is there
		if st, err := os.Stat(partial); err == nil && st.Size() >= int64(len(data)/2) {
			g.g.advance(st.Size(), -1)
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the download's first half never came")
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second) // backstop: the old code wrote the entry and waited for the rest
	defer cancel()
	_, err = flashOne(ctx, FlashOptions{Source: Source{Path: partial, Growing: g}, Targets: []string{entry}, Verify: true})
	if !errors.Is(err, ErrTargetIsSource) {
		t.Errorf("target %s (the entry the followed download becomes): got %v, want ErrTargetIsSource", entry, err)
	}
	g.g.finish(errors.New("test over"))
	close(gate)
}
