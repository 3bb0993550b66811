package lzma

import (
	"bytes"
	"io"
	"testing"
)

func lzma2Stream(t *testing.T, data []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	w, err := Writer2Config{DictCap: MinDictCap}.NewWriter2(&buf)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write(data); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// A reset reader decodes the next stream as a new reader would, whatever
// the previous stream left in the dictionary or whether it failed.
func TestReader2Reset(t *testing.T) {
	a := bytes.Repeat([]byte("abcdefgh-0123456789 "), 2000) // several dictionaries
	b := append(bytes.Repeat([]byte{0}, 9000), []byte("tail after zeros")...)
	za, zb := lzma2Stream(t, a), lzma2Stream(t, b)
	r, err := Reader2Config{DictCap: MinDictCap}.NewReader2(bytes.NewReader(za))
	if err != nil {
		t.Fatal(err)
	}
	if got, err := io.ReadAll(r); err != nil || !bytes.Equal(got, a) {
		t.Fatalf("first stream: %d bytes, %v", len(got), err)
	}
	r.Reset(bytes.NewReader(zb))
	if got, err := io.ReadAll(r); err != nil || !bytes.Equal(got, b) {
		t.Fatalf("after Reset: %d bytes, %v", len(got), err)
	}
	// A truncated stream fails as with a new reader, and Reset recovers.
	fresh, _ := Reader2Config{DictCap: MinDictCap}.NewReader2(bytes.NewReader(za[:len(za)/2]))
	_, wantErr := io.ReadAll(fresh)
	r.Reset(bytes.NewReader(za[:len(za)/2]))
	if _, err := io.ReadAll(r); err == nil || wantErr == nil || err.Error() != wantErr.Error() {
		t.Fatalf("truncated stream: error %v, new reader %v", err, wantErr)
	}
	r.Reset(bytes.NewReader(za))
	if got, err := io.ReadAll(r); err != nil || !bytes.Equal(got, a) {
		t.Fatalf("after a failed stream: %d bytes, %v", len(got), err)
	}
}
