package imaging

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// Symlinks planted in the cache are never followed: not as the entry, the
// partial download, its sidecar, nor a version directory.
func TestCacheNeverFollowsSymlinks(t *testing.T) {
	img := testImage(t)
	outsideData := []byte("precious file outside the cache\n")

	setup := func(t *testing.T) (*Cache, string, string, func(*Cache) (string, error)) {
		srv, _, c := newFactory(t, img.XZ)
		outside := filepath.Join(t.TempDir(), "precious")
		writeFile(t, outside, outsideData)
		final := finalPath(t, c)
		return c, final, outside, func(c *Cache) (string, error) { return fetch(t, srv, c) }
	}
	checkOutside := func(t *testing.T, outside string) {
		t.Helper()
		got, err := os.ReadFile(outside)
		if err != nil || !bytes.Equal(got, outsideData) {
			t.Fatalf("the file outside the cache changed: %q %v", got, err)
		}
	}

	for _, suffix := range []string{partialSuffix, metaSuffix, metaSuffix + ".tmp", lockSuffix, ""} {
		t.Run("link as "+suffix, func(t *testing.T) {
			c, final, outside, run := setup(t)
			if err := os.MkdirAll(filepath.Dir(final), 0o700); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(outside, final+suffix); err != nil {
				t.Fatal(err)
			}
			p, err := run(c)
			if err != nil {
				t.Fatal(err)
			}
			checkOutside(t, outside)
			fi, err := os.Lstat(p)
			if err != nil || !fi.Mode().IsRegular() {
				t.Fatalf("entry %s: %v %v", p, fi, err)
			}
			assertFile(t, p, img.XZ)
		})
	}

	t.Run("version directory", func(t *testing.T) {
		c, final, outside, run := setup(t)
		if err := os.MkdirAll(filepath.Dir(filepath.Dir(final)), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(filepath.Dir(outside), filepath.Dir(final)); err != nil {
			t.Fatal(err)
		}
		_, err := run(c)
		var ce *CacheError
		if !errors.As(err, &ce) || !errors.Is(err, ErrCache) || errors.Is(err, ErrDownload) {
			t.Fatalf("got %v, want a CacheError naming the directory (not a download failure)", err)
		}
		entries, _ := os.ReadDir(filepath.Dir(outside))
		if len(entries) != 1 {
			t.Fatalf("%d files next to the outside file: the download went through the link", len(entries))
		}
	})
}

// Entries are private: files 0600, directories 0700.
func TestCachePermissions(t *testing.T) {
	img := testImage(t)
	srv, _, c := newFactory(t, img.XZ)
	c.Dir = filepath.Join(c.Dir, "new")
	p, err := fetch(t, srv, c)
	if err != nil {
		t.Fatal(err)
	}
	for d := filepath.Dir(p); ; d = filepath.Dir(d) {
		fi, err := os.Stat(d)
		if err != nil || fi.Mode().Perm() != 0o700 {
			t.Fatalf("%s: %v %v, want 0700", d, fi.Mode(), err)
		}
		if d == c.Dir {
			break
		}
	}
	if fi, err := os.Stat(p); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("%s: %v %v, want 0600", p, fi.Mode(), err)
	}
}

// A read-only cache directory is a local failure naming the path, not a
// network one.
func TestCacheReadOnlyDirIsCacheError(t *testing.T) {
	img := testImage(t)
	srv, _, c := newFactory(t, img.XZ)
	// A file where the cache directory should be (fails for root too).
	notDir := filepath.Join(t.TempDir(), "cache")
	writeFile(t, notDir, nil)
	cf := *c
	cf.Dir = notDir
	if _, err := fetch(t, srv, &cf); !errors.Is(err, ErrCache) || errors.Is(err, ErrDownload) || !strings.Contains(err.Error(), notDir) {
		t.Fatalf("got %v, want ErrCache naming %s", err, notDir)
	}
	if os.Geteuid() == 0 {
		t.Skip("root ignores directory permissions")
	}
	if err := os.Chmod(c.Dir, 0o500); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Chmod(c.Dir, 0o700) })
	_, err := fetch(t, srv, c)
	if !errors.Is(err, ErrCache) || errors.Is(err, ErrDownload) {
		t.Fatalf("got %v, want ErrCache only", err)
	}
}

// Two flashes of the same image at the same time: one downloads, the other
// waits for the entry's lock and reuses it; both cards are right.
func TestConcurrentFlashesShareOneDownload(t *testing.T) {
	img := testImage(t)
	srv, path, c := newFactory(t, img.XZ)
	srv.SetBuildDelay(300 * time.Millisecond) // both start while it builds
	src := Source{URL: srv.ImageURL(testSchematic, testVersion, testFile), Key: CacheKey(testSchematic, testVersion, testFile),
		Cache: c, HTTPClient: srv.Client()}
	var wg sync.WaitGroup
	errs := make([]error, 2)
	dsts := []string{filepath.Join(t.TempDir(), "a.img"), filepath.Join(t.TempDir(), "b.img")}
	for i := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// A separate Cache value per flash, as two processes would have.
			cc := *c
			s := src
			s.Cache = &cc
			res, err := flashOne(context.Background(), FlashOptions{Source: s, Targets: []string{dsts[i]}, Verify: true})
			if err == nil && res.SHA256 != img.SHA256 {
				err = errors.New("wrong hash " + res.SHA256)
			}
			errs[i] = err
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("flash %d: %v", i, err)
		}
	}
	if n := len(srv.RequestsTo(path)); n != 1 || srv.BytesServed() != int64(len(img.XZ)) {
		t.Fatalf("%d requests, %d bytes served: want one download", n, srv.BytesServed())
	}
}
