package imaging

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/talosflash/talosflash/factory/factorytest"
)

// damaged is a container cut or altered so that its own end check fails.
type damaged struct {
	name string
	data []byte
}

// damages cuts data at points that hit every part of a container (its
// header, the data, the checksum or index near the end, the last byte) and
// flips a byte in the middle.
func damages(data []byte, flipToo bool) []damaged {
	var out []damaged
	for _, cut := range []int{1, 4, 8, 20, 100, len(data) / 3, len(data) / 2, len(data) - 4096} {
		if cut <= 0 || cut >= len(data) {
			continue
		}
		out = append(out, damaged{fmt.Sprintf("cut %d bytes", cut), data[:len(data)-cut]})
	}
	if flipToo {
		flip := bytes.Clone(data)
		flip[len(flip)/2] ^= 0x40
		out = append(out, damaged{"flipped byte", flip})
	}
	return out
}

// flashPath is one way an image reaches the pipeline.
type flashPath struct {
	name string
	run  func(t *testing.T, data []byte, file string) ([]CardResult, *Cache, error)
}

func flashPaths() []flashPath {
	targets := func(t *testing.T, n int) []string {
		dir := t.TempDir()
		var ts []string
		for i := range n {
			ts = append(ts, filepath.Join(dir, fmt.Sprintf("card%d.img", i)))
		}
		return ts
	}
	factory := func(t *testing.T, data []byte, file string, noCache, prefill bool) ([]CardResult, *Cache, error) {
		srv := factorytest.New(t)
		srv.AddImage(testSchematic, testVersion, file, data)
		c := &Cache{Dir: t.TempDir(), Retries: 1, RetryDelay: 1}
		key := CacheKey(testSchematic, testVersion, file)
		if prefill {
			p, err := c.Path(key)
			if err != nil {
				t.Fatal(err)
			}
			os.MkdirAll(filepath.Dir(p), 0o755)
			if err := os.WriteFile(p, data, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		src := Source{URL: srv.ImageURL(testSchematic, testVersion, file), Key: key, Cache: c, HTTPClient: srv.Client(), NoCache: noCache}
		res, err := FlashAll(context.Background(), FlashOptions{Source: src, Targets: targets(t, 1), Verify: true})
		return res, c, err
	}
	return []flashPath{
		{"file", func(t *testing.T, data []byte, file string) ([]CardResult, *Cache, error) {
			res, err := FlashAll(context.Background(), FlashOptions{Source: Source{Path: writeTemp(t, file, data)}, Targets: targets(t, 1), Verify: true})
			return res, nil, err
		}},
		{"three cards", func(t *testing.T, data []byte, file string) ([]CardResult, *Cache, error) {
			res, err := FlashAll(context.Background(), FlashOptions{Source: Source{Path: writeTemp(t, file, data)}, Targets: targets(t, 3), Verify: true})
			return res, nil, err
		}},
		{"downloaded into the cache", func(t *testing.T, data []byte, file string) ([]CardResult, *Cache, error) {
			return factory(t, data, file, false, false)
		}},
		{"cached entry", func(t *testing.T, data []byte, file string) ([]CardResult, *Cache, error) {
			return factory(t, data, file, false, true)
		}},
		{"no cache", func(t *testing.T, data []byte, file string) ([]CardResult, *Cache, error) {
			return factory(t, data, file, true, false)
		}},
	}
}

// The invariant: a stream ends only at its container's checked end. A cut
// or altered image, whatever its format and however it arrives, is never
// a card: the flash fails as a corrupt image (the card, when it was
// written, reported incomplete), no card is "verified", and a cache entry
// it came from is gone.
func TestStreamEndsOnlyAtContainerEnd(t *testing.T) {
	img := testImage(t)
	formats := []struct {
		name, file string
		data       []byte
	}{
		{"xz", "metal-arm64.raw.xz", img.XZ},
		{"zstd", "metal-arm64.raw.zst", zstdBytes(t, img.Raw)},
		{"gzip", "metal-arm64.raw.gz", gzipBytes(t, img.Raw)},
		{"raw", "metal-arm64.raw", img.Raw}, // its only end check is the GPT it carries (gpt.go)
	}
	for _, f := range formats {
		for _, p := range flashPaths() {
			if f.name == "raw" && p.name != "file" && p.name != "three cards" {
				continue // downloads must be compressed (checkImage)
			}
			for _, d := range damages(f.data, f.name != "raw") { // raw data has no check of its own
				t.Run(f.name+"/"+p.name+"/"+d.name, func(t *testing.T) {
					res, c, err := p.run(t, d.data, f.file)
					assertCorrupt(t, res, err)
					if c != nil {
						if ok, _ := c.Lookup(CacheKey(testSchematic, testVersion, f.file)); ok {
							t.Fatal("the damaged image stayed in the cache")
						}
					}
				})
			}
		}
	}
}

// assertCorrupt checks a flash of a damaged image failed as corrupt: no
// card verified, each written card reported incomplete.
func assertCorrupt(t *testing.T, res []CardResult, err error) {
	t.Helper()
	if err != nil {
		if !errors.Is(err, ErrCorruptImage) && !errors.Is(err, ErrUnsupportedImage) {
			t.Fatalf("flash failed but not as a corrupt image: %v", err)
		}
		return
	}
	for _, r := range res {
		if r.Err == nil || r.Verified {
			t.Fatalf("%s: a damaged image was written and verified: %+v %v", r.Target, r, r.Err)
		}
		if !errors.Is(r.Err, ErrCorruptImage) {
			t.Fatalf("%s: not a corrupt image: %v", r.Target, r.Err)
		}
		if _, statErr := os.Stat(r.Target); statErr == nil && !errors.Is(r.Err, ErrIncomplete) {
			t.Fatalf("%s: written but not reported incomplete: %v", r.Target, r.Err)
		}
	}
}
