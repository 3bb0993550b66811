package plan

import (
	"os/exec"
	"runtime"

	"github.com/talosflash/talosflash/imaging/devices"
)

// CardTwiceError is a card named twice in one flash (the same path, or
// another name of the same disk): refused before anything is touched.
type CardTwiceError struct{ Path string }

func (e *CardTwiceError) Error() string { return e.Path + " is named twice" }

// CheckCards applies the safety rules (devices.Check) to every target of a
// flash before anything is downloaded, so a refused card costs nothing,
// and refuses a card named twice. The disks are returned in order.
// Flash's Open applies the same rules again when it opens each card.
func CheckCards(paths []string, opts devices.Options) ([]devices.Disk, error) {
	var disks []devices.Disk
	seen := map[string]bool{}
	for _, p := range paths {
		disk, err := devices.Check(p, 0, opts)
		if err != nil {
			return nil, err
		}
		if seen[disk.Path] {
			return nil, &CardTwiceError{Path: disk.Path}
		}
		seen[disk.Path] = true
		disks = append(disks, *disk)
	}
	return disks, nil
}

// Elevation is the root decision of a flash: which cards need more than
// the user's rights (Needs, asked per card by Flash), and how those are
// written: through UDisks2 first (Linux: the card opened for the user, no
// root process), else by the elevated child (Command). The zero Elevation
// writes every card in this process.
type Elevation struct {
	Needs   func(path string) bool
	Command func(args []string) (*exec.Cmd, error)
	UDisks  *devices.UDisks
}

// DefaultElevation is the elevation of a front end that may ask for
// administrator rights: devices.NeedsElevation, UDisks2 on Linux, then the
// elevated child of this version (devices.ElevatedCommandFor: its
// cgo-free CLI when a trusted one is installed). The elevated child itself
// never elevates (the zero Elevation).
func DefaultElevation(version string) Elevation {
	e := Elevation{Needs: devices.NeedsElevation, Command: devices.ElevatedCommandFor(version)}
	if runtime.GOOS == "linux" {
		e.UDisks = &devices.UDisks{}
	}
	return e
}

// SetElevation makes the job elevate as e says.
func (job *Job) SetElevation(e Elevation) {
	job.NeedsElevation, job.Elevate, job.UDisks = e.Needs, e.Command, e.UDisks
}

// CardRefusal is why a listed disk may not be written, given the image's
// uncompressed size once known (0: not yet): the one rule the CLI's
// `devices` and the app's card list show. A loop device is judged with
// the user's options (--allow-loop lets it through the safety rules it
// otherwise fails); any other disk as listed (its Safe and Refusal), then
// against the image's size.
func CardRefusal(d devices.Disk, imageSize int64, opts devices.Options) *devices.RefusedError {
	if d.Transport == devices.TransportLoop && opts.AllowLoop {
		return d.Assess(imageSize, opts)
	}
	if !d.Safe {
		if d.Refusal != nil {
			return d.Refusal
		}
		return &devices.RefusedError{Device: d.Path, Msg: d.Path + " is not a safe target"}
	}
	if imageSize > 0 {
		return d.Assess(imageSize, devices.Options{})
	}
	return nil
}

// ListedCards are the disks as the user's options judge them (a loop
// device with --allow-loop gets the verdict a flash would give).
func ListedCards(disks []devices.Disk, opts devices.Options) []devices.Disk {
	for i := range disks {
		if d := &disks[i]; d.Transport == devices.TransportLoop && opts.AllowLoop {
			d.Refusal = CardRefusal(*d, 0, opts)
			d.Safe = d.Refusal == nil
		}
	}
	return disks
}
