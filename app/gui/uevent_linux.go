package gui

import (
	"bytes"
	"context"
	"errors"
	"os"

	"golang.org/x/sys/unix"
)

// BlockEvents reports block device uevents (a card inserted, removed,
// resized) from the kernel's netlink socket, which any user may read: the
// device list is refreshed on them instead of being polled. nil where the
// socket cannot be opened; closed when it fails for good (the caller then
// polls, only while step 2 shows).
func BlockEvents(ctx context.Context) <-chan struct{} {
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC|unix.SOCK_NONBLOCK, unix.NETLINK_KOBJECT_UEVENT)
	if err != nil {
		return nil
	}
	if err := unix.Bind(fd, &unix.SockaddrNetlink{Family: unix.AF_NETLINK, Groups: 1}); err != nil { // 1: the kernel's events
		unix.Close(fd)
		return nil
	}
	f := os.NewFile(uintptr(fd), "uevent") // non-blocking: reads wait in Go's poller, Close ends them
	ch := make(chan struct{}, 1)
	go func() {
		<-ctx.Done()
		f.Close()
	}()
	notify := func() {
		select {
		case ch <- struct{}{}:
		default: // a refresh is pending already
		}
	}
	go func() {
		defer close(ch)             // the caller falls back to polling
		buf := make([]byte, 16<<10) // one datagram per read; a uevent is at most a few KiB
		for {
			n, err := f.Read(buf)
			switch {
			case ctx.Err() != nil:
				return
			case errors.Is(err, unix.ENOBUFS):
				notify() // a burst overflowed the socket: events were dropped, read the list again
			case err != nil:
				return // any other error repeats: retrying it would spin
			case bytes.Contains(buf[:n], []byte("\x00SUBSYSTEM=block\x00")):
				notify()
			}
		}
	}()
	return ch
}
