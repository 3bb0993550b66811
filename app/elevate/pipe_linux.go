package elevate

import (
	"os"

	"golang.org/x/sys/unix"
)

// pipeSize is the child's stdin pipe buffer: a frame at a time instead of
// the default 64 KiB (16 wake-ups of the child per frame). 1 MiB is
// Linux's default pipe-max-size, allowed to any user.
const pipeSize = 1 << 20

// setPipeSize grows the pipe w writes to (best effort; through the raw
// descriptor, so w stays non-blocking).
func setPipeSize(w any) {
	f, ok := w.(*os.File)
	if !ok {
		return
	}
	if rc, err := f.SyscallConn(); err == nil {
		_ = rc.Control(func(fd uintptr) { _, _ = unix.FcntlInt(fd, unix.F_SETPIPE_SZ, pipeSize) })
	}
}
