package devices

import (
	"os"
	"path/filepath"
	"strconv"
	"testing"
)

// fakeDisk describes one /sys/block entry. The tree is built in a temp dir
// because sysfs is made of symlinks (/sys/block/sdb -> ../devices/.../sdb).
type fakeDisk struct {
	name    string
	devPath string // under sys/devices
	dev     string // "major:minor"
	sectors int64
	rem, ro bool
	attrs   map[string]string // extra files relative to the disk dir
	holders []string
	parts   []fakePart
}

type fakePart struct {
	name    string
	dev     string
	sectors int64
	holders []string
}

const gib = int64(1) << 30

// fakeSystem is a laptop with an NVMe system disk and several cards/disks.
var fakeSystem = []fakeDisk{
	{name: "nvme0n1", devPath: "pci0000:00/0000:00:1d.0/0000:3d:00.0/nvme/nvme0/nvme0n1", dev: "259:0", sectors: 1953525168,
		attrs: map[string]string{"device/model": "Samsung SSD 970 EVO Plus 1TB          "},
		parts: []fakePart{{"nvme0n1p1", "259:1", 1048576, nil}, {"nvme0n1p2", "259:2", 1900000000, nil}, {"nvme0n1p3", "259:3", 33554432, nil}}},
	// USB SD reader with a 32 GB card, automounted by udisks.
	{name: "sdb", devPath: "pci0000:00/0000:00:14.0/usb2/2-1/2-1:1.0/host6/target6:0:0/6:0:0:0/block/sdb", dev: "8:16", sectors: 62333952, rem: true,
		attrs: map[string]string{"device/vendor": "Generic ", "device/model": "SD/MMC          "},
		parts: []fakePart{{"sdb1", "8:17", 524288, nil}, {"sdb2", "8:18", 61800000, nil}}},
	// Laptop SD slot: mmcblk reports removable=0.
	{name: "mmcblk0", devPath: "pci0000:00/0000:00:1c.0/0000:02:00.0/mmc_host/mmc0/mmc0:aaaa/block/mmcblk0", dev: "179:0", sectors: 124735488,
		attrs: map[string]string{"device/name": "SD64G", "device/type": "SD"},
		parts: []fakePart{{"mmcblk0p1", "179:1", 124000000, nil}}},
	// Internal eMMC and its hardware boot area.
	{name: "mmcblk1", devPath: "platform/soc/fe340000.mmc/mmc_host/mmc1/mmc1:0001/block/mmcblk1", dev: "179:32", sectors: 61071360,
		attrs: map[string]string{"device/name": "DG4032", "device/type": "MMC"}},
	{name: "mmcblk1boot0", devPath: "platform/soc/fe340000.mmc/mmc_host/mmc1/mmc1:0001/block/mmcblk1boot0", dev: "179:64", sectors: 8192, ro: true,
		attrs: map[string]string{"device/type": "MMC"}},
	// SATA data disk, btrfs mounted at /data (anonymous device number).
	{name: "sda", devPath: "pci0000:00/0000:00:17.0/ata1/host0/target0:0:0/0:0:0:0/block/sda", dev: "8:0", sectors: 7814037168,
		attrs: map[string]string{"device/vendor": "ATA     ", "device/model": "WDC WD40EFRX-68N"},
		parts: []fakePart{{"sda1", "8:1", 7814000000, nil}}},
	// SATA disk with nothing mounted: only the removable rule stops it.
	{name: "sdc", devPath: "pci0000:00/0000:00:17.0/ata2/host1/target1:0:0/1:0:0:0/block/sdc", dev: "8:32", sectors: 976773168,
		attrs: map[string]string{"device/vendor": "ATA     ", "device/model": "ST500DM002"}},
	// SATA disk whose partition is an LVM PV; /home is on the LV dm-0.
	{name: "sdd", devPath: "pci0000:00/0000:00:17.0/ata3/host2/target2:0:0/2:0:0:0/block/sdd", dev: "8:48", sectors: 976773168,
		attrs: map[string]string{"device/vendor": "ATA     ", "device/model": "CT500MX500"},
		parts: []fakePart{{"sdd1", "8:49", 976000000, []string{"dm-0"}}}},
	{name: "dm-0", devPath: "virtual/block/dm-0", dev: "253:0", sectors: 976000000, attrs: map[string]string{"dm/name": "vg-home"}},
	// USB card reader with a write-protected card.
	{name: "sde", devPath: "pci0000:00/0000:00:14.0/usb2/2-2/2-2:1.0/host7/target7:0:0/7:0:0:0/block/sde", dev: "8:64", sectors: 15523840, rem: true, ro: true,
		attrs: map[string]string{"device/vendor": "Generic ", "device/model": "STORAGE DEVICE  "}},
	// USB card reader without a card.
	{name: "sdf", devPath: "pci0000:00/0000:00:14.0/usb2/2-3/2-3:1.0/host8/target8:0:0/8:0:0:0/block/sdf", dev: "8:80", sectors: 0, rem: true,
		attrs: map[string]string{"device/vendor": "Generic ", "device/model": "SD Reader       "}},
	// USB stick with an encrypted (LUKS) partition that is not mounted.
	{name: "sdg", devPath: "pci0000:00/0000:00:14.0/usb2/2-4/2-4:1.0/host9/target9:0:0/9:0:0:0/block/sdg", dev: "8:96", sectors: 30000000, rem: true,
		attrs: map[string]string{"device/vendor": "SanDisk ", "device/model": "Cruzer Blade    "},
		parts: []fakePart{{"sdg1", "8:97", 29990000, []string{"dm-1"}}}},
	{name: "dm-1", devPath: "virtual/block/dm-1", dev: "253:1", sectors: 29980000, attrs: map[string]string{"dm/name": "luks-stick"}},
	// USB stick used as swap.
	{name: "sdh", devPath: "pci0000:00/0000:00:14.0/usb2/2-5/2-5:1.0/host10/target10:0:0/10:0:0:0/block/sdh", dev: "8:112", sectors: 30000000, rem: true,
		attrs: map[string]string{"device/vendor": "Kingston", "device/model": "DataTraveler 3.0"},
		parts: []fakePart{{"sdh1", "8:113", 29990000, nil}}},
	// USB stick formatted without a partition table, automounted.
	{name: "sdi", devPath: "pci0000:00/0000:00:14.0/usb2/2-6/2-6:1.0/host11/target11:0:0/11:0:0:0/block/sdi", dev: "8:128", sectors: 15000000, rem: true,
		attrs: map[string]string{"device/vendor": "Generic ", "device/model": "Flash Disk      "}},
	{name: "loop0", devPath: "virtual/block/loop0", dev: "7:0", sectors: 16384, attrs: map[string]string{"loop/backing_file": "/tmp/test.img"}},
	{name: "loop1", devPath: "virtual/block/loop1", dev: "7:1", sectors: 0},
	{name: "zram0", devPath: "virtual/block/zram0", dev: "252:0", sectors: 16777216},
}

// buildFakeSystem writes the sysfs tree, a fake /dev (empty files standing in
// for device nodes, plus by-id links) and returns a Lister on it.
func buildFakeSystem(t *testing.T, disks []fakeDisk) *Lister {
	t.Helper()
	root := t.TempDir()
	sys := filepath.Join(root, "sys")
	dev := filepath.Join(root, "dev")
	write := func(path, content string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(content+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	link := func(target, path string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(target, path); err != nil {
			t.Fatal(err)
		}
	}
	holders := func(dir string, names []string) {
		if err := os.MkdirAll(filepath.Join(dir, "holders"), 0o755); err != nil {
			t.Fatal(err)
		}
		for _, h := range names {
			link("../../../../../../"+h, filepath.Join(dir, "holders", h))
		}
	}
	bool01 := func(b bool) string {
		if b {
			return "1"
		}
		return "0"
	}
	for _, d := range disks {
		dir := filepath.Join(sys, "devices", d.devPath)
		write(filepath.Join(dir, "dev"), d.dev)
		write(filepath.Join(dir, "size"), strconv.FormatInt(d.sectors, 10))
		write(filepath.Join(dir, "removable"), bool01(d.rem))
		write(filepath.Join(dir, "ro"), bool01(d.ro))
		for rel, content := range d.attrs {
			write(filepath.Join(dir, rel), content)
		}
		holders(dir, d.holders)
		rel, err := filepath.Rel(filepath.Join(sys, "block"), dir)
		if err != nil {
			t.Fatal(err)
		}
		link(rel, filepath.Join(sys, "block", d.name))
		write(filepath.Join(dev, d.name), "")
		for i, p := range d.parts {
			pdir := filepath.Join(dir, p.name)
			write(filepath.Join(pdir, "dev"), p.dev)
			write(filepath.Join(pdir, "size"), strconv.FormatInt(p.sectors, 10))
			write(filepath.Join(pdir, "partition"), strconv.Itoa(i+1))
			holders(pdir, p.holders)
			write(filepath.Join(dev, p.name), "")
		}
	}
	link("../dm-0", filepath.Join(dev, "mapper", "vg-home"))
	link("../../sdb", filepath.Join(dev, "disk", "by-id", "usb-Generic_SD_MMC_20120501030900000-0:0"))
	link("../../sdb1", filepath.Join(dev, "disk", "by-id", "usb-Generic_SD_MMC_20120501030900000-0:0-part1"))
	return &Lister{SysRoot: sys, DevRoot: dev, MountInfo: "testdata/mountinfo", ProcSwaps: "testdata/swaps"}
}
