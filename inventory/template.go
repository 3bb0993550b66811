package inventory

import (
	"fmt"
	"strings"

	"github.com/talosflash/talosflash/factory"
)

// exampleNodes are the starting file's machines: one control plane, two
// workers, on an example home network (documentation only).
var exampleNodes = []struct{ host, role, addr string }{
	{"cp-1", "controlplane", "192.168.1.20/24"},
	{"worker-1", "worker", "192.168.1.21/24"},
	{"worker-2", "worker", "192.168.1.22/24"},
}

// Template is a commented starting talosflash.yaml for the built-in roles.
// The addresses are examples: nothing is looked up or contacted.
func Template() []byte {
	version := factory.DefaultTalosVersion
	roles := factory.BuiltinProfiles()

	var b strings.Builder

	b.WriteString(`# talosflash inventory: the cluster's machines, one card each.
# Keep it next to the talos/ folder (machine configs, installer files) in git.
# It holds no secrets: the machine configs it names do, so keep those private.
#
# talosflash writes each node's address, route, DNS and hostname onto its
# card (Talos META key 0x0a, read by the metal platform at boot, before any
# machine config), so every Pi boots where this file says it is.
# Check it with: talosflash inventory check
# The addresses below are EXAMPLES: change them to your network's.

cluster: home
`)
	fmt.Fprintf(&b, "factory: %s   # the Image Factory the images come from\n", factory.DefaultBaseURL)
	fmt.Fprintf(&b, "talosVersion: %s              # default for every node's image\n", version)
	b.WriteString(`
# Defaults for every node (a node may set its own):
gateway: 192.168.1.1          # the router; must be inside each node's subnet
dns: [192.168.1.1]            # resolvers (a list)
interface: ` + DefaultInterface + `               # the Pi 4's onboard Ethernet under Talos

# Roles (role:) are the built-in images:
`)

	for _, r := range roles {
		fmt.Fprintf(&b, "#   %-13s %s\n", r.Name, r.Description)
	}

	b.WriteString(`# Each built for the node's board: (rpi4, the Raspberry Pi 4B, when not given;
# rpi5 for a Raspberry Pi 5, from Talos v1.12.3). A Pi 5 node's installer file
# is its own: talos/installer-ROLE-rpi5.yaml.
# A custom image: profile: NAME, defined in a profiles file named here:
# profiles: profiles.yaml

`)

	b.WriteString(`
nodes:
# Each node: hostname, role (or profile), address with its prefix length;
# config is its machine config (talosctl gen config ... --output-dir talos),
# installer its installer file
# (talosflash schematic --role ROLE --installer-yaml > talos/installer-ROLE.yaml).
`)

	for i, n := range exampleNodes {
		if i > 0 {
			b.WriteString("\n")
		}

		fmt.Fprintf(&b, "  - hostname: %s\n", n.host)
		fmt.Fprintf(&b, "    role: %s\n", n.role)
		fmt.Fprintf(&b, "    address: %s\n", n.addr)
		fmt.Fprintf(&b, "    config: talos/%s.yaml\n", n.role)
		fmt.Fprintf(&b, "    installer: talos/installer-%s.yaml\n", n.role)
	}

	return []byte(b.String())
}
