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

// The same when the image is decoded here for the elevated child
// (OpenDecoded): neither the download's partial nor the entry it becomes
// may be one of the child's cards.
func TestDecodedSourceIsNotATarget(t *testing.T) {
	raw := skipRaw(t)
	data := zstdBytes(t, raw)
	for _, which := range []string{"entry", "partial"} {
		gate := make(chan struct{})
		close(gate)
		srv := gatedServer(t, data, gate, false)
		c := &Cache{Dir: t.TempDir(), Retries: 1, RetryDelay: time.Millisecond, IdleTimeout: 20 * time.Second}
		key := CacheKey(testSchematic, testVersion, "metal-arm64.raw.zst")
		dst, _ := c.Path(key)
		if which == "partial" {
			dst += partialSuffix
		}
		d, err := OpenDecoded(context.Background(), Source{URL: srv.URL + "/img", Key: key, Cache: c, HTTPClient: srv.Client()}, []string{dst}, false, nil)
		if !errors.Is(err, ErrTargetIsSource) {
			if d != nil {
				d.Close()
			}
			t.Errorf("target %s (the cache's %s): got %v, want ErrTargetIsSource", dst, which, err)
		}
	}
	// A local file, and a hard link to it.
	img := writeTemp(t, "img.raw.zst", data)
	link := img + ".link"
	if err := os.Link(img, link); err != nil {
		t.Fatal(err)
	}
	for _, dst := range []string{img, link} {
		if _, err := OpenDecoded(context.Background(), Source{Path: img}, []string{"/dev/null", dst}, false, nil); !errors.Is(err, ErrTargetIsSource) {
			t.Errorf("target %s: got %v, want ErrTargetIsSource", dst, err)
		}
	}
}
