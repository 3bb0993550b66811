package inventory

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strings"

	"github.com/talosflash/talosflash/factory"
	"github.com/talosflash/talosflash/imaging/gpt"
	"github.com/talosflash/talosflash/imaging/meta"
	"github.com/talosflash/talosflash/internal/printable"
)

// WriteCard writes the node's network config (META key 0x0a) onto a
// flashed card or image d of size bytes: META found through the GPT, other
// tags kept, both copies written and synced, read back and compared (see
// meta.WriteTag). A card without a usable META is refused before writing.
func (n Node) WriteCard(d meta.Disk, size int64) (*meta.Written, error) {
	value, err := n.NetworkConfig()
	if err != nil {
		return nil, fmt.Errorf("node %s: %w", n.Hostname, err)
	}

	w, err := meta.WriteTag(d, size, meta.MetalNetworkPlatformConfig, value)
	if err != nil {
		return nil, fmt.Errorf("write node %s onto the card: %w", n.Hostname, err)
	}

	return w, nil
}

// WriteCardPath is WriteCard on an image file or a device path the caller
// has already checked is safe to write (imaging/devices rules).
func (n Node) WriteCardPath(path string) (*meta.Written, error) {
	value, err := n.NetworkConfig()
	if err != nil {
		return nil, fmt.Errorf("node %s: %w", n.Hostname, err)
	}

	w, err := meta.WriteTagPath(path, meta.MetalNetworkPlatformConfig, value)
	if err != nil {
		return nil, fmt.Errorf("write node %s onto the card: %w", n.Hostname, err)
	}

	return w, nil
}

// CardNode reads which node a card was written for: the META 0x0a value
// decoded (ok false when the card carries none).
func CardNode(c *meta.Store) (info CardInfo, ok bool, err error) {
	if c == nil || c.ADV == nil {
		return CardInfo{}, false, nil
	}

	v, ok := c.ADV.Get(meta.MetalNetworkPlatformConfig)
	if !ok {
		return CardInfo{}, false, nil
	}

	info, err = ParseNetworkConfig(v)

	return info, true, err
}

// CardReport is what a card says about itself, read-only: the partition
// table, whether it holds a Talos image, the META keys (names and sizes,
// never values: some hold keys) and the node written in 0x0a. The CLI's
// `card` and the GUI's card list show it.
type CardReport struct {
	Table *gpt.Table // nil without a GPT
	// Talos: the table has the partitions every Talos metal image has.
	Talos bool
	// META is nil when the card has no usable META partition.
	META *meta.Store
	Keys []CardKey
	// Node is the node written onto the card (nil: none).
	Node *CardInfo
	// Record is talosflash's record (META 0x0e) from the flash: which
	// image it wrote (nil: none, e.g. a card flashed without inventory).
	Record *Record
	// Boot is what the boot (EFI) partition's files say of the board
	// (nil: no EFI partition); BoardOfBootFiles.
	Boot *BootBoard
	// Incomplete: the primary partition table is missing or damaged while
	// a backup (at the card's end) is there, as after a flash interrupted
	// before it wrote the card's head: the backup, META and node are an
	// earlier flash's, so none is reported (Talos false, no META, no node).
	Incomplete bool
	Problems   []string
}

// IncompleteNote says what an Incomplete card is and what to do.
const IncompleteNote = "incomplete: an interrupted flash; flash it again (the primary partition table is missing or damaged; the backup at the card's end, its META and node are from an earlier flash)"

// CardKey is one META key, without its value.
type CardKey struct {
	Key  uint8
	Name string
	Size int
}

// talosLabels are the partitions every Talos metal image has.
var talosLabels = []string{"EFI", meta.PartitionLabel}

// ReadCard reads a card or image of size bytes: the partition table and
// the META store (meta.ReadStore's bounded reads), nothing else.
func ReadCard(r io.ReaderAt, size int64) *CardReport {
	rep := &CardReport{}

	card, err := meta.ReadStore(r, size)
	if card != nil && card.Table != nil {
		rep.Table = card.Table
		rep.Problems = append(rep.Problems, card.Table.Problems...)
		rep.Talos = true

		for _, l := range talosLabels {
			if _, ok := card.Table.Find(l); !ok {
				rep.Talos = false
			}
		}
	}

	if t := rep.Table; t != nil && !t.Primary && t.Backup {
		rep.Incomplete, rep.Talos = true, false
		rep.Problems = append(rep.Problems, IncompleteNote)

		return rep
	}

	if rep.Talos {
		if efi, ok := rep.Table.Find("EFI"); ok && efi.Offset+efi.Size <= size {
			rep.Boot = readBootBoard(r, efi.Offset, efi.Size)
		}
	}

	if err != nil {
		if errors.Is(err, gpt.ErrNoGPT) {
			rep.Problems = append(rep.Problems, "no GPT partition table: not a Talos image (or a blank card)")
		} else {
			rep.Problems = append(rep.Problems, err.Error())
		}

		rep.Talos = false

		return rep
	}

	rep.META = card
	for _, t := range card.ADV.Tags() {
		rep.Keys = append(rep.Keys, CardKey{Key: t.Key, Name: meta.KeyName(t.Key), Size: len(t.Value)})
	}

	if card.Status.Used == 0 && !card.Status.Blank {
		rep.Problems = append(rep.Problems, "META holds data that is not a Talos ADV")
	}

	if v, ok := card.ADV.Get(RecordKey); ok {
		if r, err := ParseRecord(v); err == nil {
			rep.Record = &r
		}
	}

	if rec, boot := rep.Record, rep.Boot; rec != nil && rec.Board != "" && boot != nil && boot.Board != "" && string(boot.Board) != rec.Board {
		rep.Problems = append(rep.Problems, fmt.Sprintf("the record says board %s, but the boot partition holds %s: the card holds another board's image (flash it again)",
			rec.Board, boot.Evidence))
	}

	info, ok, err := CardNode(card)
	switch {
	case err != nil:
		rep.Problems = append(rep.Problems, err.Error())
	case ok:
		rep.Node = &info
	}

	return rep
}

// Board is the board the card was written for and how that is known:
// talosflash's record of the flash (META 0x0e), else the boot
// partition's files (BoardOfBootFiles); "" when neither says.
func (rep *CardReport) Board() (b factory.Board, source string) {
	if rep == nil {
		return "", ""
	}
	if r := rep.Record; r != nil && factory.Board(r.Board).Known() { // a card's text: only a board talosflash knows
		return factory.Board(r.Board), "record"
	}
	if rep.Boot != nil && rep.Boot.Board != "" {
		return rep.Boot.Board, "boot files"
	}
	return "", ""
}

// ErrNotACard: the path is neither a block device nor a regular file (a
// FIFO would wait for a writer, a directory holds no image).
var ErrNotACard = errors.New("not a disk or an image file")

// ReadCardPath reads the card or image file at path, read-only and bounded
// (ReadCard reads the partition tables and META only), and returns its
// report and size. The path is checked before it is opened: one that
// does not exist is an error that says so (errors.Is fs.ErrNotExist).
func ReadCardPath(path string) (*CardReport, int64, error) {
	st, err := os.Stat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, 0, &notExistError{path}
	}
	if err != nil {
		return nil, 0, err
	}

	if !st.Mode().IsRegular() && st.Mode()&os.ModeDevice == 0 {
		return nil, 0, fmt.Errorf("%s: %w", path, ErrNotACard)
	}

	f, err := os.Open(path) // read-only: nothing is ever written here
	if err != nil {
		return nil, 0, err
	}
	defer f.Close()

	size, err := f.Seek(0, io.SeekEnd)
	if err != nil {
		return nil, 0, fmt.Errorf("size of %s: %w", path, err)
	}

	return ReadCard(f, size), size, nil
}

// notExistError is a card path that names nothing (errors.Is
// fs.ErrNotExist), said in the user's words.
type notExistError struct{ path string }

func (e *notExistError) Error() string {
	return e.path + " does not exist (is the card inserted? `talosflash devices` lists the disks)"
}

func (e *notExistError) Is(target error) bool { return target == fs.ErrNotExist }

// Summary is the report in one line for a list of cards, escaped
// (printable.String): the node and
// image written on it, "a Talos image" without talosflash's records, or ""
// when the card holds no Talos image.
func (rep *CardReport) Summary() string {
	if rep != nil && rep.Incomplete {
		return "an interrupted flash (incomplete: flash it again)"
	}

	if rep == nil || !rep.Talos {
		return ""
	}

	var parts []string
	if rep.Node != nil {
		if s := rep.Node.String(); s != "" {
			parts = append(parts, s)
		}
	}

	if r := rep.Record; r != nil {
		image := r.Profile
		if b, _ := rep.Board(); b != "" && b != factory.DefaultBoard {
			image = profileLabel(image, b)
			if r.Profile == "" {
				image = string(b)
			}
		}
		if r.Schematic != "" {
			image = strings.TrimSpace(image + " " + factory.ShortID(r.Schematic))
		}

		if r.TalosVersion != "" {
			image = strings.TrimSpace(image + " " + r.TalosVersion)
		}

		if image != "" {
			parts = append(parts, image)
		}
	}

	if len(parts) == 0 {
		return "a Talos image (no node written on it)"
	}

	return "Talos for " + printable.String(strings.Join(parts, " · ")) // what the card says: shown escaped
}
