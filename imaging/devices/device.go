package devices

import (
	"errors"
	"io"
	"io/fs"
	"os"
	"sync"
)

// DefaultSyncEvery is how much Device.Write buffers in the page cache before
// an fsync. Syncing in steps keeps dirty memory bounded, makes progress
// honest, and (since buffered block-device writes only fail at writeback)
// pins an I/O error to a region this large instead of "somewhere in the
// image".
const DefaultSyncEvery = 32 << 20

// Device is an open write target. It satisfies imaging.Target
// (io.Writer, io.ReaderAt, Sync, Close, Fd). Writes are sequential: Write
// and Sync are meant for one goroutine, ReadAt may run concurrently, and
// Close may be called from another goroutine while a Write is stuck in the
// kernel (a vanished reader): it then closes without waiting.
//
// After the first write or sync error the Device stays failed: every later
// Write, Sync and Close returns that error, nothing is retried.
type Device struct {
	Disk      *Disk    // what was checked
	Unmounted []string // mount points Open unmounted, in order

	f         *os.File
	block     bool
	syncEvery int64
	// sector, when set, is the I/O unit of a raw device opened without
	// buffering (a macOS /dev/rdisk, a Windows physical drive): such a
	// device refuses a write that is not a multiple of it, so the image's
	// last, short chunk is padded with zeros (the disk has the room: its
	// size is a multiple of the sector and at least the image's).
	sector int
	padded bool // the tail was padded: the stream must have ended
	// afterClose releases what the backend holds besides the file (volume
	// locks, the disk to eject); a non-empty result is a warning.
	afterClose func() string

	mu       sync.Mutex // guards the fields below; never held during I/O
	off      int64      // bytes written so far (sequential writes)
	synced   int64      // off at the last successful sync
	inflight int        // Write/Sync calls in the kernel right now
	failed   error
	closed   bool
	warnings []string
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

// Fd is the file descriptor (the pipeline uses it for O_DIRECT and to read
// the device size).
func (d *Device) Fd() uintptr { return d.f.Fd() }

// Warnings are non-fatal problems, e.g. the kernel could not re-read the
// partition table after Close.
func (d *Device) Warnings() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]string(nil), d.warnings...)
}

// Notes are what the user should know about the device after a flash:
// the mount points Open unmounted, then the warnings (imaging.CardResult.Notes).
func (d *Device) Notes() []string {
	var notes []string
	for _, m := range d.Unmounted {
		notes = append(notes, "unmounted "+m+" before writing")
	}
	for _, w := range d.Warnings() {
		notes = append(notes, "warning: "+w)
	}
	return notes
}

// begin registers an I/O call; it fails on a failed or closed Device.
func (d *Device) begin() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.failed != nil {
		return d.failed
	}
	if d.closed {
		return os.ErrClosed
	}
	d.inflight++
	return nil
}

// Write writes sequentially. Errors are *IOError with the failed region.
func (d *Device) Write(p []byte) (int, error) {
	if err := d.begin(); err != nil {
		return 0, err
	}
	n, err := d.writeRaw(p)

	d.mu.Lock()
	d.inflight--
	start := d.off
	d.off += int64(n)
	if err != nil && d.failed == nil {
		d.failed = &IOError{Op: "write", Path: d.f.Name(), Offset: start + int64(n), Len: int64(len(p) - n), Err: errno(err)}
	}
	failed := d.failed
	needSync := d.syncEvery > 0 && d.off-d.synced >= d.syncEvery
	d.mu.Unlock()

	if failed != nil {
		return n, failed
	}
	if needSync {
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
	if err := d.begin(); err != nil {
		return err
	}
	return d.sync()
}

// sync runs fsync for a caller that did begin().
func (d *Device) sync() error {
	d.mu.Lock()
	upTo := d.off
	d.mu.Unlock()
	err := d.f.Sync()

	d.mu.Lock()
	defer d.mu.Unlock()
	d.inflight--
	if err != nil {
		if d.failed == nil {
			d.failed = &IOError{Op: "sync", Path: d.f.Name(), Offset: d.synced, Len: upTo - d.synced, Err: errno(err)}
		}
		return d.failed
	}
	d.synced = max(d.synced, upTo)
	return d.failed
}

// Close syncs, asks the kernel to re-read the partition table of a block
// device (so the new partitions appear; failures become Warnings), and
// closes. It returns the first I/O error of the Device, if any. Closing
// twice is a no-op. If a Write is still blocked in the kernel, Close does
// not sync (that would block too): it closes and reports the write as
// unfinished.
func (d *Device) Close() error {
	d.mu.Lock()
	if d.closed {
		d.mu.Unlock()
		return nil
	}
	d.closed = true
	busy, failed := d.inflight > 0, d.failed
	if !busy && failed == nil {
		d.inflight++ // for sync()
	}
	d.mu.Unlock()

	if busy {
		d.f.Close()
		d.release()
		return &IOError{Op: "write", Path: d.f.Name(), Offset: d.written(), Err: errStuck}
	}
	err := failed
	if err == nil {
		err = d.sync()
	}
	if err == nil && d.block {
		if w := rereadPartitions(d.f); w != "" {
			d.mu.Lock()
			d.warnings = append(d.warnings, w)
			d.mu.Unlock()
		}
	}
	if cerr := d.f.Close(); cerr != nil && err == nil {
		err = cerr
	}
	d.release()
	return err
}

func (d *Device) release() {
	if d.afterClose == nil {
		return
	}
	if w := d.afterClose(); w != "" {
		d.mu.Lock()
		d.warnings = append(d.warnings, w)
		d.mu.Unlock()
	}
}

// writeRaw writes p, padding a short tail to the sector size when the
// device needs whole sectors. It reports len(p) for a padded write.
func (d *Device) writeRaw(p []byte) (int, error) {
	if d.sector <= 0 || len(p)%d.sector == 0 && !d.padded {
		return d.f.Write(p)
	}
	if d.padded {
		return 0, errors.New("write after the padded end of the image (writes must be whole sectors until the last one)")
	}
	d.padded = true
	buf := alignedBuffer((len(p)+d.sector-1)/d.sector*d.sector, d.sector)
	copy(buf, p)
	n, err := d.f.Write(buf)
	return min(n, len(p)), err
}

func (d *Device) written() int64 {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.off
}

var errStuck = errors.New("closed while a write was still blocked in the kernel (card removed or reader hung?)")

// errno strips *fs.PathError so IOError does not repeat the path.
func errno(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}
