package plan

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/talosflash/talosflash/app/contract"
	"github.com/talosflash/talosflash/imaging"
	"github.com/talosflash/talosflash/imaging/devices"
	"github.com/talosflash/talosflash/imaging/meta"
	"github.com/talosflash/talosflash/inventory"
)

// CardMeta is what a flash with an inventory writes onto one card once its
// image is written and verified: the node's META tags (its network config
// under 0x0a, talosflash's record under 0x0e), nothing secret. Node and
// Address are for the messages ("Card ready: worker-1, 192.168.1.21/24").
type CardMeta struct {
	Node    string     `json:"node"`
	Address string     `json:"address"`
	Tags    []meta.Tag `json:"tags"`
}

// ErrNoNodeMeta: the image has no META partition that can take the node's
// values; the flash is refused before any card is touched.
var ErrNoNodeMeta = errors.New("the image cannot carry the node's network config")

// metaKeys are the only keys a flash writes (an elevated child refuses
// anything else on its command line).
var metaKeys = []uint8{meta.MetalNetworkPlatformConfig, inventory.RecordKey}

// maxCardMeta bounds an encoded CardMeta (a network config is < 1 KiB).
const maxCardMeta = 64 << 10

// NodeCardMeta is the CardMeta for node n on a card holding im, im being
// ChooseImage's decision for n. The record says what was written, from the
// decision only: im's profile and schematic (none for an image of unknown
// content), never what the inventory expected.
func NodeCardMeta(n inventory.Node, im *Image) (*CardMeta, error) {
	rec := inventory.Record{}
	n.Profile = "" // CardTags records n.Profile: the image's, below
	if im != nil {
		rec.Schematic, rec.TalosVersion, n.Profile = im.SchematicID, im.Version, im.ProfileName()
		rec.Board = string(im.Board()) // `card` reads it back (and checks it against the boot files)
	}

	tags, err := n.CardTags(rec)
	if err != nil {
		return nil, err
	}

	return &CardMeta{Node: n.Hostname, Address: n.Address.String(), Tags: tags}, nil
}

// Encode is the CardMeta as one command-line word for the elevated child
// (base64url of its JSON).
func (m *CardMeta) Encode() string {
	b, _ := json.Marshal(m) // strings and bytes only

	return base64.RawURLEncoding.EncodeToString(b)
}

// DecodeCardMeta reads what Encode wrote, checking it names only the keys
// a flash writes.
func DecodeCardMeta(s string) (*CardMeta, error) {
	if len(s) > maxCardMeta {
		return nil, fmt.Errorf("node META: %d bytes, at most %d", len(s), maxCardMeta)
	}

	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		return nil, fmt.Errorf("node META: %w", err)
	}

	var m CardMeta
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("node META: %w", err)
	}

	if m.Node == "" || len(m.Tags) == 0 {
		return nil, errors.New("node META: no node or no tags")
	}

	for _, t := range m.Tags {
		if !containsKey(metaKeys, t.Key) {
			return nil, fmt.Errorf("node META: key 0x%02x is not one a flash writes", t.Key)
		}
	}

	return &m, meta.Fits(m.Tags)
}

func containsKey(keys []uint8, k uint8) bool {
	for _, x := range keys {
		if x == k {
			return true
		}
	}

	return false
}

// CardMeta is the META for the job's i-th device (nil: none): what a card
// that ended OK carries.
func (job *Job) CardMeta(i int) *CardMeta {
	if i < len(job.Meta) {
		return job.Meta[i]
	}

	return nil
}

func (job *Job) hasMeta() bool {
	for _, m := range job.Meta {
		if m != nil {
			return true
		}
	}

	return false
}

// checkHead is FlashOptions.CheckHead for the cards of group g, when some
// have META to write, before any of them is opened: the decoded image's
// META must lie inside its own layout (meta.CheckPlace; inside the image
// when its size is known, else checked against the bytes written before
// META is: the backup header the primary names), and each card's values
// must fit the store on their own. Where the image's store can be read
// (in the head, or anywhere through image: an image file), its content
// gets the card's own check (meta.CheckStore, each node's tags as
// writeCardMeta will write them): foreign data, or the image's own tags
// leaving no room, refuse the image's cards; g.storeChecked says so. A
// stream's store beyond the head is checked only on the card
// (writeCardMeta, streamMETANote).
func (job *Job) checkHead(g *group) func(head []byte, size int64, image io.ReaderAt) error {
	var metas []*CardMeta
	for _, i := range g.cards {
		if m := job.CardMeta(i); m != nil {
			metas = append(metas, m)
		}
	}
	if len(metas) == 0 {
		return nil
	}

	return func(head []byte, size int64, image io.ReaderAt) error {
		for _, m := range metas {
			if err := meta.Fits(m.Tags); err != nil {
				return fmt.Errorf("%w (no card was touched): node %s: %w", ErrNoNodeMeta, m.Node, err)
			}
		}

		store, err := meta.ImageStore(head, size, image)
		if meta.Refused(err) {
			return fmt.Errorf("%w (no card was touched): %w", ErrNoNodeMeta, err)
		}
		if err != nil {
			return err // reading the image (imaging says what failed)
		}
		if store.ADV == nil {
			return nil // a stream: its store is known only on the card
		}

		for _, m := range metas {
			tags, _ := keepImageRecord(store, m.Tags) // as writeCardMeta writes them
			if err := meta.CheckStore(store, tags); err != nil {
				return fmt.Errorf("%w (no card was touched): node %s: the image's META store: %w", ErrNoNodeMeta, m.Node, err)
			}
		}
		g.storeChecked = true

		return nil
	}
}

// streamMETANote says why a refusal of an image's META content comes
// after its card was written: the image came as a stream.
const streamMETANote = "the image came as a stream (a first download, decoded as it arrives; --no-cache; or the elevated write's input), whose META store is known only once on the card; a cached or local image file is checked before any card is touched"

// refusedOnCard is a refusal of META found by the write onto a card
// holding the plain image; checked: the image's store was checked before
// the write (the card's META is then not what was checked).
func refusedOnCard(node string, checked bool, err error) error {
	why := streamMETANote
	if checked {
		why = "the card's META differs from the image's, checked before the write"
	}
	return fmt.Errorf("%w: node %s not written (META untouched, the card holds the plain image): %s: %w", ErrNoNodeMeta, node, why, err)
}

// writeCardMeta writes m onto the verified card at path: the device is
// checked again by the safety rules (it may have been swapped or mounted
// since), then meta.WriteTags (other tags kept, both copies, read back). A
// RecordKey value that is not talosflash's (the user's own) is kept and
// the record left out.
//
// imageSize is the image's decoded bytes written onto the card: META must
// end inside them (for a size-less stream, the head check could not know).
// A refusal of META found only now (foreign data in the image's META, or
// its place) is ErrNoNodeMeta: the image's fault, the card holds the plain
// image; checked says whether the image's store was checked before the
// write (else it came as a stream: streamMETANote).
func (job *Job) writeCardMeta(path string, imageSize int64, m *CardMeta, checked bool) (*meta.Written, []string, error) {
	if _, err := devices.Check(path, 0, job.Safety); err != nil {
		return nil, nil, fmt.Errorf("write node %s onto %s: %w", m.Node, path, err)
	}

	tags := m.Tags
	var notes []string

	if job.cardFile != nil {
		// Opened through UDisks2: the user cannot open the device by path.
		return job.writeCardMetaFile(path, imageSize, m, tags, checked)
	}

	if card, err := meta.ReadStorePath(path); err == nil {
		tags, notes = keepImageRecord(card, m.Tags)
	}

	w, err := meta.WriteTagsPathWithin(path, imageSize, tags)
	if meta.Refused(err) {
		return nil, notes, refusedOnCard(m.Node, checked, err)
	}
	if err != nil {
		return nil, notes, fmt.Errorf("write node %s onto the card: %w", m.Node, err)
	}

	return w, notes, nil
}

// keepImageRecord leaves talosflash's record out of tags when the card's
// RecordKey holds a value that is not one (the image's own), with a note.
func keepImageRecord(card *meta.Store, tags []meta.Tag) ([]meta.Tag, []string) {
	v, ok := card.ADV.Get(inventory.RecordKey)
	if !ok {
		return tags, nil
	}
	if _, err := inventory.ParseRecord(v); err == nil {
		return tags, nil
	}
	var kept []meta.Tag
	for _, t := range tags {
		if t.Key != inventory.RecordKey {
			kept = append(kept, t)
		}
	}
	return kept, []string{fmt.Sprintf("META 0x%02x holds the image's own value: kept, talosflash's record left out", inventory.RecordKey)}
}

// writeCardMetaFile is writeCardMeta through a descriptor of job.cardFile
// (UDisks2), with the same reads, checks and errors as by path.
func (job *Job) writeCardMetaFile(path string, imageSize int64, m *CardMeta, tags []meta.Tag, checked bool) (*meta.Written, []string, error) {
	f, err := job.cardFile(path)
	if err != nil {
		return nil, nil, fmt.Errorf("write node %s onto the card: %w", m.Node, err)
	}
	defer f.Close()
	size, err := f.Seek(0, io.SeekEnd)
	if err != nil {
		return nil, nil, fmt.Errorf("write node %s onto the card: size of %s: %w", m.Node, path, err)
	}
	var notes []string
	if card, err := meta.ReadStore(f, size); err == nil {
		tags, notes = keepImageRecord(card, tags)
	}
	w, err := meta.WriteTagsWithin(f, size, imageSize, tags)
	if err == nil {
		err = f.Close()
	}
	if meta.Refused(err) {
		return nil, notes, refusedOnCard(m.Node, checked, fmt.Errorf("%s: %w", path, err))
	}
	if err != nil {
		return nil, notes, fmt.Errorf("write node %s onto the card: %s: %w", m.Node, path, err)
	}
	return w, notes, nil
}

// writeMetas writes each verified card's META (in process, after
// imaging.FlashAll): a card whose write fails is failed, the others go on.
// checked[i]: card i's image store was checked before the write.
func (job *Job) writeMetas(cards []imaging.CardResult, checked []bool) {
	for i := range cards {
		m := job.CardMeta(i)
		if m == nil || !cards[i].OK() {
			continue
		}

		job.status(fmt.Sprintf("writing node %s (%s) onto %s (META)", m.Node, m.Address, cards[i].Target))

		_, notes, err := job.writeCardMeta(cards[i].Target, cards[i].Bytes, m, checked[i])
		for _, n := range notes {
			job.status(cards[i].Target + ": " + n)
		}
		cards[i].Notes = append(cards[i].Notes, notes...)
		cards[i].Err = err
	}
}

// encodedMeta is Job.Meta for elevate.Args.
func (job *Job) encodedMeta() []string {
	if !job.hasMeta() {
		return nil
	}

	out := make([]string, len(job.Devices))
	for i := range out {
		if m := job.CardMeta(i); m != nil {
			out[i] = m.Encode()
		}
	}

	return out
}

// childNode checks the node the elevated child says it wrote onto card i:
// a card that should carry one and does not is failed.
func (job *Job) childNode(i int, r *contract.ResultEvent) error {
	m := job.CardMeta(i)
	if m == nil {
		return nil
	}

	if r.Node != m.Node || r.Address != m.Address {
		return fmt.Errorf("%w: the elevated write reported node %q (%s), expected %s (%s)", ErrNodeNotWritten, r.Node, r.Address, m.Node, m.Address)
	}

	return nil
}

// ErrNodeNotWritten: a card was written but not the node's META.
var ErrNodeNotWritten = errors.New("the node was not written onto the card")
