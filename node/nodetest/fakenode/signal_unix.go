//go:build unix

package main

import (
	"os"
	"syscall"
)

// cniSignals install a CNI (kill -USR1 PID).
var cniSignals = []os.Signal{syscall.SIGUSR1}
