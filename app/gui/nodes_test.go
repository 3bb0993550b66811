package gui

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/storage"
	"fyne.io/fyne/v2/test"
	"fyne.io/fyne/v2/widget"

	"github.com/siderolabs/image-factory/pkg/schematic"
	"github.com/talosflash/talosflash/factory"
	"github.com/talosflash/talosflash/imaging"
	"github.com/talosflash/talosflash/internal/testkit"
	"github.com/talosflash/talosflash/node"
	"github.com/talosflash/talosflash/node/nodetest"
)

// probedRow probes a fake node as a scan would, lists it and drops file on it.
func (h *harness) dropOnProbedNode(srv *nodetest.Server, file string) (*nodeRow, *applyPrompt) {
	h.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	n, err := node.Probe(ctx, srv.Addr())
	if err != nil {
		h.t.Fatal(err)
	}
	var row *nodeRow
	var pos fyne.Position
	h.onUI(func() {
		h.ui.tabs.SelectIndex(tabNodes)
		row = h.ui.nodes.addNode(*n)
		h.ui.Window.Content().Refresh()
	})
	h.onUI(func() {
		pos = fyne.CurrentApp().Driver().AbsolutePositionForObject(row.box).Add(fyne.NewPos(20, row.box.Size().Height/2))
		h.ui.escape()
		h.ui.HandleDrop(pos, []fyne.URI{storage.NewFileURI(file)})
	})
	var p *applyPrompt
	h.waitFor("findings dialog", func() bool { p = h.ui.nodes.openPrompt(); return p != nil })
	return row, p
}

func builtin(t *testing.T, name string) factory.Profile {
	t.Helper()
	p, err := factory.FindProfile(factory.BuiltinProfiles(), name)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// The incident: the node booted an image with Newt (a schematic made
// elsewhere, of no profile: no role to hold the config against), the
// user's worker.yaml has no ExtensionServiceConfig. The row says what the
// node booted (no "Card flashed as" guess), and Apply is blocked.
func TestNodesBootedNewtImageBlocksWorkerConfig(t *testing.T) {
	h := newHarness(t, nil)
	srv := nodetest.Start(t, nodetest.Options{Schematic: newtElsewhere(t)})
	file := testkit.TestdataPath(t, "talos114/valid/worker.yaml") // as talosctl gen config 1.14 writes it: documents machinery 1.13 does not check (notes)
	row, p := h.dropOnProbedNode(srv, file)
	h.onUI(func() {
		if !strings.Contains(row.badge.Text, "extensions iscsi-tools, newt") && !strings.Contains(row.badge.Text, "newt") {
			t.Errorf("badge %q", row.badge.Text)
		}
		if row.flashedBox.Visible() {
			t.Error(`"Card flashed as" shown although the node says what it booted`)
		}
		blocked := false
		for _, f := range p.findings {
			if f.Code == node.CodeExtensionConfigMissing && strings.Contains(f.Message, "the node booted an image with siderolabs/newt") {
				blocked = true
			}
		}
		if !blocked || !p.apply.Disabled() || p.override == nil {
			t.Fatalf("not blocked: %+v", p.findings)
		}
		// The error and its fix come first: the notes (INFO) pushed them
		// below the fold.
		var order []string
		for _, o := range test.LaidOutObjects(h.ui.Window.Canvas().Overlays().Top()) {
			if l, ok := o.(*breakLabel); ok {
				if sev, _, ok := strings.Cut(l.Text, ":"); ok && (sev == "ERROR" || sev == "WARNING" || sev == "INFO") {
					order = append(order, sev)
				}
			}
		}
		if len(order) < 2 || order[0] != "ERROR" || !slices.IsSortedFunc(order, func(a, b string) int { return rank(a) - rank(b) }) {
			t.Errorf("findings in the order %v, want errors, warnings, then notes", order)
		}
		test.Tap(p.apply)
	})
	time.Sleep(100 * time.Millisecond)
	if n := len(srv.Requests()); n != 0 {
		t.Fatalf("blocked config reached the node (%d requests)", n)
	}
}

// The incident as it happened (issue 37): the node booted the control
// plane's Newt image and the user's worker.yaml cannot run there. It is
// a role mismatch: refused naming the control plane's config and both
// ways a worker would be right, with no findings dialog and so no "Send
// anyway"; nothing reaches the node.
func TestNodesWorkerConfigOnTheControlPlaneImage(t *testing.T) {
	h := newHarness(t, nil)
	srv := nodetest.Start(t, nodetest.Options{Schematic: builtin(t, "controlplane").Schematic()})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	n, err := node.Probe(ctx, srv.Addr())
	if err != nil {
		t.Fatal(err)
	}
	var row *nodeRow
	h.onUI(func() {
		h.ui.tabs.SelectIndex(tabNodes)
		row = h.ui.nodes.addNode(*n)
		h.ui.Window.Content().Refresh()
	})
	h.onUI(func() {
		pos := fyne.CurrentApp().Driver().AbsolutePositionForObject(row.box).Add(fyne.NewPos(20, row.box.Size().Height/2))
		h.ui.HandleDrop(pos, []fyne.URI{storage.NewFileURI(testkit.TestdataPath(t, "talos114/valid/worker.yaml"))})
	})
	var shown string
	h.waitFor("refusal", func() bool { shown = h.overlayLabels(); return strings.Contains(shown, "is a control plane") })
	for _, want := range []string{"(it booted the controlplane image)", "worker config", "apply the controlplane.yaml that talosctl gen config wrote",
		"flash its card with the worker image", "give worker.yaml the ExtensionServiceConfig"} {
		if !strings.Contains(shown, want) {
			t.Errorf("refusal %q does not say %q", shown, want)
		}
	}
	h.onUI(func() {
		if h.ui.nodes.openPrompt() != nil {
			t.Fatal("the findings dialog (with its override) was shown")
		}
	})
	if n := len(srv.Requests()); n != 0 {
		t.Fatalf("%d requests reached the node", n)
	}
}

// A worker image node: the worker config passes, the node's dry run comes
// first, the config arrives byte for byte, the row reports the node's mode.
func TestNodesWorkerImageApplies(t *testing.T) {
	h := newHarness(t, nil)
	srv := nodetest.Start(t, nodetest.Options{Schematic: builtin(t, "worker").Schematic()})
	file, _ := filepath.Abs("testdata/worker.yaml")
	want, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	row, p := h.dropOnProbedNode(srv, file)
	h.onUI(func() {
		if !strings.Contains(row.badge.Text, "Booted: worker") {
			t.Errorf("badge %q", row.badge.Text)
		}
		if p.apply.Disabled() {
			t.Fatalf("blocked: %+v", p.findings)
		}
		test.Tap(p.apply)
	})
	h.waitFor("apply", func() bool { return !h.ui.nodes.applying() })
	reqs := srv.Requests()
	if len(reqs) != 2 || !reqs[0].DryRun || reqs[1].DryRun || !bytes.Equal(reqs[1].Config, want) {
		t.Fatalf("node got %d requests; want its dry run, then worker.yaml byte for byte", len(reqs))
	}
	h.onUI(func() {
		if row.reply.Text != "Applied worker.yaml: the node boots with it now, no reboot." || !strings.Contains(row.detail.Text, "node answered mode no-reboot") {
			t.Errorf("reply %q, details %q", row.reply.Text, row.detail.Text)
		}
		if row.bootstrapBox != nil {
			t.Error("talosctl bootstrap shown after a worker config")
		}
	})
}

// After a control plane config, the row shows the next step: bootstrap etcd.
func TestNodesControlplaneApplyShowsBootstrap(t *testing.T) {
	h := newHarness(t, nil)
	srv := nodetest.Start(t, nodetest.Options{Schematic: builtin(t, "worker").Schematic()})
	file := testkit.TestdataPath(t, "controlplane.yaml")
	row, p := h.dropOnProbedNode(srv, file)
	h.onUI(func() {
		if p.override != nil {
			p.override.SetChecked(true)
		}
		test.Tap(p.apply)
	})
	h.waitFor("apply", func() bool { return !h.ui.nodes.applying() })
	h.onUI(func() {
		if row.reply.Importance != widget.SuccessImportance {
			t.Fatalf("not applied: %q", row.reply.Text)
		}
		want := "talosctl bootstrap --nodes 127.0.0.1 --endpoints 127.0.0.1 --talosconfig ./talosconfig"
		if row.bootstrapBox == nil || !row.bootstrapBox.Visible() || row.bootstrap.Text != want {
			t.Fatalf("bootstrap step: %v", row.bootstrap)
		}
	})
}

// The Nodes step follows the session: a flash presets the fallback choice
// of rows that did not say what they booted.
func TestNodesObserveFlashedCards(t *testing.T) {
	h := newHarness(t, nil)
	h.onUI(func() {
		r := h.ui.nodes.addNode(node.Node{Addr: "127.0.0.1:50000", Maintenance: true})
		if r.flashed.Selected != unknownFlash {
			t.Fatalf("preset %q before any flash", r.flashed.Selected)
		}
		h.ui.image.selectProfile("worker")
		c := h.ui.session.Choice()
		h.ui.session.AddFlashed(Flashed{Image: *c, Card: imaging.CardResult{Target: h.target}})
		if r.flashed.Selected != "worker" {
			t.Fatalf("after a worker flash the row says %q", r.flashed.Selected)
		}
	})
}

// Without extension statuses the "Card flashed as" choice appears and is
// the announced fallback.
func TestNodesUnknownBootedShowsFallbackChoice(t *testing.T) {
	h := newHarness(t, nil)
	srv := nodetest.Start(t, nodetest.Options{Legacy: true})
	file, _ := filepath.Abs("testdata/worker.yaml")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	n, err := node.Probe(ctx, srv.Addr())
	if err != nil {
		t.Fatal(err)
	}
	var row *nodeRow
	h.onUI(func() {
		h.ui.tabs.SelectIndex(tabNodes)
		row = h.ui.nodes.addNode(*n)
		row.flashed.SetSelected("controlplane")
		if !row.flashedBox.Visible() || !strings.Contains(row.badge.Text, "unknown") {
			t.Errorf("fallback not offered: badge %q", row.badge.Text)
		}
		h.ui.escape()
		data, _ := os.ReadFile(file)
		h.ui.nodes.checkAndPrompt(row, "worker.yaml", "", data)
	})
	var p *applyPrompt
	h.waitFor("findings dialog", func() bool { p = h.ui.nodes.openPrompt(); return p != nil })
	h.onUI(func() {
		fallback, blocked := false, false
		for _, f := range p.findings {
			fallback = fallback || f.Code == node.CodeBootedUnknown
			blocked = blocked || f.Code == node.CodeExtensionConfigMissing
		}
		if !fallback || !blocked || !p.apply.Disabled() {
			t.Fatalf("findings %+v", p.findings)
		}
	})
}

// A FIFO dropped on a node is refused at once, not read forever.
func TestNodesDropFIFORefused(t *testing.T) {
	p := filepath.Join(t.TempDir(), "fifo.yaml")
	if err := mkfifo(p); err != nil {
		t.Skip(err)
	}
	done := make(chan error, 1)
	go func() { _, err := readConfigURI(storage.NewFileURI(p)); done <- err }()
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "FIFO") {
			t.Fatalf("err = %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("reading a dropped FIFO blocks")
	}
}

func rank(sev string) int { return map[string]int{"ERROR": 0, "WARNING": 1, "INFO": 2}[sev] }

// A file too large to be a machine config, dropped on a node, is said so
// as it is: the bounded read's refusal (node.ReadConfigFile, the CLI's),
// not 4 MiB of zeros made up for the check to call too large; nothing
// reaches the node.
func TestNodesDropTooLargeSaysSo(t *testing.T) {
	h := newHarness(t, nil)
	srv := nodetest.Start(t, nodetest.Options{Schematic: builtin(t, "worker").Schematic()})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	n, err := node.Probe(ctx, srv.Addr())
	if err != nil {
		t.Fatal(err)
	}
	huge := testkit.WriteFile(t, t.TempDir(), "huge.yaml", strings.Repeat("# padding\n", node.MaxConfigSize/10+1))
	h.onUI(func() {
		h.ui.tabs.SelectIndex(tabNodes)
		row := h.ui.nodes.addNode(*n)
		h.ui.nodes.applyURI(row, storage.NewFileURI(huge))
	})
	var shown string
	h.waitFor("the refusal", func() bool { shown = h.overlayLabels(); return shown != "" })
	if !strings.Contains(shown, "onfig file "+huge+" is too large for a machine config") || !strings.Contains(shown, "Cannot read huge.yaml") {
		t.Fatalf("shown: %q", shown)
	}
	if n := len(srv.Requests()); n != 0 {
		t.Fatalf("%d requests reached the node", n)
	}
}

// newtElsewhere is an image with Newt made elsewhere (the factory's UI):
// the control plane's schematic plus iscsi-tools, no profile's, so no role
// holds a config against it and the Newt finding is the one that blocks.
func newtElsewhere(t *testing.T) *schematic.Schematic {
	sc := builtin(t, "controlplane").Schematic()
	sc.Customization.SystemExtensions.OfficialExtensions = append(sc.Customization.SystemExtensions.OfficialExtensions, "siderolabs/iscsi-tools")
	return sc
}

// The confirmation leads with its verdict; the notes are folded under
// Details and the documents this machinery cannot check are one line
// there, not the list of 11 to 24 kinds the node validates anyway (they
// pushed "The incident checks found nothing wrong." below the fold,
// issue 39).
func TestNodesPromptVerdictFirst(t *testing.T) {
	h := newHarness(t, nil)
	srv := nodetest.Start(t, nodetest.Options{Schematic: builtin(t, "controlplane").Schematic()})
	_, p := h.dropOnProbedNode(srv, testkit.TestdataPath(t, "talos114/valid/controlplane.yaml"))
	h.onUI(func() {
		if p.apply.Disabled() {
			t.Fatalf("blocked: %+v", p.findings)
		}
		all := h.overlayLabels()
		if strings.Contains(all, "KubeletConfig") || strings.Contains(all, "not checked locally") {
			t.Errorf("the dialog lists the kinds the node checks:\n%s", all)
		}
		if !strings.Contains(all, "25 documents are newer than Talos machinery v1.13") {
			t.Errorf("the unchecked documents are not said in one line:\n%s", all)
		}
		var shown []string // what is drawn before Details is unfolded
		for _, b := range drawnTexts(h.ui.Window.Canvas().Overlays().Top()) {
			shown = append(shown, b.text)
		}
		text := strings.Join(shown, "\n")
		if len(shown) == 0 || !strings.HasPrefix(shown[0], "The incident checks found nothing wrong. Once sent, the node boots with it now") {
			t.Errorf("the verdict is not first:\n%s", text)
		}
		if strings.Contains(text, "newer than Talos machinery") || strings.Contains(text, "INFO") || !strings.Contains(text, "Details") {
			t.Errorf("notes shown unfolded:\n%s", text)
		}
	})
}

// A mistyped address in the node field (issue 39) is said at once, not
// probed: no lookup of "127.0.3.3l" as a host name, no "No Talos node at".
func TestNodesFieldRefusesATypoBeforeAnyLookup(t *testing.T) {
	h := newHarness(t, nil)
	probed := make(chan string, 1)
	h.onUI(func() {
		h.ui.deps.Probe = func(_ context.Context, addr string) (*node.Node, error) {
			probed <- addr
			return nil, errors.New("probed")
		}
		h.ui.tabs.SelectIndex(tabNodes)
		h.ui.nodes.manual.SetText("127.0.3.3l")
		h.ui.nodes.addManual()
	})
	var shown string
	h.waitFor("refusal", func() bool { shown = h.overlayLabels(); return strings.Contains(shown, "is not an address") })
	if !strings.Contains(shown, "not an IP address or host name") {
		t.Errorf("refusal %q", shown)
	}
	select {
	case a := <-probed:
		t.Fatalf("%s was probed", a)
	default:
	}
}
