package devices

import (
	"errors"
	"fmt"
	"strings"
)

// UDisks opens block devices as the user through the UDisks2 daemon on the
// system bus (org.freedesktop.UDisks2.Block.OpenDevice), as Raspberry Pi
// Imager does: polkit decides, usually with a password prompt of the
// desktop session, and the daemon hands back an open file descriptor. No
// process of talosflash runs as root. The safety rules (Check) always run
// first: UDisks2 is only the way to get the descriptor, and the descriptor
// is refused unless it is the very device that was checked. Linux only;
// elsewhere every call answers ErrNoUDisks.
type UDisks struct {
	// Address is the system bus ("unix:path=..."); "" is the system bus
	// of godbus: $DBUS_SYSTEM_BUS_ADDRESS, else /var/run/dbus/system_bus_socket.
	Address string
	// Lister is the view of the disks the safety rules judge (nil: the
	// running system).
	Lister *Lister
}

// ErrNoUDisks says there is no UDisks2 to ask: no system bus, or no daemon
// on it (not installed, not activatable).
var ErrNoUDisks = errors.New("UDisks2 is not running")

// UDisksError is UDisks2 (or polkit, for it) refusing a request, or not
// knowing the device.
type UDisksError struct {
	Op   string // "open /dev/sdb", "unmount /media/u/boot"
	Name string // the D-Bus error name, "" when UDisks2 lists no such device
	Msg  string
}

func (e *UDisksError) Error() string {
	if e.Name == "" {
		return e.Op + ": " + e.Msg
	}
	return fmt.Sprintf("%s: %s (%s)", e.Op, e.Msg, strings.TrimPrefix(e.Name, "org.freedesktop."))
}

// D-Bus error names of UDisks2's authorization check (udisksdaemonutil.c).
const (
	udisksNotAuthorized = "org.freedesktop.UDisks2.Error.NotAuthorized"
	udisksCanObtain     = "org.freedesktop.UDisks2.Error.NotAuthorizedCanObtain"
	udisksDismissed     = "org.freedesktop.UDisks2.Error.NotAuthorizedDismissed"
)

// Dismissed says the user dismissed (cancelled) the password prompt.
func (e *UDisksError) Dismissed() bool { return e.Name == udisksDismissed }

// NotAuthorized says polkit did not allow it (no agent to ask, wrong
// password, or a policy that says no).
func (e *UDisksError) NotAuthorized() bool {
	return e.Name == udisksNotAuthorized || e.Name == udisksCanObtain || e.Name == udisksDismissed
}

// ErrUDisksDismissed is matched by a UDisksError whose prompt was dismissed.
var ErrUDisksDismissed = errors.New("the password prompt was dismissed")

// Is makes a dismissed prompt match ErrUDisksDismissed.
func (e *UDisksError) Is(target error) bool { return target == ErrUDisksDismissed && e.Dismissed() }
