package plan

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/talosflash/talosflash/factory"
	"github.com/talosflash/talosflash/inventory"
)

// The four role x board schematic IDs (docs/BOARDS.md).
const (
	idCP4     = "29a2fae6a7f059e83882db3447b6411d474c6154d8cd1a34ec27779ab198f50d"
	idWorker4 = "ee21ef4a5ef808a9b7484cc0dda0f25075021691c8c09a276591eedb638ea1f9"
	idCP5     = "e761366799ebd34f6047dc1ec81548129662ca740498063e623c98eac71a3b81"
	idWorker5 = "a636242df247ad4aad2e36d1026d8d4727b716a3061749bd7b19651e548f65e4"
)

// mixedInventory: a Pi 4 and a Pi 5 of each role.
func mixedInventory(t *testing.T) *inventory.Inventory {
	t.Helper()
	inv, err := inventory.Parse([]byte(`cluster: mixed
nodes:
  - hostname: cp-1
    role: controlplane
    address: 127.0.0.21/8
  - hostname: worker-1
    role: worker
    address: 127.0.0.22/8
  - hostname: cp-5
    role: controlplane
    board: rpi5
    address: 127.0.0.25/8
  - hostname: worker-5
    role: worker
    board: rpi5
    address: 127.0.0.26/8
  - hostname: worker-6
    role: worker
    board: rpi5
    address: 127.0.0.27/8
`), "talosflash.yaml", "", inventory.Options{SkipFiles: true})
	if err != nil {
		t.Fatal(err)
	}
	return inv
}

// A member's image is its role on its board: the rolling upgrade installs
// Member.Schematic(), so a Pi 5 worker gets the rpi_5 worker's installer.
func TestMemberImageFollowsItsBoard(t *testing.T) {
	c := NewCluster(mixedInventory(t), nil, 0)
	for host, want := range map[string]string{"cp-1": idCP4, "worker-1": idWorker4, "cp-5": idCP5, "worker-5": idWorker5, "worker-6": idWorker5} {
		m, err := c.Find(host)
		if err != nil {
			t.Fatal(err)
		}
		if got := m.SchematicID(); got != want {
			t.Errorf("%s: schematic %s, want %s", host, got, want)
		}
		if s := m.Schematic(); s == nil || (m.Board == factory.BoardRPi5) != (s.Overlay.Name == "rpi_5") {
			t.Errorf("%s (board %s): schematic %+v", host, m.Board, s)
		}
		if m.ProfileName() != m.Role.String() || len(m.Needs()) != map[bool]int{true: 1}[m.Role.IsControlPlane()] {
			t.Errorf("%s: profile %s, needs %v", host, m.ProfileName(), m.Needs())
		}
	}
}

// A mixed cluster in one decision: each node gets its role's image on its
// board, nodes of one role and board share it (one download each).
func TestChooseImagesPerRoleAndBoard(t *testing.T) {
	inv := mixedInventory(t)
	ims, obl, err := ChooseImages(context.Background(), Choice{Nodes: inv.Nodes, Profiles: inv.Known, Factory: factory.NewClient("http://127.0.0.1:1", nil)})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{idCP4, idWorker4, idCP5, idWorker5, idWorker5}
	for i, im := range ims {
		if im.SchematicID != want[i] || im.Board() != inv.Nodes[i].Board {
			t.Errorf("%s: %s on %s, want %s on %s", inv.Nodes[i].Hostname, im.SchematicID, im.Board(), want[i], inv.Nodes[i].Board)
		}
	}
	if ims[3] != ims[4] || ims[1] == ims[3] || ims[0] == ims[2] {
		t.Error("images not shared per role and board")
	}
	if ims[3].Label != "profile worker for rpi5" || ims[1].Label != "profile worker" {
		t.Errorf("labels %q, %q", ims[3].Label, ims[1].Label)
	}
	if len(obl.Services) != 1 || obl.Services[0].Extension != factory.NewtExtension {
		t.Errorf("obligations %+v", obl)
	}
	// The record on each card names its board.
	m, err := NodeCardMeta(inv.Nodes[3], ims[3])
	if err != nil {
		t.Fatal(err)
	}
	rec, err := inventory.ParseRecord(m.Tags[1].Value)
	if err != nil || rec.Board != "rpi5" || rec.Schematic != idWorker5 || rec.Profile != "worker" {
		t.Fatalf("record %+v, %v", rec, err)
	}
}

// --board picks the role's board; a board below its minimum Talos version
// is refused with the version it needs; a pick of the other board for a
// node is a conflict that names both boards; an installer of the node's
// board is its image.
func TestChooseImageBoard(t *testing.T) {
	f := factory.NewClient("http://127.0.0.1:1", nil)
	im, _, err := ChooseImage(context.Background(), Choice{Role: "worker", Board: factory.BoardRPi5, Factory: f})
	if err != nil || im.SchematicID != idWorker5 || im.Installer.SchematicID != idWorker5 {
		t.Fatalf("worker on rpi5: %+v, %v", im, err)
	}

	_, _, err = ChooseImage(context.Background(), Choice{Role: "controlplane", Board: factory.BoardRPi5, Version: "v1.12.2", Factory: f})
	if !IsChoiceError(err) || !errors.Is(err, factory.ErrBoardVersion) || !strings.Contains(err.Error(), "needs Talos v1.12.3 or later, not v1.12.2") {
		t.Fatalf("rpi5 at v1.12.2: %v", err)
	}

	inv := mixedInventory(t)
	w5 := inv.Nodes[3]
	_, _, err = ChooseImage(context.Background(), Choice{Role: "worker", Board: factory.BoardRPi4, Nodes: []inventory.Node{w5}, Factory: f})
	var conflict *ConflictError
	if !errors.As(err, &conflict) {
		t.Fatalf("a Pi 4 worker image for a Pi 5: %v", err)
	}
	want := "role worker is the worker image for rpi4 (schematic ee21ef4a5ef8…); the inventory says worker-5 is a worker on board rpi5: flash worker-5's own image (profile worker, board rpi5), or correct the inventory"
	if got := conflict.Error(); got != want {
		t.Fatalf("got  %s\nwant %s", got, want)
	}

	ref := "factory.talos.dev/metal-installer/" + idWorker5 + ":v1.14.5"
	im, _, err = ChooseImage(context.Background(), Choice{InstallerRef: ref, Nodes: []inventory.Node{w5}, Factory: f})
	if err != nil || im.ProfileName() != "worker" || im.Board() != factory.BoardRPi5 {
		t.Fatalf("the Pi 5 worker's installer for worker-5: %+v, %v", im, err)
	}
	_, _, err = ChooseImage(context.Background(), Choice{InstallerRef: ref, Nodes: []inventory.Node{inv.Nodes[1]}, Factory: f})
	if !errors.As(err, &conflict) || !strings.Contains(err.Error(), "is the worker image for rpi5") {
		t.Fatalf("the Pi 5 worker's installer for a Pi 4 worker: %v", err)
	}
	_, _, err = ChooseImage(context.Background(), Choice{InstallerRef: ref, Board: factory.BoardRPi4, Factory: f})
	if !IsChoiceError(err) || !strings.Contains(err.Error(), "board rpi4 contradicts the installer's board rpi5") {
		t.Fatalf("--board rpi4 with a Pi 5 installer: %v", err)
	}
}

// A schematic without an overlay is said to need the board's overlay,
// naming both boards' (it named the Pi 4's only).
func TestNoOverlayWarningNamesBothBoards(t *testing.T) {
	im := &Image{Schematic: (&factory.Profile{Name: "bare"}).Schematic(), Arch: "arm64"}
	w := strings.Join(ImageWarnings(im), "\n")
	if !strings.Contains(w, "rpi_generic for the Pi 4, rpi_5 for the Pi 5") {
		t.Fatalf("warnings %q", w)
	}
}
