//go:build linux

package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

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

// The same download cut mid-body (no validators: the factory's direct
// path), while the root child already writes what came: the download
// restarts from byte 0, the restarted bytes are checked against those the
// child was sent, and the card is the image; a restart that brings other
// bytes fails as a splice and the card counts as incomplete, never as
// written. For the in-process flash, imaging's TestFirstFlashSurvivesCut.
func TestElevatedChildSurvivesACutDownload(t *testing.T) {
	fx := imagetest.New(t, 8<<20, 12, 1<<20)
	other := imagetest.New(t, 8<<20, 13, 1<<20)
	p, err := factory.FindProfile(factory.BuiltinProfiles(), "worker")
	if err != nil {
		t.Fatal(err)
	}
	id, _ := p.SchematicID()
	for _, changed := range []bool{false, true} {
		srv := factorytest.New(t)
		srv.AddImage(id, factory.DefaultTalosVersion, "metal-arm64.raw.xz", fx.XZ)
		path := factorytest.ImagePath(id, factory.DefaultTalosVersion, "metal-arm64.raw.xz")
		srv.ResetAfter(path, int64(len(fx.XZ))*3/4)
		if changed {
			srv.Inject(path, factorytest.Fault{Kind: factorytest.FaultContent, Data: other.XZ, Times: 1})
		}
		c := factory.NewClient(srv.URL, srv.Client())
		im, err := plan.FromProfile(context.Background(), c, p, false)
		if err != nil {
			t.Fatal(err)
		}
		im.UseFormat("xz")
		dir := t.TempDir()
		card := filepath.Join(dir, "card.img")
		cache := &imaging.Cache{Dir: filepath.Join(dir, "cache"), RetryDelay: time.Millisecond}
		out, err := plan.Flash(context.Background(), plan.Job{
			Image: im, Devices: []string{card}, Cache: cache, Factory: c,
			NeedsElevation: func(string) bool { return true },
			Elevate: func(args []string) (*exec.Cmd, error) {
				cmd := exec.Command(os.Args[0], args...)
				cmd.Env = append(baseEnv(), "TALOSFLASH_TEST_RUN_MAIN=1")
				return cmd, nil
			},
		})
		if !changed {
			if err != nil || !out.Elevated || !out.Cards[0].Verified || imagetest.FileSHA256(t, card, fx.Size) != fx.SHA256 {
				t.Fatalf("a cut of the same bytes: %+v %v", out, err)
			}
			if n := srv.BytesServed(); n <= int64(len(fx.XZ)) {
				t.Fatalf("served %d bytes: the cut did not happen", n)
			}
			continue
		}
		if err == nil || !errors.Is(err, imaging.ErrDownload) || !strings.Contains(err.Error(), "the restarted download differs") {
			t.Fatalf("other bytes after the cut: %v, want the splice refusal", err)
		}
		if out != nil && len(out.Cards) == 1 && out.Cards[0].Err == nil {
			t.Fatalf("a spliced download counted as a card: %+v", out.Cards[0])
		}
	}
}
