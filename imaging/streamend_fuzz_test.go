package imaging

import (
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/talosflash/talosflash/imaging/imagetest"
)

var (
	fuzzImagesOnce sync.Once
	fuzzRaw        []byte
	fuzzImages     [][]byte // xz (several blocks), zstd, gzip, raw
)

func fuzzStreams(f *testing.F) {
	fuzzImagesOnce.Do(func() {
		raw, err := imagetest.Raw(1<<20, 9) // a small GPT image
		if err != nil {
			f.Fatal(err)
		}
		xz, err := imagetest.XZBytes(raw, 256<<10)
		if err != nil {
			f.Fatal(err)
		}
		zst, err := imagetest.ZstdBytes(raw)
		if err != nil {
			f.Fatal(err)
		}
		var gz bytes.Buffer
		zw := gzip.NewWriter(&gz)
		zw.Write(raw[:len(raw)/2])
		zw.Close()
		zw = gzip.NewWriter(&gz) // two members, as pigz or cat a.gz b.gz write
		zw.Write(raw[len(raw)/2:])
		zw.Close()
		fuzzRaw, fuzzImages = raw, [][]byte{xz, zst, gz.Bytes(), raw}
	})
}

// The decoders on cut and spliced streams: a flash either succeeds with a
// byte-exact card or fails as a corrupt (or unsupported) image, never a
// short or different card reported written.
func FuzzCutAndSplicedStreams(f *testing.F) {
	fuzzStreams(f)
	for format := range uint8(4) {
		n := uint32(len(fuzzImages[format]))
		f.Add(format, n, n, uint32(0), uint16(0))          // whole
		f.Add(format, n-1, n, uint32(0), uint16(0))        // last byte cut
		f.Add(format, n/2, n, uint32(0), uint16(0))        // cut in the middle
		f.Add(format, n/3, n/2, uint32(0), uint16(0))      // a piece left out
		f.Add(format, n/2, n/2, uint32(n/4), uint16(4096)) // a piece repeated
	}
	f.Fuzz(func(t *testing.T, format uint8, cut, resume, from uint32, length uint16) {
		whole := fuzzImages[format%4]
		n := uint32(len(whole))
		cut, resume = min(cut, n), min(resume, n)
		// prefix [0,cut) + whole[from:from+length] + suffix [resume,n)
		data := append([]byte{}, whole[:cut]...)
		if from < n {
			data = append(data, whole[from:min(n, from+uint32(length))]...)
		}
		data = append(data, whole[resume:]...)
		dst := filepath.Join(t.TempDir(), "card.img")
		res, err := FlashAll(context.Background(), FlashOptions{Source: Source{Path: writeTemp(t, "img", data)}, Targets: []string{dst}, Verify: true})
		if err == nil {
			err = res[0].Err
		}
		if err != nil {
			if !errors.Is(err, ErrCorruptImage) && !errors.Is(err, ErrUnsupportedImage) {
				t.Fatalf("failed, but not as a corrupt image: %v", err)
			}
			return
		}
		card, rerr := os.ReadFile(dst)
		if rerr != nil {
			t.Fatal(rerr)
		}
		if format%4 == 3 && bytes.Equal(data, card) && len(data) >= len(fuzzRaw) {
			return // raw: the card is what was given, a GPT disk whole to its backup header
		}
		if !bytes.Equal(card, fuzzRaw) || res[0].Bytes != int64(len(fuzzRaw)) || !res[0].Verified {
			t.Fatalf("a damaged stream (%d bytes of %d) made a card of %d bytes that is not the image: %+v", len(data), n, len(card), res[0])
		}
	})
}
