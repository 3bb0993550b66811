package factory

import (
	"errors"
	"fmt"
	"strings"

	"github.com/blang/semver/v4"
	"github.com/siderolabs/image-factory/pkg/schematic"

	"github.com/talosflash/talosflash/internal/editdistance"
)

// Board is a Raspberry Pi model talosflash builds images for: it picks the
// overlay of the role's schematic. The zero value is no board.
//
// The boards and their overlays follow Talos's SBC table
// (siderolabs/talos pkg/machinery/platforms/sbcs.go, read at
// v1.14.0-rc.1) and the overlay installers of siderolabs/sbc-raspberrypi
// (installers/rpi_generic and installers/rpi_5, read at v0.2.0).
type Board string

// The boards. DefaultBoard is the one a node or profile that names none
// is built for: talosflash began with the Pi 4 only.
const (
	BoardRPi4 Board = "rpi4"
	BoardRPi5 Board = "rpi5"

	DefaultBoard = BoardRPi4
)

// AnyBoard is what a profiles file writes as `board: any`: the profile is
// a role's recipe for every board, as the built-in roles are (see
// Profile.AnyBoard).
const AnyBoard = "any"

// RPi5OverlayName is the Raspberry Pi 5 overlay of RPiOverlayImage.
const RPi5OverlayName = "rpi_5"

type boardSpec struct {
	model   string
	overlay string // overlay name in RPiOverlayImage
	// minTalos is the first Talos release whose Image Factory offers the
	// overlay ("" = every release talosflash builds for).
	minTalos string
}

// boardSpecs, in Boards order.
//
//   - rpi4: overlay rpi_generic, "Raspberry Pi Series" in Talos's table
//     with no minimum version; its installer copies the Raspberry Pi
//     firmware (start4.elf, the bcm2711 device trees) and U-Boot
//     (sbc-raspberrypi installers/rpi_generic/src/main.go). The README of
//     sbc-raspberrypi calls it "Raspberry Pi generic (models before Pi 5)".
//   - rpi5: overlay rpi_5, MinVersion 1.12.3 in Talos's table: added by
//     commit a842775a8 ("feat: add RPi5 to the list of supported SBCs",
//     cherry-picked from 859d3f03c, release-1.12), first released in
//     v1.12.3 under the misspelt name "rpi5", named rpi_5 from v1.12.4 on
//     (commit 924125420, "fix: typo with rpi_5 profile name"); the factory
//     lists overlays from siderolabs/overlays internal/overlays/overlays.yaml,
//     which has rpi_5 (sbc-raspberrypi v0.1.8) from its v1.12.3 tag and not
//     at v1.12.2. Its installer copies device trees built from the
//     Raspberry Pi kernel and U-Boot, no GPU firmware
//     (installers/rpi_5/src/main.go, since sbc-raspberrypi v0.1.8).
var boardSpecs = map[Board]boardSpec{
	BoardRPi4: {model: "Raspberry Pi 4B", overlay: RPiOverlayName},
	BoardRPi5: {model: "Raspberry Pi 5", overlay: RPi5OverlayName, minTalos: "v1.12.3"},
}

// Boards lists the boards talosflash knows, the default first.
func Boards() []Board { return []Board{BoardRPi4, BoardRPi5} }

// BoardNames lists the boards' names, for usage texts and "valid:" lists.
func BoardNames() []string {
	var out []string
	for _, b := range Boards() {
		out = append(out, string(b))
	}

	return out
}

// Known reports whether b is one of Boards.
func (b Board) Known() bool {
	_, ok := boardSpecs[b]
	return ok
}

// String is the board's name, as written in files and flags ("rpi5").
func (b Board) String() string { return string(b) }

// Model is the board's marketing name ("Raspberry Pi 5"), "" for an
// unknown board.
func (b Board) Model() string { return boardSpecs[b].model }

// Overlay is the board's overlay in a schematic (a fresh value, no
// options); the zero Overlay for an unknown board.
func (b Board) Overlay() schematic.Overlay {
	spec, ok := boardSpecs[b]
	if !ok {
		return schematic.Overlay{}
	}

	return schematic.Overlay{Image: RPiOverlayImage, Name: spec.overlay}
}

// Arch is the CPU architecture of the board's images (both are arm64).
func (b Board) Arch() string { return DefaultArch }

// MinTalosVersion is the first Talos version the board's overlay exists
// for ("" when it has no minimum).
func (b Board) MinTalosVersion() string { return boardSpecs[b].minTalos }

// ErrBoardVersion is matched (errors.Is) by a *BoardVersionError.
var ErrBoardVersion = errors.New("board needs a newer Talos version")

// BoardVersionError: the board's overlay does not exist for that Talos
// version, so the factory cannot build the image.
type BoardVersionError struct {
	Board      Board
	Version    string // what was asked for
	MinVersion string // what the board needs
}

func (e *BoardVersionError) Error() string {
	return fmt.Sprintf("the %s (board %s) needs Talos %s or later, not %s: its overlay %s (%s) is offered from %s on",
		e.Board.Model(), e.Board, e.MinVersion, e.Version, e.Board.Overlay().Name, RPiOverlayImage, e.MinVersion)
}

func (e *BoardVersionError) Unwrap() error { return ErrBoardVersion }

// CheckVersion refuses a Talos version below the board's minimum with a
// *BoardVersionError. Versions compare as semantic versions, as Talos's
// table does (a v1.12.3 pre-release is below v1.12.3). A version that does
// not parse is left to ValidateVersion.
func (b Board) CheckVersion(talosVersion string) error {
	if err := b.check(); err != nil {
		return err
	}

	min := b.MinTalosVersion()
	if min == "" {
		return nil
	}

	v, err := semver.ParseTolerant(talosVersion)
	if err != nil {
		return nil
	}

	if v.LT(semver.MustParse(strings.TrimPrefix(min, "v"))) {
		return &BoardVersionError{Board: b, Version: talosVersion, MinVersion: min}
	}

	return nil
}

// ErrUnknownBoard is matched (errors.Is) by an *UnknownBoardError.
var ErrUnknownBoard = errors.New("unknown board")

// UnknownBoardError: a board name that is none of Boards.
type UnknownBoardError struct {
	Name string
	// Near is the board the name is probably a typo of ("" if none).
	Near Board
}

func (e *UnknownBoardError) Error() string {
	msg := fmt.Sprintf("unknown board %q", e.Name)
	if e.Name == "" {
		msg = "no board given"
	}

	hint := ""
	if e.Near != "" {
		hint = "did you mean " + string(e.Near) + "?"
		if e.Near.Overlay().Name == e.Name {
			hint += " " + e.Name + " is its overlay's name"
		}
		hint += "; "
	}

	return msg + " (" + hint + "valid: " + strings.Join(BoardNames(), ", ") + ")"
}

func (e *UnknownBoardError) Unwrap() error { return ErrUnknownBoard }

func (b Board) check() error {
	if b.Known() {
		return nil
	}

	return &UnknownBoardError{Name: string(b), Near: nearBoard(string(b))}
}

// ParseBoard reads a board name exactly as Boards spells it ("rpi4",
// "rpi5"); anything else is an *UnknownBoardError with the board it is
// probably a typo of ("rpi_5", "RPi5" and "pi5" all suggest rpi5). An
// empty name is an error too: a caller with nothing given uses its
// default (DefaultBoard, or the profile's board: Profile.TargetBoard).
func ParseBoard(name string) (Board, error) {
	b := Board(name)
	if err := b.check(); err != nil {
		return "", err
	}

	return b, nil
}

// nearBoard is the board name is a typo of: its overlay's name, or within
// edit distance 2 of its name (case ignored).
func nearBoard(name string) Board {
	if name == "" {
		return ""
	}

	low := strings.ToLower(name)
	best, bestD := Board(""), 3

	for _, b := range Boards() {
		if low == b.Overlay().Name {
			return b
		}

		if d := editdistance.Levenshtein(low, string(b)); d < bestD {
			best, bestD = b, d
		}
	}

	return best
}

// BoardOfOverlay is the board whose overlay o is: the official overlay
// image and one of the boards' overlay names (options do not matter). It
// reads back which board a schematic was made for, as the factory UI does
// (image-factory internal/frontend/http/ui.go SetURLValuesFromSchematic
// matches OverlayName and OverlayImage against Talos's SBC table).
func BoardOfOverlay(o schematic.Overlay) (Board, bool) {
	if o.Image != RPiOverlayImage {
		return "", false
	}

	for _, b := range Boards() {
		if b.Overlay().Name == o.Name {
			return b, true
		}
	}

	return "", false
}

// BoardOfSchematic is BoardOfOverlay of the schematic's overlay (a
// schematic from the factory, an installer file's comments or a node's
// `schematic` extension); false for nil.
func BoardOfSchematic(s *schematic.Schematic) (Board, bool) {
	if s == nil {
		return "", false
	}

	return BoardOfOverlay(s.Overlay)
}

// BoardMismatchError: a profile made for one board asked for another.
type BoardMismatchError struct {
	Profile      string
	ProfileBoard Board // the board the profile's overlay is for
	Board        Board // the board asked for
}

// ErrBoardMismatch is matched (errors.Is) by a *BoardMismatchError.
var ErrBoardMismatch = errors.New("profile is for another board")

func (e *BoardMismatchError) Error() string {
	return fmt.Sprintf("profile %q is for the %s (board %s, overlay %s), not board %s: use a profile for %s, or write `board: %s` in the profile (instead of its overlay) so it follows each node's board",
		e.Profile, e.ProfileBoard.Model(), e.ProfileBoard, e.ProfileBoard.Overlay().Name, e.Board, e.Board, AnyBoard)
}

func (e *BoardMismatchError) Unwrap() error { return ErrBoardMismatch }
