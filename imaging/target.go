package imaging

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/talosflash/talosflash/internal/humanbytes"
)

// Target is where an image is written: sequential writes from offset 0,
// then random reads for verification. *os.File satisfies it.
//
// Optional methods the pipeline uses when present:
//
//	Fd() uintptr           // enables O_DIRECT / fadvise and block-device size lookup
//	Size() (int64, error)  // capacity, checked before writing
type Target interface {
	io.Writer
	io.ReaderAt
	Sync() error
	Close() error
}

type fdTarget interface{ Fd() uintptr }
type sizedTarget interface{ Size() (int64, error) }

// OpenFile is the default Target opener: it opens a regular file (created,
// or truncated once opened) or a block device read-write. It refuses
// directories and adds no other safety checks: imaging/devices supplies the
// opener that protects system disks. An existing file is truncated only if
// the opened file is the one that was looked at (no check-then-open race).
func OpenFile(path string, size int64) (Target, error) {
	st, err := os.Stat(path)
	switch {
	case err == nil && st.IsDir():
		return nil, fmt.Errorf("target %s is a directory", path)
	case errors.Is(err, os.ErrNotExist):
		f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o644)
		if err != nil {
			return nil, fmt.Errorf("open target: %w", err)
		}
		return f, nil
	case err != nil:
		return nil, fmt.Errorf("target %s: %w", path, err)
	}
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return nil, fmt.Errorf("open target: %w", err)
	}
	if st.Mode().IsRegular() {
		fi, err := f.Stat()
		if err == nil && !os.SameFile(fi, st) {
			err = fmt.Errorf("target %s changed while it was being opened", path)
		}
		if err == nil {
			err = f.Truncate(0)
		}
		if err != nil {
			f.Close()
			return nil, fmt.Errorf("open target: %w", err)
		}
	}
	return f, nil
}

// ErrIncomplete is matched by errors that leave a partially written target
// (write failures, cancellation): the card will not boot as is.
var ErrIncomplete = errors.New("the target is incomplete and will not boot; flash it again")

// ErrTargetTooSmall is returned (before writing) when the image does not
// fit the target.
var ErrTargetTooSmall = errors.New("image is larger than the target")

// ErrTargetIsSource refuses a target that is the image file being flashed
// (or the cache entry it comes from): writing would destroy the source.
var ErrTargetIsSource = errors.New("the target is the image file being flashed")

// WriteError is a failure of the target during the write stage. Offset is
// how many bytes were written successfully before it.
type WriteError struct {
	Offset int64
	Err    error
}

func (e *WriteError) Error() string {
	return fmt.Sprintf("write to target failed after %s: %v (%v)", humanbytes.Exact(e.Offset), e.Err, ErrIncomplete)
}

// InterruptedError is a flash its context stopped (Ctrl-C): how far it got
// in words, not the context's ("context canceled"). errors.Is the
// context's error and ErrIncomplete.
type InterruptedError struct {
	Done    int64 // bytes written to the card; < 0: several cards, each says its own
	SyncErr error // syncing what was written failed too (nil: synced)
	Cause   error // the context's error
}

func (e *InterruptedError) Error() string {
	s := "flash interrupted"
	if e.Done >= 0 {
		s += " after " + humanbytes.Exact(e.Done)
	}
	if errors.Is(e.Cause, context.DeadlineExceeded) {
		s += " (its time ran out)"
	}
	if e.SyncErr != nil {
		s += ", and syncing them failed: " + e.SyncErr.Error()
	}
	return s + ": " + ErrIncomplete.Error()
}

func (e *InterruptedError) Unwrap() []error { return []error{e.Cause, ErrIncomplete} }

func (e *WriteError) Unwrap() error { return e.Err }

// Is makes a WriteError match ErrIncomplete.
func (e *WriteError) Is(target error) bool { return target == ErrIncomplete }

// VerifyError reports that the read-back differs from what was written.
// Offset is the start of the first differing 4 KiB block (or -1 if only the
// final SHA-256 differed).
type VerifyError struct {
	Offset int64
	Want   string // SHA-256 of the written stream
}

func (e *VerifyError) Error() string {
	if e.Offset < 0 {
		return "verify failed: the SHA-256 of the data read back from the target differs from what was written"
	}
	return fmt.Sprintf("verify failed: data read back from the target differs from what was written, first in the 4 KiB block at byte %d (bad card or reader?)", e.Offset)
}

// Is makes a VerifyError match ErrVerifyMismatch.
func (e *VerifyError) Is(target error) bool { return target == ErrVerifyMismatch }

// ErrVerifyMismatch is matched by *VerifyError.
var ErrVerifyMismatch = errors.New("verify mismatch")

// targetCapacity returns the usable size of t if it can be known: Size()
// if implemented, else the size of a block device behind Fd(). Regular
// files grow, so they have no capacity.
func targetCapacity(t Target) (int64, bool, error) {
	if s, ok := t.(sizedTarget); ok {
		n, err := s.Size()
		if err != nil {
			return 0, false, fmt.Errorf("target size: %w", err)
		}
		return n, true, nil
	}
	if f, ok := t.(fdTarget); ok {
		return blockDeviceSize(f.Fd())
	}
	return 0, false, nil
}
