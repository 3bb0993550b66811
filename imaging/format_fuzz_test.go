package imaging

import (
	"bytes"
	"errors"
	"testing"
)

// Hostile headers never panic, loop or claim a size the bytes can't hold.
func FuzzImageHeaders(f *testing.F) {
	f.Add([]byte{})
	f.Add(zstdMagic)
	f.Add(append(append([]byte{}, zstdMagic...), 0x20, 0x05, 0x01, 0, 0))
	f.Add([]byte{0x50, 0x2A, 0x4D, 0x18, 0xff, 0xff, 0xff, 0xff})
	f.Add(append(append([]byte{}, xzMagic...), make([]byte, 64)...))
	f.Add([]byte("BZh9"))
	f.Add([]byte{0x5D, 0, 0, 0x80, 0, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff})
	f.Fuzz(func(t *testing.T, data []byte) {
		format, err := sniffFormat(data)
		if err != nil && !errors.Is(err, ErrUnsupportedImage) {
			t.Fatalf("sniff error %v is not ErrUnsupportedImage", err)
		}
		if err == nil && format == FormatZstd {
			size, err := zstdFileSize(bytes.NewReader(data), int64(len(data)))
			if err != nil && !errors.Is(err, ErrCorruptImage) {
				t.Fatalf("zstd walk error %v is not ErrCorruptImage", err)
			}
			if err == nil && size < -1 {
				t.Fatalf("size %d", size)
			}
		}
		_ = checkDiskStart(data)
	})
}
