//go:build unix

package imaging

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// cacheDir is one directory of the cache, reached from Cache.Dir one
// component at a time with openat(O_NOFOLLOW|O_DIRECTORY): every later
// open, unlink and rename is relative to its descriptor, so a component
// swapped for a symlink after the walk changes nothing.
type cacheDir struct {
	fd   int
	path string // for messages only
}

// openCacheDir walks from root (the user's choice: it may itself be or
// sit below a symlink) down segs. Each component must be a directory, not
// a symlink, owned by this user (root also accepts Dir's owner: sudo in
// the user's cache); one of ours that others can reach is made 0700. With create,
// missing components are made 0700; without, a missing one is
// fs.ErrNotExist.
func openCacheDir(root string, segs []string, create bool) (*cacheDir, error) {
	if create {
		if err := os.MkdirAll(root, 0o700); err != nil {
			return nil, cacheError(root, err)
		}
	}
	fd, err := unix.Open(root, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		if err == unix.ENOENT && !create {
			return nil, fs.ErrNotExist
		}
		return nil, cacheError(root, err)
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		unix.Close(fd)
		return nil, cacheError(root, err)
	}
	rootUID := st.Uid
	path := root
	for _, seg := range segs {
		cur := filepath.Join(path, seg)
		next, err := openSubdir(fd, seg, cur, create, rootUID)
		unix.Close(fd)
		if err != nil {
			return nil, err
		}
		fd, path = next, cur
	}
	return &cacheDir{fd: fd, path: path}, nil
}

func openSubdir(parent int, name, path string, create bool, rootUID uint32) (int, error) {
	for tries := 0; ; tries++ {
		fd, err := unix.Openat(parent, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if err == unix.ENOENT {
			if !create {
				return -1, fs.ErrNotExist
			}
			if tries < 2 {
				if err := unix.Mkdirat(parent, name, 0o700); err != nil && err != unix.EEXIST {
					return -1, cacheError(path, err)
				}
				continue
			}
		}
		if err != nil {
			var st unix.Stat_t
			if serr := unix.Fstatat(parent, name, &st, unix.AT_SYMLINK_NOFOLLOW); serr == nil {
				switch st.Mode & unix.S_IFMT {
				case unix.S_IFLNK:
					err = errors.New("a symbolic link where a directory should be: refusing to follow it (remove it to use the cache)")
				case unix.S_IFDIR:
				default:
					err = errors.New("not a directory: refusing to use it")
				}
			}
			return -1, cacheError(path, err)
		}
		if err := checkOwnDir(fd, path, rootUID); err != nil {
			unix.Close(fd)
			return -1, err
		}
		return fd, nil
	}
}

// checkOwnDir refuses a directory someone else controls: its files could
// change under us between our checks.
func checkOwnDir(fd int, path string, rootUID uint32) error {
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return cacheError(path, err)
	}
	euid := uint32(os.Geteuid())
	perm := uint32(st.Mode) & 0o777
	switch {
	case st.Uid == euid:
		if perm&0o077 != 0 {
			if err := unix.Fchmod(fd, 0o700); err != nil && err != unix.EROFS {
				return cacheError(path, fmt.Errorf("make it private (0700): %w", err))
			}
		}
	case euid == 0 && st.Uid == rootUID:
		// Root (sudo keeping HOME) in the cache of the user who owns Dir.
		if perm&0o022 != 0 {
			return cacheError(path, fmt.Errorf("owned by uid %d and writable by others: refusing to use it", st.Uid))
		}
	default:
		return cacheError(path, fmt.Errorf("owned by uid %d, not by this user (uid %d): refusing to use it", st.Uid, euid))
	}
	return nil
}

func (d *cacheDir) join(name string) string { return filepath.Join(d.path, name) }

func (d *cacheDir) close() { unix.Close(d.fd) }

// open opens name in d without following a symlink and without blocking
// on a FIFO; anything but a regular file is errNotRegular.
func (d *cacheDir) open(name string, flag int, perm os.FileMode) (*os.File, error) {
	fd, err := unix.Openat(d.fd, name, flag|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, uint32(perm.Perm()))
	switch err {
	case nil:
	case unix.ELOOP, unix.EMLINK, unix.ENXIO, unix.EISDIR:
		// A symlink (ELOOP; EMLINK on BSDs), a FIFO with no reader, a directory.
		return nil, &fs.PathError{Op: "open", Path: d.join(name), Err: errNotRegular}
	default:
		return nil, &fs.PathError{Op: "open", Path: d.join(name), Err: err}
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		unix.Close(fd)
		return nil, &fs.PathError{Op: "stat", Path: d.join(name), Err: err}
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		unix.Close(fd)
		return nil, &fs.PathError{Op: "open", Path: d.join(name), Err: errNotRegular}
	}
	if err := unix.SetNonblock(fd, false); err != nil {
		unix.Close(fd)
		return nil, &fs.PathError{Op: "open", Path: d.join(name), Err: err}
	}
	return os.NewFile(uintptr(fd), d.join(name)), nil
}

// remove deletes the entry name of d itself (a link, never its target; an
// empty directory); a missing one is no error.
func (d *cacheDir) remove(name string) error {
	err := unix.Unlinkat(d.fd, name, 0)
	if err == unix.EISDIR || err == unix.EPERM {
		err = unix.Unlinkat(d.fd, name, unix.AT_REMOVEDIR)
	}
	if err != nil && err != unix.ENOENT {
		return &fs.PathError{Op: "remove", Path: d.join(name), Err: err}
	}
	return nil
}

func (d *cacheDir) rename(from, to string) error {
	if err := unix.Renameat(d.fd, from, d.fd, to); err != nil {
		return &os.LinkError{Op: "rename", Old: d.join(from), New: d.join(to), Err: err}
	}
	return nil
}

// sync makes renames in d durable; best effort.
func (d *cacheDir) sync() { _ = unix.Fsync(d.fd) }
