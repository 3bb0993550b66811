package devices

import (
	"fmt"
	"strings"
)

// platform is what differs between operating systems in the safety rules
// (Assess): which mount points belong to the running system, where the
// desktop mounts removable media (only those are unmounted before a
// write), and what can be stacked on a disk. The rules themselves, their
// order, codes and messages are the same everywhere.
type platform struct {
	systemMount func(point string) bool // refuse the disk: CodeSystemDisk
	mediaMount  func(point string) bool // unmounted by Open; anything else: CodeMounted
	mediaDirs   string                  // names the media locations in CodeMounted messages
	holderKinds string                  // names what a holder is in CodeHolders messages
}

var linuxRules = &platform{
	systemMount: isSystemMount,
	mediaMount:  isRemovableMediaMount,
	mediaDirs:   "/media and /run/media",
	holderKinds: "device-mapper/LVM/LUKS/RAID",
}

// platform returns the disk's rules; disks read from sysfs (and tests'
// hand-made disks) use Linux's.
func (d *Disk) platform() *platform {
	if d.rules == nil {
		return linuxRules
	}
	return d.rules
}

// judgeListed finds name among a backend's listing (a whole disk or one of
// its partitions) and judges it like Check does on Linux: a disk gets its
// refusal for this image size and options, a partition is refused with
// its disk suggested when that disk would be accepted.
func judgeListed(disks []Disk, name, path string, imageSize int64, opts Options) (*Disk, error) {
	for i := range disks {
		d := &disks[i]
		if strings.EqualFold(d.Name, name) {
			if r := d.Assess(imageSize, opts); r != nil {
				return d, r
			}
			return d, nil
		}
		for _, p := range d.Partitions {
			if !strings.EqualFold(p.Name, name) {
				continue
			}
			r := &RefusedError{Device: p.Path, Reason: CodePartition,
				Msg: fmt.Sprintf("%s is a partition; images are written to the whole disk", p.Path)}
			if dr := d.Assess(imageSize, opts); dr != nil {
				r.Msg += fmt.Sprintf(", and its disk %s is refused too: %s", d.Path, dr.Msg)
			} else {
				r.Suggestion = d.Path
			}
			return nil, r
		}
	}
	return nil, &RefusedError{Device: path, Reason: CodeNotFound,
		Msg: fmt.Sprintf("%s does not exist (is the card inserted? `talosflash devices` lists the disks)", path)}
}
