//go:build !unix

package xvfbtest

import "os"

// lockFile: no Xvfb there, so nothing to take turns for.
func lockFile(*os.File) error { return nil }
