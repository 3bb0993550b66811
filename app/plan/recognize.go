package plan

import (
	"github.com/talosflash/talosflash/factory"
)

// Recognize names an image known only by its schematic ID (an installer
// reference) when the ID is one of profiles' schematics, computed offline:
// a pasted `.../metal-installer/<controlplane's ID>:v1.14.5` becomes the
// controlplane role at that version, with its schematic, so its notes and
// checks apply and no factory lookup is needed. It reports whether it did.
func (im *Image) Recognize(profiles []factory.Profile) bool {
	if im.Profile != nil || im.SchematicID == "" || im.LocalPath != "" {
		return false
	}
	for _, p := range profiles {
		id, err := p.SchematicID()
		if err != nil || id != im.SchematicID {
			continue
		}
		if im.Version != "" {
			p.TalosVersion = im.Version
		}
		im.Profile, im.Schematic = &p, p.Schematic()
		im.Label = "profile " + p.Name + " (" + im.Label + ")"
		return true
	}
	return false
}
