//go:build !linux

package devices

import (
	"context"
	"os"
)

// Open answers ErrNoUDisks: UDisks2 is Linux's.
func (u *UDisks) Open(context.Context, string, int64, Options) (*Device, error) {
	return nil, ErrNoUDisks
}

// OpenFile answers ErrNoUDisks.
func (u *UDisks) OpenFile(context.Context, string, Options) (*os.File, error) {
	return nil, ErrNoUDisks
}

// PowerOff answers ErrNoUDisks.
func (u *UDisks) PowerOff(context.Context, string) error { return ErrNoUDisks }
