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
	return compressFile(ctx, path, s, Reader(size, seed))
}

// compressFile compresses src (closed at the end) into path through the
// shape's compressor, by way of path+".tmp".
func compressFile(ctx context.Context, path string, s Shape, src io.ReadCloser) error {
	tmp := path + ".tmp"
	f, err := os.Create(tmp)
	if err != nil {
		src.Close()
		return err
	}
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

// TalosFactoryParts is the partition layout of the factory's metal images
// (siderolabs/talos internal/pkg/partition, pkg/machinery/imager/quirks:
// EFI 100 MiB, BOOT 1000 MiB, META 1 MiB, STATE 100 MiB, from 1 MiB on):
// META lies after BOOT, at 1101 MiB of the 1246.
func TalosFactoryParts() []Part {
	return []Part{
		{Name: "EFI", Size: 100 << 20},
		{Name: "BOOT", Size: 1000 << 20},
		{Name: "META", Size: 1 << 20},
		{Name: "STATE", Size: 100 << 20},
	}
}

// WriteTalosImage streams Raw(size, seed)'s data with the factory's
// partition table (TalosFactoryParts; META blank, as Talos builds it: a
// node's values can be written into it) to w, without holding the image in
// memory; size must hold the layout (FactorySize does). It returns META's
// offset.
func WriteTalosImage(w io.Writer, size, seed int64) (int64, error) {
	writes, offsets, err := gptLayout(size, TalosFactoryParts())
	if err != nil {
		return 0, err
	}
	metaOff := offsets[2]
	zeros := [][2]int64{{0, 1 << 20}, {metaOff, metaOff + 1<<20}, {size - 33*512, size}}
	r := Reader(size, seed)
	defer r.Close()
	buf := make([]byte, 4<<20)
	for off := int64(0); off < size; {
		n, err := io.ReadFull(r, buf[:min(int64(len(buf)), size-off)])
		if err != nil {
			return 0, err
		}
		chunk := buf[:n]
		end := off + int64(n)
		for _, z := range zeros {
			if lo, hi := max(z[0], off), min(z[1], end); lo < hi {
				clear(chunk[lo-off : hi-off])
			}
		}
		for _, d := range writes {
			if lo, hi := max(d.off, off), min(d.off+int64(len(d.b)), end); lo < hi {
				copy(chunk[lo-off:hi-off], d.b[lo-d.off:])
			}
		}
		if _, err := w.Write(chunk); err != nil {
			return 0, err
		}
		off = end
	}
	return metaOff, nil
}

// WriteTalosFactoryFile is WriteFactoryFile of WriteTalosImage's image: a
// factory-shaped file whose META lies where the factory's does.
func WriteTalosFactoryFile(ctx context.Context, path string, s Shape, size, seed int64) error {
	pr, pw := io.Pipe()
	go func() {
		_, err := WriteTalosImage(pw, size, seed)
		pw.CloseWithError(err)
	}()
	return compressFile(ctx, path, s, pr)
}
