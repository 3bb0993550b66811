package imagetest

import (
	"bytes"
	"io"
	"testing"

	"github.com/ulikunitz/xz"
)

func TestNewTalos(t *testing.T) {
	f := NewTalos(t, 8<<20, 2, 1<<20)

	r, err := xz.NewReader(bytes.NewReader(f.XZ))
	if err != nil {
		t.Fatal(err)
	}

	got, err := io.ReadAll(r)
	if err != nil || !bytes.Equal(got, f.Raw) || sha256Hex(got) != f.SHA256 {
		t.Fatalf("xz round trip: %v", err)
	}

	// The same data as Raw outside the table and META: it compresses alike.
	plain, _ := Raw(8<<20, 2)
	same := 0
	for i := range plain {
		if plain[i] == f.Raw[i] {
			same++
		}
	}

	if same < len(plain)*3/4 {
		t.Fatalf("only %d of %d bytes as Raw", same, len(plain))
	}

	if _, err := TalosRaw(4<<20, 1); err == nil {
		t.Fatal("4 MiB accepted")
	}
}
