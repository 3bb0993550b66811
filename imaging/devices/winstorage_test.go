package devices

import (
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// winHex reads a testdata/windows file: hex bytes, '#' comments.
func winHex(t *testing.T, name string) []byte {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("testdata", "windows", name))
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for _, line := range strings.Split(string(raw), "\n") {
		line, _, _ = strings.Cut(line, "#")
		b.WriteString(strings.ReplaceAll(strings.TrimSpace(line), " ", ""))
	}
	out, err := hex.DecodeString(b.String())
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return out
}

func TestDecodeStorageDescriptor(t *testing.T) {
	d, err := decodeStorageDescriptor(winHex(t, "drive1-usb-sd.desc.hex"))
	if err != nil {
		t.Fatal(err)
	}
	want := storageDescriptor{RemovableMedia: true, BusType: busUSB, Vendor: "Generic-", Product: "SD/MMC", Revision: "1.00", Serial: "20120501030900000"}
	if *d != want {
		t.Errorf("got %+v, want %+v", *d, want)
	}
	nvme, err := decodeStorageDescriptor(winHex(t, "drive0-nvme.desc.hex"))
	if err != nil || nvme.Vendor != "" || nvme.Product != "Samsung SSD 970 EVO Plus 1TB" || nvme.BusType != busNVMe || nvme.RemovableMedia {
		t.Errorf("nvme: %+v, %v", nvme, err)
	}
	// Truncated, a string offset past the end, an unterminated string.
	good := winHex(t, "drive1-usb-sd.desc.hex")
	for name, b := range map[string][]byte{
		"short":        good[:20],
		"size too big": append(append([]byte(nil), good[:4]...), append([]byte{0xff, 0, 0, 0}, good[8:]...)...),
		"cut string":   withSize(good[:len(good)-1], len(good)-1),
		"offset out":   patch(good, 16, []byte{0xf0, 0, 0, 0}),
	} {
		if _, err := decodeStorageDescriptor(b); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

func withSize(b []byte, n int) []byte {
	return patch(b, 4, []byte{byte(n), byte(n >> 8), 0, 0})
}

func patch(b []byte, at int, with []byte) []byte {
	c := append([]byte(nil), b...)
	copy(c[at:], with)
	return c
}

func TestDecodeGeometryAndExtents(t *testing.T) {
	g, err := decodeDiskGeometryEx(winHex(t, "drive1-usb-sd.geo.hex"))
	if err != nil || g.DiskSize != 31914983424 || g.MediaType != mediaRemovable || g.BytesPerSector != 512 {
		t.Errorf("geometry %+v, %v", g, err)
	}
	if _, err := decodeDiskGeometryEx(winHex(t, "drive1-usb-sd.geo.hex")[:31]); err == nil {
		t.Error("short geometry accepted")
	}
	if _, err := decodeDiskGeometryEx(patch(winHex(t, "drive1-usb-sd.geo.hex"), 20, []byte{7, 0, 0, 0})); err == nil {
		t.Error("7 bytes per sector accepted")
	}
	e, err := decodeVolumeDiskExtents(winHex(t, "vol-s.ext.hex"))
	if err != nil || len(e) != 2 || e[0] != (diskExtent{4, 1048576, 2000000000000}) || e[1] != (diskExtent{5, 1048576, 1000000000000}) {
		t.Errorf("extents %+v, %v", e, err)
	}
	for name, b := range map[string][]byte{"empty": nil, "zero": make([]byte, 8), "count past end": patch(winHex(t, "vol-e.ext.hex"), 0, []byte{2})} {
		if _, err := decodeVolumeDiskExtents(b); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

// winLaptop is a Windows laptop: NVMe system SSD, a USB SD reader with a
// card (E:), an empty USB reader, an attached VHDX (V:), two SATA disks
// carrying a spanned volume (S:), the built-in SD slot with a
// write-protected card, and a DVD drive whose volume has no disk extents.
func winLaptop(t *testing.T) ([]winDrive, []winVolume) {
	drives := []winDrive{
		{Number: 0, Descriptor: winHex(t, "drive0-nvme.desc.hex"), Geometry: winHex(t, "drive0-nvme.geo.hex")},
		{Number: 1, Descriptor: winHex(t, "drive1-usb-sd.desc.hex"), Geometry: winHex(t, "drive1-usb-sd.geo.hex")},
		{Number: 2, Descriptor: winHex(t, "drive2-usb-empty.desc.hex"), NoMedium: true},
		{Number: 3, Descriptor: winHex(t, "drive3-vhd.desc.hex"), Geometry: winHex(t, "drive3-vhd.geo.hex")},
		{Number: 4, Descriptor: winHex(t, "drive4-sata.desc.hex"), Geometry: winHex(t, "drive4-sata.geo.hex")},
		{Number: 5, Descriptor: winHex(t, "drive4-sata.desc.hex"), Geometry: winHex(t, "drive4-sata.geo.hex")},
		{Number: 6, Descriptor: winHex(t, "drive6-sd-slot.desc.hex"), Geometry: winHex(t, "drive6-sd-slot.geo.hex"), ReadOnly: true},
	}
	vols := []winVolume{
		{GUIDPath: `\\?\Volume{1b9d1c4e-0000-0000-0000-100000000000}\`, Extents: winHex(t, "vol-efi.ext.hex")},
		{GUIDPath: `\\?\Volume{1b9d1c4e-0000-0000-0000-602e00000000}\`, Paths: []string{`C:\`}, Extents: winHex(t, "vol-c.ext.hex")},
		{GUIDPath: `\\?\Volume{5c1e0a2b-0000-0000-0000-400000000000}\`, Paths: []string{`E:\`}, Extents: winHex(t, "vol-e.ext.hex")},
		{GUIDPath: `\\?\Volume{8d3f4a10-0000-0000-0000-000001000000}\`, Paths: []string{`V:\`}, Extents: winHex(t, "vol-v.ext.hex")},
		{GUIDPath: `\\?\Volume{e2b7c6d1-0000-0000-0000-000000000000}\`, Paths: []string{`S:\`}, Extents: winHex(t, "vol-s.ext.hex")},
		{GUIDPath: `\\?\Volume{9a0f3b22-0000-0000-0000-000000000000}\`, Paths: []string{`D:\`}, Err: errors.New("Incorrect function.")},
	}
	return drives, vols
}

func TestWindowsDisks(t *testing.T) {
	drives, vols := winLaptop(t)
	disks := windowsDisks(drives, vols, `C:\Windows`)
	by := map[string]Disk{}
	for _, d := range disks {
		by[d.Name] = d
	}
	if len(disks) != 7 || disks[0].Name != "PhysicalDrive0" || disks[6].Name != "PhysicalDrive6" {
		t.Fatalf("disks: %v", disks)
	}
	d0 := by["PhysicalDrive0"]
	wantRefused(t, d0, CodeSystemDisk, `\\.\PhysicalDrive0 holds the system filesystem C:\`)
	if r := d0.Assess(0, Options{ForceNonRemovable: true}); r == nil || r.Reason != CodeSystemDisk {
		t.Errorf("forced system disk: %v", r)
	}
	if len(d0.Partitions) != 2 || d0.Partitions[0].Name != `\\?\Volume{1b9d1c4e-0000-0000-0000-100000000000}\` || d0.Partitions[1].Name != "C:" || d0.Partitions[1].Path != `\\.\C:` {
		t.Errorf("PhysicalDrive0 partitions: %+v", d0.Partitions)
	}

	d1 := by["PhysicalDrive1"]
	if !d1.Safe || d1.Path != `\\.\PhysicalDrive1` || d1.Size != 31914983424 || d1.Transport != TransportUSB || !d1.Removable {
		t.Fatalf("PhysicalDrive1 = %+v (refusal %v)", d1, d1.Refusal)
	}
	if got := d1.String(); got != "PhysicalDrive1  29.7 GiB  Generic- SD/MMC (usb, removable)" {
		t.Errorf("String = %q", got)
	}
	wantRefused(t, by["PhysicalDrive2"], CodeNoMedium, `\\.\PhysicalDrive2 has no medium (is the card inserted?)`)
	wantRefused(t, by["PhysicalDrive3"], CodeVirtual, `\\.\PhysicalDrive3 is a virtual vhd device, not a card`)
	wantRefused(t, by["PhysicalDrive4"], CodeHolders, `\\.\PhysicalDrive4 is in use by S: (a volume spanning several disks`)
	wantRefused(t, by["PhysicalDrive5"], CodeHolders, `\\.\PhysicalDrive5 is in use by S:`)
	d6 := by["PhysicalDrive6"]
	wantRefused(t, d6, CodeReadOnly, `\\.\PhysicalDrive6 is read-only`)
	if d6.Transport != TransportMMC || !d6.RemovableLike() {
		t.Errorf("SD slot: %+v", d6)
	}

	// The volume letter is refused as a partition with the disk suggested.
	_, err := judgeListed(disks, "E:", `E:\`, 0, Options{})
	var r *RefusedError
	if !errors.As(err, &r) || r.Reason != CodePartition || r.Suggestion != `\\.\PhysicalDrive1` {
		t.Errorf("E: -> %v", err)
	}
	_, err = judgeListed(disks, "C:", `C:`, 0, Options{})
	if !errors.As(err, &r) || r.Reason != CodePartition || r.Suggestion != "" {
		t.Errorf("C: -> %v", err)
	}
	// Too small for the image.
	if _, err := judgeListed(disks, "PhysicalDrive1", `\\.\PhysicalDrive1`, 32e9, Options{}); !errors.As(err, &r) || r.Reason != CodeTooSmall {
		t.Errorf("32 GB image: %v", err)
	}
}

func TestWindowsDisksFolderMount(t *testing.T) {
	drives, vols := winLaptop(t)
	vols[2].Paths = []string{`E:\`, `C:\cards\sd\`} // also mounted in a folder
	disks := windowsDisks(drives, vols, `C:\Windows`)
	wantRefused(t, disks[1], CodeMounted, `\\.\PhysicalDrive1 is mounted at C:\cards\sd\, outside drive letters`)
}

// When the system volume cannot be placed, nothing is offered.
func TestWindowsDisksSystemUnknown(t *testing.T) {
	drives, vols := winLaptop(t)
	vols[1].Err, vols[1].Extents = errors.New("Access is denied."), nil
	for _, d := range windowsDisks(drives, vols, `C:\Windows`) {
		wantRefused(t, d, CodeUnknownDevice, d.Path+" cannot be judged safe: the disk of the system volume C:\\ is unknown")
		if r := d.Assess(0, Options{ForceNonRemovable: true}); r == nil {
			t.Errorf("%s forced: accepted", d.Name)
		}
	}
	drives, vols = winLaptop(t)
	for _, d := range windowsDisks(drives, vols, `\\server\share`) {
		wantRefused(t, d, CodeUnknownDevice, d.Path+" cannot be judged safe")
	}
	// A drive that could not be queried is refused, the others are not.
	drives, vols = winLaptop(t)
	drives[1].Err = errors.New("Access is denied.")
	disks := windowsDisks(drives, vols, `C:\Windows`)
	wantRefused(t, disks[1], CodeUnknownDevice, `\\.\PhysicalDrive1 cannot be judged safe: reading PhysicalDrive1 failed (Access is denied.)`)
}

func TestWindowsDiskName(t *testing.T) {
	for in, want := range map[string]string{`\\.\PhysicalDrive2`: "PhysicalDrive2", `\\?\PhysicalDrive12`: "PhysicalDrive12", `physicaldrive0`: "PhysicalDrive0",
		`//./PhysicalDrive1`: "PhysicalDrive1", `E:`: "E:", `e:\`: "E:", `\\.\E:`: "E:",
		`PhysicalDrive`: "", `PhysicalDrive01`: "", `PhysicalDrive-1`: "", `card.img`: "", `C:\card.img`: "", `/dev/sdb`: ""} {
		got, ok := windowsDiskName(in)
		if got != want || ok != (want != "") {
			t.Errorf("windowsDiskName(%q) = %q, %v; want %q", in, got, ok, want)
		}
	}
}
