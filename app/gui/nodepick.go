package gui

import (
	"fmt"
	"strings"

	"fyne.io/fyne/v2/widget"

	"github.com/talosflash/talosflash/app/plan"
	"github.com/talosflash/talosflash/imaging"
	"github.com/talosflash/talosflash/inventory"
)

// noNodeOption is the node select's "flash a role" choice.
const noNodeOption = "none: flash a role (no address on the card)"

// nodePicker is step 1's node choice with an inventory: the image is the
// node's role/profile and the flash writes the node (address, hostname)
// onto the card's META after the verify (plan.Job.Meta, as the CLI's
// flash --inventory --hostname). One node is one card.
type nodePicker struct {
	sel   *widget.Select
	nodes map[string]inventory.Node // option -> node
}

// newNodePicker is the select for the inventory's nodes (nil: none).
func (s *imageStep) newNodePicker() *widget.Select {
	inv := s.ui.deps.Inventory
	if inv == nil || len(inv.Nodes) == 0 {
		return nil
	}
	p := &nodePicker{nodes: map[string]inventory.Node{}}
	opts := []string{noNodeOption}
	for _, n := range inv.Nodes {
		o := fmt.Sprintf("%s  ·  %s, %s", n.Hostname, plan.BoardLabel(n.Profile, n.Board), n.Address)
		p.nodes[o] = n
		opts = append(opts, o)
	}
	p.sel = widget.NewSelect(opts, func(o string) { s.pickNode(o) })
	p.sel.PlaceHolder = "choose a node of " + inventoryFileName(inv)
	s.nodes = p
	return p.sel
}

// pickNode takes the node chosen (UI goroutine): its profile, its board,
// the inventory's Talos version.
func (s *imageStep) pickNode(option string) {
	n, ok := s.nodes.nodes[option]
	switch {
	case !ok: // none: the pick stands alone again
		s.ui.session.SetNode(nil)
		s.rechoose()
	case s.customRef: // an installer or local image: held against the node
		s.ui.session.SetNode(&n)
		s.rechoose()
	default: // a role: the node's own, on its board
		s.ui.session.SetNode(&n)
		s.showBoard(n.Board)
		if v := s.ui.deps.Inventory.TalosVersion; v != "" && s.version.Text != v {
			s.version.SetText(v)
		}
		s.selectProfile(n.Profile)
		s.update() // also when the role was the node's already
	}
}

// pickedNode is the node chosen in step 1 (nil: a role).
func (s *imageStep) pickedNode() *inventory.Node { return s.ui.session.Node() }

// nodeCardMetas is plan.Job.Meta for a flash of c onto n cards: the
// picked node's values, or nil without a pick; one node is one card.
func (s *flashStep) nodeCardMetas(c *imageChoice, cards int) ([]*plan.CardMeta, error) {
	n := s.ui.image.pickedNode()
	if n == nil {
		return nil, nil
	}
	if cards != 1 {
		return nil, fmt.Errorf("%s is one node: choose one card in step 2 (or a role in step 1 for several cards)", n.Hostname)
	}
	m, err := plan.NodeCardMeta(*n, c)
	if err != nil {
		return nil, fmt.Errorf("node %s: %w", n.Hostname, err)
	}
	return []*plan.CardMeta{m}, nil
}

// cardsReady is the finish screen's title for cards written for their
// node ("" when none was): "Card ready: worker-1, 192.168.1.21/24 (label
// it worker-1)", the CLI's words.
func cardsReady(cards []imaging.CardResult, metas []*plan.CardMeta) string {
	var lines []string
	for i, c := range cards {
		if i < len(metas) && metas[i] != nil && c.OK() {
			m := metas[i]
			lines = append(lines, fmt.Sprintf("✓ Card ready: %s, %s (label it %s)", m.Node, m.Address, m.Node))
		}
	}
	return strings.Join(lines, "\n")
}

// inventoryFileName is the inventory's file name, for the texts.
func inventoryFileName(inv *inventory.Inventory) string {
	name := inv.Path
	if i := strings.LastIndexAny(name, `/\`); i >= 0 {
		name = name[i+1:]
	}
	if name == "" || name == "." {
		name = inventory.DefaultFile
	}
	return name
}
