//go:build demo

package gui

// The demo runs the real UI against a fake Image Factory on 127.0.0.1, a
// regular file as the SD card and canned nodes, and drives it to one step
// so scripts/screenshots.sh can capture it. Built only with -tags demo:
// the release binary never contains the fake servers.

import (
	"context"
	_ "embed"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"time"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/app"
	"fyne.io/fyne/v2/storage"

	"github.com/talosflash/talosflash/factory"
	"github.com/talosflash/talosflash/factory/factorytest"
	"github.com/talosflash/talosflash/imaging"
	"github.com/talosflash/talosflash/imaging/devices"
	"github.com/talosflash/talosflash/imaging/imagetest"
	"github.com/talosflash/talosflash/node"
)

//go:embed testdata/controlplane-no-esc.yaml
var demoConfigNoESC []byte

//go:embed testdata/worker.yaml
var demoWorker []byte

// DemoSteps are the states RunDemo can reach.
var DemoSteps = []string{"image", "local", "card", "confirm", "flashing", "done", "nodes", "findings"}

// RunDemo shows the window at step and prints "READY <step>" on stdout once
// it is there. It blocks until the window is closed.
func RunDemo(step string) error {
	dir, err := os.MkdirTemp("", "talosflash-demo-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)

	srv := factorytest.NewServer() // 127.0.0.1 only
	defer srv.Close()
	raw, err := imagetest.Raw(16<<20, 1)
	if err != nil {
		return err
	}
	xz, err := imagetest.XZBytes(raw, 4<<20)
	if err != nil {
		return err
	}
	zst, err := imagetest.ZstdBytes(raw)
	if err != nil {
		return err
	}
	for _, p := range factory.BuiltinProfiles() {
		id, _ := p.SchematicID()
		srv.AddImage(id, p.Version(), "metal-arm64.raw.xz", xz)
		srv.AddImage(id, p.Version(), "metal-arm64.raw.zst", zst)
	}

	card := filepath.Join(dir, "sdcard.img")
	if err := os.WriteFile(card, nil, 0o644); err != nil {
		return err
	}
	disks := []devices.Disk{
		{Name: "sdb", Path: "/dev/sdb", Size: 31914983424, SizeHuman: "29.7 GiB", Vendor: "Generic", Model: "SD/MMC Reader", Transport: devices.TransportUSB, Removable: true, Safe: true},
		{Name: "sdc", Path: "/dev/sdc", Size: 62277025792, SizeHuman: "58 GiB", Vendor: "SanDisk", Model: "Ultra USB 3.0", Transport: devices.TransportUSB, Removable: true,
			Mounts:  []devices.Mount{{Point: "/home/user/backup", FSType: "ext4"}},
			Refusal: &devices.RefusedError{Device: "/dev/sdc", Reason: devices.CodeMounted, Msg: "/dev/sdc is mounted at /home/user/backup, outside /media and /run/media; unmount it yourself if it really is the card"}},
		{Name: "nvme0n1", Path: "/dev/nvme0n1", Size: 512110190592, SizeHuman: "477 GiB", Model: "Samsung SSD 980 PRO", Transport: devices.TransportNVMe,
			Refusal: &devices.RefusedError{Device: "/dev/nvme0n1", Reason: devices.CodeSystemDisk, Msg: "/dev/nvme0n1 holds the system filesystem /"}},
	}
	booted := func(role string, exts ...string) *node.Booted { // what each Pi reports it booted
		p, _ := factory.FindProfile(factory.BuiltinProfiles(), role)
		id, _ := p.SchematicID()
		return &node.Booted{SchematicID: id, Schematic: p.Schematic(), Overlay: factory.RPiOverlayImage, Extensions: exts}
	}
	demoNodes := []node.Node{
		{Addr: "192.168.1.31:50000", Maintenance: true, Stage: "maintenance", Hostname: "talos-7xk-2qa", MAC: "dc:a6:32:1a:2b:31", CertFingerprint: "demo-certificate-31", TalosVersion: "v1.14.5", Arch: "arm64", Booted: booted("controlplane", "newt")},
		{Addr: "192.168.1.32:50000", Maintenance: true, Stage: "maintenance", Hostname: "talos-m3p-9cd", MAC: "dc:a6:32:1a:2b:32", CertFingerprint: "demo-certificate-32", TalosVersion: "v1.14.5", Arch: "arm64", Booted: booted("worker")},
		{Addr: "192.168.1.33:50000", Maintenance: true, Stage: "maintenance", Hostname: "talos-q8r-4ef", MAC: "dc:a6:32:1a:2b:33", CertFingerprint: "demo-certificate-33", TalosVersion: "v1.12.6"},
	}
	slow := step == "flashing"
	deps := Deps{
		Factory:     factory.NewClient(srv.URL, srv.Client()),
		Cache:       &imaging.Cache{Dir: filepath.Join(dir, "cache")},
		ListDevices: func() ([]devices.Disk, error) { return disks, nil },
		Open: func(path string, size int64) (imaging.Target, error) {
			if path == "/dev/sdb" {
				path = card // the demo's card is a file
			}
			t, err := imaging.OpenFile(path, size)
			if err != nil || !slow {
				return t, err
			}
			return &slowTarget{Target: t}, nil
		},
		NeedsElevation: func(string) bool { return false },
		// Canned network: nothing leaves this machine.
		LocalPrefixes: func() ([]netip.Prefix, error) { return []netip.Prefix{netip.MustParsePrefix("192.168.1.0/24")}, nil },
		Discover: func(ctx context.Context, o node.DiscoverOptions) ([]node.Node, error) {
			return demoNodes, nil
		},
		Probe: func(ctx context.Context, addr string) (*node.Node, error) {
			for _, n := range demoNodes {
				if n.Addr == addr {
					return &n, nil
				}
			}
			n := demoNodes[0]
			return &n, nil
		},
		Apply: func(ctx context.Context, o node.ApplyOptions) (*node.ApplyResult, error) {
			return &node.ApplyResult{Endpoint: o.Endpoint, Mode: node.ModeAuto, DryRun: o.DryRun, Messages: []node.ApplyMessage{{Mode: "no-reboot"}}, ModeDetails: "Applied configuration without a reboot"}, nil
		},
		PortalOpenFile: noPortal,
		DeviceEvents:   func(context.Context) <-chan struct{} { return nil },
		RefreshEvery:   -1,
	}
	cfgPath := filepath.Join(dir, "controlplane.yaml")
	if err := os.WriteFile(cfgPath, demoConfigNoESC, 0o600); err != nil {
		return err
	}
	localPath := filepath.Join(dir, "talos-custom.raw.xz") // step "local": a local image file in step 1
	if err := os.WriteFile(localPath, xz, 0o600); err != nil {
		return err
	}

	a := app.NewWithID(AppID)
	ui := New(a, deps)
	ui.Window.SetFixedSize(true)
	go driveDemo(ui, step, "/dev/sdb", cfgPath, localPath)
	ui.Window.ShowAndRun()
	ui.Close()
	return nil
}

// slowTarget caps write speed so the progress bars can be captured mid-way.
type slowTarget struct{ imaging.Target }

func (s *slowTarget) Write(p []byte) (int, error) {
	time.Sleep(time.Duration(len(p)) * time.Second / (2 << 20))
	return s.Target.Write(p)
}

func driveDemo(ui *UI, step, card, cfgPath, localPath string) {
	ready := func() { time.Sleep(700 * time.Millisecond); fmt.Println("READY", step) }
	waitUntil := func(cond func() bool) {
		for {
			ok := false
			fyne.DoAndWait(func() { ok = cond() })
			if ok {
				return
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	waitUntil(func() bool { return len(ui.target.disks) > 0 })
	profile := "controlplane"
	if step == "local" {
		fyne.DoAndWait(func() { ui.image.useLocal(localPath) })
		waitUntil(func() bool { return strings.Contains(ui.image.size.Text, "on the card") })
		ready()
		return
	}
	if step == "image" {
		fyne.DoAndWait(func() { ui.image.selectProfile(profile) })
		ready()
		return
	}
	fyne.DoAndWait(func() {
		ui.image.selectProfile(profile)
		ui.tabs.SelectIndex(tabTarget)
		ui.target.selectPath(card)
	})
	if step == "card" {
		ready()
		return
	}
	fyne.DoAndWait(func() {
		ui.tabs.SelectIndex(tabFlash)
		ui.flash.askConfirm()
	})
	if step == "confirm" {
		ready()
		return
	}
	fyne.DoAndWait(func() {
		ui.escape() // the confirmation
		ui.flash.begin(*ui.image.choice, ui.session.Cards(), nil)
	})
	if step == "flashing" {
		waitUntil(func() bool { return ui.flash.cards[0].write.bar.Value > 0.4 })
		fmt.Println("READY", step)
		return
	}
	waitUntil(func() bool { return ui.flash.finished() })
	if step == "done" {
		ready()
		return
	}
	fyne.DoAndWait(func() {
		ui.tabs.SelectIndex(tabNodes)
		ui.nodes.Scan()
	})
	waitUntil(func() bool { return len(ui.nodes.rows) == 3 })
	if step == "nodes" {
		fyne.DoAndWait(func() { ui.nodes.checkAndPrompt(ui.nodes.rows[1], "worker.yaml", "", demoWorker) })
		waitUntil(func() bool { return ui.nodes.shown != nil && ui.modal == ui.nodes.shown.modal })
		fyne.DoAndWait(func() { ui.nodes.shown.apply.OnTapped() })
		waitUntil(func() bool { return strings.HasPrefix(ui.nodes.rows[1].reply.Text, "Applied") })
		ready()
		return
	}
	// findings: the control plane card has Newt; its config lacks the
	// ExtensionServiceConfig. Drop it onto the first row.
	fyne.DoAndWait(func() {
		r := ui.nodes.rows[0]
		pos := fyne.CurrentApp().Driver().AbsolutePositionForObject(r.box).Add(fyne.NewPos(30, r.box.Size().Height/2))
		ui.HandleDrop(pos, []fyne.URI{storage.NewFileURI(cfgPath)})
	})
	waitUntil(func() bool { return ui.nodes.shown != nil })
	ready()
}
