package gui

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/talosflash/talosflash/app/plan"
	"github.com/talosflash/talosflash/factory"
	"github.com/talosflash/talosflash/imaging"
	"github.com/talosflash/talosflash/imaging/devices"
)

func TestSessionNotifiesAndKeepsSizeForItsChoice(t *testing.T) {
	s := NewSession(factory.NewClient("http://127.0.0.1:1", nil), factory.BuiltinProfiles())
	var got []Change
	s.AddListener(func(c Change) { got = append(got, c) })

	if s.TalosVersion() != factory.DefaultTalosVersion {
		t.Fatalf("version without a choice: %s", s.TalosVersion())
	}
	im := &plan.Image{SchematicID: "abc", Version: "v1.14.4", URL: "http://127.0.0.1:1/image/abc/v1.14.4/metal-arm64.raw.xz", Profile: &factory.Profile{Name: "worker"}}
	s.SetChoice(im)
	s.SetImageSize("other/v1/metal-arm64.raw.xz", 99) // a stale lookup for an earlier choice
	s.SetImageSize(im.CacheKey(), 1<<30)
	s.SetDisk(&devices.Disk{Path: "/dev/sdz"})
	s.AddFlashed(Flashed{Image: *im, Card: imaging.CardResult{Target: "/dev/sdz"}})
	s.SetChoice(nil)

	want := []Change{ChangeChoice, ChangeImageSize, ChangeDisk, ChangeFlashed, ChangeChoice}
	if !slices.Equal(got, want) {
		t.Fatalf("changes %v, want %v", got, want)
	}
	if s.ImageSize() != 0 || s.Disk().Path != "/dev/sdz" || len(s.Flashed()) != 1 || s.Flashed()[0].Image.ProfileName() != "worker" {
		t.Fatalf("session state: size %d disk %v flashed %+v", s.ImageSize(), s.Disk(), s.Flashed())
	}
}

// A flash attempt lives as long as what it describes: choosing the same
// image and cards again (or fewer of them: a written card is unticked)
// keeps it, another image or a card it did not write forgets it once it
// ended; a running one is never forgotten, and the reports of an earlier
// attempt never reach a later one.
func TestSessionAttemptLifetime(t *testing.T) {
	s := NewSession(factory.NewClient("http://127.0.0.1:1", nil), factory.BuiltinProfiles())
	im := &plan.Image{SchematicID: "abc", Version: "v1.14.5", URL: "http://127.0.0.1:1/image/abc/v1.14.5/metal-arm64.raw.zst", Profile: &factory.Profile{Name: "worker"}}
	other := &plan.Image{SchematicID: "def", Version: "v1.14.5", URL: "http://127.0.0.1:1/image/def/v1.14.5/metal-arm64.raw.zst"}
	cards := []devices.Disk{{Path: "/dev/sdy"}, {Path: "/dev/sdz"}}
	s.SetChoice(im)
	s.SetCards(cards)
	a := &Attempt{Image: *im, Cards: cards}
	s.StartAttempt(a)
	first := a.Seq
	s.SetChoice(other) // chosen while it runs
	if s.Attempt() == nil {
		t.Fatal("a running attempt was forgotten")
	}
	s.SetChoice(im)
	s.EndAttempt(first, nil, context.Canceled, time.Now())
	s.SetCards(slices.Clone(cards)) // a device list refresh: the same cards
	if s.Attempt() == nil {
		t.Fatal("the same cards chosen again forgot the attempt")
	}
	s.SetCards(cards[:1])
	if s.Attempt() == nil {
		t.Fatal("one of its cards unticked: the ended attempt is forgotten")
	}
	s.SetCards([]devices.Disk{{Path: "/dev/sdx"}})
	if s.Attempt() != nil {
		t.Fatal("a card it did not write chosen: the ended attempt is still shown")
	}
	s.SetCards(cards)
	b := &Attempt{Image: *im, Cards: cards}
	s.StartAttempt(b)
	s.AttemptProgress(first, imaging.Progress{Stage: imaging.StageWrite, Done: 9, Total: 10, Target: "/dev/sdy"})
	s.AttemptStatus(first, "late line of the first attempt")
	if len(b.Write) != 0 || b.Status != "" || b.Seq == first {
		t.Fatalf("the first attempt's reports reached the second: %+v", b)
	}
	s.EndAttempt(b.Seq, nil, context.Canceled, time.Now())
	s.SetChoice(other)
	if s.Attempt() != nil {
		t.Fatal("another image chosen: the ended attempt is still shown")
	}
}
