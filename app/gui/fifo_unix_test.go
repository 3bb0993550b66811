//go:build unix

package gui

import "syscall"

// mkfifo makes a FIFO at path (apart so that every test file also builds,
// and is vetted, for Windows: fifo_other_test.go).
func mkfifo(path string) error { return syscall.Mkfifo(path, 0o600) }
