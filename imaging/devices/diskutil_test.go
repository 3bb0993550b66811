package devices

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// darwinFixture lists the disks of a captured Mac: list is the `diskutil
// list -plist` file, infos maps disk identifiers to `diskutil info -plist`
// files (testdata/darwin/README.md says where they come from).
func darwinFixture(t *testing.T, list string, infos map[string]string, edit func(id string, b []byte) []byte) map[string]Disk {
	t.Helper()
	read := func(name string) []byte {
		b, err := os.ReadFile(filepath.Join("testdata", "darwin", name))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	disks, err := diskutilDisks(read(list), func(id string) ([]byte, error) {
		f, ok := infos[id]
		if !ok {
			return nil, errors.New("exit status 1")
		}
		b := read(f)
		if edit != nil {
			b = edit(id, b)
		}
		return b, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	m := map[string]Disk{}
	for _, d := range disks {
		m[d.Name] = d
	}
	return m
}

var macInfos = map[string]string{
	"disk0": "diskutil-info-disk0.plist",
	"disk1": "diskutil-info-disk1.plist",
	"disk2": "diskutil-info-disk2-usb-stick.plist",
}

func TestDiskutilUSBStick(t *testing.T) {
	disks := darwinFixture(t, "diskutil-all-usb-stick.plist", macInfos, nil)
	if len(disks) != 3 {
		t.Fatalf("got %d disks, want disk0-2: %v", len(disks), disks)
	}
	// The boot SSD: the sealed system snapshot "/" lives in APFS container
	// disk1, whose physical store is disk0s2.
	d0 := disks["disk0"]
	wantRefused(t, d0, CodeSystemDisk, "/dev/disk0 holds the system filesystem /System/Volumes/Data (via disk1)")
	if d0.Size != 512110190592 || d0.Transport != TransportNVMe || d0.Model != "INTEL SSDPEKNW512G8" || d0.RemovableLike() {
		t.Errorf("disk0 = %+v", d0)
	}
	if len(d0.Partitions) != 2 || d0.Partitions[1].Name != "disk0s2" || d0.Partitions[1].Holders[0] != "disk1" {
		t.Errorf("disk0 partitions = %+v", d0.Partitions)
	}
	// Even forced, the system disk stays refused.
	if r := d0.Assess(0, Options{ForceNonRemovable: true}); r == nil || r.Reason != CodeSystemDisk {
		t.Errorf("forced disk0: %v", r)
	}
	wantRefused(t, disks["disk1"], CodeVirtual, "/dev/disk1 is a virtual apfs device, not a card")

	// The Cruzer Fit: USB, removable, FAT32 on the whole disk mounted by
	// Finder under /Volumes: offered, and Open will unmount it.
	d2 := disks["disk2"]
	if !d2.Safe || d2.Refusal != nil {
		t.Fatalf("disk2 refused: %v", d2.Refusal)
	}
	if d2.Path != "/dev/disk2" || d2.Size != 15682240512 || d2.Transport != TransportUSB || !d2.Removable || d2.ReadOnly || d2.Model != "Cruzer Fit" {
		t.Errorf("disk2 = %+v", d2)
	}
	if got := d2.AllMounts(); len(got) != 1 || got[0].Point != "/Volumes/NO NAME" {
		t.Errorf("disk2 mounts = %+v", got)
	}
	if got := d2.String(); got != "disk2  14.6 GiB  Cruzer Fit (usb, removable)" {
		t.Errorf("String = %q", got)
	}
	// Too small for a 16 GB image.
	if r := d2.Assess(16e9, Options{}); r == nil || r.Reason != CodeTooSmall {
		t.Errorf("16 GB image on disk2: %v", r)
	}
}

func TestDiskutilUSBAdapterIsFixed(t *testing.T) {
	infos := map[string]string{"disk0": macInfos["disk0"], "disk1": macInfos["disk1"], "disk2": "diskutil-info-disk2-usb-ide-adapter.plist"}
	disks := darwinFixture(t, "diskutil-all-usb-ide-adapter.plist", infos, nil)
	d2 := disks["disk2"]
	// An mSATA SSD behind USB: Removable false, but on USB, which counts
	// as removable like on Linux (card readers and sticks are USB).
	if !d2.Safe || d2.Transport != TransportUSB || d2.Removable {
		t.Fatalf("disk2 = %+v, refusal %v", d2, d2.Refusal)
	}
	if len(d2.Partitions) != 1 || d2.Partitions[0].Name != "disk2s1" || d2.Partitions[0].Mounts[0].Point != "/Volumes/PC" {
		t.Errorf("disk2 partitions = %+v", d2.Partitions)
	}
	// A partition is refused with its disk suggested; the system disk's
	// partition gets no suggestion.
	_, err := judgeListed(mapValues(disks), "disk2s1", "/dev/disk2s1", 0, Options{})
	var r *RefusedError
	if !errors.As(err, &r) || r.Reason != CodePartition || r.Suggestion != "/dev/disk2" {
		t.Errorf("disk2s1: %v", err)
	}
	_, err = judgeListed(mapValues(disks), "disk0s1", "/dev/disk0s1", 0, Options{})
	if !errors.As(err, &r) || r.Reason != CodePartition || r.Suggestion != "" || !strings.Contains(r.Msg, "holds the system filesystem") {
		t.Errorf("disk0s1: %v", err)
	}
	_, err = judgeListed(mapValues(disks), "disk9", "/dev/disk9", 0, Options{})
	if !errors.As(err, &r) || r.Reason != CodeNotFound {
		t.Errorf("disk9: %v", err)
	}
}

// The same captures with one value changed (marked): the rules must follow
// the field, not the device's name.
func TestDiskutilEditedFields(t *testing.T) {
	flip := func(key, from, to string) func(string, []byte) []byte {
		return func(id string, b []byte) []byte {
			if id != "disk2" {
				return b
			}
			old := []byte("<key>" + key + "</key>\n\t" + from)
			if !bytes.Contains(b, old) {
				t.Fatalf("fixture has no %s", old)
			}
			return bytes.Replace(b, old, []byte("<key>"+key+"</key>\n\t"+to), 1)
		}
	}
	ro := darwinFixture(t, "diskutil-all-usb-stick.plist", macInfos, flip("WritableMedia", "<true/>", "<false/>"))
	wantRefused(t, ro["disk2"], CodeReadOnly, "/dev/disk2 is read-only (check the write-protect switch on the card)")

	img := darwinFixture(t, "diskutil-all-usb-stick.plist", macInfos, flip("BusProtocol", "<string>USB</string>", "<string>Disk Image</string>"))
	wantRefused(t, img["disk2"], CodeVirtual, "/dev/disk2 is a virtual disk-image device, not a card")

	fixed := darwinFixture(t, "diskutil-all-usb-stick.plist", macInfos, flip("BusProtocol", "<string>USB</string>", "<string>Thunderbolt</string>"))
	// Still removable media (RemovableMedia true): allowed.
	if !fixed["disk2"].Safe {
		t.Errorf("removable media on another bus refused: %v", fixed["disk2"].Refusal)
	}

	// No info for disk2 (diskutil failed): listed, refused, even forced.
	noInfo := darwinFixture(t, "diskutil-all-usb-stick.plist", map[string]string{"disk0": macInfos["disk0"], "disk1": macInfos["disk1"]}, nil)
	d2 := noInfo["disk2"]
	wantRefused(t, d2, CodeUnknownDevice, "/dev/disk2 cannot be judged safe: `diskutil info disk2` failed")
	if r := d2.Assess(0, Options{ForceNonRemovable: true}); r == nil || r.Reason != CodeUnknownDevice {
		t.Errorf("forced: %v", r)
	}
}

func TestDiskutilMountedOutsideVolumes(t *testing.T) {
	list, err := os.ReadFile("testdata/darwin/diskutil-all-usb-stick.plist")
	if err != nil {
		t.Fatal(err)
	}
	// Edited: the stick mounted by hand at /private/tmp/stick.
	list = bytes.Replace(list, []byte("<string>/Volumes/NO NAME</string>"), []byte("<string>/private/tmp/stick</string>"), 1)
	disks, err := diskutilDisks(list, func(id string) ([]byte, error) {
		return os.ReadFile(filepath.Join("testdata", "darwin", macInfos[id]))
	})
	if err != nil {
		t.Fatal(err)
	}
	wantRefused(t, disks[2], CodeMounted, "/dev/disk2 is mounted at /private/tmp/stick, outside /Volumes; unmount it yourself if it really is the card")
}

func TestDiskutilGarbage(t *testing.T) {
	for _, in := range []string{"", "not a plist", "<plist><dict><key>WholeDisks</key><integer>3</integer></dict></plist>"} {
		if _, err := diskutilDisks([]byte(in), nil); err == nil {
			t.Errorf("%q: no error", in)
		}
	}
}

func TestDarwinDiskName(t *testing.T) {
	for in, want := range map[string]string{"/dev/disk4": "disk4", "/dev/rdisk4": "disk4", "disk4": "disk4", "/dev/disk4s1": "disk4s1", "/dev/rdisk10s2": "disk10s2",
		"/dev/sda": "", "/tmp/disk4": "", "/dev/diskX": "", "/dev/disk": "", "card.img": ""} {
		got, ok := darwinDiskName(in)
		if got != want || ok != (want != "") {
			t.Errorf("darwinDiskName(%q) = %q, %v; want %q", in, got, ok, want)
		}
	}
	if rawDiskPath("disk4") != "/dev/rdisk4" {
		t.Error(rawDiskPath("disk4"))
	}
}

func wantRefused(t *testing.T, d Disk, code Code, msg string) {
	t.Helper()
	if d.Safe || d.Refusal == nil {
		t.Errorf("%s: want refusal %s, got safe", d.Name, code)
		return
	}
	if d.Refusal.Reason != code || !strings.HasPrefix(d.Refusal.Msg, msg) {
		t.Errorf("%s: refusal %s %q, want %s %q", d.Name, d.Refusal.Reason, d.Refusal.Msg, code, msg)
	}
}

func mapValues(m map[string]Disk) []Disk {
	var out []Disk
	for _, d := range m {
		out = append(out, d)
	}
	return out
}
