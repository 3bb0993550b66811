//go:build !linux

package gui

import "context"

// BlockEvents is nil off Linux: the device list is polled while step 2 shows.
func BlockEvents(context.Context) <-chan struct{} { return nil }
