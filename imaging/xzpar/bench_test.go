package xzpar

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"io"
	"sync"
	"testing"

	"github.com/talosflash/talosflash/imaging/imagetest"
	forkxz "github.com/talosflash/talosflash/third_party/xz"
	"github.com/ulikunitz/xz"
)

// Benchmarks decode a 64 MiB imagetest image (the layout of a Talos metal
// image) compressed like Image Factory output (xz -T2 -6 with 24 MiB blocks
// would give only 3 blocks here, so --block-size=8MiB keeps 8 of them) and
// single-threaded (one unsized block). MB/s is of decoded output.
const benchSize = 64 << 20

var (
	benchOnce                    sync.Once
	benchMulti, bench1, benchXZ0 []byte
)

func benchFixtures(b *testing.B) (multi, single []byte) {
	needXZ(b)
	benchOnce.Do(func() {
		raw, err := imagetest.Raw(benchSize, 11)
		if err != nil {
			b.Fatal(err)
		}
		benchMulti = xzRun(b, raw, "-c", "-6", "-T2", "--block-size=8MiB")
		bench1 = xzRun(b, raw, "-c", "-6", "-T1")
		// Image Factory's own shape: xz -0 -T0, 1 MiB blocks, 256 KiB dictionary.
		benchXZ0 = xzRun(b, raw, append([]string(nil), imagetest.ShapeXZ0.Cmd[1:]...)...)
	})
	return benchMulti, bench1
}

func benchDecode(b *testing.B, z []byte, open func(io.Reader) (io.Reader, error)) {
	b.SetBytes(benchSize)
	b.ReportAllocs()
	for b.Loop() {
		r, err := open(bytes.NewReader(z))
		if err != nil {
			b.Fatal(err)
		}
		n, err := io.Copy(io.Discard, r)
		if err != nil || n != benchSize {
			b.Fatalf("decoded %d bytes: %v", n, err)
		}
		if c, ok := r.(io.Closer); ok {
			c.Close()
		}
	}
}

func plain(r io.Reader) (io.Reader, error) {
	return xz.NewReader(bufio.NewReaderSize(r, 1<<20))
}

// forkPlain is the same single-threaded reader from the patched fork
// (third_party/xz), which imaging uses.
func forkPlain(r io.Reader) (io.Reader, error) {
	return forkxz.NewReader(bufio.NewReaderSize(r, 1<<20))
}

func par(workers int) func(io.Reader) (io.Reader, error) {
	return func(r io.Reader) (io.Reader, error) { return NewReader(r, workers) }
}

// BenchmarkDecodeFactory decodes the factory's xz -0 -T0 shape (1 MiB
// blocks): xzpar as the flash path uses it, and single-threaded readers
// from the fork and from upstream v0.5.17.
func BenchmarkDecodeFactory(b *testing.B) {
	benchFixtures(b)
	b.Run("xz0/xzpar-2", func(b *testing.B) { benchDecode(b, benchXZ0, par(2)) })
	b.Run("xz0/xzpar-1", func(b *testing.B) { benchDecode(b, benchXZ0, par(1)) })
	b.Run("xz0/fork", func(b *testing.B) { benchDecode(b, benchXZ0, forkPlain) })
	b.Run("xz0/ulikunitz", func(b *testing.B) { benchDecode(b, benchXZ0, plain) })
}

func BenchmarkDecode(b *testing.B) {
	multi, single := benchFixtures(b)
	b.Run("multiblock/ulikunitz", func(b *testing.B) { benchDecode(b, multi, plain) })
	b.Run("multiblock/fork", func(b *testing.B) { benchDecode(b, multi, forkPlain) })
	b.Run("multiblock/xzpar-1", func(b *testing.B) { benchDecode(b, multi, par(1)) })
	b.Run("multiblock/xzpar-2", func(b *testing.B) { benchDecode(b, multi, par(2)) })
	b.Run("singleblock/ulikunitz", func(b *testing.B) { benchDecode(b, single, plain) })
	b.Run("singleblock/fork", func(b *testing.B) { benchDecode(b, single, forkPlain) })
	b.Run("singleblock/xzpar-2", func(b *testing.B) { benchDecode(b, single, par(2)) })
}

// BenchmarkSHA256 is the hashing cost per decoded byte, for comparison.
func BenchmarkSHA256(b *testing.B) {
	buf := make([]byte, 4<<20)
	for i := range buf {
		buf[i] = byte(i * 31)
	}
	b.SetBytes(int64(len(buf)))
	for b.Loop() {
		sha256.Sum256(buf)
	}
}
