package gui

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/test"
	"fyne.io/fyne/v2/widget"

	"github.com/talosflash/talosflash/factory"
	"github.com/talosflash/talosflash/imaging"
	"github.com/talosflash/talosflash/imaging/devices"
	"github.com/talosflash/talosflash/imaging/meta"
	"github.com/talosflash/talosflash/internal/testkit"
	"github.com/talosflash/talosflash/inventory"
)

const evilText = "\x1b[2J\x1b[HNode: evil\u202e"

// A card row shows what a crafted card (and its reader's model string)
// says escaped: the default CardHolds on a real card image whose node and
// record strings are hostile.
func TestCardRowEscapesWhatTheCardSays(t *testing.T) {
	path := testkit.TalosCard(t, "evil.img")
	network, _ := json.Marshal(map[string]any{
		"hostnames": []map[string]string{{"hostname": evilText}},
		"addresses": []map[string]string{{"address": "192.168.1.21/24", "linkName": evilText}},
	})
	record, _ := json.Marshal(map[string]string{"format": inventory.RecordFormat, "schematic": evilText, "talosVersion": evilText, "profile": evilText})
	if _, err := meta.WriteTagsPath(path, []meta.Tag{{Key: meta.MetalNetworkPlatformConfig, Value: network}, {Key: inventory.RecordKey, Value: record}}); err != nil {
		t.Fatal(err)
	}
	card := devices.Disk{Name: "sdb", Path: path, Size: 16 << 20, SizeHuman: "16 MiB", Model: evilText, Vendor: evilText, Transport: devices.TransportUSB, Removable: true, Safe: true}
	deps := Deps{
		Factory:        factory.NewClient("http://127.0.0.1:1", nil),
		Cache:          &imaging.Cache{Dir: t.TempDir()},
		ListDevices:    func() ([]devices.Disk, error) { return []devices.Disk{card}, nil },
		NeedsElevation: func(string) bool { return false },
		PortalOpenFile: noPortal,
		DeviceEvents:   func(context.Context) <-chan struct{} { return make(chan struct{}) },
	}
	a := test.NewTempApp(t)
	ui := New(a, deps)
	t.Cleanup(ui.Close)
	row := func() (string, string) {
		ui.uiMu.Lock()
		defer ui.uiMu.Unlock()
		if ui.target.list.Length() == 0 {
			return "", ""
		}
		o := ui.target.list.CreateItem()
		ui.target.list.UpdateItem(0, o)
		box := o.(*fyne.Container).Objects[0].(*fyne.Container)
		return box.Objects[0].(*widget.Label).Text, box.Objects[1].(*widget.Label).Text
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		title, detail := row()
		if strings.Contains(detail, "holds ") {
			for _, s := range []string{title, detail} {
				for _, r := range s {
					if r < 0x20 || r == 0x7f || r >= 0x80 && r < 0xa0 || r >= 0x202a && r <= 0x202e || r >= 0x2066 && r <= 0x2069 {
						t.Fatalf("card row holds %U: %q", r, s)
					}
				}
			}
			if !strings.Contains(detail, `\x1b[2J`) || !strings.Contains(title, `\x1b[2J`) {
				t.Fatalf("card row does not show the card's text escaped: %q / %q", title, detail)
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("card row %q / %q does not say what the card holds", title, detail)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
