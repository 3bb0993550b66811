//go:build !linux && !darwin && !windows

package imaging

import "errors"

var errNoDirect = errors.New("direct I/O not supported on this platform")

func setDirect(fd uintptr, on bool) error { return errNoDirect }

func dropCache(fd uintptr) error { return errNoDirect }

func blockDeviceSize(fd uintptr) (int64, bool, error) { return 0, false, nil }

// nextData: holes are not asked for here; a regular file is read.
func nextData(Target, int64) (int64, bool) { return 0, false }
