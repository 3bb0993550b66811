package imaging

import (
	"io"
	"os"
)

// SniffFile names the container of the image file f by its first bytes
// (as Flash tells it, never by name); formats talosflash does not write are
// an error naming them (ErrUnsupportedImage). f's offset is not moved.
func SniffFile(f *os.File) (Format, error) {
	head := make([]byte, sniffHeadSize)
	n, err := f.ReadAt(head, 0)
	if err != nil && err != io.EOF {
		return 0, err
	}
	return sniffFormat(head[:n])
}
