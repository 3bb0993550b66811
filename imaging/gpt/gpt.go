// Package gpt reads a GUID partition table from a disk or disk image: the
// primary header at LBA 1 and the backup at the last LBA, each with its
// header and entry-array CRC32 checked, and finds a partition by its label
// (Talos names its partitions EFI, BIOS, BOOT, META, STATE, EPHEMERAL).
//
// It only reads, through an io.ReaderAt, and every read is bounded by the
// header's own fields, checked before use: a hostile image cannot make it
// allocate or read more than MaxEntryBytes for the entries.
package gpt

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"strings"
	"unicode/utf16"
)

// MaxEntryBytes bounds the partition entry array (the usual one is 16 KiB:
// 128 entries of 128 bytes).
const MaxEntryBytes = 1 << 20

// signature starts every GPT header.
const signature = "EFI PART"

// ErrNoGPT: neither header is a valid GPT header (the disk has none, an MBR
// only, or both copies are damaged).
var ErrNoGPT = errors.New("no valid GPT (GUID partition table)")

// Partition is one used entry of the table.
type Partition struct {
	Index    int    // 1-based entry number, as Linux numbers partitions (sdX1, p1)
	Name     string // the label, e.g. "META"
	Type     string // partition type GUID, in the usual text form
	GUID     string // unique partition GUID
	FirstLBA uint64
	LastLBA  uint64 // inclusive
	Offset   int64  // byte offset on the disk
	Size     int64  // bytes
}

// Table is what was read.
type Table struct {
	SectorSize int64
	DiskGUID   string
	Partitions []Partition
	// Primary and Backup tell which copies are valid; Problems says what is
	// wrong with an invalid one (the table is used as long as one is good).
	Primary, Backup bool
	Problems        []string
	// Header is the header of the copy used (the primary when valid): where
	// the tables lie and which LBAs are usable, for placement checks.
	Header Header
}

// Find returns the partition labelled label (exact, as Talos compares).
func (t *Table) Find(label string) (Partition, bool) {
	for _, p := range t.Partitions {
		if p.Name == label {
			return p, true
		}
	}

	return Partition{}, false
}

// Labels lists the partition labels in table order.
func (t *Table) Labels() []string {
	out := make([]string, len(t.Partitions))
	for i, p := range t.Partitions {
		out[i] = p.Name
	}

	return out
}

// Read reads the table of a disk of size bytes. It tries 512-byte sectors,
// then 4096 (the header sits at LBA 1 either way). The primary copy is used
// when valid, else the backup; a disk with neither is ErrNoGPT.
func Read(r io.ReaderAt, size int64) (*Table, error) {
	var problems []string

	for _, ss := range []int64{512, 4096} {
		if size < 3*ss {
			continue
		}

		t, err := readWithSector(r, size, ss)
		if err == nil {
			return t, nil
		}

		if !errors.Is(err, errNoSignature) {
			problems = append(problems, err.Error())
		}
	}

	if len(problems) > 0 {
		return nil, fmt.Errorf("%w: %s", ErrNoGPT, strings.Join(problems, "; "))
	}

	return nil, ErrNoGPT
}

var errNoSignature = errors.New("no GPT signature")

// Header is one GPT header, as ParseHeader read and checked it.
type Header struct {
	MyLBA, AltLBA         uint64
	FirstUsable           uint64
	LastUsable            uint64
	DiskGUID              [16]byte
	EntryLBA              uint64
	EntryCount, EntrySize uint32
	EntryCRC              uint32
}

// EntryBytes is the size of the partition entry array the header names.
func (h Header) EntryBytes() int64 { return int64(h.EntryCount) * int64(h.EntrySize) }

// ParseHeader reads and checks the header in sector, the sector at LBA
// lba: the signature, the header size, its CRC32, that it says it is at
// lba, and an entry array of sane shape (at most MaxEntryBytes). Where the
// disk ends is the caller's to check. Both the table reader here and the
// flash's check of a decoded stream use it.
func ParseHeader(sector []byte, lba uint64) (Header, error) {
	var hd Header
	if len(sector) < 92 || string(sector[:8]) != signature {
		return hd, errNoSignature
	}

	hsize := binary.LittleEndian.Uint32(sector[12:])
	if hsize < 92 || int64(hsize) > int64(len(sector)) {
		return hd, fmt.Errorf("header at LBA %d: header size %d out of range", lba, hsize)
	}

	h := make([]byte, hsize)
	copy(h, sector[:hsize])
	want := binary.LittleEndian.Uint32(h[16:])
	binary.LittleEndian.PutUint32(h[16:], 0)

	if got := crc32.ChecksumIEEE(h); got != want {
		return hd, fmt.Errorf("header at LBA %d: CRC32 %08x, header says %08x", lba, got, want)
	}

	hd.MyLBA = binary.LittleEndian.Uint64(sector[24:])
	hd.AltLBA = binary.LittleEndian.Uint64(sector[32:])
	hd.FirstUsable = binary.LittleEndian.Uint64(sector[40:])
	hd.LastUsable = binary.LittleEndian.Uint64(sector[48:])
	copy(hd.DiskGUID[:], sector[56:72])
	hd.EntryLBA = binary.LittleEndian.Uint64(sector[72:])
	hd.EntryCount = binary.LittleEndian.Uint32(sector[80:])
	hd.EntrySize = binary.LittleEndian.Uint32(sector[84:])
	hd.EntryCRC = binary.LittleEndian.Uint32(sector[88:])

	if hd.MyLBA != lba {
		return hd, fmt.Errorf("header at LBA %d says it is at LBA %d", lba, hd.MyLBA)
	}

	if hd.EntrySize < 128 || hd.EntrySize%8 != 0 {
		return hd, fmt.Errorf("header at LBA %d: entry size %d invalid", lba, hd.EntrySize)
	}

	if total := hd.EntryBytes(); total == 0 || total > MaxEntryBytes {
		return hd, fmt.Errorf("header at LBA %d: %d entries of %d bytes out of range", lba, hd.EntryCount, hd.EntrySize)
	}

	return hd, nil
}

func readWithSector(r io.ReaderAt, size, ss int64) (*Table, error) {
	lastLBA := uint64(size/ss) - 1

	t := &Table{SectorSize: ss}

	primary, perr := readCopy(r, ss, 1, lastLBA)

	backup, berr := readCopy(r, ss, lastLBA, lastLBA)
	if berr != nil && perr == nil && primary.hdr.AltLBA < lastLBA {
		// An image written onto a larger card: its backup is where the
		// image ended, which the primary names.
		backup, berr = readCopy(r, ss, primary.hdr.AltLBA, lastLBA)
	}

	if errors.Is(perr, errNoSignature) && errors.Is(berr, errNoSignature) {
		return nil, errNoSignature
	}

	t.Primary, t.Backup = perr == nil, berr == nil
	if perr != nil {
		t.Problems = append(t.Problems, "primary: "+perr.Error())
	}

	if berr != nil {
		t.Problems = append(t.Problems, "backup: "+berr.Error())
	}

	use := primary
	if perr != nil {
		if berr != nil {
			return nil, fmt.Errorf("%d-byte sectors: primary: %v; backup: %v", ss, perr, berr)
		}

		use = backup
	}

	if perr == nil && berr == nil && !bytes.Equal(primary.entries, backup.entries) {
		t.Problems = append(t.Problems, "primary and backup partition entries differ (the primary is used)")
	}

	t.Header = use.hdr
	t.DiskGUID = guidString(use.hdr.DiskGUID[:])
	t.Partitions = parseEntries(use.entries, int(use.hdr.EntrySize), ss, lastLBA)

	return t, nil
}

type gptCopy struct {
	hdr     Header
	entries []byte
}

func readCopy(r io.ReaderAt, ss int64, lba, lastLBA uint64) (*gptCopy, error) {
	buf := make([]byte, ss)
	if _, err := r.ReadAt(buf, int64(lba)*ss); err != nil {
		return nil, fmt.Errorf("read header at LBA %d: %w", lba, err)
	}

	hd, err := ParseHeader(buf, lba)
	if err != nil {
		return nil, err
	}

	total := uint64(hd.EntryBytes())
	entrySectors := (total + uint64(ss) - 1) / uint64(ss)
	if hd.EntryLBA < 2 || hd.EntryLBA > lastLBA || lastLBA-hd.EntryLBA+1 < entrySectors {
		return nil, fmt.Errorf("header at LBA %d: entries at LBA %d outside the disk", lba, hd.EntryLBA)
	}

	if hd.FirstUsable > hd.LastUsable || hd.LastUsable > lastLBA {
		return nil, fmt.Errorf("header at LBA %d: usable LBAs %d..%d outside the disk", lba, hd.FirstUsable, hd.LastUsable)
	}

	entries := make([]byte, total)
	if _, err := r.ReadAt(entries, int64(hd.EntryLBA)*ss); err != nil {
		return nil, fmt.Errorf("read entries at LBA %d: %w", hd.EntryLBA, err)
	}

	if got := crc32.ChecksumIEEE(entries); got != hd.EntryCRC {
		return nil, fmt.Errorf("entries at LBA %d: CRC32 %08x, header says %08x", hd.EntryLBA, got, hd.EntryCRC)
	}

	return &gptCopy{hdr: hd, entries: entries}, nil
}

func parseEntries(b []byte, esz int, ss int64, lastLBA uint64) []Partition {
	var out []Partition

	for i := 0; (i+1)*esz <= len(b); i++ {
		e := b[i*esz : (i+1)*esz]
		if allZero(e[:16]) { // unused entry
			continue
		}

		first := binary.LittleEndian.Uint64(e[32:])
		last := binary.LittleEndian.Uint64(e[40:])

		if last < first || last > lastLBA {
			continue // not addressable on this disk: not a partition to use
		}

		out = append(out, Partition{
			Index:    i + 1,
			Name:     utf16Name(e[56:128]),
			Type:     guidString(e[0:16]),
			GUID:     guidString(e[16:32]),
			FirstLBA: first,
			LastLBA:  last,
			Offset:   int64(first) * ss,
			Size:     int64(last-first+1) * ss,
		})
	}

	return out
}

func utf16Name(b []byte) string {
	u := make([]uint16, 0, len(b)/2)

	for i := 0; i+1 < len(b); i += 2 {
		c := binary.LittleEndian.Uint16(b[i:])
		if c == 0 {
			break
		}

		u = append(u, c)
	}

	return string(utf16.Decode(u))
}

func allZero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}

	return true
}

// guidString formats a GUID as GPT stores it (the first three fields little-endian).
func guidString(b []byte) string {
	return fmt.Sprintf("%08X-%04X-%04X-%X-%X",
		binary.LittleEndian.Uint32(b[0:4]),
		binary.LittleEndian.Uint16(b[4:6]),
		binary.LittleEndian.Uint16(b[6:8]),
		b[8:10], b[10:16])
}
