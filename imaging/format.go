package imaging

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"math"
	"os"

	"github.com/klauspost/compress/zstd"
)

// Format is the container of an image file, told by its content, never by
// its name.
type Format int

// Image formats talosflash writes. Anything else that is recognised is
// refused with ErrUnsupportedImage.
const (
	FormatRaw  Format = iota // an uncompressed disk image
	FormatXZ                 // .raw.xz (Image Factory default, xz -0 -T0)
	FormatZstd               // .raw.zst (Image Factory, zstd -T0 -18)
	FormatGzip               // .raw.gz
)

func (f Format) String() string {
	switch f {
	case FormatXZ:
		return "xz"
	case FormatZstd:
		return "zstd"
	case FormatGzip:
		return "gzip"
	}
	return "raw"
}

// ErrUnsupportedImage is matched by the refusal of an input that is not an
// image talosflash can write (bzip2, lzma, zip, qcow2, an empty file, or a
// decoded stream that does not start like a disk). It is refused before the
// target is opened; the CLI exits 9 as for a corrupt image.
var ErrUnsupportedImage = errors.New("not a disk image talosflash can write")

var (
	zstdMagic  = []byte{0x28, 0xB5, 0x2F, 0xFD}
	gzipMagic  = []byte{0x1F, 0x8B}
	bzip2Magic = []byte("BZh")
	zipMagic   = []byte("PK\x03\x04")
	qcowMagic  = []byte("QFI\xfb")
	sevenZip   = []byte{'7', 'z', 0xBC, 0xAF, 0x27, 0x1C}
	lz4Magic   = []byte{0x04, 0x22, 0x4D, 0x18}
	vhdxMagic  = []byte("vhdxfile")
	vmdkMagic  = []byte("KDMV")
)

// sniffHeadSize is how many leading bytes sniffFormat and checkDiskStart look at.
const sniffHeadSize = 1024

// sniffFormat names the container of a file from its first bytes. Formats
// that talosflash does not write are an error naming them.
func sniffFormat(head []byte) (Format, error) {
	refuse := func(what string) (Format, error) {
		return 0, fmt.Errorf("%w: it is %s; talosflash writes .raw.xz, .raw.zst, .raw.gz or raw disk images", ErrUnsupportedImage, what)
	}
	switch {
	case len(head) == 0:
		return 0, fmt.Errorf("%w: the file is empty", ErrUnsupportedImage)
	case bytes.HasPrefix(head, xzMagic):
		return FormatXZ, nil
	case bytes.HasPrefix(head, zstdMagic):
		return FormatZstd, nil
	case bytes.HasPrefix(head, gzipMagic):
		return FormatGzip, nil
	case bytes.HasPrefix(head, bzip2Magic) && len(head) > 3 && head[3] >= '1' && head[3] <= '9':
		return refuse("a bzip2 file")
	case bytes.HasPrefix(head, zipMagic):
		return refuse("a zip archive (extract the image first)")
	case bytes.HasPrefix(head, qcowMagic):
		return refuse("a qcow2 virtual machine disk")
	case bytes.HasPrefix(head, sevenZip):
		return refuse("a 7z archive")
	case bytes.HasPrefix(head, lz4Magic):
		return refuse("an lz4 file")
	case bytes.HasPrefix(head, vhdxMagic), bytes.HasPrefix(head, vmdkMagic):
		return refuse("a virtual machine disk (VHDX/VMDK)")
	case len(head) >= 13 && head[0] == 0x5D && head[1] == 0 && head[2] == 0:
		// Legacy .lzma: properties 0x5D (lc=3 lp=0 pb=2, what lzma uses),
		// then a little-endian dictionary size, then the raw size.
		return refuse("an lzma (legacy .lzma) file")
	}
	return FormatRaw, nil
}

// checkDiskStart refuses a decoded stream that does not start like a disk:
// an MBR (also GPT's protective one) ends its first sector with 0x55AA, a
// GPT header at byte 512 starts with "EFI PART". Talos images have both.
func checkDiskStart(head []byte) error {
	if len(head) >= 512 && head[510] == 0x55 && head[511] == 0xAA {
		return nil
	}
	if len(head) >= 520 && string(head[512:520]) == "EFI PART" {
		return nil
	}
	if len(head) == 0 {
		return fmt.Errorf("%w: it decodes to nothing", ErrUnsupportedImage)
	}
	return fmt.Errorf("%w: its data does not start like a disk (no MBR signature at byte 510, no GPT header at byte 512); use --force-raw to write it anyway", ErrUnsupportedImage)
}

// zstdMaxWindow bounds the decoder's memory. Image Factory's zstd -18 uses
// an 8 MiB window; zstd --long=27 (128 MiB) is the most common tools write.
const zstdMaxWindow = 128 << 20

// newZstdReader decodes a zstd stream, checking its XXH64 checksums.
// window is the largest window of its frames when every frame header was
// read (a local file), else 0.
//
// A known window up to zstdFastWindow (Image Factory's zstd -18: 8 MiB) is
// decoded by one goroutine (the pipeline's read) into a history of twice
// the window: the decoder's low-memory history (the window + 1 MiB) moves
// the whole window down every MiB decoded, 3 GiB of copying for a 384 MiB
// image, and its two-goroutine mode copies every block once more. This
// decodes the factory's image 1.8x as fast for 5 MiB more
// (docs/PERFORMANCE.md). Larger or unknown windows (a stream, whose later
// frames are not known yet) keep the low-memory history: memory stays
// bounded by zstdMaxWindow.
func newZstdReader(r io.Reader, window uint64) (io.ReadCloser, error) {
	opts := []zstd.DOption{zstd.WithDecoderMaxWindow(zstdMaxWindow), zstd.WithDecoderConcurrency(2)}
	if window > 0 && window <= zstdFastWindow {
		opts = []zstd.DOption{zstd.WithDecoderMaxWindow(zstdFastWindow), zstd.WithDecoderConcurrency(1), zstd.WithDecoderLowmem(false)}
	}
	d, err := zstd.NewReader(r, opts...)
	if err != nil {
		return nil, err
	}
	return d.IOReadCloser(), nil
}

// zstdFastWindow is the largest window decoded with a history of twice it.
const zstdFastWindow = 8 << 20

// zstdContentSize returns the decoded size declared in the first frame's
// header (zstd writes it when it knows the input size, as Image Factory's
// does), or -1.
func zstdContentSize(head []byte) (int64, error) {
	var h zstd.Header
	if err := h.Decode(head); err != nil {
		return -1, fmt.Errorf("%w: zstd frame header: %v", ErrCorruptImage, err)
	}
	if h.Skippable || !h.HasFCS || h.FrameContentSize > 1<<62 {
		return -1, nil
	}
	return int64(h.FrameContentSize), nil
}

// zstdMaxBlock is the most a zstd block decodes to (RFC 8878 Block_Maximum_Size).
const zstdMaxBlock = 128 << 10

// zstdFileSize walks the frames of a zstd file (headers and block headers
// only, no decoding) and returns the decoded size the frame headers add up
// to, or -1 when a frame does not declare its size. Several frames (pzstd,
// concatenated files) are summed; a structure that does not add up to the
// file size is corrupt.
func zstdFileSize(r io.ReaderAt, size int64) (int64, error) {
	n, _, err := zstdFrames(r, size)
	return n, err
}

// zstdFrames is zstdFileSize, and the largest window of the frames (a
// single-segment frame's is its content size).
func zstdFrames(r io.ReaderAt, size int64) (int64, uint64, error) {
	var window uint64
	corrupt := func(format string, args ...any) (int64, uint64, error) {
		return -1, 0, fmt.Errorf("%w: zstd: %s", ErrCorruptImage, fmt.Sprintf(format, args...))
	}
	var total int64
	known := true
	buf := make([]byte, 32)
	for pos := int64(0); pos < size; {
		n, err := r.ReadAt(buf[:min(int64(len(buf)), size-pos)], pos)
		if err != nil && err != io.EOF {
			return -1, 0, err
		}
		var h zstd.Header
		if err := h.Decode(buf[:n]); err != nil {
			return corrupt("frame header at byte %d: %v", pos, err)
		}
		pos += int64(h.HeaderSize)
		if h.Skippable {
			pos += int64(h.SkippableSize)
			continue
		}
		w := h.WindowSize
		if h.SingleSegment {
			w = h.FrameContentSize
		}
		window = max(window, w)
		var blocks uint64
		for last := false; !last; blocks++ {
			var bh [3]byte
			if _, err := r.ReadAt(bh[:], pos); err != nil {
				return corrupt("block header at byte %d: %v", pos, err)
			}
			v := uint32(bh[0]) | uint32(bh[1])<<8 | uint32(bh[2])<<16
			last = v&1 == 1
			switch (v >> 1) & 3 {
			case 0, 2: // raw, compressed: that many bytes follow
				pos += 3 + int64(v>>3)
			case 1: // RLE: one byte follows
				pos += 4
			default:
				return corrupt("reserved block type at byte %d", pos)
			}
			if pos > size {
				return corrupt("block at byte %d runs past the end of the file", pos)
			}
		}
		if h.HasCheckSum {
			pos += 4
		}
		if pos > size {
			return corrupt("frame checksum past the end of the file")
		}
		// A block decodes to at most 128 KiB: a header claiming more than
		// its blocks can hold lies (and must not pass a size check).
		switch {
		case !h.HasFCS:
			known = false
		case h.FrameContentSize > blocks*zstdMaxBlock || int64(h.FrameContentSize) > math.MaxInt64-total:
			return corrupt("frame declares %d bytes in %d blocks", h.FrameContentSize, blocks)
		default:
			total += int64(h.FrameContentSize)
		}
	}
	if !known {
		return -1, window, nil
	}
	return total, window, nil
}

// decoderFor wraps the compressed stream r in the decoder of format;
// zstdWindow is newZstdReader's window.
func decoderFor(format Format, r io.Reader, zstdWindow uint64) (io.Reader, error) {
	switch format {
	case FormatXZ:
		return newDecompressor(r)
	case FormatZstd:
		return newZstdReader(r, zstdWindow)
	case FormatGzip:
		zr, err := gzip.NewReader(r)
		if err != nil {
			return nil, err
		}
		zr.Multistream(true)
		return zr, nil
	}
	return r, nil
}

// checkImage checks a downloaded or cached file (opened by the cache) is
// an image in a format talosflash writes: the xz container's structure and
// checks (CheckXZ), the zstd frames and block headers adding up to the file
// size, a gzip header. Data checks come while flashing.
func checkImage(f *os.File) error {
	st, err := f.Stat()
	if err != nil {
		return err
	}
	if !st.Mode().IsRegular() {
		return fmt.Errorf("%s is not a regular file", f.Name())
	}
	head := make([]byte, sniffHeadSize)
	n, err := f.ReadAt(head, 0)
	if err != nil && err != io.EOF {
		return err
	}
	format, err := sniffFormat(head[:n])
	if err != nil {
		return err
	}
	switch format {
	case FormatXZ:
		_, err = CheckXZ(f, st.Size())
		return err
	case FormatZstd:
		_, err = zstdFileSize(f, st.Size())
		return err
	case FormatGzip:
		_, err = gzip.NewReader(bytes.NewReader(head[:n]))
		if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) {
			return fmt.Errorf("%w: gzip: %v", ErrCorruptImage, err)
		}
		return nil
	}
	return fmt.Errorf("%w: the download is not compressed (xz, zstd or gzip expected)", ErrCorruptImage)
}

// peekDisk reads the start of the decoded stream (without consuming it) and
// refuses it unless it starts like a disk or force is set. It returns the
// reader to continue from.
func peekDisk(r io.Reader, force bool) (io.Reader, error) {
	// A small buffer: big reads pass straight through it afterwards, and
	// the decoder is not asked for more than the GPT's first tables up front.
	br := bufio.NewReaderSize(r, gptPeek)
	head, err := br.Peek(sniffHeadSize)
	if err != nil && err != io.EOF && !errors.Is(err, bufio.ErrBufferFull) {
		return nil, err
	}
	if len(head) == 0 {
		return nil, fmt.Errorf("%w: it decodes to nothing", ErrUnsupportedImage)
	}
	if !force {
		if err := checkDiskStart(head); err != nil {
			return nil, err
		}
	}
	// A GPT image is checked against its own tables, to its end.
	return gptCheck(br)
}
