package meta

import (
	"errors"
	"fmt"

	"github.com/talosflash/talosflash/imaging/gpt"
)

// ErrPlace: the META partition does not lie inside the image's own layout
// (over a GPT header or entry array, over another partition, outside the
// usable LBAs, at LBA 0, past the image's end, or labelled twice): writing
// it would damage the card's table or another partition.
var ErrPlace = errors.New("META partition lies outside the image's own layout")

// Refused tells whether err is one of this package's refusals of a disk's
// META (no GPT, no META, too small, misplaced, foreign data, tags that do
// not fit), as opposed to an I/O failure: each is found before META is
// written.
func Refused(err error) bool {
	for _, e := range []error{ErrNoGPT, ErrNoMETA, ErrTooSmall, ErrPlace, ErrForeign, ErrTooLarge} {
		if errors.Is(err, e) {
			return true
		}
	}

	return false
}

// lbaRange is an inclusive range of LBAs.
type lbaRange struct {
	name        string
	first, last uint64
}

func (r lbaRange) overlaps(first, last uint64) bool { return first <= r.last && r.first <= last }

// CheckPlace checks where tab's META partition lies: exactly one partition
// labelled META, at least MinPartition bytes, not at LBA 0, within the
// header's usable LBAs, over neither GPT header nor entry array (the used
// copy's, and the other copy's where the standard layout puts it), over no
// other partition, and, when imageSize > 0, ending inside the image's
// imageSize bytes, as do the usable LBAs and the backup header. The
// partitions are tab's as read: CheckHead reads them with no disk end, so
// that one running past the image still counts. It returns the META
// partition.
func CheckPlace(tab *gpt.Table, imageSize int64) (gpt.Partition, error) {
	var p gpt.Partition

	n := 0
	for _, q := range tab.Partitions {
		if q.Name == PartitionLabel {
			if n == 0 {
				p = q
			}
			n++
		}
	}

	switch {
	case n == 0:
		return p, fmt.Errorf("%w (partitions: %s): not a Talos metal image", ErrNoMETA, PartitionNames(tab))
	case n > 1:
		// Talos uses the first, a tool another: which one a node reads is not ours to guess.
		return p, fmt.Errorf("%w: %d partitions labelled META", ErrPlace, n)
	case p.Size < MinPartition:
		return p, fmt.Errorf("%w: %d bytes, at least %d needed", ErrTooSmall, p.Size, MinPartition)
	case p.FirstLBA == 0:
		return p, fmt.Errorf("%w: META starts at LBA 0 (the protective MBR)", ErrPlace)
	}

	h := tab.Header
	if p.FirstLBA < h.FirstUsable || p.LastLBA > h.LastUsable {
		return p, fmt.Errorf("%w: META at LBA %d-%d, the usable LBAs are %d-%d", ErrPlace, p.FirstLBA, p.LastLBA, h.FirstUsable, h.LastUsable)
	}

	ss := uint64(tab.SectorSize)
	arr := (uint64(h.EntryBytes()) + ss - 1) / ss
	reserved := []lbaRange{
		{"the protective MBR", 0, 0},
		{"a GPT header", h.MyLBA, h.MyLBA},
		{"a GPT header", h.AltLBA, h.AltLBA},
		{"a GPT entry array", h.EntryLBA, h.EntryLBA + arr - 1},
	}
	// The other copy's array, where every tool puts it: after the primary
	// header, or just before the backup header. Nothing usable lies past
	// it: the backup ends the image.
	if h.MyLBA < h.AltLBA {
		if p.LastLBA >= h.AltLBA {
			return p, fmt.Errorf("%w: META at LBA %d-%d ends past the backup GPT header at LBA %d, the image's end", ErrPlace, p.FirstLBA, p.LastLBA, h.AltLBA)
		}
		if h.AltLBA >= arr {
			reserved = append(reserved, lbaRange{"a GPT entry array", h.AltLBA - arr, h.AltLBA - 1})
		}
	} else {
		reserved = append(reserved, lbaRange{"a GPT entry array", 2, 2 + arr - 1})
	}

	for _, r := range reserved {
		if r.overlaps(p.FirstLBA, p.LastLBA) {
			return p, fmt.Errorf("%w: META at LBA %d-%d overlaps %s (LBA %d-%d)", ErrPlace, p.FirstLBA, p.LastLBA, r.name, r.first, r.last)
		}
	}

	for _, q := range tab.Partitions {
		if q.Index != p.Index && (lbaRange{first: q.FirstLBA, last: q.LastLBA}).overlaps(p.FirstLBA, p.LastLBA) {
			return p, fmt.Errorf("%w: META at LBA %d-%d overlaps partition %d %s (LBA %d-%d)", ErrPlace, p.FirstLBA, p.LastLBA, q.Index, partitionName(q.Name), q.FirstLBA, q.LastLBA)
		}
	}

	if imageSize > 0 {
		// On a card larger than the image, its table is read with the
		// card's LBAs: the image's end bounds it here.
		end := func(lba uint64) int64 { return int64(min(lba, 1<<40)+1) * tab.SectorSize }
		switch {
		case p.Offset+p.Size > imageSize:
			return p, fmt.Errorf("%w: META ends at byte %d, past the image's end at byte %d", ErrPlace, p.Offset+p.Size, imageSize)
		case end(h.LastUsable) > imageSize:
			return p, fmt.Errorf("%w: the usable LBAs end at LBA %d, past the image's end at byte %d", ErrPlace, h.LastUsable, imageSize)
		case end(max(h.MyLBA, h.AltLBA)) > imageSize:
			return p, fmt.Errorf("%w: the backup GPT header at LBA %d lies past the image's end at byte %d", ErrPlace, max(h.MyLBA, h.AltLBA), imageSize)
		}
	}

	return p, nil
}
