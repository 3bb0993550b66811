package imaging

import (
	"errors"
	"fmt"
	"io"

	"github.com/talosflash/talosflash/imaging/xzpar"
)

// ErrCorruptImage reports an image whose container structure or data is
// damaged (bad magic, CRC, index, sizes, a decode error, a cut stream).
// errors.Is-able.
var ErrCorruptImage = errors.New("image is corrupt")

var xzMagic = []byte{0xFD, '7', 'z', 'X', 'Z', 0x00}

// XZInfo describes an xz file as recorded in its stream headers, indexes
// and footers (xzpar.Scan, the one parser of the container).
type XZInfo = xzpar.Info

// XZUncompressedSize returns the decompressed size recorded in the index of
// every stream of an xz file of the given size, reading only the stream
// headers, footers and indexes (a few KiB). It validates their magic bytes,
// CRC32s and that the recorded sizes add up to the file size exactly.
func XZUncompressedSize(r io.ReaderAt, size int64) (int64, error) {
	info, err := scanXZ(r, size, false)
	if err != nil {
		return 0, err
	}
	return info.Uncompressed, nil
}

// CheckXZ is XZUncompressedSize plus every block header checked against
// its index record (CRC32, sizes): the structure of a download, no decode.
func CheckXZ(r io.ReaderAt, size int64) (*XZInfo, error) {
	info, err := scanXZ(r, size, true)
	if err != nil {
		return nil, err
	}
	return &info, nil
}

func scanXZ(r io.ReaderAt, size int64, checkBlocks bool) (xzpar.Info, error) {
	info, err := xzpar.Scan(r, size, checkBlocks)
	if errors.Is(err, xzpar.ErrFormat) {
		err = fmt.Errorf("%w: %w", ErrCorruptImage, err)
	}
	return info, err
}
