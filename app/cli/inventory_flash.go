package cli

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"

	"github.com/talosflash/talosflash/app/contract"
	"github.com/talosflash/talosflash/app/plan"
	"github.com/talosflash/talosflash/imaging/devices"
	"github.com/talosflash/talosflash/inventory"
)

func init() {
	hiddenFlags["node-meta"] = true // the privileged child's values
	placeholders["inventory"], placeholders["hostname"] = "FILE", "NAME"
	h := commandHelp["flash"]
	h.example += "\ntalosflash --flash --inventory talosflash.yaml --hostname worker-1 --hostname worker-2 --device /dev/sdb --device /dev/sdc"
	commandHelp["flash"] = h
}

// nodeFlags are flash's inventory flags: --inventory with one --hostname
// per --device (paired in order) flashes each card for its node; the
// elevated child gets the values instead (--node-meta), never the file.
type nodeFlags struct {
	inventory string
	hostnames deviceList
	nodeMeta  deviceList // internal: DEVICE=ENCODED, from the unprivileged parent

	nodes []inventory.Node // the --hostname nodes, in order
}

func (f *nodeFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.inventory, "inventory", "", "cluster inventory (talosflash.yaml): flash each card for a node, its address and hostname written onto it (META)")
	fs.Var(&f.hostnames, "hostname", "with --inventory: the node a --device is for (repeat it, paired in order with --device)")
	fs.Var(&f.nodeMeta, "node-meta", "internal: the node META the privileged write puts on a card (DEVICE=VALUE)")
}

// loadSettings applies the run's defaults (plan.LoadSettings: the user's
// profiles and factory, else the inventory's) with the CLI's words and
// exit codes: a profiles file that cannot be used is bad usage; an
// inventory's problems, every one at once, exit 7, before any card or
// node is touched.
func loadSettings(d plan.Defaults) (*plan.Settings, error) {
	s, err := plan.LoadSettings(d)

	var (
		bad      *plan.ProfilesError
		problems inventory.Problems
	)

	switch {
	case err == nil:
		return s, nil
	case errors.As(err, &bad):
		return nil, withCode(contract.ExitUsage, err)
	case errors.As(err, &problems):
		return nil, withCode(contract.ExitConfig, fmt.Errorf("%s: %d problem(s) (see talosflash inventory check %s): %w", d.Inventory, len(problems), d.Inventory, err))
	case errors.Is(err, os.ErrNotExist): // a missing file is bad input (docs/JSON.md)
		return nil, withCode(contract.ExitUsage, fmt.Errorf("%w (start one with: talosflash inventory init %s)", err, d.Inventory))
	}

	return nil, withCode(contract.ExitConfig, err)
}

// loadInventory is loadSettings for a command that needs the inventory.
func loadInventory(file, profiles string) (*inventory.Inventory, error) {
	s, err := loadSettings(plan.Defaults{Inventory: file, ProfilesFile: profiles})
	if err != nil {
		return nil, err
	}

	return s.Inventory, nil
}

// chooseImage reads the inventory and gives the image flags the named
// nodes (plan.ChooseImage decides their image: one run is one image, one
// download and one decode, so the nodes must share it) and the inventory's
// Talos version; its factory and profiles come with the settings
// (imageFlags.load).
func (f *nodeFlags) chooseImage(im *imageFlags, devs int) error {
	switch {
	case f.inventory == "" && len(f.hostnames) > 0:
		return usageErrorf("flash: --hostname needs --inventory FILE")
	case f.inventory == "" && len(f.nodeMeta) > 0:
		if len(f.nodeMeta) > devs {
			return usageErrorf("flash: more --node-meta than --device")
		}

		return nil
	case f.inventory == "":
		return nil
	case len(f.nodeMeta) > 0:
		return usageErrorf("flash: --node-meta is internal; use --inventory with --hostname")
	case len(f.hostnames) == 0:
		return usageErrorf("flash --inventory: name each card's node with --hostname (one per --device)")
	case len(f.hostnames) != devs:
		return usageErrorf("flash --inventory: %d --hostname for %d --device: give one node per card, in the same order", len(f.hostnames), devs)
	}

	s, err := im.load(f.inventory)
	if err != nil {
		return err
	}

	inv := s.Inventory
	seen := map[string]bool{}
	for _, h := range f.hostnames {
		n, err := inv.Find(h)
		if err != nil {
			return withCode(contract.ExitUsage, err)
		}

		if seen[strings.ToLower(n.Hostname)] {
			return usageErrorf("flash: node %s named twice in --hostname: each card gets its own node", n.Hostname)
		}

		seen[strings.ToLower(n.Hostname)] = true
		f.nodes = append(f.nodes, n)
	}

	// The nodes fix the image: plan.ChooseImage refuses a pick that
	// contradicts them (resolve).
	im.nodes, im.inventoryVersion = f.nodes, inv.TalosVersion

	return nil
}

// metas is plan.Job.Meta for the cards: from the inventory's nodes, or in
// the elevated child from --node-meta (matched by the --device given).
func (f *nodeFlags) metas(im *plan.Image, given []string) ([]*plan.CardMeta, error) {
	if len(f.nodes) > 0 {
		out := make([]*plan.CardMeta, len(f.nodes))
		for i, n := range f.nodes {
			m, err := plan.NodeCardMeta(n, im)
			if err != nil {
				return nil, withCode(contract.ExitConfig, err)
			}

			out[i] = m
		}

		return out, nil
	}

	if len(f.nodeMeta) == 0 {
		return nil, nil
	}

	out := make([]*plan.CardMeta, len(given))
	for _, nm := range f.nodeMeta {
		// The value (base64url, no padding) has no '='; the path may.
		i := strings.LastIndexByte(nm, '=')
		if i < 0 {
			return nil, usageErrorf("flash: --node-meta %q: want DEVICE=VALUE", nm)
		}

		dev, enc := nm[:i], nm[i+1:]
		i = indexOf(given, dev)
		if i < 0 {
			return nil, usageErrorf("flash: --node-meta names %s, which is not a --device", dev)
		}

		m, err := plan.DecodeCardMeta(enc)
		if err != nil {
			return nil, withCode(contract.ExitUsage, err)
		}

		out[i] = m
	}

	return out, nil
}

func indexOf(list []string, s string) int {
	for i, x := range list {
		if x == s {
			return i
		}
	}

	return -1
}

// cardReady is the line for a card written for its node.
func cardReady(node *plan.CardMeta) string {
	return fmt.Sprintf("Card ready: %s, %s (label it %s)", node.Node, node.Address, node.Node)
}

// nodeNext is the next step after cards flashed for an inventory's nodes.
func (f *nodeFlags) nodeNext() string {
	return fmt.Sprintf("next: boot each Pi from its card, then `talosflash apply --inventory %s` (waits for each node at its address, checks what it booted, sends its config)",
		devices.ShellJoin([]string{f.inventory}))
}
