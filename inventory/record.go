package inventory

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/talosflash/talosflash/imaging/meta"
)

// RecordKey is the META key of talosflash's own record on a card: one of
// the user-reserved keys (0x0c-0x0e), which Talos stores and never reads.
const RecordKey = meta.UserReserved3

// RecordFormat marks a RecordKey value as talosflash's (a user's own 0x0e
// value, e.g. from the factory's customization.meta, is never replaced).
const RecordFormat = "talosflash/v1"

// Record is what talosflash notes on a card it flashed for a node, so that
// `talosflash card` can say which image it holds without reading the BOOT
// filesystem. Nothing secret: the image's identity and the node's name.
type Record struct {
	Format       string `json:"format"`
	Schematic    string `json:"schematic,omitempty"`
	TalosVersion string `json:"talosVersion,omitempty"`
	Profile      string `json:"profile,omitempty"`
	// Board is the board the image was built for (its schematic's
	// overlay: factory.Board, "rpi5"); "" when not known (an image of
	// unknown content, a card flashed before boards were recorded).
	Board    string `json:"board,omitempty"`
	Hostname string `json:"hostname,omitempty"`
}

// MaxRecord bounds a record's encoding (it is a few hundred bytes).
const MaxRecord = 4 << 10

// Bytes is the value written under RecordKey (compact JSON).
func (r Record) Bytes() []byte {
	r.Format = RecordFormat
	b, _ := json.Marshal(r) // only strings: cannot fail

	return b
}

// ErrNotRecord: the RecordKey value is someone else's.
var ErrNotRecord = errors.New("META 0x0e is not a talosflash record")

// ParseRecord decodes a RecordKey value.
func ParseRecord(b []byte) (Record, error) {
	if len(b) > MaxRecord {
		return Record{}, fmt.Errorf("%w: %d bytes", ErrNotRecord, len(b))
	}

	var r Record
	if err := json.Unmarshal(b, &r); err != nil || r.Format != RecordFormat {
		return Record{}, ErrNotRecord
	}

	return r, nil
}

// CardTags are the META tags a flash writes for n onto a card holding the
// image rec describes: the network config (0x0a) and the record (0x0e).
func (n Node) CardTags(rec Record) ([]meta.Tag, error) {
	value, err := n.NetworkConfig()
	if err != nil {
		return nil, fmt.Errorf("node %s: %w", n.Hostname, err)
	}

	rec.Hostname, rec.Profile = n.Hostname, n.Profile

	return []meta.Tag{{Key: meta.MetalNetworkPlatformConfig, Value: value}, {Key: RecordKey, Value: rec.Bytes()}}, nil
}
