package devices

import (
	"errors"
	"io"
	"io/fs"
	"os"
)

// DefaultSyncEvery is how much Device.Write buffers in the page cache before
// an fsync. Syncing in steps keeps dirty memory bounded, makes progress
// honest, and (since buffered block-device writes only fail at writeback)
// pins an I/O error to a region this large instead of "somewhere in the
// image".
const DefaultSyncEvery = 32 << 20

// Device is an open write target. It satisfies imaging.Target
// (io.Writer, io.ReaderAt, Sync, Close, Fd). Write and Sync are sequential
// and not safe for concurrent use; ReadAt may run concurrently.
//
// After the first write or sync error the Device stays failed: every later
// Write, Sync and Close returns that error, nothing is retried.
type Device struct {
	Disk      *Disk    // what was checked
	Unmounted []string // mount points Open unmounted, in order

	f         *os.File
	block     bool
	off       int64 // bytes written so far (sequential writes)
	synced    int64 // off at the last successful sync
	syncEvery int64
	failed    error
	warnings  []string
	closed    bool
}

func newDevice(f *os.File, d *Disk, block bool, opts Options) *Device {
	every := opts.SyncEvery
	if every == 0 {
		every = DefaultSyncEvery
	}
	return &Device{Disk: d, f: f, block: block, syncEvery: every}
}

// Name is the path that was opened.
func (d *Device) Name() string { return d.f.Name() }

// Fd is the file descriptor (for O_DIRECT-style tuning by the pipeline).
func (d *Device) Fd() uintptr { return d.f.Fd() }

// Warnings are non-fatal problems, e.g. the kernel could not re-read the
// partition table after Close.
func (d *Device) Warnings() []string { return append([]string(nil), d.warnings...) }

// Write writes sequentially. Errors are *IOError with the failed region.
func (d *Device) Write(p []byte) (int, error) {
	if d.failed != nil {
		return 0, d.failed
	}
	start := d.off
	n, err := d.f.Write(p)
	d.off += int64(n)
	if err != nil {
		d.failed = &IOError{Op: "write", Path: d.f.Name(), Offset: start + int64(n), Len: int64(len(p) - n), Err: errno(err)}
		return n, d.failed
	}
	if d.syncEvery > 0 && d.off-d.synced >= d.syncEvery {
		if err := d.Sync(); err != nil {
			return n, err
		}
	}
	return n, nil
}

// ReadAt reads back (for verification). Errors other than io.EOF are
// *IOError with the region that could not be read.
func (d *Device) ReadAt(p []byte, off int64) (int, error) {
	n, err := d.f.ReadAt(p, off)
	if err != nil && !errors.Is(err, io.EOF) {
		return n, &IOError{Op: "read", Path: d.f.Name(), Offset: off + int64(n), Len: int64(len(p) - n), Err: errno(err)}
	}
	return n, err
}

// Sync flushes written data to the medium. A failure is an *IOError covering
// everything written since the previous successful sync.
func (d *Device) Sync() error {
	if d.failed != nil {
		return d.failed
	}
	if err := d.f.Sync(); err != nil {
		d.failed = &IOError{Op: "sync", Path: d.f.Name(), Offset: d.synced, Len: d.off - d.synced, Err: errno(err)}
		return d.failed
	}
	d.synced = d.off
	return nil
}

// Close syncs, asks the kernel to re-read the partition table of a block
// device (so the new partitions appear; failures become Warnings), and
// closes. It returns the first I/O error of the Device, if any. Closing
// twice is a no-op.
func (d *Device) Close() error {
	if d.closed {
		return nil
	}
	d.closed = true
	err := d.Sync() // returns the sticky error without touching a failed device
	if err == nil && d.block {
		if w := rereadPartitions(d.f); w != "" {
			d.warnings = append(d.warnings, w)
		}
	}
	if cerr := d.f.Close(); cerr != nil && err == nil {
		err = cerr
	}
	return err
}

// errno strips *fs.PathError so IOError does not repeat the path.
func errno(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}
