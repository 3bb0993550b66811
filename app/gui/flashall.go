package gui

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/container"
	"fyne.io/fyne/v2/theme"
	"fyne.io/fyne/v2/widget"

	"github.com/talosflash/talosflash/app/plan"
	"github.com/talosflash/talosflash/imaging/devices"
	"github.com/talosflash/talosflash/inventory"
)

// "Flash all cards": with an inventory, the cards chosen in step 2 go one
// to each node, in one flash job (plan.Job.Images: each node's image,
// each image downloaded and decoded once, all at once; one password
// prompt, or none with UDisks2), each card with its node's META, as the
// CLI's flash --inventory with a --hostname per --device.

// notFlashed is a node's "no card" option.
const notFlashed = "no card this time"

// newFlashAllButton is the Flash step's "Flash all cards…" (nil without an
// inventory).
func (s *flashStep) newFlashAllButton() *keyButton {
	if inv := s.ui.deps.Inventory; inv == nil || len(inv.Nodes) == 0 {
		return nil
	}
	return newKeyButton(s.ui, "Flash all cards…", theme.MediaPlayIcon(), s.askFlashAll)
}

// askFlashAll pairs the chosen cards with the inventory's nodes (in order,
// each changeable), then asks to erase them.
func (s *flashStep) askFlashAll() {
	if s.running != nil {
		return
	}
	inv, cards := s.ui.deps.Inventory, s.ui.session.Cards()
	if len(cards) == 0 {
		s.ui.showModal("Flash all cards", wrapLabel(fmt.Sprintf("Choose the cards in step 2 first: one for each node of %s you want to flash (%d nodes).", inventoryFileName(inv), len(inv.Nodes))), "Close", nil, fyne.NewSize(520, 0))
		return
	}
	options := []string{notFlashed}
	for _, d := range cards {
		options = append(options, cardText(d))
	}
	// Each node's line, its card's choice under it at the dialog's whole
	// width: beside it, a card's name and size were cut ("…") at 820 px.
	rows := container.NewVBox()
	selects := make([]*widget.Select, len(inv.Nodes))
	for i, n := range inv.Nodes {
		sel := widget.NewSelect(options, nil)
		sel.SetSelected(notFlashed)
		if i < len(cards) {
			sel.SetSelected(options[i+1])
		}
		selects[i] = sel
		rows.Add(widget.NewLabelWithStyle(fmt.Sprintf("%s  ·  %s, %s", n.Hostname, n.Profile, n.Address), fyne.TextAlignLeading, fyne.TextStyle{Bold: true}))
		rows.Add(sel)
	}
	ok := primaryButton(s.ui, "Next", nil, func() {
		var nodes []inventory.Node
		var disks []devices.Disk
		for i, sel := range selects {
			if j := slices.Index(options, sel.Selected); j > 0 {
				nodes, disks = append(nodes, inv.Nodes[i]), append(disks, cards[j-1])
			}
		}
		s.confirmFlashAll(nodes, disks)
	})
	content := container.NewVBox(wrapLabel("Each node gets its own card: its image (its role's), its address and hostname written onto it."), rows)
	s.ui.showModal("Flash all cards", content, "Cancel", ok, fyne.NewSize(min(760, s.ui.Window.Canvas().Size().Width-40), 0))
}

// confirmFlashAll decides each node's image and asks to erase the cards.
func (s *flashStep) confirmFlashAll(nodes []inventory.Node, disks []devices.Disk) {
	inv, with := s.ui.deps.Inventory, plan.Choice{Profiles: s.ui.deps.Profiles, Factory: s.ui.deps.Factory}
	if recheck := s.ui.deps.Recheck; recheck != nil {
		// The files as they are now: one edited since the app opened is
		// judged before any card is erased, as a new CLI run would judge it.
		fresh, now, err := recheck(nodes)
		if err != nil {
			s.ui.showError(inventoryFileName(inv)+" has changed since the app opened: nothing was written", err)
			return
		}
		inv, nodes, with = fresh.Inventory, now, plan.Choice{Profiles: fresh.Profiles, Factory: s.ui.deps.Factory}
	}
	images, metas, err := clusterCards(inv, with, nodes, disks)
	if err != nil {
		s.ui.showError("Cannot flash these cards", err)
		return
	}
	var list strings.Builder
	elevated := false
	for i, d := range disks {
		fmt.Fprintf(&list, "    %s  (%s, %s)  →  %s, %s (%s)\n", d.Path, d.Description(), d.SizeHuman, metas[i].Node, metas[i].Address, images[i].Label)
		elevated = elevated || s.ui.deps.NeedsElevation(d.Path)
	}
	msg := fmt.Sprintf("Everything on\n\n%s\nwill be erased and replaced with each node's image, its node written onto it.", list.String())
	if elevated {
		msg += "\n\nWriting to the cards needs administrator rights: you will be asked for your password once."
	}
	ok := primaryButton(s.ui, "Erase and flash", theme.MediaPlayIcon(), func() {
		s.begin(*images[0], disks, metas, images)
	})
	s.ui.showModal(fmt.Sprintf("Erase %d cards?", len(disks)), wrapLabel(msg), "Keep the cards", ok, fyne.NewSize(min(760, s.ui.Window.Canvas().Size().Width-40), 0))
}

// clusterCards is each card's image and META for its node (one card a
// node, nodes and disks paired in order): plan.ChooseImages with the
// app's profiles and factory (with), offline (a download registers the
// schematic), one image per profile.
func clusterCards(inv *inventory.Inventory, with plan.Choice, nodes []inventory.Node, disks []devices.Disk) ([]*plan.Image, []*plan.CardMeta, error) {
	if len(nodes) == 0 || len(nodes) != len(disks) {
		return nil, nil, fmt.Errorf("choose a card for at least one node, each card for one node")
	}
	for i := range disks {
		if slices.ContainsFunc(disks[:i], func(d devices.Disk) bool { return d.Path == disks[i].Path }) {
			return nil, nil, fmt.Errorf("%s is chosen for two nodes: each node gets its own card", disks[i].Path)
		}
	}
	images, _, err := plan.ChooseImages(context.Background(), plan.Choice{Nodes: nodes, Profiles: with.Profiles, Factory: with.Factory,
		InventoryVersion: inv.TalosVersion, Format: plan.DefaultFormat})
	if err != nil {
		return nil, nil, err
	}
	metas := make([]*plan.CardMeta, len(nodes))
	for i, n := range nodes {
		if metas[i], err = plan.NodeCardMeta(n, images[i]); err != nil {
			return nil, nil, fmt.Errorf("node %s: %w", n.Hostname, err)
		}
	}
	return images, metas, nil
}

// attemptImages are the images of an attempt, each once: each card's
// (images, "Flash all cards"; a nil entry: c), else c.
func attemptImages(c *imageChoice, images []*plan.Image) []*plan.Image {
	if len(images) == 0 {
		return []*plan.Image{c}
	}
	var out []*plan.Image
	for _, im := range images {
		if im == nil {
			im = c
		}
		if !slices.Contains(out, im) {
			out = append(out, im)
		}
	}
	return out
}
