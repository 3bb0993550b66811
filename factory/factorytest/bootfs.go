package factorytest

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"slices"
	"strings"
	"unicode/utf16"

	"github.com/talosflash/talosflash/imaging/gpt"
)

// OverlayBootFiles are the files a Raspberry Pi overlay's installer leaves
// in the root of a Talos image's EFI partition, by overlay name, as the
// sbc-raspberrypi installers copy them (installers/rpi_generic and
// installers/rpi_5, src/main.go: both copy into /boot/EFI): rpi_generic
// the Raspberry Pi firmware's boot folder (the Pi 4's GPU firmware
// start4.elf and fixup4.dat, the bcm2711 device trees and, in current
// firmware, the Pi 5's too) and U-Boot; rpi_5 only the bcm2712 device
// trees built from the Raspberry Pi kernel (artifacts/dtb/raspberrypi)
// and U-Boot, no GPU firmware. Both write config.txt. The contents are
// stand-ins: only the names matter to what reads them back.
func OverlayBootFiles(overlay string) map[string][]byte {
	common := map[string][]byte{
		"config.txt": []byte("# stand-in for the overlay's config.txt\nkernel=u-boot.bin\narm_64bit=1\n"),
		"u-boot.bin": bytes.Repeat([]byte("u-boot "), 300),
	}
	var own []string
	switch overlay {
	case "rpi_generic":
		own = []string{"start4.elf", "fixup4.dat", "bootcode.bin", "bcm2711-rpi-4-b.dtb", "bcm2711-rpi-400.dtb", "bcm2711-rpi-cm4.dtb", "bcm2712-rpi-5-b.dtb"}
	case "rpi_5":
		own = []string{"bcm2712-rpi-5-b.dtb", "bcm2712d0-rpi-5-b.dtb", "bcm2712-rpi-cm5-cm5io.dtb", "bcm2712-rpi-500.dtb"}
	default:
		return nil
	}
	for _, name := range own {
		common[name] = []byte("stand-in for " + name + "\n")
	}
	return common
}

// WithBootFiles is a copy of raw, a disk image with a GPT and an EFI
// partition (imaging/imagetest's TalosRaw), whose EFI partition holds a
// FAT filesystem with files in its root folder (FATImage: FAT12 or 16,
// FAT32 from about 32 MiB on): what a Talos image built with an overlay
// carries there.
func WithBootFiles(raw []byte, files map[string][]byte) ([]byte, error) {
	tab, err := gpt.Read(bytes.NewReader(raw), int64(len(raw)))
	if err != nil {
		return nil, fmt.Errorf("boot files: %w", err)
	}
	efi, ok := tab.Find("EFI")
	if !ok {
		return nil, fmt.Errorf("boot files: the image has no EFI partition")
	}
	fs, err := FATImage(efi.Size, files, false)
	if err != nil {
		fs, err = FATImage(efi.Size, files, true) // too many clusters for FAT16: FAT32, as mkfs.fat would
	}
	if err != nil {
		return nil, err
	}
	out := slices.Clone(raw)
	copy(out[efi.Offset:], fs)
	return out, nil
}

// FATImage is a FAT filesystem of size bytes (512-byte sectors, one
// sector a cluster, two FATs) with files in its root folder, contiguous,
// in name order; names that are no 8.3 name get long-name entries, as
// Linux's vfat writes them. fat32 makes the FAT32 layout (the root folder
// a cluster chain, here one cluster per 16 entries, interleaved with the
// files' clusters so the chain jumps); else FAT12 or FAT16 by the cluster
// count, as the specification (Microsoft's FAT32 File System
// Specification, "FAT Type Determination") says. Its own code, written
// from that specification, not shared with the reader in inventory.
func FATImage(size int64, files map[string][]byte, fat32 bool) ([]byte, error) {
	const bps = 512
	if size < 64*bps || size%bps != 0 {
		return nil, fmt.Errorf("FATImage: size %d: at least 32 KiB, a multiple of 512", size)
	}
	total := size / bps
	img := make([]byte, size)
	b := img[:bps]
	copy(b[0:], []byte{0xEB, 0x3C, 0x90})
	copy(b[3:], "TFLASHFS")
	binary.LittleEndian.PutUint16(b[11:], bps)
	b[13] = 1 // sectors per cluster
	b[16] = 2 // FATs
	b[21] = 0xF8
	b[510], b[511] = 0x55, 0xAA

	names := make([]string, 0, len(files))
	for n := range files {
		names = append(names, n)
	}
	slices.Sort(names)
	var entries [][]byte // 32-byte directory entries, long names first
	for i, n := range names {
		entries = append(entries, dirEntries(n, i)...)
	}

	var rsvd, rootSectors, fatSz, clusters int64
	kind := 32
	if fat32 {
		rsvd = 32
		// FAT32: 4 bytes an entry; solve for the FAT's size.
		for fatSz = 1; ; fatSz++ {
			clusters = total - rsvd - 2*fatSz
			if (clusters+2)*4 <= fatSz*bps {
				break
			}
		}
	} else {
		rsvd, rootSectors = 1, 32 // 512 root entries
		for _, k := range []int{12, 16} {
			for fatSz = 1; ; fatSz++ {
				clusters = total - rsvd - 2*fatSz - rootSectors
				if (clusters+2)*int64(k)/8+1 <= fatSz*bps {
					break
				}
			}
			kind = k
			if k == 12 && clusters < 4085 || k == 16 {
				break
			}
		}
		if kind == 16 && clusters >= 65525 {
			return nil, fmt.Errorf("FATImage: %d bytes is FAT32's size: pass fat32", size)
		}
		if int64(len(entries)) > rootSectors*bps/32 {
			return nil, fmt.Errorf("FATImage: %d root entries, at most %d", len(entries), rootSectors*bps/32)
		}
	}
	if clusters < 16 {
		return nil, fmt.Errorf("FATImage: %d bytes is too small", size)
	}
	binary.LittleEndian.PutUint16(b[14:], uint16(rsvd))
	if total < 0x10000 {
		binary.LittleEndian.PutUint16(b[19:], uint16(total))
	} else {
		binary.LittleEndian.PutUint32(b[32:], uint32(total))
	}
	if fat32 {
		binary.LittleEndian.PutUint32(b[36:], uint32(fatSz))
		binary.LittleEndian.PutUint32(b[44:], 2) // root folder's first cluster
		b[66] = 0x29
		copy(b[71:], "EFI        ")
		copy(b[82:], "FAT32   ")
	} else {
		binary.LittleEndian.PutUint16(b[17:], uint16(rootSectors*bps/32))
		binary.LittleEndian.PutUint16(b[22:], uint16(fatSz))
		b[38] = 0x29
		copy(b[43:], "EFI        ")
		copy(b[54:], fmt.Sprintf("FAT%d   ", kind))
	}

	fat := make([]uint32, clusters+2)
	fat[0], fat[1] = 0x0FFFFFF8, 0x0FFFFFFF
	dataStart := (rsvd + 2*fatSz + rootSectors) * bps
	next := int64(2)
	alloc := func(n int64) int64 { // n contiguous clusters, chained
		first := next
		for c := first; c < first+n; c++ {
			fat[c] = uint32(c + 1)
		}
		fat[first+n-1] = 0x0FFFFFFF
		next += n
		return first
	}
	clusterAt := func(c int64) []byte { return img[dataStart+(c-2)*bps : dataStart+(c-1)*bps] }

	var rootChain []int64
	perCluster := int64(bps / 32)
	if fat32 {
		rootChain = append(rootChain, alloc(1))
	}
	for i, n := range names {
		data := files[n]
		first := int64(0)
		if len(data) > 0 {
			count := (int64(len(data)) + bps - 1) / bps
			if next+count > clusters+2 {
				return nil, fmt.Errorf("FATImage: the files do not fit in %d bytes", size)
			}
			first = alloc(count)
			copy(img[dataStart+(first-2)*bps:], data)
		}
		setFile(entries, i, first, len(data))
		// FAT32: grow the root folder's chain as it fills, between files.
		for fat32 && int64(len(rootChain))*perCluster < int64(len(entries)) && next < clusters+2 {
			c := alloc(1)
			fat[rootChain[len(rootChain)-1]] = uint32(c)
			rootChain = append(rootChain, c)
		}
	}
	if fat32 && int64(len(rootChain))*perCluster < int64(len(entries)) {
		return nil, fmt.Errorf("FATImage: the root folder does not fit in %d bytes", size)
	}

	root := bytes.Join(entries, nil)
	if fat32 {
		for i, c := range rootChain {
			lo := int64(i) * bps
			if lo >= int64(len(root)) {
				break
			}
			copy(clusterAt(c), root[lo:min(lo+bps, int64(len(root)))])
		}
	} else {
		copy(img[(rsvd+2*fatSz)*bps:], root)
	}

	for copyN := range int64(2) {
		f := img[(rsvd+copyN*fatSz)*bps : (rsvd+(copyN+1)*fatSz)*bps]
		for c, v := range fat {
			switch kind {
			case 32:
				binary.LittleEndian.PutUint32(f[c*4:], v&0x0FFFFFFF)
			case 16:
				binary.LittleEndian.PutUint16(f[c*2:], uint16(v))
			case 12:
				v &= 0xFFF
				o := c * 3 / 2
				if c%2 == 0 {
					f[o] = byte(v)
					f[o+1] = f[o+1]&0xF0 | byte(v>>8)
				} else {
					f[o] = f[o]&0x0F | byte(v<<4)
					f[o+1] = byte(v >> 4)
				}
			}
		}
	}
	return img, nil
}

// setFile fills in the short entry of the file-th file in entries (in
// dirEntries' order: each file's long-name entries, then its short one).
func setFile(entries [][]byte, file int, first int64, size int) {
	seen := -1
	for _, e := range entries {
		if e[11] == 0x0F {
			continue
		}
		seen++
		if seen == file {
			binary.LittleEndian.PutUint16(e[20:], uint16(first>>16))
			binary.LittleEndian.PutUint16(e[26:], uint16(first))
			binary.LittleEndian.PutUint32(e[28:], uint32(size))
			return
		}
	}
}

// dirEntries are the directory entries of a file called name (the i-th):
// an 8.3 name as it is (lower case kept through the NT case flags), else
// long-name entries and a ~N short name.
func dirEntries(name string, i int) [][]byte {
	short := make([]byte, 32)
	short[11] = 0x20 // archive
	base, ext, _ := strings.Cut(name, ".")
	if fits83(base, ext) {
		copy(short[0:8], fmt.Sprintf("%-8s", strings.ToUpper(base)))
		copy(short[8:11], fmt.Sprintf("%-3s", strings.ToUpper(ext)))
		if base == strings.ToLower(base) {
			short[12] |= 0x08
		}
		if ext == strings.ToLower(ext) {
			short[12] |= 0x10
		}
		return [][]byte{short}
	}
	alias := strings.ToUpper(strings.NewReplacer("-", "", "_", "").Replace(base))
	if len(alias) > 6 {
		alias = alias[:6]
	}
	alias = fmt.Sprintf("%s~%d", alias, i%9+1)
	copy(short[0:8], fmt.Sprintf("%-8s", alias))
	copy(short[8:11], fmt.Sprintf("%-3s", strings.ToUpper(ext[:min(3, len(ext))])))
	var sum byte
	for _, c := range short[:11] {
		sum = (sum>>1 | sum<<7) + c
	}
	units := utf16.Encode([]rune(name))
	units = append(units, 0)
	for len(units)%13 != 0 {
		units = append(units, 0xFFFF)
	}
	parts := len(units) / 13
	var out [][]byte
	for p := parts; p >= 1; p-- { // the last part first, as on disk
		e := make([]byte, 32)
		e[0] = byte(p)
		if p == parts {
			e[0] |= 0x40
		}
		e[11], e[13] = 0x0F, sum
		chunk := units[(p-1)*13 : p*13]
		offs := []int{1, 3, 5, 7, 9, 14, 16, 18, 20, 22, 24, 28, 30}
		for k, o := range offs {
			binary.LittleEndian.PutUint16(e[o:], chunk[k])
		}
		out = append(out, e)
	}
	return append(out, short)
}

// fits83 reports whether base.ext is an 8.3 name in one case per part.
func fits83(base, ext string) bool {
	ok := func(s string, n int) bool {
		if len(s) > n || s != strings.ToLower(s) && s != strings.ToUpper(s) {
			return false
		}
		for _, c := range s {
			if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_') {
				return false
			}
		}
		return true
	}
	return base != "" && ok(base, 8) && ok(ext, 3) && !strings.Contains(ext, ".")
}
