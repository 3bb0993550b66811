package cli

import (
	"fmt"
	"os"
	"os/user"
	"runtime"
	"strconv"
	"syscall"

	"golang.org/x/sys/unix"
)

const nonBlock = syscall.O_NONBLOCK

// openAsInvoker opens the elevated child's image with the file-system
// rights of the user who ran pkexec (or sudo), so root never reads for
// them a file they could not read (/etc/shadow onto a card they own). The
// open runs on a thread of its own whose fs uid/gid are the user's and
// which has no supplementary groups (stricter than the user, never more
// permissive); that thread is never unlocked, so it ends with its
// goroutine and no other code runs with those ids.
func openAsInvoker(path string) (*os.File, error) {
	uid, ok := invokerUID()
	if !ok {
		return openImage(path)
	}
	if uid < 0 {
		return nil, fmt.Errorf("the invoking user (PKEXEC_UID/SUDO_UID) is not a number")
	}
	gid := -1
	if u, err := user.LookupId(strconv.Itoa(uid)); err == nil {
		gid, _ = strconv.Atoi(u.Gid)
	}
	if gid < 0 {
		return nil, fmt.Errorf("the invoking user %d has no group to read the image as", uid)
	}
	type opened struct {
		f   *os.File
		err error
	}
	ch := make(chan opened, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: see above
		if err := asUser(uid, gid); err != nil {
			ch <- opened{err: err}
			return
		}
		f, err := openImage(path)
		if err != nil {
			err = fmt.Errorf("as user %d: %w", uid, err)
		}
		ch <- opened{f, err}
	}()
	o := <-ch
	return o.f, o.err
}

// asUser sets this thread's fs ids to uid/gid and drops its supplementary
// groups (raw syscalls: per thread, unlike syscall.Setgroups), checking
// that the kernel took them (setfsuid reports no failure of its own).
func asUser(uid, gid int) error {
	if _, _, e := unix.RawSyscall(unix.SYS_SETGROUPS, 0, 0, 0); e != 0 {
		return fmt.Errorf("drop groups to read the image as user %d: %w", uid, e)
	}
	_ = unix.Setfsgid(gid) // checked below
	_ = unix.Setfsuid(uid)
	if got, _ := unix.SetfsgidRetGid(-1); got != gid {
		return fmt.Errorf("cannot read the image as group %d (fs gid %d)", gid, got)
	}
	if got, _ := unix.SetfsuidRetUid(-1); got != uid {
		return fmt.Errorf("cannot read the image as user %d (fs uid %d)", uid, got)
	}
	return nil
}

// fdPath names the open image for the pipeline: opening it opens the same
// file again, whatever its path names by then.
func fdPath(f *os.File) string { return fmt.Sprintf("/proc/self/fd/%d", f.Fd()) }
