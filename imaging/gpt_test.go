package imaging

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"os"
	"path/filepath"
	"testing"
)

// A GPT image checks itself: a damaged primary table is refused before the
// card is touched, a damaged backup table or a stream that ends before the
// backup header fails as a corrupt image with the card incomplete.
func TestGPTImageChecksItself(t *testing.T) {
	img := testImage(t)
	size := int64(len(img.Raw))
	backup := size - 512
	flip := func(off int64) []byte {
		b := bytes.Clone(img.Raw)
		b[off] ^= 0x01
		return b
	}
	cases := []struct {
		name   string
		data   []byte
		before bool // found before the target is opened
	}{
		{"primary header CRC", flip(512 + 16), true},
		{"primary header field", flip(512 + 40), true},
		{"primary partition array", flip(2*512 + 5), true},
		{"backup header", flip(backup + 40), false},
		{"backup header signature", flip(backup), false},
		{"backup partition array", flip(backup - 32*512 + 7), false},
		{"cut before the backup header", img.Raw[:backup], false},
		{"cut inside the backup header", img.Raw[:backup+100], false},
		{"cut in the middle", img.Raw[:size/2], false},
		{"cut inside the primary array", img.Raw[:3*512], false},
		{"cut inside the primary header", img.Raw[:600], false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			for _, data := range [][]byte{c.data, zstdBytes(t, c.data)} {
				dst := filepath.Join(t.TempDir(), "card.img")
				_, err := flashOne(context.Background(), FlashOptions{Source: Source{Path: writeTemp(t, "img", data)}, Targets: []string{dst}, Verify: true})
				if !errors.Is(err, ErrCorruptImage) {
					t.Fatalf("got %v, want a corrupt image", err)
				}
				_, statErr := os.Stat(dst)
				if c.before && statErr == nil {
					t.Fatalf("the target was opened: %v", err)
				}
				if statErr == nil && !errors.Is(err, ErrIncomplete) {
					t.Fatalf("written, not reported incomplete: %v", err)
				}
			}
		})
	}
	// The whole image, and one padded after its backup header, pass.
	for _, data := range [][]byte{img.Raw, append(bytes.Clone(img.Raw), make([]byte, 4096)...)} {
		dst := filepath.Join(t.TempDir(), "card.img")
		if _, err := flashOne(context.Background(), FlashOptions{Source: Source{Path: writeTemp(t, "img", data)}, Targets: []string{dst}, Verify: true}); err != nil {
			t.Fatal(err)
		}
	}
}

// A backup header that names another place or disk is refused too.
func TestGPTBackupMustMatchPrimary(t *testing.T) {
	img := testImage(t)
	b := bytes.Clone(img.Raw)
	hdr := b[len(b)-512:]
	binary.LittleEndian.PutUint64(hdr[32:], 7) // alternate LBA
	binary.LittleEndian.PutUint32(hdr[16:], 0)
	binary.LittleEndian.PutUint32(hdr[16:], crc32IEEE(hdr[:92]))
	_, err := flashOne(context.Background(), FlashOptions{Source: Source{Path: writeTemp(t, "img", b)}, Targets: []string{filepath.Join(t.TempDir(), "card.img")}})
	if !errors.Is(err, ErrCorruptImage) || !errors.Is(err, ErrIncomplete) {
		t.Fatalf("got %v", err)
	}
}

func crc32IEEE(b []byte) uint32 { return crc32.ChecksumIEEE(b) }
