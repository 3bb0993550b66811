package devices

// macOS disk model, built from `diskutil list -plist` and `diskutil info
// -plist <disk>` (the formats are Apple's; see testdata/darwin/README.md for
// the captures the tests use). Pure parsing and decisions: it runs and is
// tested on every OS; devices_darwin.go only runs diskutil.

import (
	"bytes"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"

	"howett.net/plist"
)

// darwinRules: the system lives on "/" and the sealed-system volumes under
// /System/Volumes; Finder mounts cards under /Volumes. An APFS container
// (or a CoreStorage/RAID set) on a disk is that disk's holder.
var darwinRules = &platform{
	systemMount: func(p string) bool {
		return p == "/" || strings.HasPrefix(p, "/System/Volumes/") || p == "/private/var/vm"
	},
	mediaMount:  func(p string) bool { return strings.HasPrefix(p, "/Volumes/") && len(p) > len("/Volumes/") },
	mediaDirs:   "/Volumes",
	holderKinds: "APFS container, CoreStorage or RAID set",
}

type duList struct {
	AllDisksAndPartitions []duEntry
	WholeDisks            []string
}

type duEntry struct {
	DeviceIdentifier   string
	Content            string
	Size               duSize
	MountPoint         string
	OSInternal         bool
	Partitions         []duPart
	APFSPhysicalStores []struct{ DeviceIdentifier string }
	APFSVolumes        []duVolume
}

type duPart struct {
	DeviceIdentifier string
	Content          string
	Size             duSize
	MountPoint       string
}

type duVolume struct {
	DeviceIdentifier string
	MountPoint       string
	MountedSnapshots []struct{ SnapshotMountPoint string }
}

// duInfo is the part of `diskutil info -plist` the rules use. Booleans that
// decide safety are pointers: a missing key is not "false".
type duInfo struct {
	DeviceIdentifier  string
	BusProtocol       string
	MediaName         string
	VirtualOrPhysical string
	Size              duSize
	RemovableMedia    *bool
	Removable         *bool // older macOS
	WritableMedia     *bool
	Internal          *bool
	OSInternalMedia   bool
	WholeDisk         bool
}

// duSize is a byte count that diskutil writes as <integer> or, depending
// on the macOS version, as <real> ("1.5682240512E10").
type duSize int64

func (s *duSize) UnmarshalPlist(unmarshal func(any) error) error {
	var i int64
	if err := unmarshal(&i); err == nil {
		*s = duSize(i)
		return nil
	}
	var f float64
	if err := unmarshal(&f); err != nil {
		return err
	}
	if f < 0 || f > 1<<62 || f != math.Trunc(f) {
		return fmt.Errorf("size %v is not a byte count", f)
	}
	*s = duSize(f)
	return nil
}

func parseDiskutilList(b []byte) (*duList, error) {
	var l duList
	if _, err := plist.Unmarshal(b, &l); err != nil {
		return nil, fmt.Errorf("parse `diskutil list -plist`: %w", err)
	}
	if len(l.WholeDisks) == 0 && len(l.AllDisksAndPartitions) == 0 && !bytes.Contains(b, []byte("WholeDisks")) {
		return nil, fmt.Errorf("parse `diskutil list -plist`: no WholeDisks in the output")
	}
	return &l, nil
}

func parseDiskutilInfo(b []byte) (*duInfo, error) {
	var i duInfo
	if _, err := plist.Unmarshal(b, &i); err != nil {
		return nil, fmt.Errorf("parse `diskutil info -plist`: %w", err)
	}
	if i.DeviceIdentifier == "" {
		return nil, fmt.Errorf("parse `diskutil info -plist`: no DeviceIdentifier")
	}
	return &i, nil
}

// diskutilDisks builds every whole disk of a `diskutil list -plist` output,
// each judged with default options. info returns `diskutil info -plist id`
// for a whole disk; a disk whose info cannot be read is listed but refused
// (CodeUnknownDevice): without it removability and write protection are
// guesses.
func diskutilDisks(list []byte, info func(id string) ([]byte, error)) ([]Disk, error) {
	l, err := parseDiskutilList(list)
	if err != nil {
		return nil, err
	}
	entries := map[string]*duEntry{}
	for i := range l.AllDisksAndPartitions {
		e := &l.AllDisksAndPartitions[i]
		entries[e.DeviceIdentifier] = e
	}
	// What each APFS container stacks on its physical stores: the store
	// gets the container as holder and the container's mounts "via" it.
	holders := map[string][]string{}
	stacked := map[string][]Mount{}
	for _, e := range l.AllDisksAndPartitions {
		if len(e.APFSPhysicalStores) == 0 {
			continue
		}
		var mounts []Mount
		for _, v := range e.APFSVolumes {
			if v.MountPoint != "" {
				mounts = append(mounts, Mount{Point: v.MountPoint, FSType: "apfs", Via: e.DeviceIdentifier})
			}
			for _, s := range v.MountedSnapshots {
				if s.SnapshotMountPoint != "" {
					mounts = append(mounts, Mount{Point: s.SnapshotMountPoint, FSType: "apfs", Via: e.DeviceIdentifier})
				}
			}
		}
		for _, p := range e.Partitions {
			if p.MountPoint != "" {
				mounts = append(mounts, Mount{Point: p.MountPoint, Via: e.DeviceIdentifier})
			}
		}
		for _, s := range e.APFSPhysicalStores {
			holders[s.DeviceIdentifier] = append(holders[s.DeviceIdentifier], e.DeviceIdentifier)
			stacked[s.DeviceIdentifier] = append(stacked[s.DeviceIdentifier], mounts...)
		}
	}

	var disks []Disk
	for _, id := range l.WholeDisks {
		e := entries[id]
		if e == nil {
			e = &duEntry{DeviceIdentifier: id}
		}
		d := Disk{Name: id, Path: "/dev/" + id, Size: int64(e.Size), rules: darwinRules}
		if e.MountPoint != "" {
			d.Mounts = append(d.Mounts, Mount{Point: e.MountPoint})
		}
		d.Holders = holders[id]
		d.Mounts = append(d.Mounts, stacked[id]...)
		for _, p := range e.Partitions {
			pt := Partition{Name: p.DeviceIdentifier, Path: "/dev/" + p.DeviceIdentifier, Number: sliceNumber(p.DeviceIdentifier), Size: int64(p.Size),
				Holders: holders[p.DeviceIdentifier]}
			if p.MountPoint != "" {
				pt.Mounts = append(pt.Mounts, Mount{Point: p.MountPoint})
			}
			pt.Mounts = append(pt.Mounts, stacked[p.DeviceIdentifier]...)
			d.Partitions = append(d.Partitions, pt)
		}
		sort.Slice(d.Partitions, func(i, j int) bool { return d.Partitions[i].Number < d.Partitions[j].Number })
		if e.OSInternal {
			d.system = "(macOS internal disk)"
		}

		raw, err := info(id)
		var in *duInfo
		if err == nil {
			in, err = parseDiskutilInfo(raw)
		}
		switch {
		case err != nil:
			d.unknown = fmt.Sprintf("`diskutil info %s` failed (%v)", id, err)
		case in.DeviceIdentifier != id:
			d.unknown = fmt.Sprintf("`diskutil info %s` described %s", id, in.DeviceIdentifier)
		default:
			applyDiskutilInfo(&d, e, in)
		}
		d.SizeHuman = humanSize(d.Size)
		d.assessDefault()
		disks = append(disks, d)
	}
	return disks, nil
}

// applyDiskutilInfo fills what only `diskutil info` knows.
func applyDiskutilInfo(d *Disk, e *duEntry, in *duInfo) {
	d.Model = strings.TrimSpace(in.MediaName)
	if in.Size > 0 {
		d.Size = int64(in.Size)
	}
	d.Removable = isTrue(in.RemovableMedia) || isTrue(in.Removable)
	d.ReadOnly = in.WritableMedia != nil && !*in.WritableMedia
	if in.OSInternalMedia {
		d.system = "(macOS internal disk)"
	}
	switch {
	case len(e.APFSPhysicalStores) > 0 || e.Content == "EF57347C-0000-11AA-AA11-00306543ECAC" || e.Content == "Apple_APFS_Container":
		d.Transport = TransportAPFS
		var stores []string
		for _, s := range e.APFSPhysicalStores {
			stores = append(stores, s.DeviceIdentifier)
		}
		d.Model = "APFS container"
		if len(stores) > 0 {
			d.Model += " on " + strings.Join(stores, ", ")
		}
	case in.BusProtocol == "Disk Image":
		d.Transport = TransportImage
	case in.VirtualOrPhysical == "Virtual":
		// Virtual but neither an APFS container nor a disk image we
		// recognise (CoreStorage, RAID): never a card.
		d.Transport = TransportImage
	default:
		d.Transport, d.MMCType = darwinTransport(in.BusProtocol)
	}
}

// darwinTransport maps diskutil's BusProtocol. Apple's built-in SD slots
// say "Secure Digital" (newer Macs) or "USB" (older ones).
func darwinTransport(bus string) (Transport, string) {
	switch bus {
	case "USB":
		return TransportUSB, ""
	case "Secure Digital", "SD":
		return TransportMMC, "SD"
	case "SATA":
		return TransportSATA, ""
	case "PCI-Express", "PCI", "NVMe", "Apple Fabric":
		return TransportNVMe, ""
	case "SAS", "SCSI", "Fibre Channel Interface":
		return TransportSCSI, ""
	}
	return TransportUnknown, ""
}

func isTrue(b *bool) bool { return b != nil && *b }

// sliceNumber is N of "disk2sN" (0 when there is none).
func sliceNumber(id string) int {
	i := strings.LastIndexByte(id, 's')
	if i < 0 {
		return 0
	}
	n, err := strconv.Atoi(id[i+1:])
	if err != nil {
		return 0
	}
	return n
}

// darwinDiskName maps a path the user gives to a diskutil identifier:
// /dev/disk4, /dev/rdisk4, disk4 -> "disk4"; /dev/disk4s1 -> "disk4s1".
// ok is false for anything else.
func darwinDiskName(path string) (string, bool) {
	name := strings.TrimPrefix(path, "/dev/")
	if name != path || !strings.Contains(path, "/") {
		name = strings.TrimPrefix(name, "r")
		if rest, ok := strings.CutPrefix(name, "disk"); ok && rest != "" && rest[0] >= '0' && rest[0] <= '9' {
			for _, c := range rest {
				if (c < '0' || c > '9') && c != 's' {
					return "", false
				}
			}
			return name, true
		}
	}
	return "", false
}

// rawDiskPath is the raw (character) node of a whole disk: writes through
// /dev/rdiskN skip the buffer cache and are several times faster than
// /dev/diskN (Etcher's users measured it).
func rawDiskPath(name string) string { return "/dev/r" + name }
