package imagetest

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"os"
	"unicode/utf16"
)

// Part is one partition of a disk built by WriteGPTDisk.
type Part struct {
	Name string
	Size int64 // bytes, a multiple of 512
	// Data, if set, is written at the start of the partition.
	Data []byte
}

// TalosParts is a small Talos-like layout: EFI, BOOT, then a 1 MiB META
// (its size in Talos images, pkg/machinery/imager/quirks METASize) and STATE.
func TalosParts() []Part {
	return []Part{
		{Name: "EFI", Size: 2 << 20},
		{Name: "BOOT", Size: 2 << 20},
		{Name: "META", Size: 1 << 20},
		{Name: "STATE", Size: 1 << 20},
	}
}

// WriteGPTDisk writes a sparse disk image of size bytes at path: protective
// MBR, primary GPT at LBA 1 (entries at LBA 2), the partitions from 1 MiB
// on, and a correct backup GPT (entries, then header at the last LBA), all
// with their CRC32s, 512-byte sectors. It returns each partition's byte
// offset. Its own code, written from the UEFI layout, not shared with the
// reader in imaging/gpt.
func WriteGPTDisk(path string, size int64, parts []Part) ([]int64, error) {
	writes, offsets, err := gptLayout(size, parts)
	if err != nil {
		return nil, err
	}

	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}

	if err := f.Truncate(size); err != nil {
		f.Close()
		return nil, err
	}

	for _, w := range writes {
		if _, err := f.WriteAt(w.b, w.off); err != nil {
			f.Close()
			return nil, err
		}
	}

	return offsets, f.Close()
}

// TalosRaw is Raw(size, seed) (the same data, so it compresses alike) with
// a partition table like a Talos metal image's: EFI, BOOT, a blank 1 MiB
// META (as Talos builds it: zeros) and EPHEMERAL, and a correct backup GPT.
// A node's META can be written onto a card flashed with it. size >= 8 MiB.
func TalosRaw(size, seed int64) ([]byte, error) {
	const mib = 1 << 20

	if size < 8*mib || size%512 != 0 {
		return nil, fmt.Errorf("TalosRaw: size %d: at least 8 MiB, a multiple of 512", size)
	}

	raw, err := Raw(size, seed)
	if err != nil {
		return nil, err
	}

	avail := size - mib - mib - 33*512 // partitions start at 1 MiB; META; backup
	efi := avail / 8 / 512 * 512
	boot := avail / 4 / 512 * 512
	rest := (avail - efi - boot) / 512 * 512
	parts := []Part{
		{Name: "EFI", Size: efi},
		{Name: "BOOT", Size: boot},
		{Name: "META", Size: mib},
		{Name: "EPHEMERAL", Size: rest},
	}

	writes, offsets, err := gptLayout(size, parts)
	if err != nil {
		return nil, err
	}

	// The old table's sectors and the META partition become zeros first.
	clear(raw[:mib])
	clear(raw[size-33*512:])
	clear(raw[offsets[2] : offsets[2]+mib])

	for _, w := range writes {
		copy(raw[w.off:], w.b)
	}

	return raw, nil
}

// NewTalos is New on TalosRaw: a fixture whose image takes a node's META.
func NewTalos(t TB, size, seed, blockSize int64) *Fixture {
	t.Helper()

	raw, err := TalosRaw(size, seed)
	if err != nil {
		t.Fatalf("%v", err)
	}

	z, err := XZBytes(raw, blockSize)
	if err != nil {
		t.Fatalf("%v", err)
	}

	return &Fixture{Size: size, Seed: seed, Raw: raw, XZ: z, SHA256: sha256Hex(raw)}
}

type diskWrite struct {
	b   []byte
	off int64
}

func gptLayout(size int64, parts []Part) ([]diskWrite, []int64, error) {
	const ss = 512

	if size%ss != 0 || size < 2<<20 {
		return nil, nil, fmt.Errorf("disk size %d: not a multiple of 512 or under 2 MiB", size)
	}

	total := uint64(size / ss)
	entries := make([]byte, 128*128)
	offsets := make([]int64, len(parts))
	lba := uint64(2048)

	for i, p := range parts {
		if p.Size%ss != 0 || p.Size <= 0 {
			return nil, nil, fmt.Errorf("partition %s: size %d", p.Name, p.Size)
		}

		last := lba + uint64(p.Size/ss) - 1
		if last > total-34 {
			return nil, nil, fmt.Errorf("partition %s does not fit", p.Name)
		}

		e := entries[i*128:]
		// Linux filesystem data type 0FC63DAF-8483-4772-8E79-3D69D8477DE4.
		copy(e[0:16], []byte{0xAF, 0x3D, 0xC6, 0x0F, 0x83, 0x84, 0x72, 0x47, 0x8E, 0x79, 0x3D, 0x69, 0xD8, 0x47, 0x7D, 0xE4})
		for j := range 16 {
			e[16+j] = byte(i*16 + j + 1)
		}

		binary.LittleEndian.PutUint64(e[32:], lba)
		binary.LittleEndian.PutUint64(e[40:], last)

		for j, c := range utf16.Encode([]rune(p.Name)) {
			binary.LittleEndian.PutUint16(e[56+2*j:], c)
		}

		offsets[i] = int64(lba) * ss
		lba = last + 1
	}

	writes := tableWrites(total, entries, 34, total-34)

	for i, p := range parts {
		if len(p.Data) > 0 {
			writes = append(writes, diskWrite{p.Data, offsets[i]})
		}
	}

	return writes, offsets, nil
}

// Entry is one partition entry of GPTRaw, placed where it says (inclusive
// LBAs, 512-byte sectors), however hostile.
type Entry struct {
	Name        string
	First, Last uint64
}

// GPTRaw is Raw(size, seed) with a GPT whose entries are ents as given
// (in that order, LBAs unchecked) and whose headers name the usable LBAs
// firstUsable..lastUsable: a valid table (CRCs, backup) describing any
// layout, for tests of what a flash does with a hostile one. The
// partitions' data is left as Raw made it, except that every entry named
// META and lying inside the image is zeroed (a blank store) unless that
// would overwrite a table.
func GPTRaw(size, seed int64, ents []Entry, firstUsable, lastUsable uint64) ([]byte, error) {
	const ss = 512

	if size%ss != 0 || size < 2<<20 || len(ents) > 128 {
		return nil, fmt.Errorf("GPTRaw: size %d, %d entries", size, len(ents))
	}

	raw, err := Raw(size, seed)
	if err != nil {
		return nil, err
	}

	total := uint64(size / ss)
	entries := make([]byte, 128*128)

	for i, p := range ents {
		e := entries[i*128:]
		copy(e[0:16], []byte{0xAF, 0x3D, 0xC6, 0x0F, 0x83, 0x84, 0x72, 0x47, 0x8E, 0x79, 0x3D, 0x69, 0xD8, 0x47, 0x7D, 0xE4})
		for j := range 16 {
			e[16+j] = byte(i*16 + j + 1)
		}

		binary.LittleEndian.PutUint64(e[32:], p.First)
		binary.LittleEndian.PutUint64(e[40:], p.Last)

		for j, c := range utf16.Encode([]rune(p.Name)) {
			binary.LittleEndian.PutUint16(e[56+2*j:], c)
		}

		if p.Name == "META" && p.First <= p.Last && p.Last < total {
			clear(raw[p.First*ss : (p.Last+1)*ss])
		}
	}

	clear(raw[:34*ss])
	clear(raw[size-33*ss:])

	for _, w := range tableWrites(total, entries, firstUsable, lastUsable) {
		copy(raw[w.off:], w.b)
	}

	return raw, nil
}

// tableWrites is the protective MBR and both GPT copies of a disk of total
// 512-byte sectors with the 128-entry array entries.
func tableWrites(total uint64, entries []byte, firstUsable, lastUsable uint64) []diskWrite {
	const ss = 512

	entryCRC := crc32.ChecksumIEEE(entries)

	hdr := func(my, alt, entryLBA uint64) []byte {
		h := make([]byte, ss)
		copy(h, "EFI PART")
		binary.LittleEndian.PutUint32(h[8:], 0x00010000)
		binary.LittleEndian.PutUint32(h[12:], 92)
		binary.LittleEndian.PutUint64(h[24:], my)
		binary.LittleEndian.PutUint64(h[32:], alt)
		binary.LittleEndian.PutUint64(h[40:], firstUsable)
		binary.LittleEndian.PutUint64(h[48:], lastUsable)
		copy(h[56:72], "talosflash-disk!")
		binary.LittleEndian.PutUint64(h[72:], entryLBA)
		binary.LittleEndian.PutUint32(h[80:], 128)
		binary.LittleEndian.PutUint32(h[84:], 128)
		binary.LittleEndian.PutUint32(h[88:], entryCRC)
		binary.LittleEndian.PutUint32(h[16:], crc32.ChecksumIEEE(h[:92]))

		return h
	}

	mbr := make([]byte, ss)
	pe := mbr[446:]
	pe[4] = 0xEE
	binary.LittleEndian.PutUint32(pe[8:], 1)
	binary.LittleEndian.PutUint32(pe[12:], uint32(min(total-1, 0xFFFFFFFF)))
	mbr[510], mbr[511] = 0x55, 0xAA

	return []diskWrite{
		{mbr, 0},
		{hdr(1, total-1, 2), ss},
		{entries, 2 * ss},
		{entries, int64(total-33) * ss},
		{hdr(total-1, 1, total-33), int64(total-1) * ss},
	}
}

// Layout is a GPT layout for GPTRaw: its entries and the headers' usable
// LBAs.
type Layout struct {
	Name                    string
	Entries                 []Entry
	FirstUsable, LastUsable uint64
	// Why is what a refusal of the layout's META names.
	Why string
}

// HostileSize is the size of HostileMETA's images (16384 sectors, usable
// 34..16350 in the standard layout).
const HostileSize = 8 << 20

// HostileMETA are layouts of a HostileSize image whose META a flash with
// a node's values must refuse before any card is touched: each would have
// the node's values written over a table, another partition or outside the
// image's layout.
func HostileMETA() []Layout {
	efi := Entry{Name: "EFI", First: 2048, Last: 4095}
	eph := Entry{Name: "EPHEMERAL", First: 6144, Last: 16350}
	meta := func(first, last uint64) Entry { return Entry{Name: "META", First: first, Last: last} }

	return []Layout{
		{"META over the primary entry array", []Entry{meta(3, 1028), efi, eph}, 34, 16350, "usable LBAs"},
		{"META over the primary entry array, usable from LBA 3", []Entry{meta(3, 1028), efi, eph}, 3, 16350, "GPT entry array"},
		{"META over the primary header", []Entry{meta(1, 2048), efi, eph}, 1, 16350, "GPT header"},
		{"META at LBA 0", []Entry{meta(0, 2047), efi, eph}, 0, 16350, "LBA 0"},
		{"META before FirstUsableLBA", []Entry{meta(40, 2047), efi, eph}, 2048, 16350, "usable LBAs"},
		{"META after LastUsableLBA", []Entry{efi, meta(14000, 16383)}, 34, 16350, "usable LBAs"},
		{"META over the backup array and header", []Entry{efi, meta(14000, 16383)}, 34, 16383, "GPT"},
		{"META over EPHEMERAL", []Entry{efi, meta(4096, 6143), {Name: "EPHEMERAL", First: 6000, Last: 16350}}, 34, 16350, `"EPHEMERAL"`},
		{"META inside EFI", []Entry{{Name: "EFI", First: 2048, Last: 8191}, meta(4096, 6143), eph}, 34, 16350, `"EFI"`},
		{"usable LBAs past the image's end", []Entry{efi, meta(4096, 6143), eph}, 34, 16393, "outside the disk"},
		{"META inside an EPHEMERAL that runs past the image's end", []Entry{efi, meta(6144, 8191), {Name: "EPHEMERAL", First: 6000, Last: 30000}}, 34, 16350, `"EPHEMERAL"`},
		{"two META partitions", []Entry{efi, meta(4096, 6143), meta(8192, 10239)}, 34, 16350, "2 partitions labelled META"},
		{"META too small", []Entry{efi, meta(4096, 4096+1024), eph}, 34, 16350, "at least"},
		{"no META", []Entry{efi, eph}, 34, 16350, `"EFI", "EPHEMERAL"`},
	}
}

// GoodMETA is HostileMETA's layout with META where Talos images put it.
func GoodMETA() Layout {
	return Layout{"META between EFI and EPHEMERAL", []Entry{{Name: "EFI", First: 2048, Last: 4095}, {Name: "META", First: 4096, Last: 6143}, {Name: "EPHEMERAL", First: 6144, Last: 16350}}, 34, 16350, ""}
}

// Raw is GPTRaw of a HostileSize image with the layout.
func (l Layout) Raw(seed int64) ([]byte, error) {
	return GPTRaw(HostileSize, seed, l.Entries, l.FirstUsable, l.LastUsable)
}
