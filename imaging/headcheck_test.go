package imaging

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/talosflash/talosflash/imaging/gpt"
	"github.com/talosflash/talosflash/imaging/imagetest"
)

// metaImage is a 16 MiB Talos-like image (META beyond the head: at
// 6.25 MiB) and its META store's offset.
func metaImage(t testing.TB) ([]byte, int64) {
	t.Helper()
	raw, err := imagetest.TalosRaw(16<<20, 9)
	if err != nil {
		t.Fatal(err)
	}
	tab, err := gpt.Read(bytes.NewReader(raw), int64(len(raw)))
	if err != nil {
		t.Fatal(err)
	}
	p, ok := tab.Find("META")
	if !ok || p.Offset < HeadSize {
		t.Fatalf("META %+v", p)
	}
	copy(raw[p.Offset:], "the image's store") // not zeros: a region compared for real
	return raw, p.Offset
}

// storeReader is a CheckHead that reads 512 KiB at off through the image
// (and, with again, the head's first sector after it: backwards) and
// records what it got; image nil is recorded as such.
type storeReader struct {
	off    int64
	again  bool
	got    []byte
	called bool
	stream bool
}

func (s *storeReader) check(head []byte, size int64, image io.ReaderAt) error {
	s.called = true
	if image == nil {
		s.stream = true
		return nil
	}
	s.got = make([]byte, 512<<10)
	if _, err := image.ReadAt(s.got, s.off); err != nil {
		return err
	}
	if s.again {
		first := make([]byte, 512)
		if _, err := image.ReadAt(first, 0); err != nil {
			return err
		}
		if !bytes.Equal(first, head[:512]) {
			return errors.New("the first sector read through the image differs from the head")
		}
	}
	return nil
}

// An image file, in every format, is read at META's offset before any
// card is touched (xz by its blocks, zstd and gzip decoded up to there,
// raw in place), and the flash that follows writes those same bytes.
func TestCheckHeadReadsAnImageFile(t *testing.T) {
	raw, off := metaImage(t)
	xzBlocks, err := imagetest.XZBytes(raw, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	xzOne, err := imagetest.XZBytes(raw, 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		data []byte
	}{
		{"metal-arm64.raw", raw},
		{"metal-arm64.raw.xz", xzBlocks},
		{"one-block.raw.xz", xzOne},
		{"metal-arm64.raw.zst", zstdBytes(t, raw)},
		{"metal-arm64.raw.gz", gzipBytes(t, raw)},
	} {
		t.Run(c.name, func(t *testing.T) {
			img := writeTemp(t, c.name, c.data)
			dst := filepath.Join(t.TempDir(), "card.img")
			s := &storeReader{off: off, again: true}
			res, err := flashOne(context.Background(), FlashOptions{Source: Source{Path: img}, Targets: []string{dst}, Verify: true, CheckHead: s.check})
			if err != nil || !res.Verified {
				t.Fatalf("%+v %v", res, err)
			}
			if s.stream || !bytes.Equal(s.got, raw[off:off+512<<10]) {
				t.Fatalf("read before the flash: stream %v, the store's bytes %v", s.stream, bytes.Equal(s.got, raw[off:off+512<<10]))
			}
			if got, _ := os.ReadFile(dst); !bytes.Equal(got, raw) {
				t.Fatal("the card is not the image")
			}
		})
	}
}

// A stream's bytes come once, in order: CheckHead gets no image for a
// first download read as it arrives, --no-cache or Source.Stream; the
// cached image of the same download gets one.
func TestCheckHeadStreamsHaveNoImage(t *testing.T) {
	raw, off := metaImage(t)
	data := zstdBytes(t, raw)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write(data) }))
	t.Cleanup(srv.Close)
	c := &Cache{Dir: t.TempDir(), Retries: 1, RetryDelay: time.Millisecond, IdleTimeout: 20 * time.Second}
	key := CacheKey(testSchematic, testVersion, "metal-arm64.raw.zst")
	for _, src := range []struct {
		name   string
		src    Source
		stream bool
	}{
		{"first download", Source{URL: srv.URL, Key: key, Cache: c}, true},
		{"cached", Source{URL: srv.URL, Key: key, Cache: c}, false},
		{"--no-cache", Source{URL: srv.URL, Key: key, Cache: c, NoCache: true}, true},
		{"a stream sent", Source{Stream: bytes.NewReader(raw), StreamSize: int64(len(raw))}, true},
	} {
		s := &storeReader{off: off}
		dst := filepath.Join(t.TempDir(), "card.img")
		res, err := flashOne(context.Background(), FlashOptions{Source: src.src, Targets: []string{dst}, CheckHead: s.check})
		if err != nil || res.Bytes != int64(len(raw)) {
			t.Fatalf("%s: %+v %v", src.name, res, err)
		}
		if !s.called || s.stream != src.stream {
			t.Fatalf("%s: CheckHead called %v, without an image %v, want %v", src.name, s.called, s.stream, src.stream)
		}
	}
}

// The bytes a card gets are the ones checked: an image file changed
// after CheckHead read it, before the stream passes there, fails the card
// with ErrImageChanged before its partition table is written (a card that
// does not read as a disk), never with the changed bytes written.
func TestChangedImageFailsTheCardBeforeItsTable(t *testing.T) {
	raw, off := metaImage(t)
	img := writeTemp(t, "metal-arm64.raw", raw)
	dst := filepath.Join(t.TempDir(), "card.img")
	s := &storeReader{off: off}
	check := func(head []byte, size int64, image io.ReaderAt) error {
		err := s.check(head, size, image)
		f, ferr := os.OpenFile(img, os.O_WRONLY, 0)
		if ferr != nil {
			return ferr
		}
		defer f.Close()
		if _, ferr := f.WriteAt([]byte("a changed store"), off+100); ferr != nil {
			return ferr
		}
		return err
	}
	cards, err := FlashAll(context.Background(), FlashOptions{Source: Source{Path: img}, Targets: []string{dst}, Verify: true, CheckHead: check})
	if err != nil {
		t.Fatal(err)
	}
	cerr := cards[0].Err
	if !errors.Is(cerr, ErrImageChanged) || !errors.Is(cerr, ErrIncomplete) || !errors.Is(cerr, ErrCorruptImage) || !strings.Contains(cerr.Error(), "the partition table not") {
		t.Fatalf("%+v", cards[0])
	}
	card, _ := os.ReadFile(dst)
	if _, err := gpt.Read(bytes.NewReader(card), int64(len(card))); err == nil {
		t.Fatal("the card has a partition table")
	}
	if bytes.Contains(card, []byte("a changed store")) {
		t.Fatal("the changed bytes reached the card")
	}
}

// What CheckHead may read ahead is bounded (each byte is kept until the
// stream passes it).
func TestCheckHeadReadAheadIsBounded(t *testing.T) {
	raw, _ := metaImage(t)
	img := writeTemp(t, "metal-arm64.raw", raw)
	opened := false
	_, err := FlashAll(context.Background(), FlashOptions{Source: Source{Path: img}, Targets: []string{filepath.Join(t.TempDir(), "card.img")},
		Open: func(string, int64) (Target, error) { opened = true; return nil, errors.New("opened") },
		CheckHead: func(_ []byte, _ int64, image io.ReaderAt) error {
			_, err := image.ReadAt(make([]byte, maxChecked+1), 0)
			return err
		}})
	if err == nil || !strings.Contains(err.Error(), "read ahead") || opened {
		t.Fatalf("%v (opened %v)", err, opened)
	}
}

// The elevated write's sender runs the same check before it returns (a
// refusal opens nothing more), and fails the stream with ErrImageChanged
// where the file changed after the check, before the changed bytes are
// sent.
func TestOpenDecodedWithACheck(t *testing.T) {
	raw, off := metaImage(t)
	img := writeTemp(t, "metal-arm64.raw.zst", zstdBytes(t, raw))
	refused := errors.New("refused")
	if _, err := OpenDecoded(context.Background(), Source{Path: img}, nil, false, nil, func([]byte, int64, io.ReaderAt) error { return refused }); err != refused {
		t.Fatalf("%v", err)
	}

	s := &storeReader{off: off}
	d, err := OpenDecoded(context.Background(), Source{Path: img}, nil, false, nil, s.check)
	if err != nil || s.stream || !bytes.Equal(s.got, raw[off:off+512<<10]) {
		t.Fatalf("%v (stream %v)", err, s.stream)
	}
	got, err := io.ReadAll(d)
	d.Close()
	if err != nil || !bytes.Equal(got, raw) {
		t.Fatalf("%d bytes, %v", len(got), err)
	}

	// A raw file changed after the check.
	img = writeTemp(t, "metal-arm64.raw", raw)
	d, err = OpenDecoded(context.Background(), Source{Path: img}, nil, false, nil, s.check)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	f, err := os.OpenFile(img, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt([]byte("a changed store"), off+100); err != nil {
		t.Fatal(err)
	}
	f.Close()
	got, err = io.ReadAll(d)
	if !errors.Is(err, ErrImageChanged) || int64(len(got)) > off+100 {
		t.Fatalf("%d bytes, %v", len(got), err)
	}
}
