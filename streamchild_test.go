//go:build linux

package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"

	"github.com/talosflash/talosflash/app/elevate"
	"github.com/talosflash/talosflash/app/plan"
	"github.com/talosflash/talosflash/factory"
	"github.com/talosflash/talosflash/factory/factorytest"
	"github.com/talosflash/talosflash/imaging"
	"github.com/talosflash/talosflash/imaging/imagetest"
)

// The elevated child (a real `talosflash --flash --elevated` process)
// writes the card from what the user's process downloads and decodes,
// while it downloads, sent on its stdin: the child is told no path, the
// card is the image, the cache entry is whole, and the network was read
// once.
func TestElevatedChildWritesTheDownloadAsItArrives(t *testing.T) {
	fx := imagetest.New(t, 8<<20, 11, 1<<20)
	srv := factorytest.New(t)
	p, err := factory.FindProfile(factory.BuiltinProfiles(), "worker")
	if err != nil {
		t.Fatal(err)
	}
	id, _ := p.SchematicID()
	srv.AddImage(id, factory.DefaultTalosVersion, "metal-arm64.raw.xz", fx.XZ)
	c := factory.NewClient(srv.URL, srv.Client())
	im, err := plan.FromProfile(context.Background(), c, p, false)
	if err != nil {
		t.Fatal(err)
	}
	im.UseFormat("xz")
	dir := t.TempDir()
	card := filepath.Join(dir, "card.img")
	cache := &imaging.Cache{Dir: filepath.Join(dir, "cache")}
	var childArgs []string
	out, err := plan.Flash(context.Background(), plan.Job{
		Image: im, Devices: []string{card}, Cache: cache, Factory: c,
		NeedsElevation: func(string) bool { return true },
		Elevate: func(args []string) (*exec.Cmd, error) {
			childArgs = args
			cmd := exec.Command(os.Args[0], args...)
			cmd.Env = append(baseEnv(), "TALOSFLASH_TEST_RUN_MAIN=1")
			return cmd, nil
		},
	})
	if err != nil || !out.Elevated || !out.Cards[0].Verified || out.Cards[0].SHA256 != fx.SHA256 {
		t.Fatalf("%+v %v", out, err)
	}
	if want := (elevate.Args{Devices: []string{card}}).List(); !slices.Equal(childArgs, want) {
		t.Fatalf("child args %q, want %q (no path to read)", childArgs, want)
	}
	if imagetest.FileSHA256(t, card, fx.Size) != fx.SHA256 {
		t.Fatal("the card is not the image")
	}
	entry, _ := cache.Path(im.CacheKey())
	if got, err := os.ReadFile(entry); err != nil || !bytes.Equal(got, fx.XZ) || out.CachePath != entry {
		t.Fatalf("cache entry %s: %v", out.CachePath, err)
	}
	if n := srv.BytesServed(); n != int64(len(fx.XZ)) {
		t.Fatalf("served %d bytes, want one download of %d", n, len(fx.XZ))
	}
}
