package imaging

import (
	"errors"

	"golang.org/x/sys/unix"
)

// setDirect turns macOS's F_NOCACHE on or off: reads and writes then bypass
// the unified buffer cache, the closest thing to Linux's O_DIRECT. (Raw
// disk nodes, /dev/rdiskN, are uncached anyway.)
func setDirect(fd uintptr, on bool) error {
	v := 0
	if on {
		v = 1
	}
	_, err := unix.FcntlInt(fd, unix.F_NOCACHE, v)
	return err
}

func dropCache(fd uintptr) error { return errors.New("no fadvise on macOS") }

func blockDeviceSize(fd uintptr) (int64, bool, error) { return 0, false, nil }

// nextData: holes are not asked for here; a regular file is read.
func nextData(Target, int64) (int64, bool) { return 0, false }
