package imaging

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// SniffFile tells a file by its first bytes and leaves its offset alone.
func TestSniffFile(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []struct {
		head []byte
		want Format
		bad  bool
	}{
		{xzMagic, FormatXZ, false},
		{zstdMagic, FormatZstd, false},
		{gzipMagic, FormatGzip, false},
		{make([]byte, 600), FormatRaw, false},
		{[]byte("BZh91AY&SY"), 0, true},
		{nil, 0, true},
	} {
		p := filepath.Join(dir, "f")
		if err := os.WriteFile(p, c.head, 0o600); err != nil {
			t.Fatal(err)
		}
		f, err := os.Open(p)
		if err != nil {
			t.Fatal(err)
		}
		got, err := SniffFile(f)
		off, _ := f.Seek(0, 1)
		f.Close()
		if c.bad != errors.Is(err, ErrUnsupportedImage) || (!c.bad && got != c.want) || off != 0 {
			t.Errorf("%q: %v, %v (offset %d), want %v (refused %v)", c.head, got, err, off, c.want, c.bad)
		}
	}
}
