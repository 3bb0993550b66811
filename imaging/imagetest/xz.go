package imagetest

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"sync"

	"github.com/ulikunitz/xz"
)

// CompressXZ compresses r into w with github.com/ulikunitz/xz (single
// stream, CRC64 block checks). blockSize > 0 splits the stream into blocks of
// that many uncompressed bytes; 0 writes one block.
func CompressXZ(w io.Writer, r io.Reader, blockSize int64) error {
	cfg := xz.WriterConfig{BlockSize: blockSize}
	zw, err := cfg.NewWriter(w)
	if err != nil {
		return fmt.Errorf("imagetest: xz writer: %w", err)
	}
	if _, err := io.Copy(zw, r); err != nil {
		return fmt.Errorf("imagetest: xz compress: %w", err)
	}
	return zw.Close()
}

// XZBytes compresses data in memory with ulikunitz/xz.
func XZBytes(data []byte, blockSize int64) ([]byte, error) {
	var out bytes.Buffer
	if err := CompressXZ(&out, bytes.NewReader(data), blockSize); err != nil {
		return nil, err
	}
	return out.Bytes(), nil
}

// HaveXZBinary reports whether the xz command-line tool is on PATH.
func HaveXZBinary() bool {
	_, err := exec.LookPath("xz")
	return err == nil
}

// CompressXZBinary compresses r into w with the xz binary, producing a
// multi-block file like the Image Factory's: with blockSize > 0 it passes
// --block-size, otherwise -T0 (which also splits into blocks when threaded).
// Level -1 keeps tests fast.
func CompressXZBinary(ctx context.Context, w io.Writer, r io.Reader, blockSize int64) error {
	args := []string{"-c", "-1", "-T0"}
	if blockSize > 0 {
		args = append(args, "--block-size="+strconv.FormatInt(blockSize, 10))
	}
	cmd := exec.CommandContext(ctx, "xz", args...)
	cmd.Stdin, cmd.Stdout = r, w
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("imagetest: xz %v: %w: %s", args, err, stderr.String())
	}
	return nil
}

// Fixture is a generated image kept in memory with its compressed form.
type Fixture struct {
	Size   int64
	Seed   int64
	Raw    []byte
	XZ     []byte
	SHA256 string // hex SHA-256 of Raw

	zstdOnce sync.Once
	zstd     []byte
	zstdErr  error
}

// TB is the subset of testing.TB the helpers need.
type TB interface {
	Helper()
	Fatalf(format string, args ...any)
}

// New generates a size-byte image and compresses it with ulikunitz/xz
// (blockSize as in CompressXZ). It fails the test on error.
func New(t TB, size, seed, blockSize int64) *Fixture {
	t.Helper()
	raw, err := Raw(size, seed)
	if err != nil {
		t.Fatalf("%v", err)
	}
	z, err := XZBytes(raw, blockSize)
	if err != nil {
		t.Fatalf("%v", err)
	}
	return &Fixture{Size: size, Seed: seed, Raw: raw, XZ: z, SHA256: sha256Hex(raw)}
}

// NewMultiBlock is New but compressed by the xz binary with --block-size, so
// the file has several independent blocks. ok is false if xz is missing.
func NewMultiBlock(t TB, size, seed, blockSize int64) (f *Fixture, ok bool) {
	t.Helper()
	if !HaveXZBinary() {
		return nil, false
	}
	raw, err := Raw(size, seed)
	if err != nil {
		t.Fatalf("%v", err)
	}
	var out bytes.Buffer
	if err := CompressXZBinary(context.Background(), &out, bytes.NewReader(raw), blockSize); err != nil {
		t.Fatalf("%v", err)
	}
	return &Fixture{Size: size, Seed: seed, Raw: raw, XZ: out.Bytes(), SHA256: sha256Hex(raw)}, true
}

// WriteXZFile streams a size-byte image through ulikunitz/xz (or the xz
// binary when useBinary and available, with blockSize) into path without
// holding the image in memory: for benchmark-sized images.
func WriteXZFile(ctx context.Context, path string, size, seed, blockSize int64, useBinary bool) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	src := Reader(size, seed)
	defer src.Close()
	if useBinary && HaveXZBinary() {
		err = CompressXZBinary(ctx, f, src, blockSize)
	} else {
		err = CompressXZ(f, src, blockSize)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}
