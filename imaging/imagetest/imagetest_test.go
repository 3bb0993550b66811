package imagetest

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"testing"

	"github.com/ulikunitz/xz"
)

func TestDeterministicAndStructured(t *testing.T) {
	const size = 8 << 20
	a, err := Raw(size, 7)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := Raw(size, 7)
	c, _ := Raw(size, 8)
	if !bytes.Equal(a, b) {
		t.Fatal("same seed gave different images")
	}
	if bytes.Equal(a, c) {
		t.Fatal("different seeds gave identical images")
	}
	if int64(len(a)) != size {
		t.Fatalf("len %d", len(a))
	}
	if a[510] != 0x55 || a[511] != 0xAA || string(a[512:520]) != "EFI PART" {
		t.Fatal("missing MBR signature or GPT header")
	}
	if string(a[size-512:size-504]) != "EFI PART" {
		t.Fatal("missing backup GPT header")
	}
	// Long zero runs and data both present.
	zeroSectors := 0
	for s := 0; s < size; s += 512 {
		if bytes.Equal(a[s:s+512], make([]byte, 512)) {
			zeroSectors++
		}
	}
	if frac := float64(zeroSectors) / float64(size/512); frac < 0.5 || frac > 0.95 {
		t.Fatalf("zero sector fraction %.2f, want mostly zeros but some data", frac)
	}
	sum, err := RawSHA256(size, 7)
	if err != nil {
		t.Fatal(err)
	}
	if want := sha256.Sum256(a); sum != hex.EncodeToString(want[:]) {
		t.Fatal("RawSHA256 differs from hash of Raw")
	}
	streamed, _ := io.ReadAll(Reader(size, 7))
	if !bytes.Equal(streamed, a) {
		t.Fatal("Reader differs from Raw")
	}
}

func TestCompressRoundTrip(t *testing.T) {
	f := New(t, 4<<20, 1, 1<<20)
	if len(f.XZ) >= len(f.Raw)/2 {
		t.Fatalf("compressed %d of %d: not compressible enough", len(f.XZ), len(f.Raw))
	}
	zr, err := xz.NewReader(bytes.NewReader(f.XZ))
	if err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(zr)
	if err != nil || !bytes.Equal(got, f.Raw) {
		t.Fatalf("round trip failed: %v", err)
	}
	if !HaveXZBinary() {
		t.Skip("xz binary not installed")
	}
	var out bytes.Buffer
	if err := CompressXZBinary(context.Background(), &out, bytes.NewReader(f.Raw), 1<<20); err != nil {
		t.Fatal(err)
	}
	zr, _ = xz.NewReader(bytes.NewReader(out.Bytes()))
	got, err = io.ReadAll(zr)
	if err != nil || !bytes.Equal(got, f.Raw) {
		t.Fatalf("xz binary round trip failed: %v", err)
	}
}

func TestRejectsBadSize(t *testing.T) {
	if err := WriteRaw(io.Discard, 1000, 1); err == nil {
		t.Fatal("want error for tiny size")
	}
}
