package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/talosflash/talosflash/app/contract"
	"github.com/talosflash/talosflash/app/elevate"
	"github.com/talosflash/talosflash/app/plan"
	"github.com/talosflash/talosflash/imaging"
	"github.com/talosflash/talosflash/imaging/devices"
	"github.com/talosflash/talosflash/inventory"
)

func init() {
	hiddenFlags["node-meta"] = true // the privileged child's values
	hiddenFlags["card-image"] = true
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
	cardImage deviceList // internal: DEVICE=N, the image on stdin a card is written from (several images)

	nodes []inventory.Node // the --hostname nodes, in order
}

func (f *nodeFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.inventory, "inventory", "", "cluster inventory (talosflash.yaml): flash each card for a node, its address and hostname written onto it (META)")
	fs.Var(&f.hostnames, "hostname", "with --inventory: the node a --device is for (repeat it, paired in order with --device)")
	fs.Var(&f.nodeMeta, "node-meta", "internal: the node META the privileged write puts on a card (DEVICE=VALUE)")
	fs.Var(&f.cardImage, "card-image", "internal: the image on stdin the privileged write puts on a card (DEVICE=N)")
}

// loadSettings applies the run's defaults (plan.LoadSettings: the user's
// profiles and factory, else the inventory's) with the CLI's words and
// exit codes (SettingsError).
func loadSettings(d plan.Defaults) (*plan.Settings, error) {
	s, err := plan.LoadSettings(d)
	if err != nil {
		return nil, SettingsError(err, d.Inventory)
	}

	return s, nil
}

// SettingsError gives an error of plan.LoadSettings (file: the
// inventory file named, "" none) the CLI's words and exit code (ExitCode),
// for the CLI and the app's command line alike: a profiles file that
// cannot be used is bad usage; an inventory's problems, every one at once,
// exit 7, before any card or node is touched; a missing file bad input.
func SettingsError(err error, file string) error {
	var (
		bad      *plan.ProfilesError
		problems inventory.Problems
	)

	switch {
	case errors.As(err, &bad):
		return withCode(contract.ExitUsage, err)
	case errors.As(err, &problems):
		return withCode(contract.ExitConfig, fmt.Errorf("%s: %d problem(s) (see talosflash inventory check %s): %w", file, len(problems), file, err))
	case errors.Is(err, os.ErrNotExist): // a missing file is bad input (docs/JSON.md)
		return withCode(contract.ExitUsage, fmt.Errorf("%w (start one with: talosflash inventory init %s)", err, file))
	}

	return withCode(contract.ExitConfig, err)
}

// ExitCode is the process exit code the CLI gives err (docs/JSON.md).
func ExitCode(err error) int { return exitCode(err) }

// chooseImage reads the inventory and gives the image flags the named
// nodes (plan.ChooseImages decides their images: one per profile, each
// downloaded and decoded once, all in one run) and the inventory's Talos
// version; its factory and profiles come with the settings
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

	c, err := s.Cluster(0)
	if err != nil {
		return err
	}
	seen := map[string]bool{}
	for _, h := range f.hostnames {
		m, err := c.Find(h)
		if err != nil {
			return withCode(contract.ExitUsage, err)
		}
		n := *m.Entry

		if seen[strings.ToLower(n.Hostname)] {
			return usageErrorf("flash: node %s named twice in --hostname: each card gets its own node", n.Hostname)
		}

		seen[strings.ToLower(n.Hostname)] = true
		f.nodes = append(f.nodes, n)
	}

	// The nodes fix the images: plan.ChooseImages refuses a pick that
	// contradicts them (resolveCards).
	im.nodes, im.inventoryVersion = f.nodes, s.Inventory.TalosVersion

	return nil
}

// metas is plan.Job.Meta for the cards: from the inventory's nodes (each
// with its image, ims: per node), or in the elevated child from
// --node-meta (matched by the --device given).
func (f *nodeFlags) metas(ims []*plan.Image, given []string) ([]*plan.CardMeta, error) {
	if len(f.nodes) > 0 {
		out := make([]*plan.CardMeta, len(f.nodes))
		for i, n := range f.nodes {
			m, err := plan.NodeCardMeta(n, ims[i])
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

// distinctImages are the run's images, each once, in the order of their
// first card (ims: per card; empty: im alone).
func distinctImages(im *plan.Image, ims []*plan.Image) []*plan.Image {
	if len(ims) == 0 {
		return []*plan.Image{im}
	}
	var out []*plan.Image
	for _, x := range ims {
		if !slices.Contains(out, x) {
			out = append(out, x)
		}
	}
	return out
}

// cardImage is card i's image.
func cardImage(im *plan.Image, ims []*plan.Image, i int) *plan.Image {
	if i < len(ims) && ims[i] != nil {
		return ims[i]
	}
	return im
}

// cardImages gives the job each card's image (inventory nodes: one image a
// profile, plan.Job.Images) or, in the elevated child, each card's stream
// (--card-image). Several images are several decoders and pipelines at
// once: the process's soft memory limit grows with them.
func (f *flashFlags) cardImages(job *plan.Job, ims []*plan.Image) {
	images := 1
	if len(f.nodes.nodes) > 0 {
		job.Images = ims
		images = len(distinctImages(nil, ims))
	}
	if f.streams != nil {
		job.Streams = f.streams
		images = 0
		for i, r := range f.streams {
			if !slices.Contains(f.streams[:i], r) {
				images++
			}
		}
	}
	if images > 1 && os.Getenv("GOMEMLIMIT") == "" {
		setMemoryLimit(imagesMemoryLimit(images)) // runFlash puts the previous one back
	}
}

// imagesMemoryLimit is the soft memory limit of a flash of n images at
// once: flashMemoryLimit for the first, and the live heap of a pipeline
// (its decoder's history, chunk pool, read-back and head buffers) for
// each other (docs/PERFORMANCE.md).
func imagesMemoryLimit(n int) int64 {
	return flashMemoryLimit + int64(n-1)*imageMemory
}

// imageMemory is what one more image at once adds to the live heap.
const imageMemory = 28 << 20

// receive, in the elevated child, starts reading what its parent sends on
// stdin (elevate.ReceiveImages): the image of every card, or with
// --card-image several, each card's stream in f.streams. Every image must
// be some card's (an image nobody reads would hold up the others).
func (f *flashFlags) receive(ctx context.Context, stdin io.Reader, cancel context.CancelFunc) error {
	idx, n := make([]int, len(f.devices)), 1 // no --card-image: every card from the one image
	if len(f.nodes.cardImage) > 0 {
		var err error
		if idx, n, err = f.cardImageIndex(); err != nil {
			return err
		}
	}
	rs := elevate.ReceiveImages(ctx, stdin, cancel, n)
	f.streams = make([]*elevate.Received, len(f.devices))
	for k := range f.devices {
		f.streams[k] = rs[idx[k]]
	}
	return nil
}

// cardImageIndex is --card-image: per --device, the index of its image,
// and how many images there are (2 to elevate.MaxImages, each some
// card's: the parent passes it only for several).
func (f *flashFlags) cardImageIndex() ([]int, int, error) {
	idx := make([]int, len(f.devices))
	set := make([]bool, len(f.devices))
	n := 0
	for _, v := range f.nodes.cardImage {
		i := strings.LastIndexByte(v, '=')
		if i < 0 {
			return nil, 0, usageErrorf("flash: --card-image %q: want DEVICE=N", v)
		}
		k := indexOf(f.devices, v[:i])
		if k < 0 {
			return nil, 0, usageErrorf("flash: --card-image names %s, which is not a --device", v[:i])
		}
		x, err := strconv.Atoi(v[i+1:])
		if err != nil || x < 0 || x >= elevate.MaxImages || set[k] {
			return nil, 0, usageErrorf("flash: --card-image %q: want each --device once, with an image 0 to %d", v, elevate.MaxImages-1)
		}
		idx[k], set[k], n = x, true, max(n, x+1)
	}
	for k := range f.devices {
		if !set[k] {
			return nil, 0, usageErrorf("flash: --card-image: none for --device %s", f.devices[k])
		}
	}
	for x := range n {
		if n < 2 || !slices.Contains(idx, x) {
			return nil, 0, usageErrorf("flash: --card-image: images 0 to %d, each some card's", n-1)
		}
	}
	return idx, n, nil
}

// cardName is a card in the summary: its node and path, or its path.
func cardName(target string, node *plan.CardMeta) string {
	if node == nil {
		return target
	}
	return node.Node + " (" + target + ")"
}

// nodesSummary is the run's last line for several nodes: each node and how
// its card ended ("nodes: cp-1 ready (/dev/sdb), worker-2 FAILED
// (/dev/sdd)").
func nodesSummary(cards []imaging.CardResult, metas []*plan.CardMeta) string {
	parts := make([]string, 0, len(cards))
	for i, c := range cards {
		name := c.Target
		if i < len(metas) && metas[i] != nil {
			name = metas[i].Node
		}
		state := "ready"
		if c.Err != nil {
			state = "FAILED"
		}
		parts = append(parts, fmt.Sprintf("%s %s (%s)", name, state, c.Target))
	}
	return "nodes: " + strings.Join(parts, ", ")
}
