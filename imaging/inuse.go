package imaging

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// ErrTargetInUse refuses a target that something else uses: another
// target of the same flash (one card named twice: a hard link, a bind
// mount, a second path to the same block device), the image being
// flashed, or the backing file of an attached loop device (a file system
// may be mounted from it). It is refused before anything is written; the
// CLI exits 5, as for any target the safety rules refuse.
var ErrTargetInUse = errors.New("the target is in use")

// targetID is what a target name stands for: an existing file or device
// (fi), or a file still to be created (its directory and name).
type targetID struct {
	name   string
	fi     os.FileInfo // nil when the target does not exist yet
	dir    os.FileInfo // the parent of a target to be created
	base   string
	loopOf string // the loop device's backing file, when the target is one
	loop   string // the loop device's name (loop0), when the target is one
}

func identify(name string) targetID {
	id := targetID{name: name, base: filepath.Base(name)}
	if fi, err := os.Stat(name); err == nil {
		id.fi = fi
		if back := loopBacking(name); back != "" {
			id.loopOf = back
			if dev, err := filepath.EvalSymlinks(name); err == nil {
				id.loop = filepath.Base(dev)
			}
		}
		return id
	}
	id.dir, _ = os.Stat(filepath.Dir(name))
	return id
}

// same says whether two names are one card: the same file (device and
// inode, whatever the path: hard links, bind mounts, symlinks), the same
// block device through different device nodes, or the same file to be
// created in the same directory.
func (a targetID) same(b targetID) bool {
	switch {
	case a.fi != nil && b.fi != nil:
		return os.SameFile(a.fi, b.fi) || sameDevice(a.fi, b.fi)
	case a.fi == nil && b.fi == nil && a.dir != nil && b.dir != nil:
		return a.base == b.base && os.SameFile(a.dir, b.dir)
	}
	return false
}

// checkTargets refuses, before any target is opened, a target that is
// another target, or the backing file (or device) of an attached loop
// device, or a loop device whose backing file another loop device also
// uses. The source itself is openedSource.notTarget's.
func checkTargets(names []string) error {
	ids := make([]targetID, len(names))
	loops := attachedLoops()
	for i, name := range names {
		ids[i] = identify(name)
		for j := range i {
			if ids[i].same(ids[j]) {
				return fmt.Errorf("%w: %s and %s are the same card; name each card once", ErrTargetInUse, names[j], name)
			}
		}
		if ids[i].fi == nil {
			continue
		}
		for _, l := range loops {
			if l.name == ids[i].loop {
				continue // the target is this loop device
			}
			if os.SameFile(ids[i].fi, l.backing) || sameDevice(ids[i].fi, l.backing) {
				return fmt.Errorf("%w: %s is the backing file of the attached loop device /dev/%s (detach it first: losetup -d /dev/%s)", ErrTargetInUse, name, l.name, l.name)
			}
			if ids[i].loopOf != "" {
				if bi, err := os.Stat(ids[i].loopOf); err == nil && os.SameFile(bi, l.backing) {
					return fmt.Errorf("%w: %s is a loop device over %s, which the loop device /dev/%s also uses", ErrTargetInUse, name, ids[i].loopOf, l.name)
				}
			}
		}
	}
	return nil
}

// loopDevice is an attached loop device and what it reads and writes.
type loopDevice struct {
	name        string // loop0
	backingPath string
	backing     os.FileInfo
}
