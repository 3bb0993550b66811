package gui

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/storage"
	"fyne.io/fyne/v2/test"
	"fyne.io/fyne/v2/widget"

	"github.com/talosflash/talosflash/imaging/devices"
	"github.com/talosflash/talosflash/internal/testkit"
	"github.com/talosflash/talosflash/inventory"
	"github.com/talosflash/talosflash/kube"
	"github.com/talosflash/talosflash/node/nodetest"
)

// windowTexts is every text of the window and its dialogs (UI goroutine).
func windowTexts(ui *UI) string {
	objs := test.LaidOutObjects(ui.Window.Content())
	for _, o := range ui.Window.Canvas().Overlays().List() {
		objs = append(objs, test.LaidOutObjects(o)...)
	}
	var out []string
	for _, o := range objs {
		switch w := o.(type) {
		case *widget.Label:
			out = append(out, w.Text)
		case *breakLabel:
			out = append(out, w.Text)
		case *widget.Entry:
			out = append(out, w.Text)
		case *keyButton:
			out = append(out, w.Text)
		}
	}
	return strings.Join(out, "\n")
}

// statusWorld is the app with the test kit's inventory (no configs) whose
// nodes are configured fakes of one PKI, its admin talosconfig on disk.
type statusWorld struct {
	*harness
	pki   *nodetest.PKI
	port  int
	ips   [3]string
	tc    string
	frags []string
}

func newStatusWorld(t *testing.T) *statusWorld {
	t.Helper()
	dir := t.TempDir()
	kit := testkit.Inventory{First: "127.0.0.41"}
	inv, err := inventory.Load(kit.Write(t, dir), inventory.Options{})
	if err != nil {
		t.Fatal(err)
	}
	pki, err := nodetest.NewPKI()
	if err != nil {
		t.Fatal(err)
	}
	data, err := pki.Talosconfig("home", "os:admin", "127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	frags, err := nodetest.SecretFragments(data)
	if err != nil {
		t.Fatal(err)
	}
	w := &statusWorld{pki: pki, ips: kit.IPs(), tc: testkit.WriteFile(t, dir, "talos/talosconfig", string(data)), frags: frags}
	w.port = testkit.FreePort(t, w.ips[:]...)
	deps := Deps{
		ListDevices:    func() ([]devices.Disk, error) { return nil, nil },
		NeedsElevation: func(string) bool { return false },
		PortalOpenFile: noPortal,
		DeviceEvents:   func(context.Context) <-chan struct{} { return nil },
		RefreshEvery:   -1,
		Inventory:      inv, InventoryPort: w.port, InventoryEvery: 10 * time.Millisecond,
	}
	ui := New(test.NewTempApp(t), deps)
	t.Cleanup(ui.Close)
	ui.Window.Resize(fyne.NewSize(1000, 700))
	w.harness = &harness{t: t, ui: ui}
	w.onUI(func() { ui.tabs.SelectIndex(tabNodes); ui.nodes.statusEvery = 30 * time.Millisecond })
	return w
}

func (w *statusWorld) addr(i int) string { return w.ips[i] + ":" + strconv.Itoa(w.port) }

func (w *statusWorld) row(addr string) *nodeRow {
	var row *nodeRow
	w.waitFor("row of "+addr, func() bool {
		for _, r := range w.ui.nodes.rows {
			if r.node.Addr == addr {
				row = r
			}
		}
		return row != nil
	})
	return row
}

// dropTalosconfig drops the talosconfig on r.
func (w *statusWorld) dropTalosconfig(r *nodeRow) {
	w.onUI(func() { w.ui.Window.Content().Refresh() })
	w.onUI(func() {
		pos := fyne.CurrentApp().Driver().AbsolutePositionForObject(r.box).Add(fyne.NewPos(20, r.box.Size().Height/2))
		w.ui.HandleDrop(pos, []fyne.URI{storage.NewFileURI(w.tc)})
	})
}

// rowText is the row's status part as shown.
func rowText(r *nodeRow) string {
	if r.statusBox == nil {
		return ""
	}
	var out []string
	for _, o := range test.LaidOutObjects(r.statusBox) {
		switch l := o.(type) {
		case *widget.Label:
			out = append(out, l.Text)
		case *breakLabel:
			out = append(out, l.Text)
		}
	}
	return strings.Join(out, "\n")
}

// The app shows the same states in its rows as `talosflash status`
// (issue 30), rendered from plan's model: worker-1 was flashed with the
// control plane's Newt image and has no ExtensionServiceConfig; 12 min
// into its boot on the fake's scaled clock, its row says it is booting,
// the waiting ext-newt, the image against its role, and the incident's
// diagnosis with the countdown and both fixes; when the clock passes
// BootTimeout the node reboots and the row counts the reboot. The
// talosconfig is only named.
func TestNodesRowShowsTheIncidentLive(t *testing.T) {
	w := newStatusWorld(t)
	clock := nodetest.NewClock(12 * time.Minute)
	n := nodetest.StartNode(t, nodetest.NodeOptions{PKI: w.pki, Addr: w.addr(1), Worker: true, Hostname: "worker-1",
		Schematic: builtin(t, "controlplane").Schematic(), Stage: "booting", WaitingExtensions: []string{"newt"}, Clock: clock,
		RebootDowntime: 20 * time.Millisecond})
	r := w.row(w.addr(1))
	w.waitFor("configured", func() bool { return r.node.Configured })
	w.dropTalosconfig(r)
	var text string
	w.waitFor("the incident on the row", func() bool { text = rowText(r); return strings.Contains(text, "has been booting for") })
	for _, want := range []string{
		"booting, ", "in booting for 12 min",
		"ext-newt Waiting (Waiting for extension service config)",
		"NOT its role's worker",
		"ERROR: worker-1 has been booting for 12 min: ext-newt waits for an ExtensionServiceConfig named newt; Talos reboots it at BootTimeout (70 min), in about 58 min",
		"write an ExtensionServiceConfig document named newt", "talosflash patch --inventory ",
		"or flash worker-1 with the worker image (it booted the controlplane image)",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("the row lacks %q:\n%s", want, text)
		}
	}
	w.onUI(func() {
		// The inventory's line says it too, at the top of the step.
		if l := w.ui.nodes.invRows[1].label; l.Importance != widget.DangerImportance ||
			!strings.HasPrefix(l.Text, "worker-1 · booting, ") || !strings.Contains(l.Text, "ext-newt waits for an ExtensionServiceConfig named newt") {
			t.Errorf("inventory line %q", l.Text)
		}
		if r.title.Text != "worker-1" || !strings.Contains(r.sub.Text, "Talos v1.14.5") {
			t.Errorf("title %q, %q: the inventory's name and the version the node told", r.title.Text, r.sub.Text)
		}
		// Its verdict says the incident in one line, red; the badge is the
		// member's state; the fix is in Details.
		if r.reply.Importance != widget.DangerImportance || !strings.Contains(r.reply.Text, "ext-newt waits for an ExtensionServiceConfig named newt") ||
			!strings.HasSuffix(r.reply.Text, "The fix is under Details.") || r.state.label.Text != "stuck" {
			t.Errorf("verdict %q (%v), state %q", r.reply.Text, r.reply.Importance, r.state.label.Text)
		}
		if r.statusHead.Importance != widget.WarningImportance {
			t.Errorf("headline %q not a warning", r.statusHead.Text)
		}
		if s := w.ui.nodes.status.Text; !strings.Contains(s, "Following each configured node with") {
			t.Errorf("status %q", s)
		}
		if w.ui.nodes.openBootstrapPrompt() != nil {
			t.Error("a talosconfig dropped on a worker opened the bootstrap dialog")
		}
	})
	for _, size := range layoutSizes { // the status part fits the row at both window sizes
		w.onUI(func() {
			w.ui.Window.Resize(size)
			w.ui.Window.Content().Refresh()
		})
		w.onUI(func() { assertObjectTextFits(t, w.ui, r.box, fmt.Sprintf("status row at %v", size)) })
	}
	boot := n.BootID()
	clock.Advance(58 * time.Minute)
	w.waitFor("the reboot on the row", func() bool { return strings.Contains(rowText(r), "1 reboot(s) seen") })
	if n.BootID() == boot || n.Reboots() != 1 {
		t.Fatalf("the fake did not reboot: %d", n.Reboots())
	}
	w.onUI(func() {
		all := windowTexts(w.ui)
		for _, f := range w.frags {
			if strings.Contains(all, f) {
				t.Fatalf("talosconfig material %q shown", f)
			}
		}
	})
}

// The user's story after the cards, in the app (issue 30): three fakes
// that boot their config (cp-1 with Newt and its ExtensionServiceConfig,
// two workers), Apply all, the talosconfig dropped on cp-1 for its
// bootstrap, then "Get kubeconfig": each row shows its node running and
// its Kubernetes node NotReady for want of a CNI, with the reason read
// from the config (Flannel disabled), then Ready once the fake's CNI is
// installed. No key of the talosconfig, the configs or the kubeconfig is
// shown.
func TestNodesRowsFollowTheClusterToKubernetes(t *testing.T) {
	dir := t.TempDir()
	kit := testkit.Inventory{Configs: true, First: "127.0.0.51"}
	invPath := kit.Write(t, dir)
	ips := kit.IPs()
	kport := strconv.Itoa(testkit.FreePort(t, ips[0]))
	var secrets []string
	var cpCfg []byte
	for _, name := range []string{"controlplane.yaml", "worker.yaml"} {
		p := dir + "/talos/" + name
		b := []byte(strings.ReplaceAll(string(readFile(t, p)), "https://"+ips[0]+":6443", "https://"+ips[0]+":"+kport))
		testkit.WriteFile(t, dir, "talos/"+name, string(b))
		f, err := nodetest.ConfigSecretFragments(b)
		if err != nil {
			t.Fatal(err)
		}
		secrets = append(secrets, f...)
		if name == "controlplane.yaml" {
			cpCfg = b
		}
	}
	if !strings.Contains(string(cpCfg), "kind: ExtensionServiceConfig\nname: newt") || strings.Contains(string(cpCfg), "KubeFlannelCNIConfig") {
		t.Skip("the control plane fixture is not the user's (Newt configured, Flannel deleted)")
	}
	inv, err := inventory.Load(invPath, inventory.Options{})
	if err != nil {
		t.Fatal(err)
	}
	tcData := testkit.Testdata(t, "talos114/valid/talosconfig")
	tc := testkit.WriteFile(t, dir, "talos/talosconfig", string(tcData))
	f, err := nodetest.SecretFragments(tcData)
	if err != nil {
		t.Fatal(err)
	}
	secrets = append(secrets, f...)
	port := testkit.FreePort(t, ips[:]...)
	fakes := map[string]*nodetest.Server{}
	for i, h := range testkit.Hostnames {
		role := "worker"
		if i == 0 {
			role = "controlplane"
		}
		fakes[h] = nodetest.Start(t, nodetest.Options{Addr: ips[i] + ":" + strconv.Itoa(port), Hostname: h, Schematic: builtin(t, role).Schematic(), BootConfig: true})
	}
	h := inventoryWindow(t, inv, port)
	ui := h.ui
	kubeconfig := dir + "/kube/config"
	h.onUI(func() {
		ui.tabs.SelectIndex(tabNodes)
		ui.nodes.statusEvery = 30 * time.Millisecond
		ui.nodes.kubeconfigPath = kubeconfig
		ui.nodes.bootWait.Every = 20 * time.Millisecond
	})
	h.waitFor("all answered", func() bool {
		for _, r := range ui.nodes.invRows {
			if r.row == nil || !r.ready {
				return false
			}
		}
		return true
	})
	h.onUI(func() { tapApplyAll(ui) })
	h.waitFor("apply all", func() bool { return strings.HasPrefix(ui.nodes.applyAllNote.Text, "Apply all: 3 applied") })
	w := &statusWorld{harness: h, tc: tc}
	rows := map[string]*nodeRow{}
	for i, host := range testkit.Hostnames {
		rows[host] = w.row(ips[i] + ":" + strconv.Itoa(port))
	}
	w.dropTalosconfig(rows["cp-1"])
	var p *bootstrapPrompt
	h.waitFor("bootstrap dialog", func() bool { p = ui.nodes.openBootstrapPrompt(); return p != nil && p.tc != nil })
	h.onUI(func() { test.Tap(p.start) })
	h.waitFor("bootstrap", func() bool { return ui.nodes.cluster.Bootstrapped != nil })
	cp := rows["cp-1"]
	h.waitFor("Get kubeconfig", func() bool { return cp.kubeBtn != nil && cp.kubeBtn.Visible() })
	h.onUI(func() { test.Tap(cp.kubeBtn) })
	h.waitFor("the kubeconfig", func() bool { return strings.HasPrefix(cp.bootNote.Text, "Wrote a new kubeconfig "+kubeconfig) })
	notReady := "Kubernetes: NotReady: no CNI yet — Flannel is disabled in your config; install your CNI (e.g. Cilium) now"
	for host, r := range rows {
		h.waitFor(host+" running, NotReady for want of a CNI", func() bool {
			text := rowText(r)
			return strings.Contains(text, notReady) && strings.Contains(text, "turn Ready once the CNI's pods run on them") && strings.HasPrefix(text, "running")
		})
	}
	h.waitFor("cp-1's Newt and etcd", func() bool {
		text := rowText(cp)
		return strings.Contains(text, "ext-newt Running") && strings.Contains(text, "etcd members: cp-1")
	})
	fakes["cp-1"].Node().KubeAPI().InstallCNI()
	for host, r := range rows {
		h.waitFor(host+" Ready", func() bool { return strings.Contains(rowText(r), "Kubernetes: Ready") })
	}
	secrets = append(secrets, kubeconfigKeys(t, kubeconfig)...)
	h.onUI(func() {
		all := windowTexts(ui)
		for _, s := range secrets {
			if strings.Contains(all, s) {
				t.Fatalf("key material %q shown", s)
			}
		}
	})
}

func readFile(t *testing.T, p string) []byte {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// kubeconfigKeys are fragments of the kubeconfig's client keys and
// certificates, never to be shown.
func kubeconfigKeys(t *testing.T, path string) []string {
	t.Helper()
	cfg, _, err := kube.LoadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	for _, u := range cfg.AuthInfos {
		for _, b := range [][]byte{u.ClientKeyData, u.ClientCertificateData} {
			for _, l := range strings.Split(string(b), "\n") {
				if l != "" && !strings.HasPrefix(l, "-----") {
					lines = append(lines, l)
				}
			}
		}
	}
	if len(lines) == 0 {
		t.Fatal("a kubeconfig without client keys")
	}
	return nodetest.Fragments(lines...)
}
