package devices

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
)

// Lister reads the kernel's view of block devices. The paths are
// configurable so tests can point it at fake trees; empty fields take the
// real system's paths.
type Lister struct {
	SysRoot   string // "/sys" (disks are under SysRoot/block)
	MountInfo string // "/proc/self/mountinfo"
	ProcSwaps string // "/proc/swaps"
	DevRoot   string // "/dev"
}

// DefaultLister reads the running system.
func DefaultLister() *Lister { return &Lister{} }

func (l *Lister) paths() Lister {
	p := Lister{SysRoot: "/sys", MountInfo: "/proc/self/mountinfo", ProcSwaps: "/proc/swaps", DevRoot: "/dev"}
	if l != nil {
		if l.SysRoot != "" {
			p.SysRoot = l.SysRoot
		}
		if l.MountInfo != "" {
			p.MountInfo = l.MountInfo
		}
		if l.ProcSwaps != "" {
			p.ProcSwaps = l.ProcSwaps
		}
		if l.DevRoot != "" {
			p.DevRoot = l.DevRoot
		}
	}
	p.DevRoot = filepath.Clean(p.DevRoot)
	return p
}

// List returns the whole disks in SysRoot/block, sorted by name, each with
// Safe/Refusal computed for default options. Unattached loop devices and
// eMMC hardware boot areas are left out.
func (l *Lister) List() ([]Disk, error) {
	if disks, ok, err := l.nativeList(); ok {
		return disks, err
	}
	if !devicesSupported && (l == nil || l.SysRoot == "") {
		return nil, ErrUnsupported
	}
	p := l.paths()
	s, err := p.snapshot()
	if err != nil {
		return nil, err
	}
	var disks []Disk
	for _, name := range s.diskNames {
		d := p.readDisk(name, s)
		if (d.Transport == TransportLoop && d.Size == 0) || isMMCHardwarePart(name) {
			continue
		}
		disks = append(disks, d)
	}
	return disks, nil
}

// snapshot is what List needs beyond one disk's sysfs directory, read once.
type snapshot struct {
	diskNames []string          // entries of /sys/block
	devByNum  map[string]string // "8:17" -> "sdb1"
	parent    map[string]string // partition -> disk ("sdb1" -> "sdb")
	dmNames   map[string]string // "vg-root" -> "dm-0"
	mounts    map[string][]Mount
	swaps     map[string]bool
}

func (p Lister) snapshot() (*snapshot, error) {
	s := &snapshot{devByNum: map[string]string{}, parent: map[string]string{}, dmNames: map[string]string{}, mounts: map[string][]Mount{}, swaps: map[string]bool{}}
	blockDir := filepath.Join(p.SysRoot, "block")
	entries, err := os.ReadDir(blockDir)
	if err != nil {
		return nil, fmt.Errorf("list block devices: %w", err)
	}
	for _, e := range entries {
		name := e.Name()
		s.diskNames = append(s.diskNames, name)
		dir := filepath.Join(blockDir, name)
		if dev := readString(dir, "dev"); dev != "" {
			s.devByNum[dev] = name
		}
		if dm := readString(dir, "dm/name"); dm != "" {
			s.dmNames[dm] = name
		}
		for _, part := range partitionNames(dir) {
			s.parent[part] = name
			if dev := readString(dir, part, "dev"); dev != "" {
				s.devByNum[dev] = part
			}
		}
	}
	sort.Strings(s.diskNames)

	mi, err := os.Open(p.MountInfo)
	if err != nil {
		// Without the mount table nothing can be called safe: fail closed.
		return nil, fmt.Errorf("read mount table: %w", err)
	}
	entriesM, err := parseMountInfo(mi)
	mi.Close()
	if err != nil {
		return nil, fmt.Errorf("read mount table %s: %w", p.MountInfo, err)
	}
	for _, m := range entriesM {
		name := s.devByNum[m.dev]
		if name == "" {
			// btrfs and some others show anonymous device numbers; fall
			// back to the source path.
			name = p.deviceForPath(m.source, s)
		}
		if name != "" {
			s.mounts[name] = append(s.mounts[name], Mount{Point: m.point, FSType: m.fstype})
		}
	}

	sw, err := os.Open(p.ProcSwaps)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		// kernel without swap support
	case err != nil:
		return nil, fmt.Errorf("read swap table: %w", err)
	default:
		files, err := parseSwaps(sw)
		sw.Close()
		if err != nil {
			return nil, fmt.Errorf("read swap table %s: %w", p.ProcSwaps, err)
		}
		for _, f := range files {
			if name := p.deviceForPath(f, s); name != "" {
				s.swaps[name] = true
			}
		}
	}
	return s, nil
}

func (s *snapshot) known(name string) bool {
	if _, ok := s.parent[name]; ok {
		return true
	}
	i := sort.SearchStrings(s.diskNames, name)
	return i < len(s.diskNames) && s.diskNames[i] == name
}

// deviceForPath maps "/dev/sdb1", "/dev/mapper/vg-root" or a /dev/disk/by-*
// link to a kernel device name; "" for anything else (swap files, tmpfs).
func (p Lister) deviceForPath(src string, s *snapshot) string {
	rel, ok := strings.CutPrefix(src, "/dev/")
	if !ok {
		return ""
	}
	if dm, ok := strings.CutPrefix(rel, "mapper/"); ok {
		if name := s.dmNames[dm]; name != "" {
			return name
		}
	}
	if s.known(rel) {
		return rel
	}
	if real, err := filepath.EvalSymlinks(filepath.Join(p.DevRoot, rel)); err == nil {
		if name := filepath.Base(real); s.known(name) {
			return name
		}
	}
	return ""
}

// readDisk describes /sys/block/<name> and computes its default verdict.
func (p Lister) readDisk(name string, s *snapshot) Disk {
	dir := filepath.Join(p.SysRoot, "block", name)
	real, err := filepath.EvalSymlinks(dir)
	if err != nil {
		real = dir
	}
	d := Disk{
		Name:      name,
		Path:      filepath.Join(p.DevRoot, name),
		Size:      readInt(dir, "size") * 512, // sysfs counts 512-byte sectors whatever the block size
		Removable: readString(dir, "removable") == "1",
		ReadOnly:  readString(dir, "ro") == "1",
		Dev:       readString(dir, "dev"),
		Transport: transportOf(name, filepath.ToSlash(real)),
	}
	d.SizeHuman = humanSize(d.Size)
	switch d.Transport {
	case TransportMMC:
		d.Model = readString(dir, "device/name")
		d.MMCType = readString(dir, "device/type")
	case TransportLoop:
		if f := readString(dir, "loop/backing_file"); f != "" {
			d.Model = "backed by " + f
		}
	case TransportDM:
		d.Model = readString(dir, "dm/name")
	case TransportVirtio:
		d.Model = "virtio disk" // device/vendor is a PCI id ("0x1af4"), not a name
	default:
		d.Vendor = readString(dir, "device/vendor")
		d.Model = readString(dir, "device/model")
	}
	d.Mounts, d.Swap = p.usage(name, s, map[string]bool{})
	d.Holders = holderNames(dir)
	for _, part := range partitionNames(dir) {
		pdir := filepath.Join(dir, part)
		pt := Partition{
			Name:    part,
			Path:    filepath.Join(p.DevRoot, part),
			Number:  int(readInt(pdir, "partition")),
			Size:    readInt(pdir, "size") * 512,
			Holders: holderNames(pdir),
		}
		pt.Mounts, pt.Swap = p.usage(part, s, map[string]bool{})
		d.Partitions = append(d.Partitions, pt)
	}
	sort.Slice(d.Partitions, func(i, j int) bool { return d.Partitions[i].Number < d.Partitions[j].Number })
	d.assessDefault()
	return d
}

// usage collects mounts and swap on a device and on everything stacked on it
// (holders, recursively: partition -> LUKS -> LVM volume).
func (p Lister) usage(name string, s *snapshot, seen map[string]bool) (mounts []Mount, swap bool) {
	if seen[name] {
		return nil, false
	}
	seen[name] = true
	mounts = append(mounts, s.mounts[name]...)
	swap = s.swaps[name]
	dir := filepath.Join(p.SysRoot, "block", name)
	if parent := s.parent[name]; parent != "" {
		dir = filepath.Join(p.SysRoot, "block", parent, name)
	}
	for _, h := range holderNames(dir) {
		hm, hs := p.usage(h, s, seen)
		for _, m := range hm {
			if m.Via == "" {
				m.Via = h
			}
			mounts = append(mounts, m)
		}
		swap = swap || hs
	}
	return mounts, swap
}

func transportOf(name, sysPath string) Transport {
	switch {
	case strings.HasPrefix(name, "loop"):
		return TransportLoop
	case strings.HasPrefix(name, "dm-"):
		return TransportDM
	case mdName.MatchString(name):
		return TransportMD
	case strings.HasPrefix(name, "zram"):
		return TransportZRAM
	case strings.HasPrefix(name, "ram"):
		return TransportRAM
	case strings.Contains(sysPath, "/usb"):
		return TransportUSB
	case strings.HasPrefix(name, "mmcblk"):
		return TransportMMC
	case strings.HasPrefix(name, "nvme"):
		return TransportNVMe
	case strings.Contains(sysPath, "/virtio"):
		return TransportVirtio
	case strings.Contains(sysPath, "/ata"):
		return TransportSATA
	case strings.HasPrefix(name, "sd"), strings.HasPrefix(name, "sr"):
		return TransportSCSI
	}
	return TransportUnknown
}

var (
	mdName      = regexp.MustCompile(`^md(\d|_)`)
	mmcHardware = regexp.MustCompile(`^mmcblk\d+(boot\d+|rpmb)$`)
)

// isMMCHardwarePart matches the eMMC boot areas and RPMB, which show up as
// separate disks but are never a flashing target.
func isMMCHardwarePart(name string) bool { return mmcHardware.MatchString(name) }

// partitionNames lists the children of a sysfs disk directory that are
// partitions (they contain a "partition" file).
func partitionNames(diskDir string) []string {
	entries, err := os.ReadDir(diskDir)
	if err != nil {
		return nil
	}
	var parts []string
	for _, e := range entries {
		if _, err := os.Stat(filepath.Join(diskDir, e.Name(), "partition")); err == nil {
			parts = append(parts, e.Name())
		}
	}
	return parts
}

func holderNames(dir string) []string {
	entries, err := os.ReadDir(filepath.Join(dir, "holders"))
	if err != nil {
		return nil
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return names
}

func readString(elem ...string) string {
	b, err := os.ReadFile(filepath.Join(elem...))
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

func readInt(elem ...string) int64 {
	n, err := strconv.ParseInt(readString(elem...), 10, 64)
	if err != nil {
		return 0
	}
	return n
}

type mountEntry struct {
	dev, point, fstype, source string
}

// parseMountInfo reads /proc/self/mountinfo (proc(5)):
//
//	36 35 98:0 /mnt1 /mnt2 rw,noatime master:1 - ext3 /dev/root rw,errors=continue
func parseMountInfo(r io.Reader) ([]mountEntry, error) {
	var out []mountEntry
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	for n := 1; sc.Scan(); n++ {
		f := strings.Fields(sc.Text())
		if len(f) == 0 {
			continue
		}
		sep := -1
		for i := 6; i < len(f); i++ {
			if f[i] == "-" {
				sep = i
				break
			}
		}
		if len(f) < 5 || sep < 0 || sep+2 >= len(f) {
			return nil, fmt.Errorf("line %d: malformed mountinfo entry", n)
		}
		out = append(out, mountEntry{dev: f[2], point: unescapeOctal(f[4]), fstype: f[sep+1], source: unescapeOctal(f[sep+2])})
	}
	return out, sc.Err()
}

// swapFileAt is the active swap file (a Filename of ProcSwaps) that is
// the file fi, "" when none is; a system without the table has none.
func (p Lister) swapFileAt(fi os.FileInfo) (string, error) {
	if p.ProcSwaps == "" {
		return "", nil
	}
	f, err := os.Open(p.ProcSwaps)
	if errors.Is(err, fs.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("read swap table: %w", err)
	}
	defer f.Close()
	files, err := parseSwaps(io.LimitReader(f, 1<<20))
	if err != nil {
		return "", fmt.Errorf("read swap table %s: %w", p.ProcSwaps, err)
	}
	for _, name := range files {
		if st, err := os.Stat(name); err == nil && os.SameFile(st, fi) {
			return name, nil
		}
	}
	return "", nil
}

// parseSwaps returns the Filename column of /proc/swaps.
func parseSwaps(r io.Reader) ([]string, error) {
	var out []string
	sc := bufio.NewScanner(r)
	for first := true; sc.Scan(); first = false {
		f := strings.Fields(sc.Text())
		if first || len(f) == 0 {
			continue // header
		}
		out = append(out, unescapeOctal(f[0]))
	}
	return out, sc.Err()
}

// unescapeOctal undoes the kernel's \NNN escaping of space, tab, newline
// and backslash in mount and swap paths ("/media/user/My\040Card").
func unescapeOctal(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+4 <= len(s) && isOctal(s[i+1:i+4]) {
			v, _ := strconv.ParseUint(s[i+1:i+4], 8, 8)
			b.WriteByte(byte(v))
			i += 3
			continue
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

func isOctal(s string) bool {
	if len(s) != 3 {
		return false
	}
	for _, c := range []byte(s) {
		if c < '0' || c > '7' {
			return false
		}
	}
	return s[0] <= '3'
}
