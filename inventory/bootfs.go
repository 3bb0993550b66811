package inventory

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"unicode/utf16"

	"github.com/talosflash/talosflash/factory"
)

// A card's board, read from what its boot partition holds. The Raspberry
// Pi overlays leave their files in the root folder of the image's EFI
// partition, a FAT filesystem (sbc-raspberrypi installers/rpi_generic and
// installers/rpi_5, src/main.go: both copy into /boot/EFI): rpi_generic the
// Raspberry Pi firmware's boot folder, with the Pi 4's GPU firmware
// start4.elf (current firmware also carries the Pi 5's device trees);
// rpi_5 only the bcm2712 device trees built from the Raspberry Pi kernel,
// no GPU firmware (the Pi 5 loads it from its EEPROM). So start4.elf says
// rpi4, bcm2712-rpi-5-b.dtb without it says rpi5, anything else nothing.

// Boot-partition evidence of each board (names compared ignoring case, as
// FAT does).
const (
	rpi4BootFile = "start4.elf"
	rpi5BootFile = "bcm2712-rpi-5-b.dtb"
)

// BootBoard is what a card's boot partition says of its board.
type BootBoard struct {
	// Board is the board its files are for ("": they say none, or the
	// partition could not be read: Err).
	Board factory.Board
	// Evidence is the files that say so, for a message.
	Evidence string
	// Files is how many files its root folder holds.
	Files int
	// Err is why the partition could not be read (not FAT, out of the
	// card): nothing is said of the board then.
	Err error
}

// BoardOfBootFiles is the board whose overlay leaves files called names
// in the boot partition's root folder ("" when they say none).
func BoardOfBootFiles(names []string) (factory.Board, string) {
	has := func(n string) bool {
		return slices.ContainsFunc(names, func(x string) bool { return strings.EqualFold(x, n) })
	}
	switch {
	case has(rpi4BootFile):
		return factory.BoardRPi4, rpi4BootFile + " (the Pi 4's GPU firmware, which only the " + factory.BoardRPi4.Overlay().Name + " overlay copies)"
	case has(rpi5BootFile):
		return factory.BoardRPi5, rpi5BootFile + " without start4.elf (the " + factory.BoardRPi5.Overlay().Name + " overlay's device trees, no GPU firmware)"
	}
	return "", ""
}

// readBootBoard reads the root folder of the FAT filesystem in the
// partition at off, size bytes long, and what its files say of the board.
func readBootBoard(r io.ReaderAt, off, size int64) *BootBoard {
	names, err := fatRootNames(r, off, size)
	if err != nil {
		return &BootBoard{Err: err}
	}
	b, why := BoardOfBootFiles(names)
	return &BootBoard{Board: b, Evidence: why, Files: len(names)}
}

// maxRootDir bounds the root folder read: 2048 entries, far more than a
// boot partition's root holds (a few dozen files).
const maxRootDir = 64 << 10

// errNotFAT: the partition does not start with a FAT boot sector.
var errNotFAT = errors.New("no FAT filesystem")

// fatRootNames lists the file names in the root folder of the FAT12, 16
// or 32 filesystem at off (size bytes): the boot sector's BIOS parameter
// block, then the root folder (FAT12/16: its fixed region; FAT32: its
// cluster chain through the first FAT), read in bounded pieces. Long
// names are used where their checksum matches their short entry; folders,
// the volume label and deleted entries are left out. Written from
// Microsoft's FAT32 File System Specification (the BPB, "FAT Data
// Structure", "FAT Long Directory Entries").
func fatRootNames(r io.ReaderAt, off, size int64) ([]string, error) {
	bs := make([]byte, 512)
	if size < 512 {
		return nil, errNotFAT
	}
	if _, err := r.ReadAt(bs, off); err != nil {
		return nil, fmt.Errorf("boot sector: %w", err)
	}
	le16 := func(b []byte, o int) int64 { return int64(binary.LittleEndian.Uint16(b[o:])) }
	le32 := func(b []byte, o int) int64 { return int64(binary.LittleEndian.Uint32(b[o:])) }

	bps, spc := le16(bs, 11), int64(bs[13])
	rsvd, nfats, rootEnt := le16(bs, 14), int64(bs[16]), le16(bs, 17)
	total := le16(bs, 19)
	if total == 0 {
		total = le32(bs, 32)
	}
	fatSz, fat32 := le16(bs, 22), false
	if fatSz == 0 {
		fatSz, fat32 = le32(bs, 36), true
	}
	pow2 := func(v int64) bool { return v > 0 && v&(v-1) == 0 }
	switch {
	case bs[510] != 0x55 || bs[511] != 0xAA,
		bps < 512 || bps > 4096 || !pow2(bps), !pow2(spc) || spc > 128,
		rsvd < 1, nfats < 1 || nfats > 4, fatSz < 1, total < 1 || total*bps > size,
		fat32 && rootEnt != 0, !fat32 && rootEnt == 0:
		return nil, errNotFAT
	}

	var dir []byte
	if !fat32 {
		start := (rsvd + nfats*fatSz) * bps
		n := rootEnt * 32
		if n > maxRootDir || start+n > total*bps {
			return nil, fmt.Errorf("%w: root folder out of the filesystem", errNotFAT)
		}
		dir = make([]byte, n)
		if _, err := r.ReadAt(dir, off+start); err != nil {
			return nil, fmt.Errorf("root folder: %w", err)
		}
	} else {
		fatStart := rsvd * bps
		dataStart := (rsvd + nfats*fatSz) * bps
		clusterBytes := bps * spc
		clusters := (total*bps - dataStart) / clusterBytes
		entry := make([]byte, 4)
		for c := le32(bs, 44) & 0x0FFFFFFF; c >= 2 && c < clusters+2; {
			if int64(len(dir))+clusterBytes > maxRootDir {
				break // enough: a boot partition's root is small
			}
			buf := make([]byte, clusterBytes)
			if _, err := r.ReadAt(buf, off+dataStart+(c-2)*clusterBytes); err != nil {
				return nil, fmt.Errorf("root folder: %w", err)
			}
			dir = append(dir, buf...)
			if fatStart+c*4+4 > fatStart+fatSz*bps {
				break
			}
			if _, err := r.ReadAt(entry, off+fatStart+c*4); err != nil {
				return nil, fmt.Errorf("FAT: %w", err)
			}
			c = le32(entry, 0) & 0x0FFFFFFF // >= 0x0FFFFFF8: the chain's end
		}
		if len(dir) == 0 {
			return nil, fmt.Errorf("%w: no root folder", errNotFAT)
		}
	}
	return dirNames(dir), nil
}

// dirNames are the files of a FAT folder's entries (32 bytes each).
func dirNames(dir []byte) []string {
	var (
		names []string
		long  []uint16 // the long name gathered so far, 13 units an entry
		sum   byte
		want  int // the next long-name entry's ordinal (0: none pending)
	)
	for i := 0; i+32 <= len(dir); i += 32 {
		e := dir[i : i+32]
		switch {
		case e[0] == 0x00:
			return names // the folder's end
		case e[0] == 0xE5:
			long, want = nil, 0
			continue
		case e[11]&0x3F == 0x0F: // a long-name part, last part first
			ord := int(e[0] & 0x3F)
			if e[0]&0x40 != 0 {
				long, sum, want = make([]uint16, ord*13), e[13], ord
			}
			if ord < 1 || ord != want || e[13] != sum || len(long) < ord*13 {
				long, want = nil, 0 // an interrupted long name: the short one stands
				continue
			}
			k := (ord - 1) * 13
			for _, o := range []int{1, 3, 5, 7, 9, 14, 16, 18, 20, 22, 24, 28, 30} {
				long[k] = binary.LittleEndian.Uint16(e[o:])
				k++
			}
			want--
			continue
		}
		name := shortName(e)
		if want == 0 && long != nil && sum == shortSum(e) {
			if end := slices.Index(long, 0); end >= 0 {
				long = long[:end]
			}
			name = string(utf16.Decode(long))
		}
		long, want = nil, 0
		if e[11]&(0x08|0x10) != 0 || name == "" { // volume label, folder
			continue
		}
		names = append(names, name)
	}
	return names
}

// shortName is an 8.3 entry's name, lower case where its NT case flags
// say so.
func shortName(e []byte) string {
	base := strings.TrimRight(string(e[0:8]), " ")
	ext := strings.TrimRight(string(e[8:11]), " ")
	if e[0] == 0x05 {
		base = "\xe5" + base[1:]
	}
	if e[12]&0x08 != 0 {
		base = strings.ToLower(base)
	}
	if e[12]&0x10 != 0 {
		ext = strings.ToLower(ext)
	}
	if ext == "" {
		return base
	}
	return base + "." + ext
}

// shortSum is the checksum of an entry's 8.3 name that its long-name
// entries carry.
func shortSum(e []byte) byte {
	var s byte
	for _, c := range e[:11] {
		s = (s>>1 | s<<7) + c
	}
	return s
}
