package devices

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// An image-file target swapped between the check and the open (for a
// symlink to another file, or another file renamed over it) is refused and
// the other file is left as it was: no check-then-open race.
func TestOpenImageFileSwappedAfterCheck(t *testing.T) {
	victimData := []byte("root:x:0:0:root:/root:/bin/bash\n")
	for name, swap := range map[string]func(t *testing.T, target, victim string){
		"symlink": func(t *testing.T, target, victim string) {
			if err := os.Remove(target); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(victim, target); err != nil {
				t.Fatal(err)
			}
		},
		"renamed over": func(t *testing.T, target, victim string) {
			if err := os.Link(victim, target+".new"); err != nil {
				t.Fatal(err)
			}
			if err := os.Rename(target+".new", target); err != nil {
				t.Fatal(err)
			}
		},
		"created as link": func(t *testing.T, target, victim string) {
			if err := os.Symlink(victim, target); err != nil {
				t.Fatal(err)
			}
		},
	} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			target := filepath.Join(dir, "card.img")
			victim := filepath.Join(dir, "passwd")
			if err := os.WriteFile(victim, victimData, 0o644); err != nil {
				t.Fatal(err)
			}
			if name != "created as link" {
				if err := os.WriteFile(target, []byte("old image"), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			beforeFileOpen = func() { swap(t, target, victim) }
			t.Cleanup(func() { beforeFileOpen = func() {} })
			d, err := Open(target, 0, Options{CreateFile: true})
			if err == nil {
				d.Close()
			}
			var r *RefusedError
			if !errors.As(err, &r) || !strings.Contains(err.Error(), "changed between the check and the open") {
				t.Fatalf("got %v, want a refusal", err)
			}
			if got, _ := os.ReadFile(victim); string(got) != string(victimData) {
				t.Fatalf("the other file was changed: %q", got)
			}
		})
	}
}

// Without a swap, an existing image file is truncated only after the open
// and written from the start; a new one is created.
func TestOpenImageFileTruncatesAfterOpen(t *testing.T) {
	dir := t.TempDir()
	target := filepath.Join(dir, "card.img")
	if err := os.WriteFile(target, []byte("an older, longer image"), 0o644); err != nil {
		t.Fatal(err)
	}
	d, err := Open(target, 0, Options{CreateFile: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d.Write([]byte("new")); err != nil {
		t.Fatal(err)
	}
	d.Close()
	if got, _ := os.ReadFile(target); string(got) != "new" {
		t.Fatalf("file holds %q, want %q", got, "new")
	}
	fresh := filepath.Join(dir, "fresh.img")
	d, err = Open(fresh, 0, Options{CreateFile: true})
	if err != nil {
		t.Fatal(err)
	}
	d.Close()
	if fi, err := os.Stat(fresh); err != nil || fi.Size() != 0 {
		t.Fatalf("new file: %v %v", fi, err)
	}
}

// Rounded sizes that read the same are followed by exact byte counts.
func TestTooSmallShowsExactBytes(t *testing.T) {
	msg := tooSmallMsg("/dev/sdz", 64<<20, 64<<20+512)
	if !strings.Contains(msg, "67108864 bytes") || !strings.Contains(msg, "67109376 bytes") {
		t.Fatalf("%q: want exact byte counts", msg)
	}
	if msg := tooSmallMsg("/dev/sdz", 32<<20, 64<<20); strings.Contains(msg, "bytes") {
		t.Fatalf("%q: distinct rounded sizes need no byte counts", msg)
	}
}
