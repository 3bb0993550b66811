package cli

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/talosflash/talosflash/app/plan"
	"github.com/talosflash/talosflash/internal/testkit"
	"github.com/talosflash/talosflash/inventory"
)

// A card path with '=' in it (a folder named "cards=2026") still gets its
// node through the elevated child: --node-meta is DEVICE=VALUE, and the
// value (base64url without padding) never holds '=', the path may.
func TestFlashInventoryElevatedDevicePathWithEquals(t *testing.T) {
	_, fx := talosFactory(t)
	dir := filepath.Join(t.TempDir(), "cards=2026")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	img := filepath.Join(dir, "metal-arm64.raw.xz")
	if err := os.WriteFile(img, fx.XZ, 0o600); err != nil {
		t.Fatal(err)
	}
	inv, err := inventory.Load(testkit.Inventory{Configs: true}.Write(t, dir), inventory.Options{})
	if err != nil {
		t.Fatal(err)
	}
	w1 := inv.Nodes[1]
	im := plan.FromFile(img)
	m1, err := plan.NodeCardMeta(w1, im)
	if err != nil {
		t.Fatal(err)
	}
	dev := filepath.Join(dir, "a=1.img")
	job := plan.Job{
		Image: im, Devices: []string{dev}, Meta: []*plan.CardMeta{m1},
		NeedsElevation: func(string) bool { return true },
		Elevate:        realChild(nil),
	}
	res, err := plan.Flash(context.Background(), job)
	if err != nil {
		t.Fatal(err)
	}
	if c := res.Cards[0]; c.Err != nil || c.SHA256 == "" || job.CardMeta(0).Node != "worker-1" {
		t.Fatalf("card: %+v", c)
	}
	checkNodeCard(t, dev, fx, "worker-1", "127.0.0.22/8", "", "") // a local file of unknown content claims no profile
}
