//go:build demo

package gui

// The demo runs the real UI against a fake Image Factory on 127.0.0.1, a
// regular file as the SD card and canned nodes, and drives it to one step
// so scripts/screenshots.sh can capture it. Built only with -tags demo:
// the release binary never contains the fake servers.

import (
	"bytes"
	"context"
	_ "embed"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/app"
	"fyne.io/fyne/v2/storage"

	"github.com/siderolabs/image-factory/pkg/schematic"
	"github.com/siderolabs/talos/pkg/machinery/resources/runtime"

	"github.com/talosflash/talosflash/app/plan"
	"github.com/talosflash/talosflash/factory"
	"github.com/talosflash/talosflash/factory/factorytest"
	"github.com/talosflash/talosflash/imaging"
	"github.com/talosflash/talosflash/imaging/devices"
	"github.com/talosflash/talosflash/imaging/imagetest"
	"github.com/talosflash/talosflash/inventory"
	"github.com/talosflash/talosflash/kube"
	"github.com/talosflash/talosflash/node"
	"github.com/talosflash/talosflash/node/nodetest"
)

//go:embed testdata/controlplane-no-esc.yaml
var demoConfigNoESC []byte

//go:embed testdata/worker.yaml
var demoWorker []byte

// DemoSteps are the states RunDemo can reach, in the order of the flow:
// the image (a role, a local file), the card, the confirmation, the flash
// and its end, a second flash of the same image from the cache
// ("cached"), an inventory's "Flash all cards" ("flashall"), one card of
// two out of space ("failed"), a second card for a node ("second"), the
// nodes found with one applied ("nodes"; "details" with its Details
// unfolded), a config blocked by the incident check ("findings"), Apply
// all with another node's card and a card of the wrong image
// ("applyall"), the bootstrap dialog offering the inventory's talosconfig
// ("bootstrap"), and the nodes followed after their config ("status": the
// incident with its countdown, Kubernetes NotReady for want of a CNI).
var DemoSteps = []string{"image", "local", "card", "confirm", "flashing", "done", "cached", "flashall", "failed", "second",
	"nodes", "details", "findings", "applyall", "bootstrap", "status"}

// demoConfigs are the Talos 1.14 configs of the repository's fixtures
// (node/testdata/talos114/valid: the control plane with Newt's
// ExtensionServiceConfig, Flannel deleted), read from the working
// directory (scripts/screenshots.sh runs the demo from the repository).
const demoConfigs = "node/testdata/talos114/valid"

// demoInventory is the inventory of the inventory steps: cp-1, worker-1
// and worker-2 at first, first+1, first+2, their configs in dir/talos.
func demoInventory(dir, first string) (*inventory.Inventory, error) {
	talos := filepath.Join(dir, "talos")
	if err := os.MkdirAll(talos, 0o700); err != nil {
		return nil, err
	}
	for _, f := range []string{"controlplane.yaml", "worker.yaml", "talosconfig"} {
		data, err := os.ReadFile(filepath.Join(demoConfigs, f))
		if err != nil {
			return nil, fmt.Errorf("the demo's configs: %w (run it from the repository)", err)
		}
		// The cluster's endpoint at cp-1's address (the fixtures': 192.168.1.20).
		data = bytes.ReplaceAll(data, []byte("https://192.168.1.20:6443"), []byte("https://"+first+":6443"))
		if err := os.WriteFile(filepath.Join(talos, f), data, 0o600); err != nil {
			return nil, err
		}
	}
	a := netip.MustParseAddr(first)
	gw := a.As4()
	gw[3] = 1 // the router: .1 of the /24
	y := "cluster: homelab\ngateway: " + netip.AddrFrom4(gw).String() + "\nnodes:\n"
	for i, h := range []string{"cp-1", "worker-1", "worker-2"} {
		role, cfg := "worker", "worker.yaml"
		if i == 0 {
			role, cfg = "controlplane", "controlplane.yaml"
		}
		y += fmt.Sprintf("  - hostname: %s\n    role: %s\n    address: %s/24\n    config: talos/%s\n", h, role, a, cfg)
		a = a.Next()
	}
	return inventory.Parse([]byte(y), filepath.Join(dir, "talosflash.yaml"), dir, inventory.Options{})
}

// RunDemo shows the window at step, width x height (0: the app's
// default size), and prints "READY <step>" on stdout once it is there. It
// blocks until the window is closed.
func RunDemo(step string, width, height float32) error {
	dir, err := os.MkdirTemp("", "talosflash-demo-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)

	srv := factorytest.NewServer() // 127.0.0.1 only
	defer srv.Close()
	raw, err := imagetest.TalosRaw(16<<20, 1) // a META partition: a node can be written onto it
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
	full := filepath.Join(dir, "sdcard2.img") // step "failed": runs out of space
	for _, f := range []string{card, full} {
		if err := os.WriteFile(f, nil, 0o644); err != nil {
			return err
		}
	}
	disks := []devices.Disk{
		{Name: "sdb", Path: "/dev/sdb", Size: 31914983424, SizeHuman: "29.7 GiB", Vendor: "Generic", Model: "SD/MMC Reader", Transport: devices.TransportUSB, Removable: true, Safe: true},
		{Name: "sdc", Path: "/dev/sdc", Size: 62277025792, SizeHuman: "58 GiB", Vendor: "SanDisk", Model: "Ultra USB 3.0", Transport: devices.TransportUSB, Removable: true,
			Mounts:  []devices.Mount{{Point: "/home/user/backup", FSType: "ext4"}},
			Refusal: &devices.RefusedError{Device: "/dev/sdc", Reason: devices.CodeMounted, Msg: "/dev/sdc is mounted at /home/user/backup, outside /media and /run/media; unmount it yourself if it really is the card"}},
		{Name: "nvme0n1", Path: "/dev/nvme0n1", Size: 512110190592, SizeHuman: "477 GiB", Model: "Samsung SSD 980 PRO", Transport: devices.TransportNVMe,
			Refusal: &devices.RefusedError{Device: "/dev/nvme0n1", Reason: devices.CodeSystemDisk, Msg: "/dev/nvme0n1 holds the system filesystem /"}},
	}
	switch step {
	case "failed", "flashall":
		disks = append(disks, devices.Disk{Name: "sdd", Path: "/dev/sdd", Size: 15931539456, SizeHuman: "14.8 GiB", Vendor: "Generic", Model: "Card Reader", Transport: devices.TransportUSB, Removable: true, Safe: true})
	case "second": // the node goes onto the card's META by its path: the cards are the files themselves
		disks[0] = devices.Disk{Name: "sdcard.img", Path: card, Size: 64 << 20, SizeHuman: "64 MiB", Model: "SD card image", Transport: devices.TransportFile, Safe: true}
		disks[1] = devices.Disk{Name: "sdcard2.img", Path: full, Size: 64 << 20, SizeHuman: "64 MiB", Model: "SD card image", Transport: devices.TransportFile, Safe: true}
	}
	booted := func(role string, exts ...string) *node.Booted { // what each Pi reports it booted
		p, _ := factory.FindProfile(factory.BuiltinProfiles(), role)
		id, _ := p.SchematicID()
		return &node.Booted{SchematicID: id, Schematic: p.Schematic(), Overlay: factory.RPiOverlayImage, Extensions: exts}
	}
	var inv *inventory.Inventory
	switch step {
	case "applyall", "second", "bootstrap", "flashall":
		if inv, err = demoInventory(dir, "192.168.1.20"); err != nil {
			return err
		}
	case "status":
		if inv, err = demoInventory(dir, "127.0.0.61"); err != nil {
			return err
		}
	}
	demoNodes := []node.Node{
		{Addr: "192.168.1.31:50000", Maintenance: true, Stage: "maintenance", Hostname: "talos-7xk-2qa", MAC: "dc:a6:32:1a:2b:31", CertFingerprint: "demo-certificate-31", TalosVersion: "v1.14.5", Arch: "arm64", Booted: booted("controlplane", "newt")},
		{Addr: "192.168.1.32:50000", Maintenance: true, Stage: "maintenance", Hostname: "talos-m3p-9cd", MAC: "dc:a6:32:1a:2b:32", CertFingerprint: "demo-certificate-32", TalosVersion: "v1.14.5", Arch: "arm64", Booted: booted("worker")},
		{Addr: "192.168.1.33:50000", Maintenance: true, Stage: "maintenance", Hostname: "talos-q8r-4ef", MAC: "dc:a6:32:1a:2b:33", CertFingerprint: "demo-certificate-33", TalosVersion: "v1.12.6"},
	}
	if step == "applyall" || step == "bootstrap" { // the inventory's nodes: worker-2's card has the control plane image
		demoNodes = []node.Node{
			{Addr: "192.168.1.20:50000", Maintenance: true, Stage: "maintenance", Hostname: "cp-1", MAC: "dc:a6:32:1a:2b:20", CertFingerprint: "demo-certificate-20", TalosVersion: "v1.14.5", Arch: "arm64", Booted: booted("controlplane", "newt")},
			{Addr: "192.168.1.21:50000", Maintenance: true, Stage: "maintenance", Hostname: "worker-1", MAC: "dc:a6:32:1a:2b:21", CertFingerprint: "demo-certificate-21", TalosVersion: "v1.14.5", Arch: "arm64", Booted: booted("worker")},
			{Addr: "192.168.1.22:50000", Maintenance: true, Stage: "maintenance", Hostname: "worker-2", MAC: "dc:a6:32:1a:2b:22", CertFingerprint: "demo-certificate-22", TalosVersion: "v1.14.5", Arch: "arm64", Booted: booted("controlplane", "newt")},
		}
	}
	slow := step == "flashing"
	deps := Deps{
		Factory:     demoFactory(srv.URL, srv.Client()),
		Cache:       &imaging.Cache{Dir: filepath.Join(dir, "cache")},
		ListDevices: func() ([]devices.Disk, error) { return disks, nil },
		Open: func(path string, size int64) (imaging.Target, error) {
			switch path {
			case "/dev/sdb":
				path = card // the demo's card is a file
			case "/dev/sdd":
				t, err := imaging.OpenFile(full, size)
				if err != nil {
					return nil, err
				}
				return &fullTarget{Target: t, left: 9 << 20}, nil
			}
			t, err := imaging.OpenFile(path, size)
			if err != nil || !slow {
				return t, err
			}
			return &slowTarget{Target: t}, nil
		},
		CardHolds: func(path string) string {
			if path == "/dev/sdb" || path == card {
				return readCardSummary(card)
			}
			return ""
		},
		Eject: func(context.Context, string) devices.Ejected {
			return devices.Ejected{Flushed: true, PoweredOff: true}
		},
		Inventory:      inv,
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
			// As a Talos 1.14 node answers a card flashed with the raw image:
			// applied, with its warning about the installer.
			return &node.ApplyResult{Endpoint: o.Endpoint, Mode: node.ModeAuto, DryRun: o.DryRun, Messages: []node.ApplyMessage{{Mode: "no-reboot"}}, ModeDetails: "Applied configuration without a reboot",
				Warnings: []string{"installer.image is not set, if Talos is not booted from asset built by Image Factory, installation will fail"}}, nil
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

	if step == "status" {
		stop, err := demoCluster(inv, &deps)
		if err != nil {
			return err
		}
		defer stop()
	}
	a := app.NewWithID(AppID)
	ui := New(a, deps)
	if width > 0 && height > 0 {
		ui.Window.Resize(fyne.NewSize(width, height))
	}
	ui.Window.SetFixedSize(true)
	first := "/dev/sdb"
	if step == "second" {
		first = card
	}
	go driveDemo(ui, step, first, cfgPath, localPath, dir)
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

// fullTarget runs out of space after left bytes.
type fullTarget struct {
	imaging.Target
	left int64
}

func (f *fullTarget) Write(p []byte) (int, error) {
	if int64(len(p)) > f.left {
		return 0, &os.PathError{Op: "write", Path: "/dev/sdd", Err: syscall.ENOSPC}
	}
	f.left -= int64(len(p))
	return f.Target.Write(p)
}

// demoCluster starts the status step's three configured fakes on
// loopback (one PKI): cp-1 runs (its Kubernetes node waits for a CNI),
// worker-1 is the incident (the Newt image, no ExtensionServiceConfig,
// 12 min into its boot), worker-2 runs. The inventory's port is theirs.
func demoCluster(inv *inventory.Inventory, deps *Deps) (func(), error) {
	pki, err := nodetest.NewPKI()
	if err != nil {
		return nil, err
	}
	schematicOf := func(role string) *schematic.Schematic {
		p, _ := factory.FindProfile(factory.BuiltinProfiles(), role)
		return p.Schematic()
	}
	notReady := func(h string) []runtime.UnmetCondition {
		return []runtime.UnmetCondition{{Name: "nodeReady", Reason: "node \"" + h + "\" is not ready"}}
	}
	var nodes []*nodetest.Node
	stop := func() {
		for _, n := range nodes {
			n.Close()
		}
	}
	port := 0
	for i, n := range inv.Nodes {
		opts := nodetest.NodeOptions{PKI: pki, Addr: net.JoinHostPort(n.Address.Addr().String(), strconv.Itoa(port)), Hostname: n.Hostname,
			Schematic: schematicOf(n.Profile), Worker: n.Role == "worker", Clock: nodetest.NewClock(3 * time.Hour), Unmet: notReady(n.Hostname)}
		switch i {
		case 0:
			opts.Bootstrapped, opts.RunningExtensions = true, []string{"newt"}
		case 1:
			opts.Schematic, opts.Stage, opts.WaitingExtensions, opts.Clock, opts.Unmet = schematicOf("controlplane"), "booting", []string{"newt"}, nodetest.NewClock(12*time.Minute), nil
		}
		nd, err := nodetest.NewNode(opts)
		if err != nil {
			stop()
			return nil, err
		}
		nodes = append(nodes, nd)
		if port == 0 {
			_, p, _ := net.SplitHostPort(nd.Addr())
			port, _ = strconv.Atoi(p)
		}
	}
	deps.InventoryPort, deps.Probe = port, nil // the real probe: they are configured nodes
	tc, err := pki.Talosconfig("homelab", "os:admin", "127.0.0.1")
	if err != nil {
		stop()
		return nil, err
	}
	demoTalosconfig = tc
	return stop, nil
}

// demoTalosconfig is the status step's talosconfig (the fakes' PKI).
var demoTalosconfig []byte

func driveDemo(ui *UI, step, card, cfgPath, localPath, dir string) {
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
	if driveIssueSteps(ui, step, card, dir, ready, waitUntil) {
		return
	}
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
		ui.flash.begin(*ui.image.choice, ui.session.Cards(), nil, nil)
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
	if step == "nodes" || step == "details" {
		fyne.DoAndWait(func() { ui.nodes.checkAndPrompt(ui.nodes.rows[1], "worker.yaml", "", demoWorker) })
		waitUntil(func() bool { return ui.nodes.shown != nil && ui.modal == ui.nodes.shown.modal })
		fyne.DoAndWait(func() { ui.nodes.shown.apply.OnTapped() })
		waitUntil(func() bool { return strings.HasPrefix(ui.nodes.rows[1].reply.Text, "Applied") })
		if step == "details" {
			fyne.DoAndWait(func() {
				ui.nodes.rows[0].box.Hide() // the applied row first, its Details open
				ui.nodes.rows[1].details.OpenAll()
				ui.nodes.relayout()
			})
		}
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

// driveIssueSteps drives the steps of issues 29 and 30 (false: another step).
func driveIssueSteps(ui *UI, step, card, dir string, ready func(), waitUntil func(func() bool)) bool {
	allAnswered := func() bool {
		for _, r := range ui.nodes.invRows {
			if r.row == nil {
				return false
			}
		}
		return true
	}
	switch step {
	case "failed": // two cards, the second runs out of space
		fyne.DoAndWait(func() {
			ui.image.selectProfile("controlplane")
			ui.tabs.SelectIndex(tabTarget)
			ui.target.selectPath(card)
			ui.target.selectPath("/dev/sdd")
			ui.tabs.SelectIndex(tabFlash)
			ui.flash.begin(*ui.image.choice, ui.session.Cards(), nil, nil)
		})
		waitUntil(func() bool { a := ui.session.Attempt(); return a != nil && a.Ejected != nil })
		ready()
	case "applyall", "bootstrap": // worker-2's card has the control plane image
		fyne.DoAndWait(func() { ui.tabs.SelectIndex(tabNodes) })
		waitUntil(allAnswered)
		fyne.DoAndWait(func() { ui.nodes.ApplyAll() })
		waitUntil(func() bool { return ui.modal != nil && ui.modal == ui.nodes.applyAllPrompt })
		fyne.DoAndWait(func() { ui.nodes.applyAllPrompt.primary.OnTapped() }) // the confirmation
		waitUntil(func() bool { return ui.nodes.appliedAll && !ui.nodes.applyingAll })
		if step == "bootstrap" { // offered the talosconfig beside the inventory's configs
			fyne.DoAndWait(func() { ui.nodes.openBootstrap(ui.nodes.invRows[0].row, nil) })
		}
		ready()
	case "cached": // the same image again: from the cache, no download
		fyne.DoAndWait(func() {
			ui.image.selectProfile("worker")
			ui.tabs.SelectIndex(tabTarget)
			ui.target.selectPath(card)
			ui.tabs.SelectIndex(tabFlash)
			ui.flash.begin(*ui.image.choice, ui.session.Cards(), nil, nil)
		})
		waitUntil(func() bool { return ui.flash.finished() })
		fyne.DoAndWait(func() {
			ui.flash.flashAnother()
			ui.image.selectProfile("worker")
			ui.tabs.SelectIndex(tabTarget)
			ui.target.selectPath(card)
		})
		waitUntil(func() bool { return ui.session.ImageCached() })
		fyne.DoAndWait(func() { ui.tabs.SelectIndex(tabFlash) })
		ready()
	case "flashall": // an inventory's three nodes, three cards
		fyne.DoAndWait(func() {
			ui.tabs.SelectIndex(tabTarget)
			ui.target.selectPath(card)
			ui.target.selectPath("/dev/sdd")
			ui.tabs.SelectIndex(tabFlash)
			ui.flash.askFlashAll()
		})
		ready()
	case "second": // worker-1's card written, then another card for worker-1
		fyne.DoAndWait(func() {
			sel := ui.image.nodes.sel
			sel.SetSelected(sel.Options[2]) // worker-1
			ui.tabs.SelectIndex(tabTarget)
			ui.target.selectPath(card)
			ui.tabs.SelectIndex(tabFlash)
			metas, _ := ui.flash.nodeCardMetas(ui.image.choice, 1)
			ui.flash.begin(*ui.image.choice, ui.session.Cards(), metas, nil)
		})
		waitUntil(func() bool { return ui.flash.succeeded() })
		waitUntil(func() bool { return ui.target.holds[card] != "" })
		fyne.DoAndWait(func() {
			ui.flash.flashAnother()
			ui.tabs.SelectIndex(tabTarget)
			ui.target.selectPath(ui.target.disks[1].Path) // another card for worker-1
			ui.tabs.SelectIndex(tabFlash)
			ui.flash.askConfirm()
		})
		ready()
	case "status": // the nodes followed: the incident, and Kubernetes waiting for a CNI
		fyne.DoAndWait(func() { ui.tabs.SelectIndex(tabNodes) })
		waitUntil(allAnswered)
		tc, err := node.ParseTalosconfig(demoTalosconfig, "")
		if err != nil {
			fmt.Println("demo:", err)
			return true
		}
		tc.Path = filepath.Join(dir, "talos", "talosconfig")
		cfg, _ := os.ReadFile(filepath.Join(dir, "talos", "controlplane.yaml"))
		fyne.DoAndWait(func() {
			ui.nodes.cluster.ObserveConfig(&plan.Member{}, "controlplane", cfg)
			ui.nodes.useTalosconfig(tc)
		})
		waitUntil(func() bool {
			for _, r := range ui.nodes.rows {
				if r.status == nil {
					return false
				}
			}
			return true
		})
		// The Kubernetes view as plan.ReadKube makes it of what the
		// kubelets say (no API server here): NotReady, no CNI.
		fyne.DoAndWait(func() {
			v := plan.KubeView{Context: "admin@homelab", CNI: ui.nodes.cluster.CNI()}
			for i, n := range ui.deps.Inventory.Nodes {
				if i == 1 {
					continue // still booting: not registered
				}
				kn := kube.Node{Name: n.Hostname, InternalIP: n.Address.Addr().String(), Ready: "False", Reason: "KubeletNotReady",
					Message: "container runtime network not ready: NetworkReady=false reason:NetworkPluginNotReady message:Network plugin returns error: cni plugin not initialized", NoCNI: true}
				v.Nodes = append(v.Nodes, plan.KubeNode{Node: kn, Hostname: n.Hostname, Diagnosis: plan.DiagnoseKubeNode(kn, ui.nodes.cluster.CNI())})
			}
			ui.nodes.kube = &v
			for _, r := range ui.nodes.rows {
				ui.nodes.renderStatus(r)
			}
		})
		ready()
	default:
		return false
	}
	return true
}

// demoFactory is the fake factory's client, as the app's settings give it.
func demoFactory(url string, hc *http.Client) *factory.Client {
	s, err := plan.LoadSettings(plan.Defaults{FactoryURL: url, HTTPClient: hc})
	if err != nil {
		panic(err) // no files are read: only the URL
	}
	return s.Factory
}
