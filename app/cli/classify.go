package cli

import (
	"errors"
	"io/fs"
	"net"
	"net/url"
	"os"
	"syscall"

	"github.com/talosflash/talosflash/app/contract"
	"github.com/talosflash/talosflash/app/plan"
	"github.com/talosflash/talosflash/factory"
	"github.com/talosflash/talosflash/imaging"
	"github.com/talosflash/talosflash/imaging/devices"
	"github.com/talosflash/talosflash/node"
)

// classify maps the library packages' typed errors to exit codes.
func classify(err error) int {
	var (
		refused   *devices.RefusedError
		elevation *devices.ElevationError
		writeErr  *imaging.WriteError
		ioErr     *devices.IOError
	)
	var input *plan.InputError
	switch {
	case errors.As(err, &input):
		// What the user typed (an address, a mode, a hostname of no node):
		// plan's word for a usage error, before anything is sent.
		return contract.ExitUsage
	case errors.As(err, &refused) && (refused.Reason == devices.CodeNotFound || refused.Reason == devices.CodeAmbiguous):
		// A --device that names nothing (or two things): the usage's
		// mistake, found before anything is touched.
		return contract.ExitUsage
	case errors.As(err, &refused), errors.As(err, &elevation), errors.Is(err, imaging.ErrTargetTooSmall),
		errors.Is(err, imaging.ErrTargetInUse), errors.Is(err, imaging.ErrTargetIsSource):
		return contract.ExitDevice
	case errors.Is(err, imaging.ErrVerifyMismatch):
		return contract.ExitVerify
	case errors.Is(err, imaging.ErrCorruptImage), errors.Is(err, imaging.ErrUnsupportedImage), errors.Is(err, plan.ErrNoNodeMeta):
		return contract.ExitImage
	case errors.Is(err, imaging.ErrCache):
		// Local (read-only, full, a symlink in the way): the message names
		// the path; retrying the network would not help.
		return contract.ExitStorage
	case errors.Is(err, imaging.ErrDownload) && !errors.As(err, &writeErr) && !errors.As(err, &ioErr):
		// Every try of the download failed (or it changed under the
		// card): the network's failure, though it left the card
		// incomplete; a card's own I/O error stays exit 6.
		return contract.ExitNetwork
	case errors.As(err, &writeErr), errors.As(err, &ioErr), errors.Is(err, imaging.ErrIncomplete):
		return contract.ExitWrite
	case errors.Is(err, node.ErrInvalidConfig), errors.Is(err, factory.ErrBlocked):
		return contract.ExitConfig
	case errors.Is(err, node.ErrRefused):
		return contract.ExitApply
	case errors.Is(err, node.ErrNetwork):
		return contract.ExitNetwork
	case errors.Is(err, factory.ErrUnknownExtension), errors.Is(err, factory.ErrUnknownOverlay),
		errors.Is(err, factory.ErrUnknownVersion):
		return contract.ExitUsage
	}
	if isNetworkOp(err) {
		return contract.ExitNetwork
	}
	// A local file or file system that can't be used (full, read-only, no
	// permission): the message names the path.
	var errno syscall.Errno
	if errors.As(err, &errno) {
		switch errno {
		case syscall.ENOSPC, syscall.EDQUOT, syscall.EROFS, syscall.EACCES, syscall.EPERM, syscall.EFBIG, syscall.EIO:
			return contract.ExitStorage
		}
	}
	if errors.Is(err, fs.ErrPermission) {
		return contract.ExitStorage
	}
	var (
		fh *factory.HTTPError
		ih *imaging.HTTPError
	)
	if errors.As(err, &fh) || errors.As(err, &ih) ||
		errors.Is(err, factory.ErrUnreachable) || errors.Is(err, factory.ErrNotFound) ||
		errors.Is(err, factory.ErrBadResponse) || errors.Is(err, factory.ErrIDMismatch) ||
		errors.Is(err, factory.ErrSchematicRejected) || errors.Is(err, imaging.ErrNotFound) ||
		errors.Is(err, imaging.ErrDownload) {
		return contract.ExitNetwork
	}
	return contract.ExitFailure
}

// isNetworkOp reports whether err came from a network operation: a dial, a
// read or write on a connection, a name lookup or an HTTP request.
// syscall.Errno implements net.Error too, so a bare errno (a full disk, a
// read-only file) is not one.
func isNetworkOp(err error) bool {
	var (
		op     *net.OpError
		dns    *net.DNSError
		urlErr *url.Error // imaging's downloads wrap the transport's error as is
		netErr net.Error
	)
	if errors.As(err, &op) || errors.As(err, &dns) || errors.As(err, &urlErr) {
		return true
	}
	if errors.As(err, &netErr) {
		_, isErrno := netErr.(syscall.Errno)
		return !isErrno && !errors.Is(err, os.ErrDeadlineExceeded)
	}
	return false
}
