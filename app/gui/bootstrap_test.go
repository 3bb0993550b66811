package gui

import (
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/canvas"
	"fyne.io/fyne/v2/storage"
	"fyne.io/fyne/v2/test"
	"fyne.io/fyne/v2/widget"

	"github.com/talosflash/talosflash/internal/testkit"
	"github.com/talosflash/talosflash/node"
	"github.com/talosflash/talosflash/node/nodetest"
)

// bootFixture is a UI with a control plane row for an mTLS fake node, the
// talosconfig of its cluster on disk, and the progress lines shown.
type bootFixture struct {
	*harness
	pki   *nodetest.PKI
	tc    string   // talosconfig path
	frags []string // its key material, never to be shown
	mu    sync.Mutex
	lines []string
}

func newBootFixture(t *testing.T) *bootFixture {
	t.Helper()
	pki, err := nodetest.NewPKI()
	if err != nil {
		t.Fatal(err)
	}
	data, err := pki.Talosconfig("home", "os:admin", "127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	f := &bootFixture{harness: newHarness(t, nil), pki: pki, tc: filepath.Join(t.TempDir(), "talosconfig")}
	if err := os.WriteFile(f.tc, data, 0o600); err != nil {
		t.Fatal(err)
	}
	if f.frags, err = nodetest.SecretFragments(data); err != nil {
		t.Fatal(err)
	}
	// The fakes answer at once: only the number of attempts decides outcomes.
	f.ui.nodes.bootWait = node.WaitOptions{Timeout: 20 * time.Second, CallTimeout: 5 * time.Second, Every: 5 * time.Millisecond,
		Progress: func(l string) { f.mu.Lock(); f.lines = append(f.lines, l); f.mu.Unlock() }}
	return f
}

// row lists addr; controlplane marks it as after a control plane config
// applied in this session (what send does), otherwise it is a configured
// node found by a scan.
func (f *bootFixture) row(addr string, controlplane bool) *nodeRow {
	var r *nodeRow
	f.onUI(func() {
		f.ui.tabs.SelectIndex(tabNodes)
		r = f.ui.nodes.addNode(node.Node{Addr: addr, Configured: !controlplane, Maintenance: controlplane})
		if controlplane {
			r.member.ObserveApplied("controlplane")
			f.ui.nodes.showBootstrap(r)
		}
		f.ui.Window.Content().Refresh()
	})
	return r
}

// drop drops the talosconfig on r (nil: anywhere on the window).
func (f *bootFixture) drop(r *nodeRow) {
	f.onUI(func() {
		pos := fyne.NewPos(5, 5)
		if r != nil {
			pos = fyne.CurrentApp().Driver().AbsolutePositionForObject(r.box).Add(fyne.NewPos(20, r.box.Size().Height/2))
		}
		f.ui.HandleDrop(pos, []fyne.URI{storage.NewFileURI(f.tc)})
	})
}

func (f *bootFixture) prompt() *bootstrapPrompt {
	f.t.Helper()
	var p *bootstrapPrompt
	f.waitFor("bootstrap dialog", func() bool { p = f.ui.nodes.openBootstrapPrompt(); return p != nil })
	return p
}

func (f *bootFixture) key(k fyne.KeyName) { f.onUI(func() { f.ui.typedKey(&fyne.KeyEvent{Name: k}) }) }

func (f *bootFixture) waitIdle() {
	f.t.Helper()
	f.waitFor("bootstrap to end", func() bool { return f.ui.nodes.bootRunning == nil })
}

// texts is every text the window shows now (widgets, rendered text,
// dialogs) plus the progress lines shown during the run.
func (f *bootFixture) texts() string {
	var out []string
	f.onUI(func() {
		objs := test.LaidOutObjects(f.ui.Window.Content())
		for _, o := range f.ui.Window.Canvas().Overlays().List() {
			objs = append(objs, test.LaidOutObjects(o)...)
		}
		for _, o := range objs {
			switch w := o.(type) {
			case *widget.Label:
				out = append(out, w.Text)
			case *widget.Entry:
				out = append(out, w.Text)
			case *widget.Check:
				out = append(out, w.Text)
			case *widget.Button:
				out = append(out, w.Text)
			case *keyButton:
				out = append(out, w.Text)
			case *canvas.Text:
				out = append(out, w.Text)
			}
		}
		out = append(out, f.ui.nodes.status.Text)
	})
	f.mu.Lock()
	out = append(out, f.lines...)
	f.mu.Unlock()
	return strings.Join(out, "\n")
}

func (f *bootFixture) assertNoSecrets() {
	f.t.Helper()
	all := f.texts()
	if !strings.Contains(all, f.tc) && !strings.Contains(all, "talosconfig") {
		f.t.Fatal("no text collected")
	}
	for _, frag := range f.frags {
		if strings.Contains(all, frag) {
			f.t.Fatalf("talosconfig key material %q shown:\n%s", frag, all)
		}
	}
}

// Success: the dialog waits for a talosconfig (dropped on it), Enter
// bootstraps, the node receives exactly one Bootstrap, the row ends on
// "etcd bootstrapped" with the kubeconfig command, and no second
// bootstrap can start from this session, on this row or another.
func TestBootstrapOnceFromTheRow(t *testing.T) {
	f := newBootFixture(t)
	n := nodetest.StartNode(t, nodetest.NodeOptions{PKI: f.pki, NotReady: 2})
	other := nodetest.StartNode(t, nodetest.NodeOptions{PKI: f.pki})
	r := f.row(n.Addr(), true)
	r2 := f.row(other.Addr(), true)
	f.onUI(func() {
		if !r.bootBtn.Visible() || r.bootBtn.Disabled() {
			t.Fatal("no Bootstrap etcd… button after a control plane config")
		}
		test.Tap(r.bootBtn)
	})
	p := f.prompt()
	f.onUI(func() {
		if p.first != nil || !p.start.Disabled() {
			t.Fatal("Bootstrap enabled without a talosconfig")
		}
	})
	f.key(fyne.KeyReturn) // disabled: nothing happens
	f.drop(nil)
	f.waitFor("talosconfig in the dialog", func() bool { return p.tc != nil })
	f.onUI(func() {
		if p.start.Disabled() || !strings.Contains(p.file.Text, f.tc) {
			t.Fatalf("dialog: %q, start disabled %v", p.file.Text, p.start.Disabled())
		}
	})
	f.assertNoSecrets()
	f.key(fyne.KeyReturn)
	f.waitIdle()
	if got := n.Bootstraps(); got != 3 || !n.Bootstrapped() { // two "not ready yet", then accepted
		t.Fatalf("node got %d Bootstrap calls (bootstrapped %v); want 2 not-ready + 1", got, n.Bootstrapped())
	}
	f.onUI(func() {
		if f.ui.modal != nil {
			t.Error("a dialog is open after success")
		}
		if r.bootState.Importance != widget.SuccessImportance || !strings.Contains(r.bootState.Text, "etcd bootstrapped on "+n.Addr()+" (Talos v1.14.5)") {
			t.Fatalf("row: %q", r.bootState.Text)
		}
		if want := "talosctl --talosconfig " + f.tc + " kubeconfig --nodes 127.0.0.1 --endpoints 127.0.0.1"; r.bootstrap.Text != want {
			t.Errorf("next step %q, want %q", r.bootstrap.Text, want)
		}
		if !r.bootBtn.Disabled() || !r2.bootBtn.Disabled() || r.bootCancel.Visible() {
			t.Error("Bootstrap still offered after a success")
		}
		f.assertLaidOut(r)
	})
	f.mu.Lock()
	progress := strings.Join(f.lines, "\n")
	f.mu.Unlock()
	for _, want := range []string{"waiting for the Talos API", "bootstrapping etcd", "not ready for bootstrap yet", "etcd is running and healthy"} {
		if !strings.Contains(progress, want) {
			t.Errorf("progress lacks %q:\n%s", want, progress)
		}
	}
	f.assertNoSecrets()

	// A second attempt, even by a path that skips the disabled buttons.
	f.onUI(func() {
		f.ui.nodes.openBootstrap(r, nil)
		f.ui.nodes.startBootstrap(r2, f.ui.nodes.talosconfig)
		if f.ui.nodes.bootRunning != nil {
			t.Fatal("a second bootstrap started")
		}
	})
	if n.Bootstraps() != 3 || other.Bootstraps() != 0 {
		t.Fatalf("second bootstrap reached a node: %d, %d calls", n.Bootstraps(), other.Bootstraps())
	}
	f.onUI(func() {
		if f.ui.nodes.openBootstrapPrompt() != nil {
			t.Error("bootstrap dialog opened again")
		}
		if !strings.Contains(r.bootState.Text, "etcd bootstrapped") {
			t.Errorf("bootstrapped row now says %q", r.bootState.Text)
		}
		if !strings.Contains(r2.bootState.Text, "refused, nothing was sent: etcd was already bootstrapped on "+n.Addr()) {
			t.Errorf("other row: %q", r2.bootState.Text)
		}
	})
}

// A node whose etcd already runs: refused in plain words, nothing sent.
// The talosconfig is dropped on a configured row found by a scan, which
// the user marks as the first control plane.
func TestBootstrapAlreadyBootstrappedRefused(t *testing.T) {
	f := newBootFixture(t)
	n := nodetest.StartNode(t, nodetest.NodeOptions{PKI: f.pki, Bootstrapped: true})
	r := f.row(n.Addr(), false)
	f.drop(r)
	p := f.prompt()
	f.onUI(func() {
		if p.tc == nil || p.first == nil || !p.start.Disabled() {
			t.Fatal("a configured node must be marked as the first control plane first")
		}
		p.first.SetChecked(true)
		if p.start.Disabled() {
			t.Fatal("still disabled once marked")
		}
	})
	f.key(fyne.KeyReturn)
	f.waitIdle()
	if n.Bootstraps() != 0 {
		t.Fatalf("%d Bootstrap calls sent to a bootstrapped node", n.Bootstraps())
	}
	f.onUI(func() {
		if r.bootState.Importance != widget.DangerImportance ||
			!strings.HasPrefix(r.bootState.Text, "Refused: etcd is already bootstrapped on this node, so nothing was sent") {
			t.Fatalf("row: %q", r.bootState.Text)
		}
		if f.ui.modal == nil {
			t.Error("no dialog explains the refusal")
		}
	})
	f.assertNoSecrets()
	f.key(fyne.KeyEscape)
	f.onUI(func() {
		if f.ui.modal != nil {
			t.Error("Esc did not close the dialog")
		}
	})
}

// Cancel while waiting for the node: nothing sent, the row says so, the
// button comes back; Esc in the dialog sends nothing either.
func TestBootstrapCancel(t *testing.T) {
	f := newBootFixture(t)
	addr := testkit.ClosedAddr(t) // nothing listens: the node is "still rebooting"
	r := f.row(addr, true)

	f.onUI(func() { test.Tap(r.bootBtn) })
	p := f.prompt()
	// The file dialog over it: Esc closes only the file dialog, then the
	// bootstrap dialog has Enter and Esc again.
	f.openChooser(func() { test.Tap(p.choose) })
	f.key(fyne.KeyEscape)
	if f.prompt() != p {
		t.Fatal("Esc in the file dialog lost the bootstrap dialog")
	}
	f.key(fyne.KeyEscape)
	f.onUI(func() {
		if f.ui.modal != nil || f.ui.nodes.bootRunning != nil {
			t.Fatal("Esc did not close the dialog, or started a bootstrap")
		}
		test.Tap(r.bootBtn)
	})
	f.drop(nil)
	p = f.prompt()
	f.waitFor("talosconfig", func() bool { return p.tc != nil })
	f.key(fyne.KeyReturn)
	f.waitFor("waiting for the node", func() bool { return strings.Contains(r.bootState.Text, "API not answering") })
	f.onUI(func() {
		if !strings.HasPrefix(r.bootState.Text, phaseWait) || !r.bootCancel.Visible() || !r.bootBtn.Disabled() {
			t.Fatalf("running row: %q, cancel shown %v", r.bootState.Text, r.bootCancel.Visible())
		}
		f.assertLaidOut(r)
		test.Tap(r.bootCancel)
	})
	f.waitIdle()
	f.onUI(func() {
		if r.bootState.Text != "Cancelled: no bootstrap request was sent." || r.bootCancel.Visible() || r.bootBtn.Disabled() {
			t.Fatalf("after cancel: %q", r.bootState.Text)
		}
		if f.ui.modal != nil {
			t.Error("a cancel is not an error dialog")
		}
	})
	f.assertNoSecrets()
}

// A node that comes back from its reboot while talosflash waits is
// bootstrapped once.
func TestBootstrapWaitsForTheNodeToComeBack(t *testing.T) {
	f := newBootFixture(t)
	addr := testkit.ClosedAddr(t)
	r := f.row(addr, true)
	tc, err := node.LoadTalosconfig(f.tc, "")
	if err != nil {
		t.Fatal(err)
	}
	f.onUI(func() { f.ui.nodes.startBootstrap(r, tc) })
	f.waitFor("waiting for the node", func() bool { return strings.Contains(r.bootState.Text, "API not answering") })
	n, err := nodetest.NewNode(nodetest.NodeOptions{PKI: f.pki, Addr: addr})
	if err != nil {
		t.Skipf("port %s taken meanwhile: %v", addr, err)
	}
	t.Cleanup(n.Close)
	f.waitIdle()
	if n.Bootstraps() != 1 || !n.Bootstrapped() {
		t.Fatalf("node got %d Bootstrap calls", n.Bootstraps())
	}
	f.onUI(func() {
		if !strings.Contains(r.bootState.Text, "etcd bootstrapped") {
			t.Fatalf("row: %q", r.bootState.Text)
		}
	})
}

// assertLaidOut checks the row's bootstrap lines do not overlap and stay
// inside the row's card after they were shown and rewrapped.
func (f *bootFixture) assertLaidOut(r *nodeRow) {
	f.t.Helper()
	drv := fyne.CurrentApp().Driver()
	// The state is the row's verdict; the words and the command are its
	// Details, laid out when unfolded.
	r.details.OpenAll()
	defer r.details.CloseAll()
	for range 3 { // the list's height follows the row's
		f.ui.Window.Content().Refresh()
	}
	state, next := drv.AbsolutePositionForObject(r.bootState), drv.AbsolutePositionForObject(r.details)
	cmd, box := drv.AbsolutePositionForObject(r.bootstrap), drv.AbsolutePositionForObject(r.box)
	switch {
	case r.reply.Visible():
		f.t.Errorf("two verdicts: %q and %q", r.reply.Text, r.bootState.Text)
	case r.bootState.Size().Height < r.bootState.MinSize().Height:
		f.t.Errorf("progress text cut: %v high, needs %v", r.bootState.Size().Height, r.bootState.MinSize().Height)
	case state.Y+r.bootState.MinSize().Height > next.Y:
		f.t.Errorf("progress text (y %v, %v high) overlaps the next line (y %v)", state.Y, r.bootState.MinSize().Height, next.Y)
	case r.bootstrap.Visible() && cmd.Y+r.bootstrap.Size().Height > box.Y+r.box.Size().Height:
		f.t.Errorf("the command (bottom %v) sticks out of the row (bottom %v)", cmd.Y+r.bootstrap.Size().Height, box.Y+r.box.Size().Height)
	}
}

// A reader talosconfig: the dialog warns before, the node refuses, and
// the row says the admin talosconfig is needed.
func TestBootstrapReaderTalosconfigRefused(t *testing.T) {
	f := newBootFixture(t)
	data, err := f.pki.Talosconfig("home", "os:reader", "127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(f.tc, data, 0o600); err != nil {
		t.Fatal(err)
	}
	if f.frags, err = nodetest.SecretFragments(data); err != nil {
		t.Fatal(err)
	}
	n := nodetest.StartNode(t, nodetest.NodeOptions{PKI: f.pki})
	r := f.row(n.Addr(), true)
	f.onUI(func() { test.Tap(r.bootBtn) })
	p := f.prompt()
	f.drop(nil)
	f.waitFor("talosconfig", func() bool { return p.tc != nil })
	f.onUI(func() {
		if !p.warn.Visible() || !strings.Contains(p.warn.Text, "not os:admin") {
			t.Errorf("no warning: %q", p.warn.Text)
		}
	})
	f.key(fyne.KeyReturn)
	f.waitIdle()
	if n.Bootstrapped() {
		t.Fatal("a reader bootstrapped the node")
	}
	f.onUI(func() {
		if !strings.HasPrefix(r.bootState.Text, "The node refused: ") || !strings.Contains(r.bootState.Text, "os:admin") || r.bootBtn.Disabled() {
			t.Fatalf("row: %q", r.bootState.Text)
		}
	})
	f.assertNoSecrets()
}

// A worker answers that bootstrap is for control plane nodes: said plainly.
func TestBootstrapWorkerRefused(t *testing.T) {
	f := newBootFixture(t)
	n := nodetest.StartNode(t, nodetest.NodeOptions{PKI: f.pki, Worker: true})
	r := f.row(n.Addr(), false)
	tc, err := node.LoadTalosconfig(f.tc, "")
	if err != nil {
		t.Fatal(err)
	}
	f.onUI(func() { f.ui.nodes.startBootstrap(r, tc) })
	f.waitIdle()
	f.onUI(func() {
		if r.bootState.Text != "Refused: this node is not a control plane node. Bootstrap the control plane node instead." {
			t.Fatalf("row: %q", r.bootState.Text)
		}
	})
	if n.Bootstrapped() {
		t.Fatal("worker bootstrapped")
	}
}

// The bootstrap dialog offers the talosconfig that talosctl gen config
// wrote beside the inventory's configs (talos/talosconfig), chosen
// already: the user had to find it with the file chooser (issue 39).
func TestBootstrapOffersTheInventorysTalosconfig(t *testing.T) {
	h := newInvHarness(t)
	pki, err := nodetest.NewPKI()
	if err != nil {
		t.Fatal(err)
	}
	data, err := pki.Talosconfig("home", "os:admin", "127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(h.dir, "talos", "talosconfig")
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	h.start("127.0.0.21", "controlplane", "cp-1", true)
	r := h.rowOf(h.addr("127.0.0.21"))
	h.onUI(func() {
		if !r.bootBtn.Visible() || r.bootBtn.Disabled() {
			t.Fatal("no bootstrap offered on the configured control plane")
		}
		test.Tap(r.bootBtn)
		p := h.ui.nodes.openBootstrapPrompt()
		if p == nil || p.tc == nil || p.tc.Path != path || p.start.Disabled() && p.first == nil {
			t.Fatalf("the dialog does not offer %s: %+v", path, p)
		}
		if !strings.Contains(p.file.Text, path) {
			t.Errorf("the dialog says %q", p.file.Text)
		}
	})
}
