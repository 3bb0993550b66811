package meta

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"

	"github.com/talosflash/talosflash/imaging/gpt"
	"github.com/talosflash/talosflash/internal/printable"
)

// PartitionLabel is the GPT label of the META partition
// (pkg/machinery/constants MetaPartitionLabel).
const PartitionLabel = "META"

// Why a card's META cannot be written. Each is checked before any write.
var (
	ErrNoGPT    = gpt.ErrNoGPT
	ErrNoMETA   = errors.New("no partition labelled META")
	ErrTooSmall = errors.New("META partition too small for the Talos ADV")
	// ErrForeign: neither ADV copy is valid and the area is not blank: the
	// partition holds something else, which a write would destroy.
	ErrForeign = errors.New("META partition holds data that is not a Talos ADV")
	// ErrReadBack: what was read after the write is not what was written.
	ErrReadBack = errors.New("META read back differs from what was written")
)

// PartitionNames lists tab's partition names as text shows them: each
// escaped (printable.String: a card's names are the card's text, and a
// crafted one would clear a screen or forge a line) and quoted. Data (JSON)
// takes the names from tab as they are.
func PartitionNames(tab *gpt.Table) string {
	names := make([]string, len(tab.Partitions))
	for i, p := range tab.Partitions {
		names[i] = partitionName(p.Name)
	}

	return strings.Join(names, ", ")
}

// partitionName is one partition's name as text shows it.
func partitionName(name string) string { return `"` + printable.String(name) + `"` }

// Store is a disk's or image's META store as ReadStore found it: the
// partition table, the META partition, the ADV it holds and which copy
// was valid (Status).
type Store struct {
	Table     *gpt.Table
	Partition gpt.Partition // the META partition
	ADV       *ADV
	Status    Status
}

// Locate reads the partition table and finds a usable META partition.
func Locate(r io.ReaderAt, size int64) (*gpt.Table, gpt.Partition, error) {
	tab, err := gpt.Read(r, size)
	if err != nil {
		return nil, gpt.Partition{}, fmt.Errorf("partition table: %w", err)
	}

	p, ok := tab.Find(PartitionLabel)
	if !ok {
		return tab, gpt.Partition{}, fmt.Errorf("%w (partitions: %s): not a Talos metal image", ErrNoMETA, PartitionNames(tab))
	}

	if p.Size < MinPartition {
		return tab, p, fmt.Errorf("%w: %d bytes, at least %d needed", ErrTooSmall, p.Size, MinPartition)
	}

	if p.Offset+p.Size > size {
		return tab, p, fmt.Errorf("META partition (%d+%d) runs past the end of the disk (%d bytes)", p.Offset, p.Size, size)
	}

	return tab, p, nil
}

// ReadStore reads the partition table and the META ADV: Size bytes, nothing else.
func ReadStore(r io.ReaderAt, size int64) (*Store, error) {
	tab, p, err := Locate(r, size)
	if err != nil {
		return &Store{Table: tab, Partition: p}, err
	}

	buf := make([]byte, Size)
	if _, err := r.ReadAt(buf, p.Offset); err != nil {
		return nil, fmt.Errorf("read META at %d: %w", p.Offset, err)
	}

	a, st, err := Parse(buf)
	if err != nil {
		return nil, err
	}

	return &Store{Table: tab, Partition: p, ADV: a, Status: st}, nil
}

// Disk is what WriteTag writes through: an open card or image.
type Disk interface {
	io.ReaderAt
	io.WriterAt
	Sync() error
}

// Written is the outcome of WriteTag or WriteTags.
type Written struct {
	Partition gpt.Partition
	Kept      []uint8 // keys that were already there and are kept
	Replaced  bool    // a key written was there and its value replaced
	// ReplacedKeys are the written keys that were there before.
	ReplacedKeys []uint8
}

// WriteTag sets key to value in the META partition of d (size bytes),
// keeping every other tag: copy 1, sync, copy 2, sync, then both read back
// (through dropCache, so from the medium where the OS allows) and compared
// byte for byte. A disk without GPT, without META, with a META too small,
// or with foreign data in it is refused before anything is written.
func WriteTag(d Disk, size int64, key uint8, value []byte) (*Written, error) {
	return WriteTags(d, size, []Tag{{Key: key, Value: value}})
}

// WriteTags is WriteTag for several keys at once: one read, one write of
// each copy, one read-back.
func WriteTags(d Disk, size int64, tags []Tag) (*Written, error) {
	return WriteTagsWithin(d, size, 0, tags)
}

// WriteTagsWithin is WriteTags on a card flashed with an image of
// imageSize bytes (0: the whole disk is the image): META must lie inside
// the image's own layout (CheckPlace) and end inside those bytes, else the
// card is refused before anything is written.
func WriteTagsWithin(d Disk, size, imageSize int64, tags []Tag) (*Written, error) {
	card, err := ReadStore(d, size)
	if err != nil {
		return nil, err
	}

	if _, err := CheckPlace(card.Table, imageSize); err != nil {
		return nil, err
	}

	if err := CheckStore(card, tags); err != nil {
		return nil, err
	}

	w := &Written{Partition: card.Partition}
	for _, t := range card.ADV.Tags() {
		if slices.ContainsFunc(tags, func(n Tag) bool { return n.Key == t.Key }) {
			w.ReplacedKeys = append(w.ReplacedKeys, t.Key)
		} else {
			w.Kept = append(w.Kept, t.Key)
		}
	}

	w.Replaced = len(w.ReplacedKeys) > 0

	for _, t := range tags {
		if err := card.ADV.Set(t.Key, t.Value); err != nil {
			return nil, err
		}
	}

	c, err := card.ADV.Copy()
	if err != nil {
		return nil, err
	}

	// One copy at a time, each synced: an interrupted write leaves one
	// valid copy (the old second or the new first), and Talos falls back.
	for i, off := range []int64{card.Partition.Offset, card.Partition.Offset + CopySize} {
		if _, err := d.WriteAt(c, off); err != nil {
			return nil, fmt.Errorf("write META copy %d: %w", i+1, err)
		}

		if err := d.Sync(); err != nil {
			return nil, fmt.Errorf("sync META copy %d: %w", i+1, err)
		}
	}

	dropCache(d, card.Partition.Offset, Size)

	back := make([]byte, Size)
	if _, err := d.ReadAt(back, card.Partition.Offset); err != nil {
		return nil, fmt.Errorf("read back META: %w", err)
	}

	if !bytes.Equal(back[:CopySize], c) || !bytes.Equal(back[CopySize:], c) {
		return nil, ErrReadBack
	}

	got, st, err := Parse(back)
	if err != nil || st.Copy1 != nil || st.Copy2 != nil {
		return nil, fmt.Errorf("%w: %v %v %v", ErrReadBack, err, st.Copy1, st.Copy2)
	}

	for _, t := range tags {
		if v, ok := got.Get(t.Key); !ok || !bytes.Equal(v, t.Value) {
			return nil, ErrReadBack
		}
	}

	return w, nil
}

// WriteTagPath opens path (an image file, or a card the caller has checked
// is safe to write), writes key with WriteTag and closes it. The caller is
// responsible for the device safety rules (imaging/devices).
func WriteTagPath(path string, key uint8, value []byte) (*Written, error) {
	return WriteTagsPath(path, []Tag{{Key: key, Value: value}})
}

// WriteTagsPath is WriteTagPath for several keys (WriteTags).
func WriteTagsPath(path string, tags []Tag) (*Written, error) {
	return WriteTagsPathWithin(path, 0, tags)
}

// WriteTagsPathWithin is WriteTagsPath with WriteTagsWithin's image size.
func WriteTagsPathWithin(path string, imageSize int64, tags []Tag) (*Written, error) {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", path, err)
	}

	size, err := f.Seek(0, io.SeekEnd) // also a block device's size
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("size of %s: %w", path, err)
	}

	w, err := WriteTagsWithin(f, size, imageSize, tags)
	if cerr := f.Close(); err == nil && cerr != nil {
		return nil, fmt.Errorf("close %s: %w", path, cerr)
	}

	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}

	return w, nil
}

// ReadStorePath opens path read-only and reads its table and META.
func ReadStorePath(path string) (*Store, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()

	size, err := f.Seek(0, io.SeekEnd)
	if err != nil {
		return nil, fmt.Errorf("size of %s: %w", path, err)
	}

	return ReadStore(f, size)
}

// HeadSize is how much of the start of a disk image CheckHead needs: the
// protective MBR, the primary GPT header and a 128-entry array, with
// 512- or 4096-byte sectors.
const HeadSize = 32 << 10

// CheckHead tells, from the first HeadSize bytes of a decoded image of
// imageSize bytes (<= 0: unknown), whether a node's META can later be
// written onto a card flashed with it: a valid primary GPT whose META lies
// inside the image's own layout (CheckPlace). A flash with an inventory
// calls it before the card is touched; where META's own bytes are in head,
// foreign data there is refused too. WriteTagsWithin checks all of it
// again on the card.
func CheckHead(head []byte, imageSize int64) (gpt.Partition, error) {
	return CheckHeadFor(head, imageSize)
}

// CheckHeadFor is CheckHead for a flash that writes each of tagSets onto
// a card: where the image's own store is in head, each set must fit next
// to the tags it already holds (those are kept).
func CheckHeadFor(head []byte, imageSize int64, tagSets ...[]Tag) (gpt.Partition, error) {
	s, err := ImageStore(head, imageSize, nil)
	if err != nil {
		return s.Partition, err
	}

	if s.ADV == nil {
		return s.Partition, nil // the store's bytes come later: WriteTagsWithin checks them on the card
	}

	for _, tags := range tagSets {
		if err := CheckStore(s, tags); err != nil {
			return s.Partition, err
		}
	}

	return s.Partition, nil
}

// ImageStore is the META store of a decoded image of imageSize bytes (<= 0:
// unknown) as a flash sees it before any card is touched: the partition
// table and META's place from head, the image's first bytes (CheckHead's
// checks), then the store's Size bytes, from head where they lie in it,
// else through at, which reads the decoded image at any offset (a local
// image file). With neither (at nil: a stream, whose store lies beyond
// head) the Store has no ADV: its content is known only on the card
// (WriteTagsWithin). An image that ends before its store is ErrPlace;
// at's other errors are returned as they are.
func ImageStore(head []byte, imageSize int64, at io.ReaderAt) (*Store, error) {
	tab, p, err := headPlace(head, imageSize)
	s := &Store{Table: tab, Partition: p}
	if err != nil {
		return s, err
	}

	var buf []byte
	switch {
	case p.Offset+Size <= int64(len(head)):
		buf = head[p.Offset : p.Offset+Size]
	case at == nil:
		return s, nil
	default:
		buf = make([]byte, Size)
		n, err := at.ReadAt(buf, p.Offset)
		if n < Size && (err == nil || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF)) {
			return s, fmt.Errorf("%w: the image ends at byte %d, inside its META store (bytes %d-%d)", ErrPlace, p.Offset+int64(n), p.Offset, p.Offset+Size-1)
		}
		if n < Size {
			return s, fmt.Errorf("read the image's META store at byte %d: %w", p.Offset, err)
		}
	}

	if s.ADV, s.Status, err = Parse(buf); err != nil {
		return s, err
	}

	return s, nil
}

// CheckStore is the one check of a META store's content before tags are
// written into it, the same on the card (WriteTagsWithin) and on an
// image's store before any card is touched (ImageStore): the store must
// be Talos's ADV or blank, else ErrForeign (a write would destroy what it
// holds), and tags must fit one copy next to the tags it holds, which are
// kept (ErrTooLarge).
func CheckStore(s *Store, tags []Tag) error {
	if s.Status.Used == 0 && !s.Status.Blank {
		return fmt.Errorf("%w (copy 1: %v; copy 2: %v)", ErrForeign, s.Status.Copy1, s.Status.Copy2)
	}

	return fitsWith(s.ADV, tags)
}

// headPlace reads the primary GPT from head and checks META's place in an
// image of imageSize bytes (CheckPlace; <= 0: a size-less stream, taken to
// end at the backup header its primary names).
func headPlace(head []byte, imageSize int64) (*gpt.Table, gpt.Partition, error) {
	// Read as on a disk with no end (headReader fails beyond head, so the
	// primary is used): every entry is kept, even one running past the
	// image, which a larger card would hold. The image's end is checked
	// next.
	all, err := gpt.Read(headReader(head), 1<<50)
	if err != nil {
		return nil, gpt.Partition{}, fmt.Errorf("partition table: %w", err)
	}

	// The table must also read as on a disk of the image's size (its
	// backup header where the primary names it).
	if imageSize > 0 {
		if _, err := gpt.Read(headReader(head), imageSize); err != nil {
			return all, gpt.Partition{}, fmt.Errorf("partition table: %w", err)
		}
	} else {
		// A size-less stream: the flash checks that it reaches the backup
		// header the primary names (imaging's GPT stream check), so the
		// image is taken to end there, and its table is read as such.
		if all.Header.AltLBA >= 1<<40 {
			return all, gpt.Partition{}, fmt.Errorf("%w: the backup GPT header at LBA %d lies beyond any card", ErrNoGPT, all.Header.AltLBA)
		}
		imageSize = int64(all.Header.AltLBA+1) * all.SectorSize
		if _, err := gpt.Read(headReader(head), imageSize); err != nil {
			return all, gpt.Partition{}, fmt.Errorf("partition table (the image ending at its backup header, byte %d): %w", imageSize, err)
		}
	}

	p, err := CheckPlace(all, imageSize)

	return all, p, err
}

// fitsWith says whether tags fit one copy next to a's own.
func fitsWith(a *ADV, tags []Tag) error {
	b := &ADV{tags: a.Tags()}
	for _, t := range tags {
		if err := b.Set(t.Key, t.Value); err != nil {
			return err
		}
	}

	_, err := b.Copy()

	return err
}

// headReader reads the head; beyond it (the backup GPT) it fails, so only
// the primary table is used.
type headReader []byte

func (h headReader) ReadAt(b []byte, off int64) (int, error) {
	if off < 0 || off+int64(len(b)) > int64(len(h)) {
		return 0, io.ErrUnexpectedEOF
	}

	return copy(b, h[off:]), nil
}

// Fits says whether tags fit one ADV copy on their own (what a flash checks
// before the card is touched; the tags already on the card count again
// when WriteTags runs).
func Fits(tags []Tag) error {
	a := &ADV{}
	for _, t := range tags {
		if err := a.Set(t.Key, t.Value); err != nil {
			return err
		}
	}

	_, err := a.Copy()

	return err
}
