//go:build unix

package factory

import (
	"os"
	"syscall"
)

// fileMeta is what a rewrite must keep that os.FileInfo does not say portably.
type fileMeta struct {
	known    bool // the fields below are real
	uid, gid uint32
	nlink    uint64
}

func metaOf(fi os.FileInfo) fileMeta {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return fileMeta{}
	}
	return fileMeta{known: true, uid: st.Uid, gid: st.Gid, nlink: uint64(st.Nlink)}
}

// lockFile takes an exclusive advisory lock, without waiting.
func lockFile(f *os.File) error {
	return syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
}

// chownLike gives f the owner and group of the original (a no-op when they
// are already ours; only root may give a file away).
func chownLike(f *os.File, m fileMeta) error {
	if !m.known {
		return nil
	}
	st, err := f.Stat()
	if err != nil {
		return err
	}
	if cur, ok := st.Sys().(*syscall.Stat_t); ok && cur.Uid == m.uid && cur.Gid == m.gid {
		return nil
	}
	return f.Chown(int(m.uid), int(m.gid))
}
