package node

import (
	"fmt"
	"regexp"
	"strings"

	"github.com/siderolabs/image-factory/pkg/schematic"

	text "github.com/talosflash/talosflash/internal/printable"
)

// Anything on the LAN can answer on port 50000 and report any string as its
// hostname, version or extension names. Everything a node reports is made
// printable here, at the source, before a terminal, a table or the app shows
// it: control and format characters (escape sequences, CR/LF that would
// forge table rows, bidi overrides) are escaped and lengths bounded.

// Length bounds (bytes, after escaping) of what a node reports.
const (
	maxHostname  = 128 // DNS allows 253; a table needs less
	maxName      = 64  // extension, overlay names
	maxMessage   = 400 // same as sanitize
	maxListItems = 64  // extensions per node
)

var (
	talosVersion = regexp.MustCompile(`^v?[0-9]{1,4}\.[0-9]{1,4}\.[0-9]{1,4}(?:-[0-9A-Za-z.\-]{1,64})?(?:\+[0-9A-Za-z.\-]{1,64})?$`)
	archName     = regexp.MustCompile(`^[a-z0-9_]{1,16}$`)
	hexID        = regexp.MustCompile(`^[0-9a-f]{64}$`)
)

// printable escapes control and format characters of s and cuts it to at
// most max bytes: the one printable-text function (internal/printable).
func printable(s string, max int) string { return text.Bounded(s, max) }

// cleanVersion keeps v if it looks like a Talos version; otherwise it
// returns "" and the escaped value for display.
func cleanVersion(v string) (version, invalid string) {
	v = strings.TrimSpace(v)
	if v == "" || talosVersion.MatchString(v) {
		return v, ""
	}
	return "", printable(v, maxName)
}

// clean makes every string of a probed node printable and bounded.
func (n *Node) clean() []string {
	var notes []string
	n.Stage = printable(n.Stage, maxName)
	n.Hostname = printable(n.Hostname, maxHostname)
	n.Domainname = printable(n.Domainname, maxHostname)
	n.MAC = printable(n.MAC, maxName)
	n.TalosVersion, n.InvalidVersion = cleanVersion(n.TalosVersion)
	if n.InvalidVersion != "" {
		notes = append(notes, "reports an invalid Talos version ("+n.InvalidVersion+")")
	}
	if n.Arch != "" && !archName.MatchString(n.Arch) {
		notes = append(notes, "reports an invalid architecture ("+printable(n.Arch, maxName)+")")
		n.Arch = ""
	}
	if n.Booted != nil {
		notes = append(notes, n.Booted.notes...) // cleaned by readBooted
	}
	return notes
}

// clean makes what a node reports it booted printable and bounded; a
// schematic ID that is not one is dropped.
func (b *Booted) clean() []string {
	var notes []string
	if b.SchematicID != "" && !hexID.MatchString(b.SchematicID) {
		notes = append(notes, "reports an invalid schematic ID ("+printable(b.SchematicID, maxName)+")")
		b.SchematicID = ""
	}
	b.Overlay = printable(b.Overlay, maxName)
	if len(b.Extensions) > maxListItems {
		notes = append(notes, fmt.Sprintf("reports %d extensions, only the first %d are shown", len(b.Extensions), maxListItems))
		b.Extensions = b.Extensions[:maxListItems]
	}
	for i, e := range b.Extensions {
		b.Extensions[i] = printable(e, maxName)
	}
	if s := b.Schematic; s != nil {
		cleanSchematic(s)
	}
	return notes
}

// cleanSchematic makes the schematic fields talosflash shows printable.
func cleanSchematic(s *schematic.Schematic) {
	s.Overlay.Image = printable(s.Overlay.Image, maxName)
	s.Overlay.Name = printable(s.Overlay.Name, maxName)
	exts := s.Customization.SystemExtensions.OfficialExtensions
	if len(exts) > maxListItems {
		exts = exts[:maxListItems]
	}
	for i, e := range exts {
		exts[i] = printable(e, maxHostname)
	}
	s.Customization.SystemExtensions.OfficialExtensions = exts
	args := s.Customization.ExtraKernelArgs
	if len(args) > maxListItems {
		args = args[:maxListItems]
	}
	for i, a := range args {
		args[i] = printable(a, maxHostname)
	}
	s.Customization.ExtraKernelArgs = args
}
