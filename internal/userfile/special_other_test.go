//go:build !unix

package userfile

import "testing"

// addSpecialFiles: no FIFOs or /dev/zero here (Windows): the directory
// stays the one file Read must refuse.
func addSpecialFiles(*testing.T, string, map[string]string) {}
