package cli

import (
	"errors"
	"net"
	"net/url"

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
	switch {
	case errors.As(err, &refused), errors.As(err, &elevation), errors.Is(err, imaging.ErrTargetTooSmall),
		errors.Is(err, imaging.ErrTargetInUse), errors.Is(err, imaging.ErrTargetIsSource):
		return ExitDevice
	case errors.Is(err, imaging.ErrVerifyMismatch):
		return ExitVerify
	case errors.Is(err, imaging.ErrCorruptImage), errors.Is(err, imaging.ErrUnsupportedImage):
		return ExitImage
	case errors.Is(err, imaging.ErrCache):
		// Local (read-only, full, a symlink in the way): the message names
		// the path; retrying the network would not help.
		return ExitStorage
	case errors.As(err, &writeErr), errors.As(err, &ioErr), errors.Is(err, imaging.ErrIncomplete):
		return ExitWrite
	case errors.Is(err, node.ErrInvalidConfig):
		return ExitConfig
	case errors.Is(err, node.ErrRefused):
		return ExitApply
	case errors.Is(err, node.ErrNetwork):
		return ExitNetwork
	case errors.Is(err, factory.ErrUnknownExtension), errors.Is(err, factory.ErrUnknownOverlay),
		errors.Is(err, factory.ErrUnknownVersion):
		return ExitUsage
	}
	var (
		fh     *factory.HTTPError
		ih     *imaging.HTTPError
		urlErr *url.Error // imaging's downloads wrap the transport's error as is
		netErr net.Error
	)
	if errors.As(err, &fh) || errors.As(err, &ih) || errors.As(err, &urlErr) || errors.As(err, &netErr) ||
		errors.Is(err, factory.ErrUnreachable) || errors.Is(err, factory.ErrNotFound) ||
		errors.Is(err, factory.ErrBadResponse) || errors.Is(err, factory.ErrIDMismatch) ||
		errors.Is(err, factory.ErrSchematicRejected) || errors.Is(err, imaging.ErrNotFound) ||
		errors.Is(err, imaging.ErrDownload) {
		return ExitNetwork
	}
	return ExitFailure
}
