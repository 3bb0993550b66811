//go:build !unix

package imaging

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
)

// cacheDir is one directory of the cache. Without openat, components are
// checked by path (Lstat: a directory, not a link) each time it is opened.
type cacheDir struct{ path string }

func openCacheDir(root string, segs []string, create bool) (*cacheDir, error) {
	if create {
		if err := os.MkdirAll(root, 0o700); err != nil {
			return nil, cacheError(root, err)
		}
	}
	if fi, err := os.Stat(root); err != nil {
		if errors.Is(err, fs.ErrNotExist) && !create {
			return nil, fs.ErrNotExist
		}
		return nil, cacheError(root, err)
	} else if !fi.IsDir() {
		return nil, cacheError(root, errors.New("not a directory: refusing to use it"))
	}
	path := root
	for _, seg := range segs {
		path = filepath.Join(path, seg)
		fi, err := os.Lstat(path)
		if errors.Is(err, fs.ErrNotExist) {
			if !create {
				return nil, fs.ErrNotExist
			}
			if err := os.Mkdir(path, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
				return nil, cacheError(path, err)
			}
			fi, err = os.Lstat(path)
		}
		switch {
		case err != nil:
			return nil, cacheError(path, err)
		case fi.Mode()&fs.ModeSymlink != 0:
			return nil, cacheError(path, errors.New("a symbolic link where a directory should be: refusing to follow it (remove it to use the cache)"))
		case !fi.IsDir():
			return nil, cacheError(path, errors.New("not a directory: refusing to use it"))
		}
	}
	return &cacheDir{path: path}, nil
}

func (d *cacheDir) join(name string) string { return filepath.Join(d.path, name) }

func (d *cacheDir) close() {}

func (d *cacheDir) open(name string, flag int, perm os.FileMode) (*os.File, error) {
	p := d.join(name)
	if fi, err := os.Lstat(p); err == nil && !fi.Mode().IsRegular() {
		return nil, &fs.PathError{Op: "open", Path: p, Err: errNotRegular}
	}
	f, err := os.OpenFile(p, flag, perm)
	if err != nil {
		return nil, err
	}
	if st, err := f.Stat(); err != nil || !st.Mode().IsRegular() {
		f.Close()
		return nil, &fs.PathError{Op: "open", Path: p, Err: errNotRegular}
	}
	return f, nil
}

func (d *cacheDir) remove(name string) error {
	if err := os.Remove(d.join(name)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return nil
}

func (d *cacheDir) rename(from, to string) error { return os.Rename(d.join(from), d.join(to)) }

// sync makes renames in d durable; best effort.
func (d *cacheDir) sync() {
	if f, err := os.Open(d.path); err == nil {
		_ = f.Sync()
		f.Close()
	}
}
