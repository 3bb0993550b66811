//go:build !linux && !darwin && !windows

package imaging

import "errors"

func pwriteFd(fd uintptr, p []byte, off int64) (int, error) {
	return 0, errors.New("positional writes not supported on this platform")
}

const havePwriteFd = false
