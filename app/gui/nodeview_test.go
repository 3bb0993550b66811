package gui

import (
	"path/filepath"
	"strings"
	"testing"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/storage"
	"fyne.io/fyne/v2/widget"
)

// waitAllAnswered waits until every inventory node answered.
func (h *invHarness) waitAllAnswered() {
	h.t.Helper()
	h.waitFor("all answered", func() bool {
		for _, r := range h.ui.nodes.invRows {
			if r.row == nil {
				return false
			}
		}
		return true
	})
}

// dropOn drops file on row (UI goroutine work done here).
func (h *invHarness) dropOn(row *nodeRow, file string) {
	h.t.Helper()
	h.onUI(func() { h.ui.Window.Content().Refresh() })
	h.onUI(func() {
		pos := fyne.CurrentApp().Driver().AbsolutePositionForObject(row.box).Add(fyne.NewPos(20, row.box.Size().Height/2))
		h.ui.HandleDrop(pos, []fyne.URI{storage.NewFileURI(file)})
	})
}

// Apply all's counts come from the rows' outcomes: worker-2 was blocked
// before (another node's card, refused on a drop) and is counted blocked
// (the note said "2 applied, 0 not" under "worker-2 · blocked"). cp-1's
// row stops saying "needs an ExtensionServiceConfig newt" once Apply all
// sent it a config that has it (it stayed).
func TestInventoryApplyAllCountsTheRows(t *testing.T) {
	h := newInvHarness(t)
	h.start("127.0.0.21", "controlplane", "cp-1", false)
	h.start("127.0.0.22", "worker", "worker-1", false)
	h.start("127.0.0.23", "worker", "worker-1", false) // worker-1's second card in worker-2's Pi
	h.waitAllAnswered()
	cp := h.rowOf(h.addr("127.0.0.21"))
	h.onUI(func() {
		if !strings.Contains(cp.badge.Text, "needs an ExtensionServiceConfig newt") {
			t.Fatalf("cp-1 before its config: %q", cp.badge.Text)
		}
	})
	h.dropOn(h.rowOf(h.addr("127.0.0.23")), filepath.Join(h.dir, "talos", "worker.yaml"))
	h.waitFor("the refusal", func() bool { return strings.HasPrefix(h.ui.nodes.invRows[2].label.Text, "worker-2 · blocked: ") })
	h.onUI(func() {
		h.ui.escape()
		tapApplyAll(h.ui)
	})
	h.waitFor("apply all done", func() bool { return strings.HasPrefix(h.ui.nodes.applyAllNote.Text, "Apply all: ") })
	h.onUI(func() {
		if got := h.ui.nodes.applyAllNote.Text; got != "Apply all: 2 applied, 1 blocked. Each row says why." {
			t.Errorf("note %q under rows %q / %q / %q", got, h.ui.nodes.invRows[0].label.Text, h.ui.nodes.invRows[1].label.Text, h.ui.nodes.invRows[2].label.Text)
		}
		if b := cp.badge.Text; strings.Contains(b, "needs an ExtensionServiceConfig") || !strings.Contains(b, "its ExtensionServiceConfig newt was sent") {
			t.Errorf("cp-1 after its config: %q", b)
		}
		if !strings.HasPrefix(cp.reply.Text, "Applied controlplane.yaml") {
			t.Errorf("cp-1's row: %q", cp.reply.Text)
		}
	})
}

// Node rows are in the inventory's order whatever order the nodes answer
// in (worker-2 first here), strays apart by address: cp-1 and its
// bootstrap step are not pushed below the fold by the workers.
func TestInventoryRowsInInventoryOrder(t *testing.T) {
	h := newInvHarness(t)
	h.start("127.0.0.23", "worker", "worker-2", false)
	h.rowOf(h.addr("127.0.0.23"))
	h.start("127.0.0.21", "controlplane", "cp-1", false)
	h.rowOf(h.addr("127.0.0.21"))
	h.start("127.0.0.22", "worker", "worker-1", false)
	h.waitAllAnswered()
	h.onUI(func() {
		var got []string
		for _, o := range h.ui.nodes.rowBox.Objects {
			for _, r := range h.ui.nodes.rows {
				if r.box == o {
					got = append(got, r.node.Addr)
				}
			}
		}
		want := []string{h.addr("127.0.0.21"), h.addr("127.0.0.22"), h.addr("127.0.0.23")}
		if strings.Join(got, " ") != strings.Join(want, " ") {
			t.Fatalf("rows %v, want %v", got, want)
		}
	})
}

// worker-2's own card (its hostname) flashed with the control plane
// image: the line and the refusal say to flash it again with the worker
// image, not "cards swapped" or "Fix the file" (issue 29).
func TestInventoryWrongImageSaysFlashAgain(t *testing.T) {
	h := newInvHarness(t)
	h.start("127.0.0.23", "controlplane", "worker-2", false)
	row := h.rowOf(h.addr("127.0.0.23"))
	h.waitFor("its line", func() bool { return !strings.Contains(h.ui.nodes.invRows[2].label.Text, "waiting at") })
	want := "flash worker-2's card again with the worker image"
	if got := h.invText(2); !strings.Contains(got, want) || strings.Contains(got, "swapped") {
		t.Errorf("line %q", got)
	}
	h.dropOn(row, filepath.Join(h.dir, "talos", "worker.yaml"))
	var shown string
	h.waitFor("refusal", func() bool { shown = h.overlayLabels(); return strings.Contains(shown, "Nothing was sent") })
	if !strings.Contains(shown, want) || strings.Contains(shown, "swapped") || strings.Contains(shown, "Fix the file") || strings.Contains(shown, "not worker-2") {
		t.Errorf("refusal:\n%s", shown)
	}
	h.onUI(func() {
		if l := h.ui.nodes.invRows[2].label; l.Importance != widget.DangerImportance || !strings.Contains(l.Text, want) {
			t.Errorf("line after the refusal %q", l.Text)
		}
	})
}
