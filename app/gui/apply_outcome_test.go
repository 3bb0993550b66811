package gui

import (
	"context"
	"net/netip"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"fyne.io/fyne/v2/test"
	"fyne.io/fyne/v2/widget"

	"github.com/talosflash/talosflash/app/plan"
	"github.com/talosflash/talosflash/internal/testkit"
	"github.com/talosflash/talosflash/node"
	"github.com/talosflash/talosflash/node/nodetest"
)

// overlayLabels is every label of the dialogs shown (UI goroutine).
func (h *harness) overlayLabels() string {
	var out []string
	for _, o := range h.ui.Window.Canvas().Overlays().List() {
		for _, w := range test.LaidOutObjects(o) {
			if l, ok := w.(*widget.Label); ok {
				out = append(out, l.Text)
			}
		}
	}
	return strings.Join(out, "\n")
}

// After an apply the row says what the node did and does next, the text
// plan gives the CLI too, per generation: no "installs Talos and reboots"
// under "Applied ... without a reboot" on 1.14; the confirmation says the same before.
func TestNodesApplySaysWhatTheNodeDoesNext(t *testing.T) {
	for _, gen := range []struct {
		name string
		opts nodetest.Options
		next plan.NextStep
	}{
		{"1.14", nodetest.Options{Schematic: builtin(t, "worker").Schematic()},
			plan.AfterApply(&node.Node{TalosVersion: nodetest.DefaultVersion}, "worker", &node.ApplyResult{Messages: []node.ApplyMessage{{Mode: node.ModeNoReboot}}})},
		{"legacy", nodetest.Options{Legacy: true},
			plan.AfterApply(&node.Node{TalosVersion: nodetest.LegacyVersion}, "worker", &node.ApplyResult{Messages: []node.ApplyMessage{{}}})},
	} {
		t.Run(gen.name, func(t *testing.T) {
			h := newHarness(t, nil)
			srv := nodetest.Start(t, gen.opts)
			file, _ := filepath.Abs("testdata/worker.yaml")
			h.onUI(func() {
				h.ui.nodes.addNode(node.Node{Addr: srv.Addr(), Maintenance: true}).flashed.SetSelected("worker")
			})
			row, p := h.dropOnProbedNode(srv, file)
			h.onUI(func() {
				if text := h.overlayLabels(); !strings.Contains(text, gen.next.Node) || strings.Contains(text, "reboots with this config") {
					t.Errorf("the confirmation says:\n%s", text)
				}
				if p.apply.Disabled() {
					t.Fatalf("blocked: %+v", p.findings)
				}
				test.Tap(p.apply)
			})
			h.waitFor("apply", func() bool { return !h.ui.nodes.applying() })
			h.onUI(func() {
				// The verdict in a line, the node's next step in full once, in Details.
				if row.reply.Text != "Applied worker.yaml: "+gen.next.Verdict+"." || !strings.Contains(row.detail.Text, gen.next.Node) ||
					!strings.Contains(row.detail.Text, "leaves maintenance mode and boots with this config") || strings.Contains(row.reply.Text, gen.next.Node) {
					t.Errorf("row says %q, details %q, want %q", row.reply.Text, row.detail.Text, gen.next.Node)
				}
				if strings.Contains(row.reply.Text+row.detail.Text, "installs Talos and reboots") {
					t.Errorf("row contradicts the node's answer: %q", row.reply.Text)
				}
			})
		})
	}
}

// The scan's "N waiting for a config" counts the rows as they are: a node
// given its config no longer waits (it stayed at 1 before).
func TestNodesScanSummaryAfterApply(t *testing.T) {
	h := newHarness(t, nil)
	srv := nodetest.Start(t, nodetest.Options{Schematic: builtin(t, "worker").Schematic()})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	probed, err := node.Probe(ctx, srv.Addr())
	if err != nil {
		t.Fatal(err)
	}
	h.onUI(func() {
		h.ui.deps.LocalPrefixes = func() ([]netip.Prefix, error) { return []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}, nil }
		h.ui.deps.Discover = func(context.Context, node.DiscoverOptions) ([]node.Node, error) { return []node.Node{*probed}, nil }
		h.ui.tabs.SelectIndex(tabNodes)
		h.ui.nodes.Scan()
	})
	h.waitFor("scan", func() bool { return strings.HasPrefix(h.ui.nodes.status.Text, "Scanned") })
	h.onUI(func() {
		if !strings.Contains(h.ui.nodes.status.Text, "1 Talos node(s), 1 waiting for a config") {
			t.Fatalf("status %q", h.ui.nodes.status.Text)
		}
	})
	file, _ := filepath.Abs("testdata/worker.yaml")
	_, p := h.dropOnProbedNode(srv, file)
	h.onUI(func() { test.Tap(p.apply) })
	h.waitFor("apply", func() bool { return !h.ui.nodes.applying() })
	h.onUI(func() {
		if !strings.Contains(h.ui.nodes.status.Text, "1 Talos node(s), 0 waiting for a config") {
			t.Errorf("status after the apply: %q", h.ui.nodes.status.Text)
		}
	})
}

// The apply is pinned to the certificate of the node that was checked: a
// probe that shows none sends nothing (the GUI sent unpinned before).
func TestNodesApplyWithoutFingerprintSendsNothing(t *testing.T) {
	h := newHarness(t, nil)
	srv := nodetest.Start(t, nodetest.Options{Schematic: builtin(t, "worker").Schematic()})
	h.onUI(func() {
		h.ui.deps.Probe = func(ctx context.Context, addr string) (*node.Node, error) {
			n, err := node.Probe(ctx, addr)
			if n != nil {
				n.CertFingerprint = ""
			}
			return n, err
		}
	})
	file, _ := filepath.Abs("testdata/worker.yaml")
	row, p := h.dropOnNode(srv.Addr(), "worker", file)
	h.onUI(func() { test.Tap(p.apply) })
	h.waitFor("apply", func() bool { return !h.ui.nodes.applying() })
	if n := len(srv.Requests()); n != 0 {
		t.Fatalf("the node got %d requests without a pinned certificate", n)
	}
	h.onUI(func() {
		if !strings.Contains(row.reply.Text, "Not applied") || !strings.Contains(row.reply.Text, "no TLS certificate") {
			t.Errorf("row says %q", row.reply.Text)
		}
	})
}

// A node this session configured as a worker is never offered "Bootstrap
// etcd…", also once a re-scan finds it configured (it was offered before:
// any configured node was).
func TestNodesWorkerNotOfferedBootstrapAfterRescan(t *testing.T) {
	h := newHarness(t, nil)
	srv := nodetest.Start(t, nodetest.Options{Schematic: builtin(t, "worker").Schematic()})
	file, _ := filepath.Abs("testdata/worker.yaml")
	r, p := h.dropOnProbedNode(srv, file)
	h.onUI(func() { test.Tap(p.apply) })
	h.waitFor("apply", func() bool { return !h.ui.nodes.applying() })
	h.onUI(func() {
		rescanned := r.node
		rescanned.Configured, rescanned.Maintenance = true, false
		h.ui.nodes.addNode(rescanned)
		if r.bootBtn.Visible() {
			t.Error("a worker configured in this session is offered a bootstrap after a re-scan")
		}
	})
}

// After the node took its config the row tells what is now true: the
// Newt node's badge no longer says it "needs an ExtensionServiceConfig"
// once the config carrying it was sent, "Choose config…" is disabled for a
// node that left maintenance (all stayed as before the apply). A success
// with the node's warning ("installer.image is not set") is a success:
// the verdict is green, the warning is said in Details (it turned the
// whole row orange, issue 39).
func TestNodesRowAfterApplyIsCurrent(t *testing.T) {
	h := newHarness(t, nil)
	srv := nodetest.Start(t, nodetest.Options{Schematic: builtin(t, "controlplane").Schematic(), Warnings: []string{"installer.image is not set"}})
	file := testkit.TestdataPath(t, "talos114/valid/controlplane.yaml")
	row, p := h.dropOnProbedNode(srv, file)
	h.onUI(func() {
		if !strings.Contains(row.badge.Text, "needs an ExtensionServiceConfig newt") {
			t.Fatalf("before: badge %q", row.badge.Text)
		}
		if p.apply.Disabled() {
			t.Fatalf("blocked: %+v", p.findings)
		}
		test.Tap(p.apply)
	})
	h.waitFor("apply", func() bool { return !h.ui.nodes.applying() })
	h.onUI(func() {
		if !strings.HasPrefix(row.reply.Text, "Applied") {
			t.Fatalf("row says %q", row.reply.Text)
		}
		if strings.Contains(row.badge.Text, "needs an ExtensionServiceConfig") || !strings.Contains(row.badge.Text, "ExtensionServiceConfig newt was sent") {
			t.Errorf("badge after the apply: %q", row.badge.Text)
		}
		if !row.pick.Disabled() {
			t.Error("Choose config… is enabled for a node that left maintenance")
		}
		if row.reply.Importance != widget.SuccessImportance || strings.Contains(row.reply.Text, "installer.image") {
			t.Errorf("a successful apply is drawn as %v: %q", row.reply.Importance, row.reply.Text)
		}
		if !strings.Contains(row.detail.Text, "The node warns: installer.image is not set") {
			t.Errorf("the node's warning is not in Details: %q", row.detail.Text)
		}
		if row.details.Items[0].Open {
			t.Error("Details unfolded by itself")
		}
	})
}
