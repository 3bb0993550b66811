package devices

// Windows disk model: the byte structures DeviceIoControl returns for a
// physical drive and its volumes, decoded without any Windows API so the
// decoding and the decisions run and are tested on every OS
// (devices_windows.go only issues the IOCTLs). Layouts: Microsoft's
// ntddstor.h / winioctl.h, little-endian, natural alignment:
//
//	STORAGE_DEVICE_DESCRIPTOR (IOCTL_STORAGE_QUERY_PROPERTY, StorageDeviceProperty)
//	  0 Version u32, 4 Size u32, 8 DeviceType u8, 9 DeviceTypeModifier u8,
//	  10 RemovableMedia u8, 11 CommandQueueing u8, 12 VendorIdOffset u32,
//	  16 ProductIdOffset u32, 20 ProductRevisionOffset u32,
//	  24 SerialNumberOffset u32, 28 BusType u32, 32 RawPropertiesLength u32,
//	  36 RawDeviceProperties[]; the strings are NUL-terminated at their
//	  offsets (0: absent).
//	DISK_GEOMETRY_EX (IOCTL_DISK_GET_DRIVE_GEOMETRY_EX)
//	  0 Cylinders i64, 8 MediaType u32, 12 TracksPerCylinder u32,
//	  16 SectorsPerTrack u32, 20 BytesPerSector u32, 24 DiskSize i64, 32 Data[]
//	VOLUME_DISK_EXTENTS (IOCTL_VOLUME_GET_VOLUME_DISK_EXTENTS)
//	  0 NumberOfDiskExtents u32, 4 padding, 8 DISK_EXTENT[n], each 24 bytes:
//	  DiskNumber u32, padding u32, StartingOffset i64, ExtentLength i64

import (
	"encoding/binary"
	"fmt"
	"sort"
	"strconv"
	"strings"
)

// STORAGE_BUS_TYPE values (ntddstor.h).
const (
	busUnknown           = 0x00
	busSCSI              = 0x01
	busATAPI             = 0x02
	busATA               = 0x03
	bus1394              = 0x04
	busFibre             = 0x06
	busUSB               = 0x07
	busRAID              = 0x08
	busISCSI             = 0x09
	busSAS               = 0x0A
	busSATA              = 0x0B
	busSD                = 0x0C
	busMMC               = 0x0D
	busVirtual           = 0x0E
	busFileBackedVirtual = 0x0F
	busSpaces            = 0x10
	busNVMe              = 0x11
)

// MEDIA_TYPE values of DISK_GEOMETRY (winioctl.h).
const (
	mediaRemovable = 11
	mediaFixed     = 12
)

type storageDescriptor struct {
	DeviceType     byte
	RemovableMedia bool
	BusType        uint32
	Vendor         string
	Product        string
	Revision       string
	Serial         string
}

func decodeStorageDescriptor(b []byte) (*storageDescriptor, error) {
	if len(b) < 36 {
		return nil, fmt.Errorf("storage device descriptor: %d bytes, need at least 36", len(b))
	}
	le := binary.LittleEndian
	if size := le.Uint32(b[4:]); int(size) < 36 || int(size) > len(b) {
		return nil, fmt.Errorf("storage device descriptor: Size %d outside the %d bytes returned", size, len(b))
	}
	str := func(field int) (string, error) {
		off := le.Uint32(b[field:])
		if off == 0 {
			return "", nil
		}
		if off < 36 || int(off) >= len(b) {
			return "", fmt.Errorf("storage device descriptor: string offset %d outside the %d bytes returned", off, len(b))
		}
		s := b[off:]
		end := 0
		for end < len(s) && s[end] != 0 {
			end++
		}
		if end == len(s) {
			return "", fmt.Errorf("storage device descriptor: string at %d is not terminated", off)
		}
		return strings.TrimSpace(string(s[:end])), nil
	}
	d := &storageDescriptor{DeviceType: b[8], RemovableMedia: b[10] != 0, BusType: le.Uint32(b[28:])}
	var err error
	for _, f := range []struct {
		at  int
		dst *string
	}{{12, &d.Vendor}, {16, &d.Product}, {20, &d.Revision}, {24, &d.Serial}} {
		if *f.dst, err = str(f.at); err != nil {
			return nil, err
		}
	}
	return d, nil
}

type diskGeometry struct {
	MediaType      uint32
	BytesPerSector uint32
	DiskSize       int64
}

func decodeDiskGeometryEx(b []byte) (*diskGeometry, error) {
	if len(b) < 32 {
		return nil, fmt.Errorf("disk geometry: %d bytes, need at least 32", len(b))
	}
	le := binary.LittleEndian
	g := &diskGeometry{MediaType: le.Uint32(b[8:]), BytesPerSector: le.Uint32(b[20:]), DiskSize: int64(le.Uint64(b[24:]))}
	if g.DiskSize < 0 {
		return nil, fmt.Errorf("disk geometry: negative disk size")
	}
	switch g.BytesPerSector {
	case 0:
		// no medium: the size is 0 too
	case 512, 1024, 2048, 4096:
	default:
		return nil, fmt.Errorf("disk geometry: %d bytes per sector", g.BytesPerSector)
	}
	return g, nil
}

type diskExtent struct {
	DiskNumber uint32
	Start      int64
	Length     int64
}

func decodeVolumeDiskExtents(b []byte) ([]diskExtent, error) {
	if len(b) < 8 {
		return nil, fmt.Errorf("volume disk extents: %d bytes, need at least 8", len(b))
	}
	le := binary.LittleEndian
	n := le.Uint32(b)
	if n == 0 || uint64(n)*24+8 > uint64(len(b)) {
		return nil, fmt.Errorf("volume disk extents: %d extents in %d bytes", n, len(b))
	}
	out := make([]diskExtent, n)
	for i := range out {
		e := b[8+24*i:]
		out[i] = diskExtent{DiskNumber: le.Uint32(e), Start: int64(le.Uint64(e[8:])), Length: int64(le.Uint64(e[16:]))}
	}
	return out, nil
}

// winDrive is what the backend read of \\.\PhysicalDriveN.
type winDrive struct {
	Number     int
	Descriptor []byte // STORAGE_DEVICE_DESCRIPTOR
	Geometry   []byte // DISK_GEOMETRY_EX; nil with NoMedium
	NoMedium   bool   // the geometry query said the device is not ready (empty reader)
	ReadOnly   bool   // IOCTL_DISK_IS_WRITABLE failed with ERROR_WRITE_PROTECT
	Err        error  // opening or querying the drive failed otherwise
}

// winVolume is one volume (\\?\Volume{GUID}\) with where it is mounted.
type winVolume struct {
	GUIDPath string   // `\\?\Volume{...}\`
	Paths    []string // `E:\`, `C:\mnt\card\`
	Extents  []byte   // VOLUME_DISK_EXTENTS; nil with Err
	Err      error    // the extents query failed (a CD drive, a network volume...)
}

// windowsRules: the disk holding the Windows directory's volume is the
// system disk; volumes mounted at a drive letter are locked and dismounted
// by Open, a volume mounted in a folder must be removed by the user; a
// volume spread over several disks is their holder.
func windowsRules(systemRoot string) *platform {
	return &platform{
		systemMount: func(p string) bool { return systemRoot != "" && strings.EqualFold(p, systemRoot) },
		mediaMount:  isDriveLetterRoot,
		mediaDirs:   "drive letters",
		holderKinds: "a volume spanning several disks: dynamic disk or Storage Spaces",
	}
}

func isDriveLetterRoot(p string) bool {
	return len(p) == 3 && p[1] == ':' && p[2] == '\\' && (p[0]|0x20) >= 'a' && (p[0]|0x20) <= 'z'
}

// windowsDisks builds the disks from what the backend read. systemDir is
// the Windows directory (`C:\Windows`): its drive's volume marks the
// system disk. If that volume cannot be placed on a disk, no disk can be
// called safe and every one is refused (CodeUnknownDevice).
func windowsDisks(drives []winDrive, vols []winVolume, systemDir string) []Disk {
	systemRoot := ""
	if len(systemDir) >= 2 && systemDir[1] == ':' {
		systemRoot = strings.ToUpper(systemDir[:1]) + `:\`
	}
	rules := windowsRules(systemRoot)
	systemPlaced := false
	byDisk := map[uint32][]Partition{}
	holders := map[uint32][]string{}
	unplaced := ""
	for _, v := range vols {
		isSystem := false
		for _, p := range v.Paths {
			isSystem = isSystem || rules.systemMount(p)
		}
		var ext []diskExtent
		err := v.Err
		if err == nil {
			ext, err = decodeVolumeDiskExtents(v.Extents)
		}
		if err != nil {
			if isSystem {
				unplaced = fmt.Sprintf("the disk of the system volume %s is unknown (%v)", systemRoot, err)
			}
			continue
		}
		systemPlaced = systemPlaced || isSystem
		name := v.GUIDPath
		path := strings.TrimSuffix(v.GUIDPath, `\`)
		for _, p := range v.Paths {
			if isDriveLetterRoot(p) {
				name = strings.ToUpper(p[:2])
				path = `\\.\` + name
				break
			}
		}
		var mounts []Mount
		for _, p := range v.Paths {
			mounts = append(mounts, Mount{Point: p})
		}
		if len(ext) > 1 {
			for _, e := range ext {
				holders[e.DiskNumber] = append(holders[e.DiskNumber], name)
			}
		}
		for _, e := range ext {
			byDisk[e.DiskNumber] = append(byDisk[e.DiskNumber], Partition{Name: name, Path: path, Size: e.Length, Mounts: mounts,
				Number: int(e.Start / 512)}) // ordered by offset, renumbered below
		}
	}
	if unplaced == "" && systemRoot != "" && !systemPlaced {
		unplaced = fmt.Sprintf("no volume is mounted at the system drive %s", systemRoot)
	}
	if systemRoot == "" {
		unplaced = fmt.Sprintf("the Windows directory %q has no drive letter", systemDir)
	}

	var disks []Disk
	for _, dr := range drives {
		name := "PhysicalDrive" + strconv.Itoa(dr.Number)
		d := Disk{Name: name, Path: `\\.\` + name, rules: rules, ReadOnly: dr.ReadOnly}
		d.Partitions = byDisk[uint32(dr.Number)]
		sort.Slice(d.Partitions, func(i, j int) bool { return d.Partitions[i].Number < d.Partitions[j].Number })
		for i := range d.Partitions {
			d.Partitions[i].Number = i + 1
		}
		d.Holders = holders[uint32(dr.Number)]
		desc, err := decodeStorageDescriptor(dr.Descriptor)
		if dr.Err != nil {
			err = dr.Err
		}
		var geo *diskGeometry
		if err == nil && !dr.NoMedium {
			geo, err = decodeDiskGeometryEx(dr.Geometry)
		}
		switch {
		case err != nil:
			d.unknown = fmt.Sprintf("reading %s failed (%v)", name, err)
		case unplaced != "":
			d.unknown = unplaced
		default:
			d.Vendor, d.Model = desc.Vendor, desc.Product
			d.Transport, d.MMCType = windowsTransport(desc.BusType)
			d.Removable = desc.RemovableMedia
			if geo != nil {
				d.Size = geo.DiskSize
				d.Removable = d.Removable || geo.MediaType == mediaRemovable
			}
		}
		d.SizeHuman = humanSize(d.Size)
		d.assessDefault()
		disks = append(disks, d)
	}
	sort.Slice(disks, func(i, j int) bool { return diskNumber(disks[i].Name) < diskNumber(disks[j].Name) })
	return disks
}

func diskNumber(name string) int {
	n, _ := strconv.Atoi(strings.TrimPrefix(name, "PhysicalDrive"))
	return n
}

// windowsTransport maps STORAGE_BUS_TYPE. SD readers on a laptop's PCIe
// report BusTypeSd; USB readers report BusTypeUsb; eMMC reports
// BusTypeMmc (fixed, like Linux's mmc type "MMC").
func windowsTransport(bus uint32) (Transport, string) {
	switch bus {
	case busUSB:
		return TransportUSB, ""
	case busSD:
		return TransportMMC, "SD"
	case busMMC:
		return TransportMMC, "MMC"
	case busATA, busATAPI, busSATA:
		return TransportSATA, ""
	case busNVMe:
		return TransportNVMe, ""
	case busSCSI, busSAS, busFibre, busISCSI:
		return TransportSCSI, ""
	case busVirtual, busFileBackedVirtual:
		return TransportVHD, ""
	case busSpaces:
		return TransportSpaces, ""
	}
	return TransportUnknown, ""
}

// windowsDiskName maps what a user types to a listed name:
// `\\.\PhysicalDrive2`, `\\?\PhysicalDrive2`, `PhysicalDrive2` ->
// "PhysicalDrive2"; `E:`, `E:\`, `\\.\E:` -> "E:" (a volume, which
// judgeListed refuses as a partition of its disk).
func windowsDiskName(path string) (string, bool) {
	p := path
	for _, pre := range []string{`\\.\`, `\\?\`, `//./`} {
		p = strings.TrimPrefix(p, pre)
	}
	if rest, ok := cutPrefixFold(p, "PhysicalDrive"); ok && rest != "" {
		if n, err := strconv.Atoi(rest); err == nil && n >= 0 && strconv.Itoa(n) == rest {
			return "PhysicalDrive" + rest, true
		}
		return "", false
	}
	p = strings.TrimSuffix(p, `\`)
	if len(p) == 2 && isDriveLetterRoot(p+`\`) {
		return strings.ToUpper(p), true
	}
	return "", false
}

func cutPrefixFold(s, prefix string) (string, bool) {
	if len(s) >= len(prefix) && strings.EqualFold(s[:len(prefix)], prefix) {
		return s[len(prefix):], true
	}
	return s, false
}
