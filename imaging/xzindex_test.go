package imaging

import (
	"bytes"
	"errors"
	"testing"

	"github.com/talosflash/talosflash/imaging/imagetest"
)

func TestXZUncompressedSize(t *testing.T) {
	f := imagetest.New(t, 2<<20, 3, 512<<10)
	n, err := XZUncompressedSize(bytes.NewReader(f.XZ), int64(len(f.XZ)))
	if err != nil || n != f.Size {
		t.Fatalf("got %d, %v; want %d", n, err, f.Size)
	}
	info, err := CheckXZ(bytes.NewReader(f.XZ), int64(len(f.XZ)))
	if err != nil {
		t.Fatal(err)
	}
	if info.Blocks != 4 || info.Streams != 1 || info.Uncompressed != f.Size {
		t.Fatalf("info %+v, want 4 blocks, 1 stream", info)
	}
	// Two concatenated streams with stream padding between them.
	two := append(append(append([]byte{}, f.XZ...), 0, 0, 0, 0), f.XZ...)
	info, err = CheckXZ(bytes.NewReader(two), int64(len(two)))
	if err != nil || info.Streams != 2 || info.Uncompressed != 2*f.Size {
		t.Fatalf("two streams: %+v, %v", info, err)
	}
}

func TestXZMultiBlockBinary(t *testing.T) {
	f, ok := imagetest.NewMultiBlock(t, 2<<20, 4, 256<<10)
	if !ok {
		t.Skip("xz binary not installed")
	}
	info, err := CheckXZ(bytes.NewReader(f.XZ), int64(len(f.XZ)))
	if err != nil || info.Blocks != 8 || info.Uncompressed != f.Size {
		t.Fatalf("info %+v, %v; want 8 blocks of %d bytes", info, err, f.Size)
	}
}

func TestCheckXZDetectsDamage(t *testing.T) {
	f := testImage(t)
	cases := map[string][]byte{
		"truncated":      f.XZ[:len(f.XZ)-1000],
		"truncated tail": f.XZ[:len(f.XZ)-3],
		"not xz":         bytes.Repeat([]byte{1}, 100),
		"empty":          nil,
	}
	flip := func(off int) []byte {
		b := append([]byte{}, f.XZ...)
		b[off] ^= 0x10
		return b
	}
	cases["footer byte"] = flip(len(f.XZ) - 8)
	cases["index byte"] = flip(len(f.XZ) - 14)
	cases["stream header"] = flip(7)
	cases["block header"] = flip(13)
	for name, data := range cases {
		_, err := CheckXZ(bytes.NewReader(data), int64(len(data)))
		if !errors.Is(err, ErrCorruptImage) {
			t.Errorf("%s: got %v, want ErrCorruptImage", name, err)
		}
	}
}
