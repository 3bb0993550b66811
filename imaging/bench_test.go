package imaging

// Benchmarks of each stage alone and of the whole pipeline on one generated
// image (default 256 MiB raw; TALOSFLASH_BENCH_MIB=1024 for Talos-like size):
//
//	go test -run '^$' -bench . -benchtime 3x ./imaging/

import (
	"bufio"
	"context"
	"crypto/sha256"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/talosflash/talosflash/imaging/imagetest"
)

var (
	benchOnce sync.Once
	benchDir  string
	benchXZ   string
	benchSize int64
	benchErr  error
)

func TestMain(m *testing.M) {
	code := m.Run()
	if benchDir != "" {
		os.RemoveAll(benchDir)
	}
	os.Exit(code)
}

func benchImage(b *testing.B) (xzPath string, size int64) {
	b.Helper()
	benchOnce.Do(func() {
		benchSize = 256 << 20
		if v, err := strconv.Atoi(os.Getenv("TALOSFLASH_BENCH_MIB")); err == nil && v > 0 {
			benchSize = int64(v) << 20
		}
		if benchDir, benchErr = os.MkdirTemp("", "talosflash-bench-"); benchErr != nil {
			return
		}
		benchXZ = filepath.Join(benchDir, "metal-arm64.raw.xz")
		// Shaped like the factory's images: xz -0 -T0, 1 MiB blocks, 256 KiB
		// dictionary (without the xz tool: ulikunitz's writer, 1 MiB blocks).
		if imagetest.ShapeXZ0.HaveTool() {
			benchErr = imagetest.WriteFactoryFile(context.Background(), benchXZ, imagetest.ShapeXZ0, benchSize, 1)
		} else {
			benchErr = imagetest.WriteXZFile(context.Background(), benchXZ, benchSize, 1, 1<<20, false)
		}
	})
	if benchErr != nil {
		b.Fatal(benchErr)
	}
	return benchXZ, benchSize
}

func BenchmarkStageDecodeXZ(b *testing.B) {
	path, size := benchImage(b)
	buf := make([]byte, chunkSize)
	b.SetBytes(size)
	for b.Loop() {
		f, err := os.Open(path)
		if err != nil {
			b.Fatal(err)
		}
		dec, err := newDecompressor(bufio.NewReaderSize(f, 1<<20)) // as the pipeline feeds it
		if err != nil {
			b.Fatal(err)
		}
		n, err := io.CopyBuffer(io.Discard, struct{ io.Reader }{dec}, buf)
		f.Close()
		if err != nil || n != size {
			b.Fatalf("%d, %v", n, err)
		}
	}
}

func benchChunk(b *testing.B) []byte {
	raw, err := imagetest.Raw(imagetest.MinSize*4, 1)
	if err != nil {
		b.Fatal(err)
	}
	return raw
}

func BenchmarkStageSHA256(b *testing.B) {
	buf := benchChunk(b)
	b.SetBytes(int64(len(buf)))
	h := sha256.New()
	for b.Loop() {
		h.Write(buf)
	}
}

func BenchmarkStageCRC32C(b *testing.B) {
	buf := benchChunk(b)
	b.SetBytes(int64(len(buf)))
	for b.Loop() {
		for i := 0; i < len(buf); i += crcBlock {
			crc32.Checksum(buf[i:i+crcBlock], crcTable)
		}
	}
}

// BenchmarkStageWriteFile writes the image size in 4 MiB O_DIRECT writes
// to a file and fsyncs, like the write stage.
func BenchmarkStageWriteFile(b *testing.B) {
	_, size := benchImage(b)
	buf := alignedBuf(chunkSize)
	copy(buf, benchChunk(b))
	dst := filepath.Join(b.TempDir(), "card.img")
	b.SetBytes(size)
	for b.Loop() {
		t, err := OpenFile(dst, size)
		if err != nil {
			b.Fatal(err)
		}
		f := t.(*os.File)
		_ = setDirect(f.Fd(), true)
		for off := int64(0); off < size; off += chunkSize {
			if _, err := f.Write(buf); err != nil {
				b.Fatal(err)
			}
		}
		if err := f.Sync(); err != nil {
			b.Fatal(err)
		}
		f.Close()
	}
}

func benchFlash(b *testing.B, verify bool) {
	path, size := benchImage(b)
	dst := filepath.Join(b.TempDir(), "card.img")
	b.SetBytes(size)
	for b.Loop() {
		res, err := Flash(context.Background(), FlashOptions{Source: Source{Path: path}, Target: dst, Verify: verify})
		if err != nil || res.Bytes != size {
			b.Fatalf("%+v, %v", res, err)
		}
	}
}

func BenchmarkPipelineWrite(b *testing.B)       { benchFlash(b, false) }
func BenchmarkPipelineWriteVerify(b *testing.B) { benchFlash(b, true) }

// cardMBps is the emulated SD card's sequential write speed (a fast UHS-I
// card); TALOSFLASH_BENCH_CARD_MBPS changes it.
func cardMBps() float64 {
	if v, err := strconv.ParseFloat(os.Getenv("TALOSFLASH_BENCH_CARD_MBPS"), 64); err == nil && v > 0 {
		return v
	}
	return 60
}

// cardTarget is a file that accepts writes no faster than a card: each
// write is held until the emulated card would have finished it.
type cardTarget struct {
	*os.File
	start   time.Time
	written int64
	bps     float64
}

func (c *cardTarget) Write(p []byte) (int, error) {
	if c.start.IsZero() {
		c.start = time.Now()
	}
	n, err := c.File.Write(p)
	c.written += int64(n)
	due := c.start.Add(time.Duration(float64(c.written) / c.bps * float64(time.Second)))
	time.Sleep(time.Until(due))
	return n, err
}

func openCard(path string) (*cardTarget, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return nil, err
	}
	return &cardTarget{File: f, bps: cardMBps() * 1e6}, nil
}

// BenchmarkStageWriteCard is the write stage alone at card speed: the
// floor for flashing a real card.
func BenchmarkStageWriteCard(b *testing.B) {
	_, size := benchImage(b)
	buf := benchChunk(b)[:chunkSize]
	dst := filepath.Join(b.TempDir(), "card.img")
	b.SetBytes(size)
	for b.Loop() {
		c, err := openCard(dst)
		if err != nil {
			b.Fatal(err)
		}
		for off := int64(0); off < size; off += chunkSize {
			if _, err := c.Write(buf); err != nil {
				b.Fatal(err)
			}
		}
		if err := c.Sync(); err != nil {
			b.Fatal(err)
		}
		c.Close()
	}
}

// BenchmarkPipelineCard is the whole pipeline (decode, hash, write) onto
// the same card-speed target: with the stages overlapped it should take
// about as long as BenchmarkStageWriteCard.
func BenchmarkPipelineCard(b *testing.B) {
	path, size := benchImage(b)
	dst := filepath.Join(b.TempDir(), "card.img")
	b.SetBytes(size)
	for b.Loop() {
		res, err := Flash(context.Background(), FlashOptions{
			Source: Source{Path: path}, Target: dst,
			Open: func(p string, _ int64) (Target, error) { return openCard(p) },
		})
		if err != nil || res.Bytes != size {
			b.Fatalf("%+v, %v", res, err)
		}
	}
}
