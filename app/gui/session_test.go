package gui

import (
	"slices"
	"testing"

	"github.com/talosflash/talosflash/app/plan"
	"github.com/talosflash/talosflash/factory"
	"github.com/talosflash/talosflash/imaging/devices"
)

func TestSessionNotifiesAndKeepsSizeForItsChoice(t *testing.T) {
	s := NewSession(factory.NewClient("http://127.0.0.1:1", nil), factory.BuiltinProfiles())
	var got []Change
	s.AddListener(func(c Change) { got = append(got, c) })

	if s.TalosVersion() != factory.DefaultTalosVersion {
		t.Fatalf("version without a choice: %s", s.TalosVersion())
	}
	im := &plan.Image{SchematicID: "abc", Version: "v1.14.4", URL: "http://127.0.0.1:1/image/abc/v1.14.4/metal-arm64.raw.xz", Role: "worker"}
	s.SetChoice(im)
	s.SetImageSize("other/v1/metal-arm64.raw.xz", 99) // a stale lookup for an earlier choice
	s.SetImageSize(im.CacheKey(), 1<<30)
	s.SetDisk(&devices.Disk{Path: "/dev/sdz"})
	s.AddFlashed(Flashed{Image: *im, Device: "/dev/sdz"})
	s.SetChoice(nil)

	want := []Change{ChangeChoice, ChangeImageSize, ChangeDisk, ChangeFlashed, ChangeChoice}
	if !slices.Equal(got, want) {
		t.Fatalf("changes %v, want %v", got, want)
	}
	if s.ImageSize() != 0 || s.Disk().Path != "/dev/sdz" || len(s.Flashed()) != 1 || s.Flashed()[0].Image.Role != "worker" {
		t.Fatalf("session state: size %d disk %v flashed %+v", s.ImageSize(), s.Disk(), s.Flashed())
	}
}
