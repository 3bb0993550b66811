package imaging

import (
	"archive/zip"
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/talosflash/talosflash/factory/factorytest"
	"github.com/talosflash/talosflash/imaging/imagetest"
)

func zstdBytes(t *testing.T, raw []byte) []byte {
	t.Helper()
	data, err := imagetest.ZstdBytes(raw) // as Image Factory: one frame, content size, checksum
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func gzipBytes(t *testing.T, raw []byte) []byte {
	t.Helper()
	var out bytes.Buffer
	zw := gzip.NewWriter(&out)
	if _, err := zw.Write(raw); err != nil {
		t.Fatal(err)
	}
	zw.Close()
	return out.Bytes()
}

// compressWith runs a compressor binary (stdin to stdout), or skips.
func compressWith(t *testing.T, raw []byte, name string, args ...string) []byte {
	t.Helper()
	if _, err := exec.LookPath(name); err != nil {
		t.Skipf("%s not installed", name)
	}
	cmd := exec.Command(name, args...)
	cmd.Stdin = bytes.NewReader(raw)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return out
}

// Inputs that are not images talosflash writes are refused with
// ErrUnsupportedImage before the target is opened: the card keeps what it
// had. Names don't matter, content does.
func TestFlashRefusesWhatIsNotADiskImage(t *testing.T) {
	img := testImage(t)
	small := img.Raw[:1<<20]
	notDisk := bytes.Repeat([]byte("not a disk "), 200_000)
	var zipped bytes.Buffer
	zw := zip.NewWriter(&zipped)
	w, _ := zw.Create("metal-arm64.raw")
	_, _ = w.Write(small)
	zw.Close()
	qcow := append([]byte("QFI\xfb\x00\x00\x00\x03"), make([]byte, 4096)...)

	cases := map[string]func(t *testing.T) []byte{
		"empty":        func(*testing.T) []byte { return nil },
		"bzip2":        func(t *testing.T) []byte { return compressWith(t, small, "bzip2", "-c") },
		"lzma":         func(t *testing.T) []byte { return compressWith(t, small, "xz", "--format=lzma", "-c") },
		"zip":          func(*testing.T) []byte { return zipped.Bytes() },
		"qcow2":        func(*testing.T) []byte { return qcow },
		"raw not disk": func(*testing.T) []byte { return notDisk },
		"xz not disk":  func(t *testing.T) []byte { return imagetestXZ(t, notDisk) },
		"zst not disk": func(t *testing.T) []byte { return zstdBytes(t, notDisk) },
		"gz not disk":  func(t *testing.T) []byte { return gzipBytes(t, notDisk) },
		"xz of empty":  func(t *testing.T) []byte { return imagetestXZ(t, nil) },
	}
	for name, make := range cases {
		t.Run(name, func(t *testing.T) {
			src := writeTemp(t, "metal-arm64.raw.xz", make(t))
			dst := filepath.Join(t.TempDir(), "card.img")
			_, err := flashOne(context.Background(), FlashOptions{Source: Source{Path: src}, Targets: []string{dst}, Verify: true})
			if !errors.Is(err, ErrUnsupportedImage) {
				t.Fatalf("got %v, want ErrUnsupportedImage", err)
			}
			if _, statErr := os.Stat(dst); !errors.Is(statErr, os.ErrNotExist) {
				t.Fatalf("the target was opened (%v) before the input was refused", statErr)
			}
			if _, statErr := os.Stat(src); statErr != nil {
				t.Fatalf("the user's file was removed: %v", statErr)
			}
		})
	}
}

func imagetestXZ(t *testing.T, raw []byte) []byte {
	t.Helper()
	z, err := imagetest.XZBytes(raw, 0)
	if err != nil {
		t.Fatal(err)
	}
	return z
}

// A decoded stream that is not a disk is written only with ForceRaw.
func TestFlashForceRaw(t *testing.T) {
	data := bytes.Repeat([]byte("firmware blob "), 100_000)
	src := writeTemp(t, "blob.raw", data)
	dst := filepath.Join(t.TempDir(), "card.img")
	res, err := flashOne(context.Background(), FlashOptions{Source: Source{Path: src}, Targets: []string{dst}, Verify: true, ForceRaw: true})
	if err != nil || !res.Verified || res.SHA256 != sha256Hex(data) {
		t.Fatalf("%+v %v", res, err)
	}
	if imagetest.FileSHA256(t, dst, int64(len(data))) != sha256Hex(data) {
		t.Fatal("target differs from the blob")
	}
}

// zstd (as Image Factory makes .raw.zst) and gzip images are written and
// verified; the zstd header's content size is checked against the target
// before anything is written.
func TestFlashZstdAndGzip(t *testing.T) {
	img := testImage(t)
	for name, data := range map[string][]byte{"zstd": zstdBytes(t, img.Raw), "gzip": gzipBytes(t, img.Raw)} {
		t.Run(name, func(t *testing.T) {
			src := writeTemp(t, "metal-arm64.raw.xz", data) // the name lies; content decides
			dst := filepath.Join(t.TempDir(), "card.img")
			res, err := flashOne(context.Background(), FlashOptions{Source: Source{Path: src}, Targets: []string{dst}, Verify: true})
			if err != nil || res.Bytes != img.Size || res.SHA256 != img.SHA256 {
				t.Fatalf("%+v %v", res, err)
			}
			if imagetest.FileSHA256(t, dst, img.Size) != img.SHA256 {
				t.Fatal("target differs from the image")
			}
		})
	}
	src := writeTemp(t, "metal-arm64.raw.zst", zstdBytes(t, img.Raw))
	dst := filepath.Join(t.TempDir(), "card.img")
	_, err := flashOne(context.Background(), FlashOptions{Source: Source{Path: src}, Targets: []string{dst}, MaxSize: img.Size - 1})
	if !errors.Is(err, ErrTargetTooSmall) || !strings.Contains(err.Error(), "needs") {
		t.Fatalf("got %v, want ErrTargetTooSmall from the zstd header's size", err)
	}
	if _, statErr := os.Stat(dst); !errors.Is(statErr, os.ErrNotExist) {
		t.Fatal("the target was opened although the size was known")
	}
}

// A corrupt zstd image fails its checks as a corrupt image.
func TestFlashCorruptZstd(t *testing.T) {
	img := testImage(t)
	data := zstdBytes(t, img.Raw)
	data[len(data)/2] ^= 0xFF
	src := writeTemp(t, "metal-arm64.raw.zst", data)
	_, err := flashOne(context.Background(), FlashOptions{Source: Source{Path: src}, Targets: []string{filepath.Join(t.TempDir(), "card.img")}})
	if !errors.Is(err, ErrCorruptImage) {
		t.Fatalf("got %v, want ErrCorruptImage", err)
	}
}

// A .raw.zst from the factory goes through the cache and is flashed.
func TestFlashZstdFromFactory(t *testing.T) {
	img := testImage(t)
	const file = "metal-arm64.raw.zst"
	srv := factorytest.New(t)
	srv.AddImage(testSchematic, testVersion, file, zstdBytes(t, img.Raw))
	c := &Cache{Dir: t.TempDir()}
	src := Source{URL: srv.ImageURL(testSchematic, testVersion, file), Key: CacheKey(testSchematic, testVersion, file), Cache: c, HTTPClient: srv.Client()}
	dst := filepath.Join(t.TempDir(), "card.img")
	res, err := flashOne(context.Background(), FlashOptions{Source: src, Targets: []string{dst}, Verify: true})
	if err != nil || res.SHA256 != img.SHA256 || imagetest.FileSHA256(t, dst, img.Size) != img.SHA256 {
		t.Fatalf("%+v %v", res, err)
	}
	if ok, err := c.Lookup(src.Key); !ok || err != nil {
		t.Fatalf("the download is not cached: %v", err)
	}
}

// A download that is not compressed at all (a hostile or broken server
// sending a raw or HTML body) never becomes a cache entry.
func TestFetchRefusesUncompressedDownload(t *testing.T) {
	srv, _, c := newFactory(t, []byte("<html>maintenance</html>"))
	_, err := fetch(t, srv, c)
	if err == nil {
		t.Fatal("an HTML page was accepted as an image")
	}
	assertNoEntry(t, c)
}

// A zstd file of several frames (pzstd, concatenated files) is written
// whole; its size is the sum of the frames', checked before writing.
func TestFlashMultiFrameZstd(t *testing.T) {
	img := testImage(t)
	half := len(img.Raw) / 2
	skippable := []byte{0x50, 0x2A, 0x4D, 0x18, 5, 0, 0, 0, 'h', 'e', 'l', 'l', 'o'} // as some tools write
	data := append(append(zstdBytes(t, img.Raw[:half]), skippable...), zstdBytes(t, img.Raw[half:])...)
	src := writeTemp(t, "metal-arm64.raw.zst", data)
	size, err := zstdFileSize(bytes.NewReader(data), int64(len(data)))
	if err != nil || size != img.Size {
		t.Fatalf("size %d, %v; want %d", size, err, img.Size)
	}
	dst := filepath.Join(t.TempDir(), "card.img")
	res, err := flashOne(context.Background(), FlashOptions{Source: Source{Path: src}, Targets: []string{dst}, Verify: true})
	if err != nil || res.Bytes != img.Size || res.SHA256 != img.SHA256 {
		t.Fatalf("%+v %v", res, err)
	}
	// A truncated file does not add up.
	if _, err := zstdFileSize(bytes.NewReader(data[:len(data)-10]), int64(len(data)-10)); !errors.Is(err, ErrCorruptImage) {
		t.Fatalf("truncated: %v, want ErrCorruptImage", err)
	}
}

// A truncated .raw.zst download never becomes a cache entry.
func TestFetchRefusesTruncatedZstd(t *testing.T) {
	img := testImage(t)
	data := zstdBytes(t, img.Raw)
	srv, _, c := newFactory(t, data[:len(data)-100])
	if _, err := fetch(t, srv, c); !errors.Is(err, ErrCorruptImage) {
		t.Fatalf("got %v, want ErrCorruptImage", err)
	}
	assertNoEntry(t, c)
}

// A factory download that decodes to something other than a disk is not
// kept: the cache entry is dropped (as the elevated child's parent does for
// the same exit code), so a later run neither trusts it nor needs
// --force-raw for what the factory should have served.
func TestFlashNotADiskFromFactoryDropsCacheEntry(t *testing.T) {
	const file = "metal-arm64.raw.zst"
	srv := factorytest.New(t)
	srv.AddImage(testSchematic, testVersion, file, zstdBytes(t, bytes.Repeat([]byte("not a disk "), 1<<16)))
	c := &Cache{Dir: t.TempDir()}
	key := CacheKey(testSchematic, testVersion, file)
	src := Source{URL: srv.ImageURL(testSchematic, testVersion, file), Key: key, Cache: c, HTTPClient: srv.Client()}
	dst := filepath.Join(t.TempDir(), "card.img")
	_, err := flashOne(context.Background(), FlashOptions{Source: src, Targets: []string{dst}, Verify: true})
	if !errors.Is(err, ErrUnsupportedImage) || !strings.Contains(err.Error(), "removed it from the cache") {
		t.Fatalf("err %v, want ErrUnsupportedImage and the entry removed", err)
	}
	if c.Has(key) {
		t.Fatal("the non-disk download stays in the cache")
	}
	if _, err := os.Stat(dst); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("target touched: %v", err)
	}
}
