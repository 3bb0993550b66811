// Package userfile reads small files named by the user (machine configs,
// profiles, installer files) safely: only regular files, never more than a
// bound, so `--file /dev/zero` or a FIFO cannot hang the command or take the
// machine's memory.
package userfile

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"syscall"

	"github.com/talosflash/talosflash/internal/humanbytes"
)

// ErrNotRegular is returned for directories, devices, FIFOs and sockets.
var ErrNotRegular = errors.New("not a regular file")

// TooLargeError says a file is over the bound given to Read.
type TooLargeError struct {
	Path string
	Max  int64
}

func (e *TooLargeError) Error() string {
	return fmt.Sprintf("%s is larger than %s", e.Path, humanbytes.Exact(e.Max))
}

// Read returns the contents of the regular file at path, refusing anything
// that is not a regular file and anything longer than max bytes. The file is
// opened non-blocking so that a FIFO without a writer is refused instead of
// blocking the open, and the size is checked on the opened file (no
// check-then-open race) and again while reading (a file that grows).
func Read(path string, max int64) ([]byte, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !st.Mode().IsRegular() {
		return nil, &fs.PathError{Op: "read", Path: path, Err: fmt.Errorf("%w (%s)", ErrNotRegular, kind(st.Mode()))}
	}
	if st.Size() > max {
		return nil, &TooLargeError{Path: path, Max: max}
	}
	data, err := io.ReadAll(io.LimitReader(f, max+1))
	if err != nil {
		return nil, err
	}
	if int64(len(data)) > max {
		return nil, &TooLargeError{Path: path, Max: max}
	}
	return data, nil
}

func kind(m fs.FileMode) string {
	switch {
	case m.IsDir():
		return "a directory"
	case m&fs.ModeNamedPipe != 0:
		return "a FIFO"
	case m&fs.ModeSocket != 0:
		return "a socket"
	case m&fs.ModeCharDevice != 0:
		return "a character device"
	case m&fs.ModeDevice != 0:
		return "a block device"
	default:
		return "not a regular file"
	}
}
