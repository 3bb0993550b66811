//go:build !unix

package main

import "os"

// peakRSSKB is not known where the process state carries no rusage.
func peakRSSKB(*os.ProcessState) int64 { return 0 }
