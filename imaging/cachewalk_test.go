//go:build unix

package imaging

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// A directory of the cache replaced by a symlink is refused on every
// access, also when the entry it leads to is complete (the hit path), and
// nothing behind it is read, served or deleted.
func TestCacheRefusesSymlinkedDirectoryOnEveryAccess(t *testing.T) {
	img := testImage(t)
	for _, tc := range []struct {
		name    string
		content []byte
	}{{"valid image behind the link", img.XZ}, {"user file behind the link", []byte("my notes\n")}} {
		for level := 1; level <= 3; level++ { // factory, schematic, version directory
			t.Run(tc.name+"/level "+string(rune('0'+level)), func(t *testing.T) {
				srv, _, c := newFactory(t, img.XZ)
				final := finalPath(t, c)
				// The directory that the link replaces, and where it points.
				linked := final
				for range 4 - level {
					linked = filepath.Dir(linked)
				}
				rest, _ := filepath.Rel(linked, final)
				elsewhere := filepath.Join(t.TempDir(), "elsewhere")
				outsideFile := filepath.Join(elsewhere, rest)
				if err := os.MkdirAll(filepath.Dir(outsideFile), 0o700); err != nil {
					t.Fatal(err)
				}
				writeFile(t, outsideFile, tc.content)
				if err := os.MkdirAll(filepath.Dir(linked), 0o700); err != nil {
					t.Fatal(err)
				}
				if err := os.Symlink(elsewhere, linked); err != nil {
					t.Fatal(err)
				}
				key := CacheKey(testSchematic, testVersion, testFile)

				if c.Has(key) {
					t.Fatal("Has: an entry reached through a symlink counts as cached")
				}
				ok, err := c.Lookup(key)
				assertRefused(t, "Lookup", ok, err, linked)
				p, err := fetch(t, srv, c)
				assertRefused(t, "Fetch", p != "", err, linked)
				if f, err := c.Open(key); err == nil {
					f.Close()
					t.Fatal("Open: opened an entry reached through a symlink")
				}
				if err := c.Remove(key); err == nil || !errors.Is(err, ErrCache) {
					t.Fatalf("Remove through a symlink: %v, want ErrCache", err)
				}
				if srv.BytesServed() != 0 {
					t.Fatalf("downloaded %d bytes through the link", srv.BytesServed())
				}
				got, err := os.ReadFile(outsideFile)
				if err != nil || !bytes.Equal(got, tc.content) {
					t.Fatalf("the file behind the link changed: %q %v", got, err)
				}
				entries, _ := os.ReadDir(filepath.Dir(outsideFile))
				if len(entries) != 1 {
					t.Fatalf("%d files next to the outside file, want 1", len(entries))
				}
				if fi, err := os.Lstat(linked); err != nil || fi.Mode()&os.ModeSymlink == 0 {
					t.Fatalf("the link itself was touched: %v %v", fi, err)
				}
			})
		}
	}
}

func assertRefused(t *testing.T, op string, ok bool, err error, path string) {
	t.Helper()
	var ce *CacheError
	if ok || !errors.As(err, &ce) || !errors.Is(err, ErrCache) || errors.Is(err, ErrDownload) ||
		ce.Path != path || !strings.Contains(err.Error(), "symbolic link") {
		t.Fatalf("%s: ok=%v err=%v, want a CacheError naming %s as a symbolic link", op, ok, err, path)
	}
}

// FIFOs (and other non-regular files) at the cache's own file names never
// block a flash: they are removed and the download goes on.
func TestCacheNonRegularFilesDoNotHang(t *testing.T) {
	img := testImage(t)
	for _, suffix := range []string{"", partialSuffix, metaSuffix, metaSuffix + ".tmp", lockSuffix} {
		t.Run("fifo as "+suffix, func(t *testing.T) {
			srv, _, c := newFactory(t, img.XZ)
			final := finalPath(t, c)
			if err := os.MkdirAll(filepath.Dir(final), 0o700); err != nil {
				t.Fatal(err)
			}
			fifo := final + suffix
			if err := syscall.Mkfifo(fifo, 0o600); err != nil {
				t.Fatal(err)
			}
			// Before the fix a blocking open hangs: unblock it at the end so
			// the test fails instead of hanging the package.
			t.Cleanup(func() {
				if w, err := os.OpenFile(fifo, os.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
					w.Close()
				}
			})
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			type result struct {
				p   string
				err error
			}
			done := make(chan result, 1)
			go func() {
				p, err := c.Fetch(ctx, srv.Client(), srv.ImageURL(testSchematic, testVersion, testFile), CacheKey(testSchematic, testVersion, testFile), nil)
				done <- result{p, err}
			}()
			var r result
			select {
			case r = <-done:
			case <-time.After(20 * time.Second):
				t.Fatalf("Fetch hangs on a FIFO at %s", filepath.Base(fifo))
			}
			if r.err != nil {
				t.Fatal(r.err)
			}
			assertFile(t, r.p, img.XZ)
			if fi, err := os.Lstat(fifo); err == nil && !fi.Mode().IsRegular() {
				t.Fatalf("the FIFO is still there: %v", fi.Mode())
			}
		})
	}
}

// A directory of the cache that someone else owns is refused; one of ours
// that others may write to is made private again.
func TestCacheDirectoryOwnerAndMode(t *testing.T) {
	img := testImage(t)
	srv, _, c := newFactory(t, img.XZ)
	final := finalPath(t, c)
	version := filepath.Dir(final)
	if err := os.MkdirAll(version, 0o777); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(version, 0o777); err != nil {
		t.Fatal(err)
	}
	p, err := fetch(t, srv, c)
	if err != nil {
		t.Fatal(err)
	}
	assertFile(t, p, img.XZ)
	if fi, err := os.Stat(version); err != nil || fi.Mode().Perm() != 0o700 {
		t.Fatalf("%s: %v %v, want 0700", version, fi.Mode(), err)
	}

	if os.Geteuid() != 0 {
		t.Skip("chown needs root")
	}
	schematicDir := filepath.Dir(version)
	if err := os.Chown(schematicDir, 4242, 4242); err != nil {
		t.Fatal(err)
	}
	if c.Has(CacheKey(testSchematic, testVersion, testFile)) {
		t.Fatal("an entry under someone else's directory counts as cached")
	}
	_, err = fetch(t, srv, c)
	var ce *CacheError
	if !errors.As(err, &ce) || ce.Path != schematicDir || !strings.Contains(err.Error(), "owned by uid 4242") {
		t.Fatalf("got %v, want a CacheError naming %s and its owner", err, schematicDir)
	}
}

// Open gives the checked entry itself, and nothing for a missing one.
func TestCacheOpen(t *testing.T) {
	img := testImage(t)
	srv, _, c := newFactory(t, img.XZ)
	key := CacheKey(testSchematic, testVersion, testFile)
	if _, err := c.Open(key); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("Open of a missing entry: %v", err)
	}
	if _, err := fetch(t, srv, c); err != nil {
		t.Fatal(err)
	}
	f, err := c.Open(key)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var buf bytes.Buffer
	if _, err := buf.ReadFrom(f); err != nil || !bytes.Equal(buf.Bytes(), img.XZ) {
		t.Fatalf("Open read %d bytes (%v), want the cached image", buf.Len(), err)
	}
}

// The flash pipeline drops a corrupt entry through Cache.Remove: the
// removal walks the cache again, so a directory swapped for a symlink in
// between protects what it points to.
func TestRemoveEntryAfterSwapDoesNotFollow(t *testing.T) {
	img := testImage(t)
	srv, _, c := newFactory(t, img.XZ)
	p, err := fetch(t, srv, c)
	if err != nil {
		t.Fatal(err)
	}
	version := filepath.Dir(p)
	elsewhere := t.TempDir()
	outside := filepath.Join(elsewhere, testFile)
	writeFile(t, outside, []byte("my notes\n"))
	if err := os.Rename(version, version+".old"); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(elsewhere, version); err != nil {
		t.Fatal(err)
	}
	key := CacheKey(testSchematic, testVersion, testFile)
	if err := c.Remove(key); !errors.Is(err, ErrCache) {
		t.Fatalf("Remove through a swapped directory: %v, want ErrCache", err)
	}
	if got, err := os.ReadFile(outside); err != nil || string(got) != "my notes\n" {
		t.Fatalf("the file behind the link changed: %q %v", got, err)
	}
	if err := os.Remove(version); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(version+".old", version); err != nil {
		t.Fatal(err)
	}
	if err := c.Remove(key); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(p); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("entry still there after Remove: %v", err)
	}
}

// Root (sudo keeping HOME) uses the cache of the user who owns its
// directory, but not a directory of that user that others can write to.
func TestCacheRootInUsersCache(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root")
	}
	img := testImage(t)
	srv, _, c := newFactory(t, img.XZ)
	final := finalPath(t, c)
	schematicDir := filepath.Dir(filepath.Dir(final))
	if err := os.MkdirAll(schematicDir, 0o700); err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{c.Dir, filepath.Dir(schematicDir), schematicDir} {
		if err := os.Chown(d, 4242, 4242); err != nil {
			t.Fatal(err)
		}
	}
	p, err := fetch(t, srv, c)
	if err != nil {
		t.Fatal(err)
	}
	assertFile(t, p, img.XZ)
	if err := os.Chmod(schematicDir, 0o777); err != nil {
		t.Fatal(err)
	}
	_, err = fetch(t, srv, c)
	var ce *CacheError
	if !errors.As(err, &ce) || ce.Path != schematicDir || !strings.Contains(err.Error(), "writable by others") {
		t.Fatalf("got %v, want a CacheError naming %s", err, schematicDir)
	}
}
