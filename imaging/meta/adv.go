// Package meta reads and writes the Talos META partition: the key-value
// store a Talos node reads at boot, before it has a machine config (see
// siderolabs/talos internal/pkg/meta and pkg/machinery/meta). talosflash
// writes key 0x0a (MetalNetworkPlatformConfig) there, so a card boots at a
// known address with a known hostname.
//
// The format is the "talos" ADV: two identical 256 KiB copies at the start
// of the partition. Each copy (big-endian):
//
//	0          magic 0x5a4b3c2d
//	4          tags: uint32 key, uint32 size, size bytes of value; key 0 ends
//	len-36     SHA-256 of the whole copy, computed with these 32 bytes zeroed
//	len-4      magic 0xa5b4c3d2
//
// Talos reads copy 1, and copy 2 when copy 1 is invalid; keys are bytes
// (a uint32 on disk, its low byte used). The end of the partition holds an
// older syslinux ADV that this package never touches.
package meta

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
)

// Layout of the talos ADV.
const (
	CopySize = 256 << 10
	Size     = 2 * CopySize // both copies
	// MinPartition leaves room for the legacy syslinux ADV (2 x 512 bytes)
	// Talos keeps at the partition's end. Talos images have 1 MiB.
	MinPartition = Size + 1024

	magic1 uint32 = 0x5a4b3c2d
	magic2 uint32 = 0xa5b4c3d2

	// maxTagBytes is what the tags (8-byte headers included) may take:
	// Talos's own limit when it sets a tag (DataLength - 20).
	maxTagBytes = CopySize - 40 - 20
)

// Keys talosflash knows (pkg/machinery/meta constants.go).
const (
	Upgrade                    uint8 = 0x06
	StagedUpgradeImageRef      uint8 = 0x07
	StagedUpgradeInstallOpts   uint8 = 0x08
	StateEncryptionConfig      uint8 = 0x09
	MetalNetworkPlatformConfig uint8 = 0x0a
	DownloadURLCode            uint8 = 0x0b
	UserReserved1              uint8 = 0x0c
	UserReserved2              uint8 = 0x0d
	UserReserved3              uint8 = 0x0e
	UUIDOverride               uint8 = 0x0f
	UniqueMachineToken         uint8 = 0x10
	DiskImageBootloader        uint8 = 0x11
)

var keyNames = map[uint8]string{
	Upgrade:                    "Upgrade",
	StagedUpgradeImageRef:      "StagedUpgradeImageRef",
	StagedUpgradeInstallOpts:   "StagedUpgradeInstallOptions",
	StateEncryptionConfig:      "StateEncryptionConfig",
	MetalNetworkPlatformConfig: "MetalNetworkPlatformConfig",
	DownloadURLCode:            "DownloadURLCode",
	UserReserved1:              "UserReserved1",
	UserReserved2:              "UserReserved2",
	UserReserved3:              "UserReserved3",
	UUIDOverride:               "UUIDOverride",
	UniqueMachineToken:         "UniqueMachineToken",
	DiskImageBootloader:        "DiskImageBootloader",
}

// KeyName is the Talos name of a key ("0x2a" for one it does not name).
func KeyName(k uint8) string {
	if n, ok := keyNames[k]; ok {
		return n
	}

	return fmt.Sprintf("0x%02x", k)
}

// Tag is one key and its value.
type Tag struct {
	Key   uint8
	Value []byte
}

// ADV is the set of tags, in the order they were read or first set.
type ADV struct {
	tags []Tag
}

// ErrTooLarge: the tags would not fit one copy.
var ErrTooLarge = errors.New("META tags do not fit the 256 KiB ADV")

// Tags returns the tags (the values are not copies; do not modify).
func (a *ADV) Tags() []Tag { return slices.Clone(a.tags) }

// Get returns key's value.
func (a *ADV) Get(key uint8) ([]byte, bool) {
	for _, t := range a.tags {
		if t.Key == key {
			return t.Value, true
		}
	}

	return nil, false
}

// Set sets or replaces key's value; the others stay as they are.
func (a *ADV) Set(key uint8, value []byte) error {
	if key == 0 {
		return errors.New("META key 0 marks the end of the tags")
	}

	used := 0
	for _, t := range a.tags {
		if t.Key != key {
			used += 8 + len(t.Value)
		}
	}

	if used+8+len(value) > maxTagBytes {
		return fmt.Errorf("%w: %d bytes needed, %d available", ErrTooLarge, used+8+len(value), maxTagBytes)
	}

	v := slices.Clone(value)

	for i := range a.tags {
		if a.tags[i].Key == key {
			a.tags[i].Value = v
			return nil
		}
	}

	a.tags = append(a.tags, Tag{Key: key, Value: v})

	return nil
}

// Copy returns one serialized copy (CopySize bytes).
func (a *ADV) Copy() ([]byte, error) {
	buf := make([]byte, CopySize)
	binary.BigEndian.PutUint32(buf, magic1)
	binary.BigEndian.PutUint32(buf[CopySize-4:], magic2)

	off := 4
	for _, t := range a.tags {
		if off+8+len(t.Value) > 4+maxTagBytes {
			return nil, ErrTooLarge
		}

		binary.BigEndian.PutUint32(buf[off:], uint32(t.Key))
		binary.BigEndian.PutUint32(buf[off+4:], uint32(len(t.Value)))
		copy(buf[off+8:], t.Value)
		off += 8 + len(t.Value)
	}

	sum := sha256.Sum256(buf) // checksum field still zero
	copy(buf[CopySize-36:], sum[:])

	return buf, nil
}

// Bytes returns both copies (Size bytes), what goes at the partition start.
func (a *ADV) Bytes() ([]byte, error) {
	c, err := a.Copy()
	if err != nil {
		return nil, err
	}

	return append(c, c...), nil
}

// Status says what Parse found in each copy.
type Status struct {
	Copy1, Copy2 error // nil: that copy is valid
	// Used is the copy the tags come from: 1, 2, or 0 when neither is valid.
	Used int
	// Blank: neither copy is valid and the area is all zeros, as in a
	// freshly built Talos image (Talos starts with no tags then).
	Blank bool
}

// Parse reads the ADV from the first Size bytes of a META partition, as
// Talos does: copy 1, else copy 2. With neither valid it returns an empty
// ADV and a Status saying why (Talos too starts empty then).
func Parse(b []byte) (*ADV, Status, error) {
	if len(b) < Size {
		return nil, Status{}, fmt.Errorf("META: %d bytes, the ADV needs %d", len(b), Size)
	}

	var st Status

	a1, err1 := parseCopy(b[:CopySize])
	st.Copy1 = err1

	a2, err2 := parseCopy(b[CopySize:Size])
	st.Copy2 = err2

	switch {
	case err1 == nil:
		st.Used = 1
		return a1, st, nil
	case err2 == nil:
		st.Used = 2
		return a2, st, nil
	}

	st.Blank = allZero(b[:Size])

	return &ADV{}, st, nil
}

func parseCopy(c []byte) (*ADV, error) {
	if m := binary.BigEndian.Uint32(c); m != magic1 {
		return nil, fmt.Errorf("start magic %08x, want %08x", m, magic1)
	}

	if m := binary.BigEndian.Uint32(c[len(c)-4:]); m != magic2 {
		return nil, fmt.Errorf("end magic %08x, want %08x", m, magic2)
	}

	work := slices.Clone(c)
	want := slices.Clone(work[len(c)-36 : len(c)-4])
	clear(work[len(c)-36 : len(c)-4])

	if sum := sha256.Sum256(work); !bytes.Equal(sum[:], want) {
		return nil, errors.New("SHA-256 mismatch")
	}

	a := &ADV{}
	data := c[4 : len(c)-36]

	for len(data) >= 8 {
		key := binary.BigEndian.Uint32(data)
		if key == 0 {
			break
		}

		size := binary.BigEndian.Uint32(data[4:])
		if uint64(size) > uint64(len(data)-8) {
			return nil, fmt.Errorf("tag 0x%x: %d bytes run past the end", key, size)
		}

		// Talos keeps the low byte of the key; a repeated key: the last
		// wins. A key whose low byte is 0 would end the tags once written
		// back as a byte: it is dropped.
		k := uint8(key)
		v := slices.Clone(data[8 : 8+size])
		data = data[8+size:]

		if k == 0 {
			continue
		}

		if i := slices.IndexFunc(a.tags, func(t Tag) bool { return t.Key == k }); i >= 0 {
			a.tags[i].Value = v
		} else {
			a.tags = append(a.tags, Tag{Key: k, Value: v})
		}
	}

	return a, nil
}

func allZero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}

	return true
}
