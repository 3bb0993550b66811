package devices

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"syscall"
	"testing"

	"github.com/talosflash/talosflash/internal/testkit"
)

func listByName(t *testing.T, l *Lister) map[string]Disk {
	t.Helper()
	disks, err := l.List()
	if err != nil {
		t.Fatalf("List: %v", err)
	}
	m := map[string]Disk{}
	for _, d := range disks {
		m[d.Name] = d
	}
	return m
}

func TestListFakeSystem(t *testing.T) {
	l := buildFakeSystem(t, fakeSystem)
	disks := listByName(t, l)

	for _, skipped := range []string{"loop1", "mmcblk1boot0"} {
		if _, ok := disks[skipped]; ok {
			t.Errorf("%s should not be listed", skipped)
		}
	}
	want := map[string]struct {
		code Code   // "" = safe
		msg  string // substring of the refusal message
	}{
		"nvme0n1": {CodeSystemDisk, "holds the system filesystem /boot/efi"},
		"sdb":     {"", ""},
		"mmcblk0": {"", ""},
		"mmcblk1": {CodeNotRemovable, "is not a removable disk"},
		"sda":     {CodeMounted, "is mounted at /data, outside /media and /run/media"},
		"sdc":     {CodeNotRemovable, "not a removable disk"},
		"sdd":     {CodeSystemDisk, "holds the system filesystem /home (via dm-0)"},
		"dm-0":    {CodeVirtual, "virtual dm device"},
		"dm-1":    {CodeVirtual, "virtual dm device"},
		"sde":     {CodeReadOnly, "write-protect"},
		"sdf":     {CodeNoMedium, "no medium"},
		"sdg":     {CodeHolders, "in use by dm-1 on "},
		"sdh":     {CodeSwap, "has swap in use on "},
		"sdi":     {"", ""},
		"loop0":   {CodeVirtual, "loop device"},
		"zram0":   {CodeVirtual, "virtual zram device"},
	}
	if len(disks) != len(want) {
		t.Errorf("listed %d disks, want %d: %v", len(disks), len(want), disks)
	}
	for name, w := range want {
		d, ok := disks[name]
		if !ok {
			t.Errorf("%s not listed", name)
			continue
		}
		if w.code == "" {
			if !d.Safe || d.Refusal != nil {
				t.Errorf("%s: want safe, refused: %v", name, d.Refusal)
			}
			continue
		}
		if d.Safe || d.Refusal == nil {
			t.Errorf("%s: want refusal %s, got safe", name, w.code)
			continue
		}
		if d.Refusal.Reason != w.code || !strings.Contains(d.Refusal.Msg, w.msg) {
			t.Errorf("%s: refusal %s %q, want %s containing %q", name, d.Refusal.Reason, d.Refusal.Msg, w.code, w.msg)
		}
		if d.Refusal.Device != d.Path {
			t.Errorf("%s: refusal names %q, want %q", name, d.Refusal.Device, d.Path)
		}
	}

	sdb := disks["sdb"]
	if sdb.Transport != TransportUSB || !sdb.Removable || sdb.Size != 62333952*512 || sdb.Vendor != "Generic" || sdb.Model != "SD/MMC" {
		t.Errorf("sdb parsed wrong: %+v", sdb)
	}
	if got, want := sdb.String(), "sdb  29.7 GiB  Generic SD/MMC (usb, removable)"; got != want {
		t.Errorf("String() = %q, want %q", got, want)
	}
	if sdb.Path != filepath.Join(l.DevRoot, "sdb") {
		t.Errorf("sdb path %q", sdb.Path)
	}
	// Partitions with their mounts; the second mount point is escaped in
	// mountinfo as My\040Card\011x.
	wantParts := []Partition{
		{Name: "sdb1", Path: filepath.Join(l.DevRoot, "sdb1"), Number: 1, Size: 524288 * 512, Mounts: []Mount{{Point: "/media/user/boot", FSType: "vfat"}}},
		{Name: "sdb2", Path: filepath.Join(l.DevRoot, "sdb2"), Number: 2, Size: 61800000 * 512, Mounts: []Mount{{Point: "/media/user/My Card\tx", FSType: "ext4"}}},
	}
	if !reflect.DeepEqual(sdb.Partitions, wantParts) {
		t.Errorf("sdb partitions:\n got %+v\nwant %+v", sdb.Partitions, wantParts)
	}

	if got := disks["sdi"].Mounts; !reflect.DeepEqual(got, []Mount{{Point: "/run/media/user/STICK", FSType: "vfat"}}) {
		t.Errorf("sdi whole-disk mounts %+v", got)
	}

	mmc := disks["mmcblk0"]
	if mmc.Transport != TransportMMC || mmc.Removable || !mmc.RemovableLike() || mmc.MMCType != "SD" {
		t.Errorf("mmcblk0: transport %s removable %v removable-like %v type %q", mmc.Transport, mmc.Removable, mmc.RemovableLike(), mmc.MMCType)
	}
	if got, want := mmc.String(), "mmcblk0  59.5 GiB  SD64G (mmc, removable)"; got != want {
		t.Errorf("String() = %q, want %q", got, want)
	}

	nvme := disks["nvme0n1"]
	if nvme.Transport != TransportNVMe || nvme.Model != "Samsung SSD 970 EVO Plus 1TB" || len(nvme.Partitions) != 3 {
		t.Errorf("nvme0n1 parsed wrong: %+v", nvme)
	}
	if !nvme.Partitions[2].Swap || nvme.Partitions[1].Swap {
		t.Errorf("swap should be on nvme0n1p3 only: %+v", nvme.Partitions)
	}
	if got := nvme.Partitions[1].Mounts; len(got) != 1 || got[0].Point != "/" {
		t.Errorf("nvme0n1p2 mounts %+v, want /", got)
	}
	if got, want := nvme.String(), "nvme0n1  932 GiB  Samsung SSD 970 EVO Plus 1TB (nvme, fixed)"; got != want {
		t.Errorf("String() = %q, want %q", got, want)
	}

	for name, tr := range map[string]Transport{"sda": TransportSATA, "sde": TransportUSB, "dm-0": TransportDM, "loop0": TransportLoop, "zram0": TransportZRAM} {
		if disks[name].Transport != tr {
			t.Errorf("%s transport %q, want %q", name, disks[name].Transport, tr)
		}
	}
	if got := disks["sdd"].Partitions[0].Holders; !reflect.DeepEqual(got, []string{"dm-0"}) {
		t.Errorf("sdd1 holders %v", got)
	}
	if got := disks["loop0"].Model; got != "backed by /tmp/test.img" {
		t.Errorf("loop0 model %q", got)
	}
}

func TestAssessOptionsAndSize(t *testing.T) {
	disks := listByName(t, buildFakeSystem(t, fakeSystem))
	cases := []struct {
		disk      string
		imageSize int64
		opts      Options
		code      Code // "" = accepted
		msg       string
	}{
		{"sdb", 1300 << 20, Options{}, "", ""},
		{"sdb", 32 * gib, Options{}, CodeTooSmall, "too small: 29.7 GiB, the image needs 32.0 GiB"},
		{"sdb", 62333952 * 512, Options{}, "", ""}, // exactly fits
		{"sdc", 0, Options{}, CodeNotRemovable, "not a removable disk"},
		{"sdc", 0, Options{ForceNonRemovable: true}, "", ""},
		{"mmcblk1", 0, Options{ForceNonRemovable: true}, "", ""},
		// Forcing never overrides the stronger rules.
		{"sda", 0, Options{ForceNonRemovable: true}, CodeMounted, "/data"},
		{"nvme0n1", 0, Options{ForceNonRemovable: true, AllowLoop: true}, CodeSystemDisk, "system filesystem"},
		{"sdd", 0, Options{ForceNonRemovable: true}, CodeSystemDisk, "via dm-0"},
		{"dm-0", 0, Options{AllowLoop: true, ForceNonRemovable: true}, CodeVirtual, "virtual dm device"},
		{"zram0", 0, Options{AllowLoop: true, ForceNonRemovable: true}, CodeVirtual, "zram"},
		{"loop0", 0, Options{AllowLoop: true}, "", ""},
		{"loop0", 1 * gib, Options{AllowLoop: true}, CodeTooSmall, "8.00 MiB, the image needs 1.00 GiB"},
		{"sde", 0, Options{ForceNonRemovable: true}, CodeReadOnly, "read-only"},
	}
	for _, c := range cases {
		d := disks[c.disk]
		r := d.Assess(c.imageSize, c.opts)
		switch {
		case c.code == "" && r != nil:
			t.Errorf("%s size %d %+v: refused %v", c.disk, c.imageSize, c.opts, r)
		case c.code != "" && r == nil:
			t.Errorf("%s size %d %+v: accepted, want %s", c.disk, c.imageSize, c.opts, c.code)
		case c.code != "" && (r.Reason != c.code || !strings.Contains(r.Msg, c.msg)):
			t.Errorf("%s: got %s %q, want %s containing %q", c.disk, r.Reason, r.Msg, c.code, c.msg)
		}
	}
}

func TestCheckPaths(t *testing.T) {
	l := buildFakeSystem(t, fakeSystem)
	dev := l.DevRoot
	outside := t.TempDir()
	imageFile := filepath.Join(outside, "talos.raw")
	if err := os.WriteFile(imageFile, make([]byte, 4096), 0o644); err != nil {
		t.Fatal(err)
	}
	// A regular file in /dev for a device the kernel does not know: what
	// `dd of=/dev/sdq` leaves behind when no card is inserted.
	if err := os.WriteFile(filepath.Join(dev, "sdq"), nil, 0o644); err != nil {
		t.Fatal(err)
	}

	cases := []struct {
		path       string
		opts       Options
		code       Code
		msg        string
		suggestion string
		disk       string // expected Disk.Name when a disk is returned
	}{
		{path: filepath.Join(dev, "sdb"), disk: "sdb"},
		{path: filepath.Join(dev, "disk/by-id/usb-Generic_SD_MMC_20120501030900000-0:0"), disk: "sdb"},
		{path: filepath.Join(dev, "mmcblk0"), disk: "mmcblk0"},
		{path: filepath.Join(dev, "sdb1"), code: CodePartition, msg: "sdb1 is a partition", suggestion: filepath.Join(dev, "sdb")},
		{path: filepath.Join(dev, "disk/by-id/usb-Generic_SD_MMC_20120501030900000-0:0-part1"), code: CodePartition, msg: "sdb1 is a partition", suggestion: filepath.Join(dev, "sdb")},
		{path: filepath.Join(dev, "mmcblk0p1"), code: CodePartition, suggestion: filepath.Join(dev, "mmcblk0")},
		// Never suggest a system disk.
		{path: filepath.Join(dev, "nvme0n1p2"), code: CodePartition, msg: "and its disk " + filepath.Join(dev, "nvme0n1") + " is refused too"},
		{path: filepath.Join(dev, "nvme0n1"), code: CodeSystemDisk, msg: "system filesystem", disk: "nvme0n1"},
		{path: filepath.Join(dev, "mapper/vg-home"), code: CodeVirtual, msg: "virtual dm device", disk: "dm-0"},
		{path: filepath.Join(dev, "loop0"), code: CodeVirtual, msg: "not a card (allowed with --allow-loop", disk: "loop0"},
		{path: filepath.Join(dev, "loop0"), opts: Options{AllowLoop: true}, disk: "loop0"},
		{path: filepath.Join(dev, "sdz"), code: CodeNotFound, msg: "does not exist (is the card inserted?"},
		{path: filepath.Join(dev, "sdq"), code: CodeNotBlockDevice, msg: "regular file inside"},
		{path: filepath.Join(outside, "missing.raw"), code: CodeNotFound, msg: "missing.raw does not exist"},
		{path: filepath.Join(outside, "missing.raw"), opts: Options{CreateFile: true}, disk: "missing.raw"},
		{path: filepath.Join(dev, "new"), opts: Options{CreateFile: true}, code: CodeNotFound},
		{path: outside, code: CodeDirectory, msg: "is a directory"},
		{path: "/dev/null", code: CodeNotBlockDevice, msg: "/dev/null is not a block device or a regular file"},
		{path: imageFile, disk: "talos.raw"},
		// An existing file with data is overwritten only if named like an image.
		{path: testkit.WriteFile(t, outside, "fstab", "proc /proc proc defaults 0 0\n"), code: CodeNotImageFile, msg: "does not look like a disk image"},
		{path: testkit.WriteFile(t, outside, "old-card.IMG", "x"), disk: "old-card.IMG"},
		{path: testkit.WriteFile(t, outside, "empty.txt", ""), disk: "empty.txt"},
		{path: "", code: CodeNotFound, msg: "no target given"},
	}
	for _, c := range cases {
		d, err := l.Check(c.path, 4<<20, c.opts)
		if c.code == "" {
			if err != nil {
				t.Errorf("Check(%s): %v", c.path, err)
				continue
			}
		} else {
			var r *RefusedError
			if !errors.As(err, &r) {
				t.Errorf("Check(%s): want refusal %s, got %v", c.path, c.code, err)
				continue
			}
			if r.Reason != c.code || !strings.Contains(r.Msg, c.msg) || r.Suggestion != c.suggestion {
				t.Errorf("Check(%s): got %s %q suggestion %q; want %s containing %q suggestion %q", c.path, r.Reason, r.Msg, r.Suggestion, c.code, c.msg, c.suggestion)
			}
		}
		if c.disk != "" && (d == nil || d.Name != c.disk) {
			t.Errorf("Check(%s): disk %+v, want %s", c.path, d, c.disk)
		}
	}

	// The full error text names the suggestion.
	_, err := l.Check(filepath.Join(dev, "sdb1"), 0, Options{})
	if want := "refusing to write: " + filepath.Join(dev, "sdb1") + " is a partition; images are written to the whole disk (did you mean " + filepath.Join(dev, "sdb") + "?)"; err == nil || err.Error() != want {
		t.Errorf("error text\n got %v\nwant %s", err, want)
	}
	// A regular file is a file target, with its size.
	d, err := l.Check(imageFile, 0, Options{})
	if err != nil || d.Transport != TransportFile || d.Size != 4096 || !d.Safe {
		t.Errorf("image file: %+v %v", d, err)
	}
}

func TestParseMountInfoEscapes(t *testing.T) {
	in := "41 26 8:18 / /media/user/My\\040Card\\011x\\134y rw - ext4 /dev/disk/by-label/A\\040B rw\n" +
		"42 26 8:19 / /run/media/u/a rw shared:1 master:2 - vfat /dev/sdb3 rw\n"
	got, err := parseMountInfo(strings.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	want := []mountEntry{
		{dev: "8:18", point: "/media/user/My Card\tx\\y", fstype: "ext4", source: "/dev/disk/by-label/A B"},
		{dev: "8:19", point: "/run/media/u/a", fstype: "vfat", source: "/dev/sdb3"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %+v\nwant %+v", got, want)
	}
	if _, err := parseMountInfo(strings.NewReader("garbage line\n")); err == nil {
		t.Error("malformed mountinfo accepted")
	}
	for in, want := range map[string]string{`a\040b`: "a b", `a\04`: `a\04`, `a\999`: `a\999`, `\`: `\`, `x\134`: `x\`} {
		if got := unescapeOctal(in); got != want {
			t.Errorf("unescape %q = %q, want %q", in, got, want)
		}
	}
	swaps, err := parseSwaps(strings.NewReader("Filename Type Size Used Priority\n/var/swap\\040file file 10 0 -2\n/dev/sda2 partition 10 0 -3\n"))
	if err != nil || !reflect.DeepEqual(swaps, []string{"/var/swap file", "/dev/sda2"}) {
		t.Errorf("swaps %q %v", swaps, err)
	}
}

func TestListFailsClosedWithoutMountTable(t *testing.T) {
	l := buildFakeSystem(t, fakeSystem)
	l.MountInfo = filepath.Join(t.TempDir(), "nope")
	if _, err := l.List(); err == nil {
		t.Fatal("List without a mount table must fail, not call disks safe")
	}
	// A missing /proc/swaps (kernel without swap) is fine.
	l = buildFakeSystem(t, fakeSystem)
	l.ProcSwaps = filepath.Join(t.TempDir(), "nope")
	disks := listByName(t, l)
	if disks["nvme0n1"].Partitions[2].Swap {
		t.Error("swap reported without a swap table")
	}
}

func TestIOErrorAndDeviceGone(t *testing.T) {
	err := &IOError{Op: "write", Path: "/dev/sdb", Offset: 3 << 20, Len: 1 << 20, Err: syscall.EIO}
	if !IsDeviceGone(err) {
		t.Error("EIO should count as device gone")
	}
	want := "write /dev/sdb failed in bytes 3145728-4194303 (at 3.00 MiB): input/output error; was the card removed or is it faulty?"
	if err.Error() != want {
		t.Errorf("got  %s\nwant %s", err, want)
	}
	if IsDeviceGone(errors.New("short write")) || IsDeviceGone(nil) {
		t.Error("unrelated errors are not device-gone")
	}
	if !IsDeviceGone(&os.PathError{Op: "write", Path: "/dev/sdb", Err: syscall.ENODEV}) {
		t.Error("ENODEV inside PathError")
	}
}

// CreateFile must not create a regular file inside DevRoot through a
// symlinked parent directory or a dangling symlink (the leftover that
// `dd of=/dev/sdX` without a card makes), nor follow a dangling link at all.
func TestCheckCreateFileNotIntoDev(t *testing.T) {
	l := buildFakeSystem(t, fakeSystem)
	outside := t.TempDir()
	linkDir := filepath.Join(outside, "devlink")
	if err := os.Symlink(l.DevRoot, linkDir); err != nil {
		t.Fatal(err)
	}
	dangling := filepath.Join(outside, "card.raw")
	if err := os.Symlink(filepath.Join(l.DevRoot, "sdz"), dangling); err != nil {
		t.Fatal(err)
	}
	danglingOut := filepath.Join(outside, "other.raw")
	if err := os.Symlink(filepath.Join(outside, "nowhere", "x.raw"), danglingOut); err != nil {
		t.Fatal(err)
	}
	opts := Options{CreateFile: true}
	for _, path := range []string{filepath.Join(linkDir, "sdz"), dangling, danglingOut} {
		d, err := l.Check(path, 0, opts)
		var r *RefusedError
		if !errors.As(err, &r) || r.Reason != CodeNotFound {
			t.Errorf("Check(%s): %+v %v, want %s refusal", path, d, err, CodeNotFound)
		}
		if dev, err := l.Open(path, 0, opts); err == nil {
			dev.Close()
			t.Errorf("Open(%s) succeeded", path)
		}
	}
	if _, err := os.Lstat(filepath.Join(l.DevRoot, "sdz")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a file was created in DevRoot: %v", err)
	}
	// A symlinked directory outside DevRoot is fine; the disk names the real place.
	realDir := t.TempDir()
	var err error
	okLink := filepath.Join(outside, "images")
	if err := os.Symlink(realDir, okLink); err != nil {
		t.Fatal(err)
	}
	if realDir, err = filepath.EvalSymlinks(realDir); err != nil {
		t.Fatal(err)
	}
	d, err := l.Check(filepath.Join(okLink, "new.raw"), 0, opts)
	if err != nil || d.Path != filepath.Join(realDir, "new.raw") {
		t.Errorf("Check through symlinked dir: %+v %v", d, err)
	}
}
