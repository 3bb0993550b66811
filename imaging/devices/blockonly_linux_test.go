//go:build linux

package devices

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// BlockOnly (the root child's rule) accepts existing block devices only:
// an image file of any name, an empty file, a symlink to a file, a
// missing path (even with CreateFile) and a stand-in under DevRoot that
// is not a device node are refused by Check and by Open, with nothing
// created or written.
func TestBlockOnlyRefusesEveryFile(t *testing.T) {
	dir := t.TempDir()
	write := func(name, data string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	img := write("card.img", "old image")
	empty := write("crontab", "")
	link := filepath.Join(dir, "link")
	if err := os.Symlink(img, link); err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(dir, "new.img")
	fake := buildFakeSystem(t, fakeSystem) // its /dev/sdb is a regular file
	for name, tc := range map[string]struct {
		l    *Lister
		path string
		code Code
	}{
		"an image file":          {DefaultLister(), img, CodeNotBlockDevice},
		"an empty file":          {DefaultLister(), empty, CodeNotBlockDevice},
		"a symlink to a file":    {DefaultLister(), link, CodeNotBlockDevice},
		"a missing path":         {DefaultLister(), missing, CodeNotFound},
		"a file standing in dev": {fake, filepath.Join(fake.DevRoot, "sdb"), CodeNotBlockDevice},
	} {
		t.Run(name, func(t *testing.T) {
			opts := Options{BlockOnly: true, CreateFile: true, AllowLoop: true, ForceNonRemovable: true}
			if _, err := tc.l.Check(tc.path, 0, opts); !isRefusal(err, tc.code) {
				t.Fatalf("Check: %v, want a %s refusal", err, tc.code)
			}
			d, err := tc.l.Open(tc.path, 0, opts)
			if err == nil {
				d.Close()
			}
			if !isRefusal(err, tc.code) {
				t.Fatalf("Open: %v, want a %s refusal", err, tc.code)
			}
			if got, _ := os.ReadFile(img); string(got) != "old image" {
				t.Fatalf("the image file was written: %q", got)
			}
			if _, err := os.Lstat(missing); !errors.Is(err, os.ErrNotExist) {
				t.Fatalf("%s was created", missing)
			}
		})
	}
}

// A symlink that named a block device when the caller checked it, and a
// file when Open runs (the root child's stat, then a swap by the user who
// owns the link): Open opens no file. Before BlockOnly the child wrote the
// file as root (a race won within a few tries with the built CLI).
func TestBlockOnlyOpensNoFileSwappedInAfterTheCheck(t *testing.T) {
	loop := newLoop(t, "", 8<<20, false)
	dir := t.TempDir()
	victim := filepath.Join(dir, "victim.img")
	if err := os.WriteFile(victim, []byte("victim"), 0o644); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "card")
	if err := os.Symlink(loop, link); err != nil {
		t.Fatal(err)
	}
	opts := Options{BlockOnly: true, AllowLoop: true, ForceNonRemovable: true}
	if _, err := Check(link, 0, opts); err != nil {
		t.Fatalf("Check of the link to %s: %v", loop, err)
	}
	if err := os.Remove(link); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(victim, link); err != nil {
		t.Fatal(err)
	}
	d, err := Open(link, 0, opts)
	if err == nil {
		d.Close()
	}
	if !isRefusal(err, CodeNotBlockDevice) {
		t.Fatalf("Open after the swap: %v, want a refusal", err)
	}
	if got, _ := os.ReadFile(victim); string(got) != "victim" {
		t.Fatalf("the file swapped in was written: %q", got)
	}
}

func isRefusal(err error, code Code) bool {
	var r *RefusedError
	return errors.As(err, &r) && r.Reason == code
}
