package imaging

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"
)

// streamFlash flashes the bytes sent (as another process sends them:
// Source.Stream) onto a new file, with sum as the sender's SHA-256 and
// size as its declared size, and returns the card's bytes.
func streamFlash(t *testing.T, sent []byte, size int64, sum []byte) (*CardResult, []byte, error) {
	t.Helper()
	card := filepath.Join(t.TempDir(), "card.img")
	res, err := flashOne(context.Background(), FlashOptions{
		Source:  Source{Stream: bytes.NewReader(sent), StreamSize: size, StreamSum: func() []byte { return sum }},
		Targets: []string{card}, Verify: true,
	})
	got, rerr := os.ReadFile(card)
	if rerr != nil && !errors.Is(rerr, os.ErrNotExist) {
		t.Fatal(rerr)
	}
	return res, got, err
}

// The decoded image another process sends is written and verified like a
// file's, its size known up front or not.
func TestStreamSourceWritesTheImage(t *testing.T) {
	raw := testImage(t).Raw
	sum := sha256.Sum256(raw)
	for _, size := range []int64{int64(len(raw)), -1} {
		res, got, err := streamFlash(t, raw, size, sum[:])
		if err != nil || !res.Verified || res.SHA256 != sha256Hex(raw) || !bytes.Equal(got, raw) {
			t.Fatalf("size %d: %+v %v", size, res, err)
		}
	}
}

// Bytes changed on the way (the sender's hash is of other bytes): the
// card fails as a verify mismatch before its first MiB, the partition
// table, is written: it never boots what was not sent.
func TestStreamSourceOtherBytesThanSent(t *testing.T) {
	raw := testImage(t).Raw
	sum := sha256.Sum256(raw)
	bad := bytes.Clone(raw)
	bad[3<<20] ^= 0x40 // in transit
	_, got, err := streamFlash(t, bad, int64(len(bad)), sum[:])
	if !errors.Is(err, ErrVerifyMismatch) || !errors.Is(err, ErrIncomplete) {
		t.Fatalf("got %v, want a mismatch before the partition table", err)
	}
	if len(got) >= headSize && bytes.Equal(got[:headSize], raw[:headSize]) {
		t.Fatal("the card holds the image's first MiB: it would boot bytes that were not sent")
	}
}

// The stream is the decoded disk image: compressed data is refused (the
// decoders run in the sender, never in the privileged child), and so is
// what does not start like a disk; a declared size the card cannot hold
// refuses before writing, and bytes that are not the declared size fail.
func TestStreamSourceRefusals(t *testing.T) {
	fx := testImage(t)
	sum := func(b []byte) []byte { s := sha256.Sum256(b); return s[:] }
	for name, sent := range map[string][]byte{"xz": fx.XZ, "not a disk": bytes.Repeat([]byte("text "), 1000)} {
		_, got, err := streamFlash(t, sent, -1, sum(sent))
		if !errors.Is(err, ErrUnsupportedImage) || got != nil {
			t.Errorf("%s: got %v (card %d bytes), want a refusal before the card", name, err, len(got))
		}
	}
	card := filepath.Join(t.TempDir(), "small.img")
	_, err := flashOne(context.Background(), FlashOptions{
		Source:  Source{Stream: bytes.NewReader(fx.Raw), StreamSize: int64(len(fx.Raw)), StreamSum: func() []byte { return sum(fx.Raw) }},
		Targets: []string{card}, MaxSize: 1 << 20,
	})
	if !errors.Is(err, ErrTargetTooSmall) {
		t.Errorf("small card: %v", err)
	}
	_, _, err = streamFlash(t, fx.Raw, int64(len(fx.Raw))+4096, sum(fx.Raw))
	if !errors.Is(err, ErrCorruptImage) {
		t.Errorf("fewer bytes than declared: %v", err)
	}
}

// A stream that fails (the sender stopped) fails the card as incomplete.
func TestStreamSourceCut(t *testing.T) {
	raw := testImage(t).Raw
	boom := errors.New("the image stream ended before the image did")
	card := filepath.Join(t.TempDir(), "card.img")
	_, err := flashOne(context.Background(), FlashOptions{
		Source:  Source{Stream: io.MultiReader(bytes.NewReader(raw[:5<<20]), errReader{boom}), StreamSize: int64(len(raw))},
		Targets: []string{card}, Verify: true,
	})
	if !errors.Is(err, boom) || !errors.Is(err, ErrIncomplete) {
		t.Fatalf("got %v", err)
	}
}

type errReader struct{ err error }

func (r errReader) Read([]byte) (int, error) { return 0, r.err }

// OpenDecoded is the sender's side: a local image decoded here, its
// declared size, and a decoded size that differs is corrupt.
func TestOpenDecodedLocalFile(t *testing.T) {
	fx := testImage(t)
	img := writeTemp(t, "img.raw.xz", fx.XZ)
	d, err := OpenDecoded(context.Background(), Source{Path: img}, []string{filepath.Join(t.TempDir(), "card")}, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(d)
	d.Close()
	if err != nil || !bytes.Equal(got, fx.Raw) || d.Size() != int64(len(fx.Raw)) {
		t.Fatalf("decoded %d bytes (size %d): %v", len(got), d.Size(), err)
	}
	notDisk := writeTemp(t, "blob.raw", bytes.Repeat([]byte("x"), 4096))
	if _, err := OpenDecoded(context.Background(), Source{Path: notDisk}, nil, false, nil); !errors.Is(err, ErrUnsupportedImage) {
		t.Fatalf("not a disk: %v", err)
	}
}
