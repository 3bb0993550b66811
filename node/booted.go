package node

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/cosi-project/runtime/pkg/safe"
	"github.com/siderolabs/image-factory/pkg/schematic"
	"github.com/siderolabs/talos/pkg/machinery/client"
	"github.com/siderolabs/talos/pkg/machinery/resources/runtime"

	"github.com/talosflash/talosflash/factory"
)

// SchematicExtension is the virtual extension the Image Factory adds to
// every image: its version is the schematic ID and (Talos >= 1.7) its
// extraInfo the schematic YAML (image-factory internal/asset builder).
const SchematicExtension = "schematic"

// Booted is what a node reports it booted, read from its ExtensionStatuses
// (`talosctl get extensions --insecure`): the factory schematic and the
// system extensions of its image.
type Booted struct {
	SchematicID string `json:",omitempty"` // "" for an image not made by the Image Factory
	// Schematic is the schematic YAML the image carries (Talos >= 1.7), nil if absent.
	Schematic *schematic.Schematic `json:"-"`
	Overlay   string               `json:",omitempty"` // overlay image from the schematic, e.g. "siderolabs/sbc-raspberrypi"
	// Extensions are the extension names as the node lists them (manifest
	// names such as "newt"), without the virtual "schematic" entry, sorted.
	Extensions []string

	notes []string // what was odd in the node's report (Booted.clean)
}

// HasExtension reports whether the image has the extension, by its official
// name ("siderolabs/newt") or manifest name ("newt").
func (b *Booted) HasExtension(name string) bool {
	if b == nil {
		return false
	}
	short := name[strings.LastIndex(name, "/")+1:]
	if slices.Contains(b.Extensions, short) {
		return true
	}
	if b.Schematic != nil {
		for _, e := range b.Schematic.Customization.SystemExtensions.OfficialExtensions {
			if extensionName(e) == extensionName(name) || extensionName(e) == "siderolabs/"+short {
				return true
			}
		}
	}
	return false
}

// String is a one-line summary: "schematic 29a2fae6a7f0… overlay siderolabs/sbc-raspberrypi, extensions newt".
func (b *Booted) String() string {
	if b == nil {
		return "unknown"
	}
	var parts []string
	if b.SchematicID != "" {
		parts = append(parts, "schematic "+factory.ShortID(b.SchematicID))
	} else {
		parts = append(parts, "no factory schematic")
	}
	if b.Overlay != "" {
		parts = append(parts, "overlay "+b.Overlay)
	}
	if len(b.Extensions) > 0 {
		parts = append(parts, "extensions "+strings.Join(b.Extensions, ", "))
	} else {
		parts = append(parts, "no extensions")
	}
	return strings.Join(parts, ", ")
}

// readBooted lists the node's ExtensionStatuses. Maintenance mode serves
// them to an insecure client (they are not sensitive).
func readBooted(ctx context.Context, c *client.Client) (*Booted, error) {
	list, err := safe.StateListAll[*runtime.ExtensionStatus](ctx, c.COSI)
	if err != nil {
		return nil, fmt.Errorf("list extension statuses: %w", err)
	}
	if list.Len() == 0 {
		return nil, nil // no statuses (older Talos, or an image not from the factory): unknown
	}
	b := &Booted{}
	for ext := range list.All() {
		md := ext.TypedSpec().Metadata
		if md.Name == SchematicExtension {
			b.SchematicID = md.Version
			if md.ExtraInfo != "" {
				if s, err := schematic.Unmarshal([]byte(md.ExtraInfo)); err == nil {
					b.Schematic = s
					b.Overlay = s.Overlay.Image
				}
			}
			continue
		}
		if md.Name != "" {
			b.Extensions = append(b.Extensions, md.Name)
		}
	}
	b.notes = b.clean() // a rogue node may report anything: printable and bounded from here on
	slices.Sort(b.Extensions)
	return b, nil
}
