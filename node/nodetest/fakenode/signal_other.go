//go:build !unix

package main

import "os"

// cniSignals: none where there is no SIGUSR1 (Windows): --cni does it.
var cniSignals []os.Signal
