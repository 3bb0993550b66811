package xzpar

import (
	"bytes"
	"io"
	"testing"

	"github.com/talosflash/talosflash/imaging/imagetest"
)

// FuzzReader: never panics, and when it returns no error the output equals
// xz.NewReader's.
func FuzzReader(f *testing.F) {
	raw, err := imagetest.Raw(1<<20, 3)
	if err != nil {
		f.Fatal(err)
	}
	small := raw[:24<<10]
	for _, bs := range []int64{0, 8 << 10} {
		z, err := imagetest.XZBytes(small, bs)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(z)
	}
	if imagetest.HaveXZBinary() {
		f.Add(xzRun(f, small, "-c", "-T2", "--block-size=8KiB", "-0"))
		f.Add(xzRun(f, small[:4<<10], "-c", "-T2", "--block-size=1KiB", "-0", "--check=crc32"))
		f.Add(xzRun(f, small[:2<<10], "-c", "-T1", "-0", "--check=sha256"))
		f.Add(xzRun(f, nil, "-c"))
	}
	const maxOut = 8 << 20
	f.Fuzz(func(t *testing.T, data []byte) {
		r, err := newReader(bytes.NewReader(data), 2, 4<<20)
		if err != nil {
			return
		}
		defer r.Close()
		got, err := io.ReadAll(io.LimitReader(r, maxOut+1))
		if err != nil || len(got) > maxOut {
			return
		}
		want, rerr := ulikunitz(data)
		if rerr != nil {
			t.Fatalf("xzpar accepted input that xz.NewReader rejects (%v)", rerr)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("output differs from xz.NewReader: %d vs %d bytes", len(got), len(want))
		}
	})
}
