package plan

import (
	"fmt"
	"strings"

	"github.com/talosflash/talosflash/factory"
	"github.com/talosflash/talosflash/node"
)

// ImageWarnings are the things to tell the user before flashing: an image
// whose extensions only start with an ExtensionServiceConfig (the Newt
// incident), and a worker profile that carries them.
func ImageWarnings(im *Image) []string {
	var out []string
	exts := im.Extensions()
	for _, se := range node.ServiceExtensions() {
		for _, e := range exts {
			if e != se.Extension {
				continue
			}
			setting := ""
			if len(se.Env) > 0 {
				setting = " (setting " + strings.Join(se.Env, ", ") + ")"
			}
			msg := fmt.Sprintf("this image includes %s: the node's machine config must contain an ExtensionServiceConfig named %q%s, or Talos stays in the booting stage and reboots every ~71 minutes",
				e, se.ConfigName, setting)
			if im.Profile != nil && RoleOf(*im.Profile) == node.RoleWorker {
				msg = "the " + im.Profile.Name + " profile includes " + e + " (normally control plane only); " + msg
			}
			out = append(out, msg)
		}
	}
	if ref := im.Installer; ref.SchematicID != "" {
		if ref.SecureBoot() {
			out = append(out, "the installer reference is a SecureBoot one ("+ref.Repository+"): a Raspberry Pi does not boot SecureBoot images; the card gets the plain metal image of the same schematic")
		} else if p := ref.Platform(); p != "" && p != "metal" {
			out = append(out, "the installer reference is for platform "+p+" ("+ref.Repository+"): the card gets the metal image of the same schematic, and the node's machine.install.image should be a metal-installer one")
		}
	}
	if im.Schematic != nil && im.Schematic.Overlay.Name == "" && (im.Arch == "" || im.Arch == factory.DefaultArch) {
		out = append(out, "this schematic has no board overlay: a Raspberry Pi needs the sbc-raspberrypi overlay to boot (rpi_generic for the Pi 4, rpi_5 for the Pi 5)")
	}
	return out
}
