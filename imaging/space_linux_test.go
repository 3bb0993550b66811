//go:build linux

package imaging

import (
	"context"
	"errors"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

// smallFS mounts a 2 MiB tmpfs for the test (root only).
func smallFS(t *testing.T) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("mounting a small tmpfs needs root")
	}
	dir := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=2m,mode=0700", "tmpfs", dir).CombinedOutput(); err != nil {
		t.Skipf("mount tmpfs: %v: %s", err, out)
	}
	t.Cleanup(func() {
		if err := unix.Unmount(dir, 0); err != nil {
			t.Errorf("unmount %s: %v", dir, err)
		}
	})
	return dir
}

// A download whose size is known and larger than the cache's free space
// is refused before it starts filling the disk; the error names the cache.
func TestFetchChecksFreeSpace(t *testing.T) {
	big := make([]byte, 3<<20) // more than the 2 MiB file system holds
	srv, _, c := newFactory(t, big)
	c.Dir = smallFS(t)
	_, err := fetch(t, srv, c)
	if !errors.Is(err, ErrTooLarge) || !errors.Is(err, ErrCache) || errors.Is(err, ErrDownload) {
		t.Fatalf("got %v, want a cache error (too large)", err)
	}
	if st, err := os.Stat(finalPath(t, c) + partialSuffix); err == nil && st.Size() > 0 {
		t.Fatalf("%d bytes were stored", st.Size())
	}
}

// An image file target on a file system without room for the known image
// size is refused before writing.
func TestFlashChecksFreeSpaceOfFileTarget(t *testing.T) {
	img := testImage(t)
	src := writeTemp(t, "metal-arm64.raw.xz", img.XZ)
	dst := filepath.Join(smallFS(t), "card.img")
	_, err := flashOne(context.Background(), FlashOptions{Source: Source{Path: src}, Targets: []string{dst}})
	if !errors.Is(err, ErrTargetTooSmall) || errors.Is(err, ErrIncomplete) {
		t.Fatalf("got %v, want ErrTargetTooSmall before writing", err)
	}
	if st, err := os.Stat(dst); err != nil || st.Size() != 0 {
		t.Fatalf("target: %v %v, want an empty file", st, err)
	}
}

// A download without a size on a nearly full cache file system stops
// before filling it and is a cache (storage) error, not a network one.
func TestFetchWithoutLengthStopsBeforeDiskIsFull(t *testing.T) {
	h := newHostile(t, func(n int, w http.ResponseWriter, r *http.Request) {
		buf := make([]byte, 64<<10)
		for i := 0; i < 1024 && r.Context().Err() == nil; i++ { // at most 64 MiB
			if _, err := w.Write(buf); err != nil {
				return
			}
		}
	})
	c := hostileCache(t)
	c.Dir = smallFS(t)
	_, err := h.fetch(t, c)
	if !errors.Is(err, ErrTooLarge) || !errors.Is(err, ErrCache) || errors.Is(err, ErrDownload) {
		t.Fatalf("got %v, want a cache error (would fill the disk)", err)
	}
	if free, ok := freeSpace(c.Dir); !ok || free < 1<<20 {
		t.Fatalf("free space left: %d", free)
	}
}
