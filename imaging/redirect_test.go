package imaging

import (
	"net/http"
	"strings"
	"testing"

	"github.com/talosflash/talosflash/factory/factorytest"
)

// Image Factory with an object-storage cache answers image GETs with a
// redirect to storage; the download, its resume and the cache follow it.
func TestFetchFollowsRedirect(t *testing.T) {
	img := testImage(t)
	srv, path, c := newStorageFactory(t, img.XZ)

	// Interrupted at the redirect target, then resumed through the redirect.
	srv.ResetAfter(path, int64(len(img.XZ)/3))
	p, err := fetch(t, srv, c)
	if err != nil {
		t.Fatalf("fetch through redirect: %v", err)
	}
	assertFile(t, p, img.XZ)
	if got := srv.BytesServed(); got > int64(len(img.XZ))+int64(len(img.XZ)/3)+64<<10 {
		t.Fatalf("served %d bytes for a %d-byte image: the resume restarted instead of continuing", got, len(img.XZ))
	}
	if len(srv.RequestsTo(path)) < 2 {
		t.Fatalf("want the resume to go through the original URL again, got %d requests", len(srv.RequestsTo(path)))
	}
	reqs := srv.RequestsTo(factorytest.StoragePrefix + path)
	if len(reqs) != 2 || !strings.HasPrefix(reqs[1].Header.Get("Range"), "bytes=") || reqs[1].Header.Get("Range") == "bytes=0-" {
		t.Fatalf("storage requests %d, second Range %q: want one reset then one ranged resume", len(reqs), reqs[len(reqs)-1].Header.Get("Range"))
	}
}

func TestFetchRedirectLoopFails(t *testing.T) {
	img := testImage(t)
	srv, path, c := newFactory(t, img.XZ)
	srv.Redirect(path, path, http.StatusFound)
	_, err := fetch(t, srv, c)
	if err == nil || !strings.Contains(err.Error(), "redirect") {
		t.Fatalf("redirect loop: err = %v, want a clear redirect error", err)
	}
	assertNoEntry(t, c)
}
