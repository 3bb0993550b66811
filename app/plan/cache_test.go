//go:build unix

package plan

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/talosflash/talosflash/factory"
	"github.com/talosflash/talosflash/factory/factorytest"
	"github.com/talosflash/talosflash/imaging"
	"github.com/talosflash/talosflash/imaging/devices"
	"github.com/talosflash/talosflash/imaging/imagetest"
)

// The same role from two factories: the second flash downloads factory B's
// image instead of reusing A's cached one, and the card gets B's image.
func TestCacheKeyedByFactory(t *testing.T) {
	id, _ := profile(t, "worker").SchematicID()
	a, b := factorytest.New(t), factorytest.New(t)
	fxA := imagetest.New(t, 1<<20, 3, 1<<20)
	fxB := imagetest.New(t, 1<<20, 7, 1<<20)
	a.AddImage(id, factory.DefaultTalosVersion, "metal-arm64.raw.xz", fxA.XZ)
	b.AddImage(id, factory.DefaultTalosVersion, "metal-arm64.raw.xz", fxB.XZ)
	dir := t.TempDir()
	cache := &imaging.Cache{Dir: filepath.Join(dir, "cache")}

	flash := func(srv *factorytest.Server, fx *imagetest.Fixture, card string) *Image {
		t.Helper()
		c := factory.NewClient(srv.URL, srv.Client())
		im, err := FromProfile(context.Background(), c, profile(t, "worker"), false)
		if err != nil {
			t.Fatal(err)
		}
		target := filepath.Join(dir, card)
		if _, err := Flash(context.Background(), Job{Image: im, Devices: []string{target}, Cache: cache, Factory: c, Safety: devices.Options{CreateFile: true}}); err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(target)
		if err != nil || !bytes.Equal(got, fx.Raw) {
			t.Fatalf("card %s does not hold the image of factory %s", card, srv.URL)
		}
		return im
	}
	imA := flash(a, fxA, "a.img")
	imB := flash(b, fxB, "b.img")
	if b.BytesServed() != int64(len(fxB.XZ)) {
		t.Fatalf("factory B served %d bytes, want its whole image (%d): A's cached image was reused", b.BytesServed(), len(fxB.XZ))
	}
	if imA.CacheKey() == imB.CacheKey() {
		t.Fatalf("both factories share the cache key %s", imA.CacheKey())
	}
	for _, im := range []*Image{imA, imB} {
		if strings.Contains(im.CacheKey(), "factory.talos.dev") || !strings.HasPrefix(im.CacheKey(), "127.0.0.1_") {
			t.Fatalf("key %q does not name the loopback factory", im.CacheKey())
		}
	}
	// Both flashed schematic IDs are listed once.
	if ids := CachedSchematicIDs(cache); len(ids) != 1 || ids[0] != id {
		t.Fatalf("cached IDs %v, want [%s]", ids, id)
	}
}

// The public factory keeps a short readable key.
func TestCacheKeyDefaultFactory(t *testing.T) {
	c := factory.NewClient("", nil)
	im := FromInstallerRef(c, factory.InstallerRef{SchematicID: strings.Repeat("a", 64), Version: "v1.14.5"}, "")
	if want := "factory.talos.dev/" + strings.Repeat("a", 64) + "/v1.14.5/metal-arm64.raw.xz"; im.CacheKey() != want {
		t.Fatalf("key %q, want %q", im.CacheKey(), want)
	}
}

// A FIFO planted as the partial download's sidecar (the review's
// reproduction) neither hangs the flash nor survives it.
func TestFlashWithFIFOSidecar(t *testing.T) {
	srv := factorytest.New(t)
	fx := imagetest.New(t, 1<<20, 3, 1<<20)
	id, _ := profile(t, "worker").SchematicID()
	srv.AddImage(id, factory.DefaultTalosVersion, "metal-arm64.raw.xz", fx.XZ)
	dir := t.TempDir()
	cache := &imaging.Cache{Dir: filepath.Join(dir, "cache")}
	c := factory.NewClient(srv.URL, srv.Client())
	im, err := FromProfile(context.Background(), c, profile(t, "worker"), false)
	if err != nil {
		t.Fatal(err)
	}
	entry, _ := cache.Path(im.CacheKey())
	if err := os.MkdirAll(filepath.Dir(entry), 0o700); err != nil {
		t.Fatal(err)
	}
	fifo := entry + ".partial.json"
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { // unblocks a hung open so the test fails instead of hanging
		if w, err := os.OpenFile(fifo, os.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
			w.Close()
		}
	})
	target := filepath.Join(dir, "card.img")
	done := make(chan error, 1)
	go func() {
		_, err := Flash(context.Background(), Job{Image: im, Devices: []string{target}, Cache: cache, Factory: c, Safety: devices.Options{CreateFile: true}})
		done <- err
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the flash hangs on a FIFO at " + fifo)
	}
	if got, err := os.ReadFile(target); err != nil || !bytes.Equal(got, fx.Raw) {
		t.Fatal("the card does not hold the served image")
	}
	if fi, err := os.Lstat(fifo); err == nil && fi.Mode()&os.ModeNamedPipe != 0 {
		t.Fatal("the FIFO is still there")
	}
}
