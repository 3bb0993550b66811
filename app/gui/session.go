package gui

import (
	"time"

	"github.com/talosflash/talosflash/app/plan"
	"github.com/talosflash/talosflash/factory"
	"github.com/talosflash/talosflash/imaging"
	"github.com/talosflash/talosflash/imaging/devices"
	"github.com/talosflash/talosflash/inventory"
	"github.com/talosflash/talosflash/node"
)

// Change says what changed in the Session.
type Change int

// The parts of a Session listeners hear about.
const (
	ChangeChoice    Change = iota // Choice (and ImageSize reset to 0)
	ChangeImageSize               // ImageSize or ImageCached
	ChangeDisks                   // Disks
	ChangeDisk                    // Cards (and Disk)
	ChangeFlashed                 // Flashed
	ChangeNodes                   // Nodes
	ChangeAttempt                 // Attempt (started, ended, ejected or forgotten)
	ChangeProgress                // Attempt's progress or status line while it runs
	ChangeNode                    // Node (the inventory node picked in step 1)
)

// Flashed is a card written in this session.
type Flashed struct {
	Image     plan.Image         // role, schematic (ID), version, installer of what was written
	Card      imaging.CardResult // the card and how it was written (Target: its device)
	CachePath string             // the cached image, "" when none
	At        time.Time
	// Node is the inventory node written onto the card ("" for a role).
	Node, Address string
}

// Session is what the user chose and did in this window, shared by the
// steps: a step sets what it owns and listens for the rest, instead of
// reading another step's widgets. Like the rest of the UI state it is only
// touched on the UI goroutine; listeners run there, in the order added,
// after every Set/Add.
type Session struct {
	factory  *factory.Client
	profiles []factory.Profile

	choice    *plan.Image
	imageSize int64
	cached    bool
	disks     []devices.Disk
	cards     []devices.Disk
	flashed   []Flashed
	nodes     []node.Node
	node      *inventory.Node
	attempt   *Attempt
	attempts  int // attempts started: each one's Seq

	listeners []func(Change)
}

// NewSession starts a session with the factory client and profiles it uses.
func NewSession(c *factory.Client, profiles []factory.Profile) *Session {
	return &Session{factory: c, profiles: profiles}
}

// AddListener calls fn after every change.
func (s *Session) AddListener(fn func(Change)) { s.listeners = append(s.listeners, fn) }

func (s *Session) changed(c Change) {
	for _, fn := range s.listeners {
		fn(c)
	}
}

// Factory is the Image Factory client: schematic lookups, registration, downloads.
func (s *Session) Factory() *factory.Client { return s.factory }

// Profiles are the builtin roles merged with the user's profiles.
func (s *Session) Profiles() []factory.Profile { return s.profiles }

// Choice is the image to flash, nil while step 1 has no valid choice.
func (s *Session) Choice() *plan.Image { return s.choice }

// SetChoice replaces the choice; its uncompressed size is unknown again.
func (s *Session) SetChoice(c *plan.Image) {
	s.choice, s.imageSize, s.cached = c, 0, false
	s.changed(ChangeChoice)
	s.forgetAttempt()
}

// Attempt is the flash shown in step 3 (running or ended), nil when none.
func (s *Session) Attempt() *Attempt { return s.attempt }

// forgetAttempt drops an ended attempt that is no longer about the choice
// and the cards.
func (s *Session) forgetAttempt() {
	if a := s.attempt; a != nil && !a.Running && !a.about(s.choice, s.cards) {
		s.ForgetAttempt()
	}
}

// Node is the inventory node picked in step 1 (nil: a role, or no inventory).
func (s *Session) Node() *inventory.Node { return s.node }

// SetNode picks the node a flash writes onto its card (nil: none).
func (s *Session) SetNode(n *inventory.Node) {
	s.node = n
	s.changed(ChangeNode)
}

// TalosVersion is the chosen image's version, else the default.
func (s *Session) TalosVersion() string {
	if s.choice != nil && s.choice.Version != "" {
		return s.choice.Version
	}
	return factory.DefaultTalosVersion
}

// ImageSize is the chosen image's uncompressed size once known, else 0.
func (s *Session) ImageSize() int64 { return s.imageSize }

// SetImageSize records the uncompressed size of the image with this cache
// key, if it is still the choice.
func (s *Session) SetImageSize(key string, raw int64) {
	if s.choice == nil || s.choice.CacheKey() != key || s.imageSize == raw {
		return
	}
	s.imageSize = raw
	s.changed(ChangeImageSize)
}

// ImageCached says whether the chosen image is in the download cache (a
// flash needs no factory then).
func (s *Session) ImageCached() bool { return s.cached }

// SetCached records whether the image with this cache key is cached, if it
// is still the choice.
func (s *Session) SetCached(key string, cached bool) {
	if s.choice == nil || s.choice.CacheKey() != key || s.cached == cached {
		return
	}
	s.cached = cached
	s.changed(ChangeImageSize)
}

// Disks are the detected disks, as listed last.
func (s *Session) Disks() []devices.Disk { return s.disks }

// SetDisks replaces the detected disks.
func (s *Session) SetDisks(d []devices.Disk) {
	s.disks = d
	s.changed(ChangeDisks)
}

// Cards are the cards chosen in step 2, in the list's order (several are
// written from one download and one decode); nil when none.
func (s *Session) Cards() []devices.Disk { return s.cards }

// SetCards chooses the cards (none: nil).
func (s *Session) SetCards(d []devices.Disk) {
	s.cards = d
	s.changed(ChangeDisk)
	s.forgetAttempt()
}

// Disk is the first card chosen in step 2, nil when none.
func (s *Session) Disk() *devices.Disk {
	if len(s.cards) == 0 {
		return nil
	}
	return &s.cards[0]
}

// SetDisk chooses one card (nil: none).
func (s *Session) SetDisk(d *devices.Disk) {
	if d == nil {
		s.SetCards(nil)
		return
	}
	s.SetCards([]devices.Disk{*d})
}

// Flashed are the cards written in this session, oldest first.
func (s *Session) Flashed() []Flashed { return s.flashed }

// AddFlashed records a written card.
func (s *Session) AddFlashed(f Flashed) {
	s.flashed = append(s.flashed, f)
	s.changed(ChangeFlashed)
}

// Nodes are the Talos nodes found or typed in step 4.
func (s *Session) Nodes() []node.Node { return s.nodes }

// SetNodes replaces the nodes.
func (s *Session) SetNodes(n []node.Node) {
	s.nodes = n
	s.changed(ChangeNodes)
}
