//go:build unix

package main

import (
	"os"
	"syscall"
)

// peakRSSKB is the peak RSS of the largest process a finished command
// reaped (wait4's rusage; KiB on Linux).
func peakRSSKB(ps *os.ProcessState) int64 {
	if ru, ok := ps.SysUsage().(*syscall.Rusage); ok {
		return int64(ru.Maxrss)
	}
	return 0
}
