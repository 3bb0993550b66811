package gui

import (
	"strings"
	"testing"

	"github.com/talosflash/talosflash/factory"
)

// The board beside the role: rpi5 builds the role for the Raspberry Pi 5
// (its schematic, ID and board in the preview); below the board's minimum
// Talos version the step says the version it needs and blocks Next.
func TestImageStepBoard(t *testing.T) {
	h := newHarness(t, nil)
	w5, _ := factory.BuiltinProfile(factory.RoleWorker, factory.BoardRPi5)
	id5, _ := w5.SchematicID()
	h.onUI(func() {
		h.ui.image.selectProfile("worker")
		h.ui.image.board.SetSelected(boardOption(factory.BoardRPi5))
		c := h.ui.session.Choice()
		if c == nil || c.SchematicID != id5 || h.ui.image.id.Text != id5 {
			t.Fatalf("worker on rpi5: choice %+v, id %q", c, h.ui.image.id.Text)
		}
		y := h.ui.image.yaml.Text
		if !strings.Contains(y, "name: rpi_5") || !strings.Contains(y, "# board: rpi5 (Raspberry Pi 5, overlay rpi_5)") {
			t.Fatalf("preview:\n%s", y)
		}
		if !strings.HasPrefix(h.ui.image.profile.Selected, "worker  ·  Raspberry Pi 5 worker") {
			t.Fatalf("the role's description does not follow the board: %q", h.ui.image.profile.Selected)
		}
		h.ui.image.version.SetText("v1.12.2")
		if h.ui.session.Choice() != nil || !h.ui.image.next.Disabled() || !strings.Contains(h.ui.image.problem.Text, "needs Talos v1.12.3 or later, not v1.12.2") {
			t.Fatalf("rpi5 at v1.12.2: choice %+v, problem %q", h.ui.session.Choice(), h.ui.image.problem.Text)
		}
		h.ui.image.version.SetText("v1.14.5")
		h.ui.image.board.SetSelected(boardOption(factory.BoardRPi4))
		if c := h.ui.session.Choice(); c == nil || c.Board() != factory.BoardRPi4 || !strings.Contains(h.ui.image.yaml.Text, "rpi_generic") {
			t.Fatalf("back on rpi4: %+v", c)
		}
	})
}

// A profile's overlay options show in the schematic preview, as the
// factory stores them and named below it.
func TestImageStepShowsOverlayOptions(t *testing.T) {
	profiles, err := factory.ParseProfiles([]byte(`profiles:
  - name: nvme-worker
    board: rpi5
    overlay:
      options:
        configTxtAppend: |-
          dtparam=pciex1
          dtparam=pciex1_gen=3
`))
	if err != nil {
		t.Fatal(err)
	}
	h := newHarness(t, factory.MergeProfiles(factory.BuiltinProfiles(), profiles))
	h.onUI(func() {
		h.ui.image.selectProfile("nvme-worker")
		y := h.ui.image.yaml.Text
		for _, want := range []string{"name: rpi_5", "options:", "configTxtAppend: |-", "dtparam=pciex1_gen=3", "# overlay options: configTxtAppend"} {
			if !strings.Contains(y, want) {
				t.Errorf("no %q in the preview:\n%s", want, y)
			}
		}
		if h.ui.image.selectedBoard() != factory.BoardRPi5 || h.ui.image.id.Text != "5eb48915ff693f7f7727071e108c99fef0bd3a5137746fa2f0b8db22d1a3bea3" {
			t.Errorf("board %s, id %s", h.ui.image.selectedBoard(), h.ui.image.id.Text)
		}
	})
}

// Issue 39: the installer field's placeholder names the factory in use,
// not factory.talos.dev when another --factory is given.
func TestInstallerPlaceholderNamesTheFactory(t *testing.T) {
	h := newHarness(t, nil)
	h.onUI(func() {
		host := strings.TrimPrefix(h.factory.URL, "http://")
		if ph := h.ui.image.ref.PlaceHolder; !strings.HasPrefix(ph, host+"/metal-installer/") || strings.Contains(ph, "factory.talos.dev") {
			t.Fatalf("placeholder %q, want the factory in use (%s)", ph, host)
		}
	})
}

// Issue 39: a pick refused for the node picked keeps the schematic fields
// under their header (the pick's own schematic, said refused) and does
// not offer Node "none" as a way around the refusal. A Pi 5 node picks its
// board; a Pi 4 image for it is refused, naming both boards.
func TestImageStepRefusalKeepsTheSchematic(t *testing.T) {
	h, _ := nodePickHarnessWith(t, `gateway: 192.168.1.1
nodes:
  - hostname: cp-1
    role: controlplane
    address: 192.168.1.11/24
  - hostname: worker-1
    role: worker
    address: 192.168.1.21/24
  - hostname: worker-5
    role: worker
    board: rpi5
    address: 192.168.1.25/24
`)
	cp, _ := factory.BuiltinProfile(factory.RoleControlPlane, factory.BoardRPi4)
	cpID, _ := cp.SchematicID()
	h.onUI(func() {
		h.pickNode("worker-1")
		h.ui.image.selectProfile("controlplane")
		im := h.ui.image
		if h.ui.session.Choice() != nil || !im.next.Disabled() || !strings.Contains(im.problem.Text, "the inventory says worker-1 is a worker") {
			t.Fatalf("conflict not shown: %q", im.problem.Text)
		}
		if strings.Contains(strings.ToLower(im.problem.Text), "none") {
			t.Fatalf("the refusal offers a way around itself: %q", im.problem.Text)
		}
		if !strings.Contains(im.yamlHead.Text, "refused for worker-1") || !strings.Contains(im.yaml.Text, "siderolabs/newt") || !strings.HasPrefix(im.id.Text, cpID) {
			t.Fatalf("schematic fields under the header: head %q, id %q, yaml %q", im.yamlHead.Text, im.id.Text, im.yaml.Text)
		}

		h.pickNode("worker-5")
		c := h.ui.session.Choice()
		if im.selectedBoard() != factory.BoardRPi5 || c == nil || c.Board() != factory.BoardRPi5 || c.ProfileName() != "worker" || im.yamlHead.Text != schematicHeading {
			t.Fatalf("worker-5: board %s, choice %+v, head %q", im.selectedBoard(), c, im.yamlHead.Text)
		}
		im.board.SetSelected(boardOption(factory.BoardRPi4))
		if h.ui.session.Choice() != nil || !strings.Contains(im.problem.Text, "the worker image for rpi4") || !strings.Contains(im.problem.Text, "worker-5 is a worker on board rpi5") {
			t.Fatalf("a Pi 4 image for worker-5: %q", im.problem.Text)
		}
	})
}
