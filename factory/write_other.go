//go:build !unix

package factory

import "os"

// fileMeta: owners and link counts are not read on this system.
type fileMeta struct {
	known    bool
	uid, gid uint32
	nlink    uint64
}

func metaOf(os.FileInfo) fileMeta { return fileMeta{} }

func lockFile(*os.File) error { return nil }

func chownLike(*os.File, fileMeta) error { return nil }
