package imaging

import (
	"bytes"
	"context"
	"path/filepath"
	"testing"

	"github.com/klauspost/compress/zstd"
)

// zstdStreamed compresses raw as a streaming writer does (no content size,
// the window in the frame header).
func zstdStreamed(t *testing.T, raw []byte, window int) []byte {
	t.Helper()
	var out bytes.Buffer
	enc, err := zstd.NewWriter(&out, zstd.WithWindowSize(window), zstd.WithEncoderCRC(true), zstd.WithEncoderConcurrency(1))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := enc.Write(raw); err != nil {
		t.Fatal(err)
	}
	if err := enc.Close(); err != nil {
		t.Fatal(err)
	}
	return out.Bytes()
}

// The decoder with a history of twice the window is chosen from the
// largest window of every frame of the file, not the first frame's: a
// later frame with a larger window is decoded (by the low-memory
// decoder) instead of failing or taking twice its window.
func TestZstdWindowOfEveryFrame(t *testing.T) {
	img := testImage(t)
	half := len(img.Raw) / 2
	small := zstdBytes(t, img.Raw[:half])            // single segment: its content size
	large := zstdStreamed(t, img.Raw[half:], 32<<20) // a 32 MiB window
	var h zstd.Header
	if err := h.Decode(large); err != nil || h.SingleSegment || h.WindowSize != 32<<20 {
		t.Fatalf("second frame: %+v %v, want a 32 MiB window", h, err)
	}
	for _, tc := range []struct {
		name string
		data []byte
		fast bool
	}{
		{"one frame", zstdBytes(t, img.Raw), true},
		{"a larger window later", append(append([]byte{}, small...), large...), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			size, window, err := zstdFrames(bytes.NewReader(tc.data), int64(len(tc.data)))
			if err != nil || size != img.Size && size != -1 || (window <= zstdFastWindow) != tc.fast || !tc.fast && window != 32<<20 {
				t.Fatalf("window %d (size %d), %v", window, size, err)
			}
			src := writeTemp(t, "metal-arm64.raw.zst", tc.data)
			dst := filepath.Join(t.TempDir(), "card.img")
			res, err := flashOne(context.Background(), FlashOptions{Source: Source{Path: src}, Targets: []string{dst}, Verify: true})
			if err != nil || res.SHA256 != img.SHA256 {
				t.Fatalf("%+v %v", res, err)
			}
		})
	}
}
