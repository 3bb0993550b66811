package imagetest

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
)

// FactorySize is the raw size of the metal images Image Factory serves for
// Talos 1.8 to 1.14 (imager's MinRAWDiskSize, 1246 MiB).
const FactorySize = 1246 << 20 // 1,306,525,696 B

// Shape is how a raw image is compressed, with the tool and flags used.
type Shape struct {
	Name string   // short name, used in file names: "xz0", "xz6", "zst18"
	Ext  string   // ".xz" or ".zst"
	Cmd  []string // compressor reading stdin, writing stdout
}

// The factory's two formats (siderolabs/talos pkg/imager post-processing
// runs `xz -0 -f -T 0` and `zstd -T0 -18`), and the xz -6 shape the older
// benchmarks modelled. xz -0 -T0 writes 1 MiB blocks (3 x the 256 KiB
// dictionary, raised to xz's 1 MiB minimum) with sizes in the block headers
// and CRC64; zstd -18 writes one frame with the content size.
var (
	ShapeXZ0   = Shape{"xz0", ".xz", []string{"xz", "-0", "-T0", "-c"}}
	ShapeXZ6   = Shape{"xz6", ".xz", []string{"xz", "-6", "-T0", "-c"}}
	ShapeZst18 = Shape{"zst18", ".zst", []string{"zstd", "-T0", "-18", "-q", "-c"}}
)

// FactoryShapes lists the shapes benchmarks use, the factory's first.
var FactoryShapes = []Shape{ShapeXZ0, ShapeZst18, ShapeXZ6}

// HaveTool reports whether the shape's compressor is installed.
func (s Shape) HaveTool() bool {
	_, err := exec.LookPath(s.Cmd[0])
	return err == nil
}

// Compress runs the shape's compressor on src into w.
func (s Shape) Compress(ctx context.Context, w io.Writer, src io.Reader) error {
	cmd := exec.CommandContext(ctx, s.Cmd[0], s.Cmd[1:]...)
	cmd.Stdin, cmd.Stdout = src, w
	var stderr limitedBuffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("imagetest: %v: %w: %s", s.Cmd, err, stderr.b)
	}
	return nil
}

// WriteFactoryFile streams a size-byte image (FactorySize for the real
// shape) through the shape's compressor into path, without holding the
// image in memory. It writes path+".tmp" and renames it when complete, so
// an interrupted run never leaves a truncated image behind.
func WriteFactoryFile(ctx context.Context, path string, s Shape, size, seed int64) error {
	tmp := path + ".tmp"
	f, err := os.Create(tmp)
	if err != nil {
		return err
	}
	src := Reader(size, seed)
	err = s.Compress(ctx, f, src)
	src.Close()
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(tmp)
		return err
	}
	return os.Rename(tmp, path)
}

// limitedBuffer keeps the first 4 KiB written to it (a tool's stderr).
type limitedBuffer struct{ b []byte }

func (l *limitedBuffer) Write(p []byte) (int, error) {
	if room := 4096 - len(l.b); room > 0 {
		l.b = append(l.b, p[:min(room, len(p))]...)
	}
	return len(p), nil
}
