package devices

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A device that takes whole sectors only (macOS raw node, Windows
// unbuffered drive) gets the image's short tail padded with zeros, and
// nothing may be written after it.
func TestSectorPaddedTail(t *testing.T) {
	// Not t.TempDir: under Wine 8 (where this test also runs) Go's
	// RemoveAll fails with "Invalid function", which would fail the test.
	dir, err := os.MkdirTemp("", "talosflash-pad")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	path := filepath.Join(dir, "card.img")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	released := 0
	dev := newDevice(f, &Disk{Path: path}, false, Options{SyncEvery: -1})
	dev.sector = 512
	dev.afterClose = func() string { released++; return "could not eject card.img" }

	body := bytes.Repeat([]byte{0xA5}, 4096)
	tail := bytes.Repeat([]byte{0x5A}, 100)
	for _, p := range [][]byte{body, tail} {
		if n, err := dev.Write(p); err != nil || n != len(p) {
			t.Fatalf("Write(%d) = %d, %v", len(p), n, err)
		}
	}
	if _, err := dev.Write(make([]byte, 512)); err == nil || !strings.Contains(err.Error(), "after the padded end") {
		t.Errorf("write after the padded tail: %v", err)
	}
	dev.Close()
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	want := append(append(append([]byte(nil), body...), tail...), make([]byte, 512-100)...)
	if !bytes.Equal(got, want) {
		t.Errorf("file holds %d bytes, want %d (body, tail, zeros to the sector end)", len(got), len(want))
	}
	if released != 1 || len(dev.Warnings()) != 1 || dev.Warnings()[0] != "could not eject card.img" {
		t.Errorf("afterClose ran %d times, warnings %q", released, dev.Warnings())
	}
}

func TestAlignedBuffer(t *testing.T) {
	for _, align := range []int{512, 4096} {
		for n := 1; n < 3*align; n += align / 2 {
			b := alignedBuffer(n, align)
			if len(b) != n || cap(b) != n {
				t.Fatalf("len %d cap %d, want %d", len(b), cap(b), n)
			}
			if addr := addrOf(b); addr%uintptr(align) != 0 {
				t.Fatalf("address %#x not %d-aligned", addr, align)
			}
		}
	}
}
