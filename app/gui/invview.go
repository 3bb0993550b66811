package gui

import (
	"fmt"
	"strings"

	"fyne.io/fyne/v2/widget"

	"github.com/talosflash/talosflash/app/plan"
	"github.com/talosflash/talosflash/internal/printable"
)

// invState is where an inventory node is: its line says it, and Apply
// all's summary counts these states (viewApplyAll), so the counts and the
// lines never disagree.
type invState int

const (
	invWaiting      invState = iota // waiting at its address
	invSilent                       // nothing answered for inventoryWait
	invFound                        // it answered (detail: what it booted); configured, or waiting for its config
	invWrongNode                    // another node's card, or its card with another role's image (detail)
	invQueued                       // Apply all: waiting for its turn
	invChecking                     // Apply all: its config is checked (detail: the config)
	invApplied                      // its config was applied (detail: the config and what the node does next)
	invBlocked                      // nothing was sent: another node's card, or the incident checks (detail)
	invNotApplied                   // the apply failed (detail: why)
	invSkipped                      // already configured: skipped
	invNoConfig                     // the inventory names no config for it
	invNotAnswering                 // Apply all while it does not answer
)

// viewInventoryRow is the line of an inventory node in its state; once its
// node is followed (status.go), where it is now, in one line.
func viewInventoryRow(r *inventoryRow) textView {
	if r.row != nil && r.row.status != nil {
		switch r.state {
		case invFound, invApplied, invSkipped:
			now := statusLine(*r.row.status)
			if r.state == invApplied {
				cfg, _, _ := strings.Cut(r.detail, ":")
				now.Text = "applied " + cfg + " · now " + now.Text
			}
			now.Text = printable.String(r.node.Hostname + " · " + now.Text)
			return now
		}
	}
	h, addr := r.node.Hostname, r.node.Endpoint.Host
	var t textView
	switch r.state {
	case invWaiting:
		t.Text = fmt.Sprintf("%s · waiting at %s …", h, addr)
	case invSilent:
		t.Text = fmt.Sprintf("%s · nothing answered at %s for %s: is the Pi on and booted from its card? (Scan, or type its address)", h, addr, inventoryWait)
	case invFound:
		t.Text = r.detail
	case invWrongNode:
		t = textView{Text: r.detail, Importance: widget.DangerImportance}
	case invQueued:
		t.Text = h + " · waiting for its turn …"
	case invChecking:
		t.Text = h + " · checking " + r.detail + " …"
	case invApplied: // what the node does next is its card's, in Details: not said on every line
		cfg, _, _ := strings.Cut(r.detail, ":")
		t = textView{Text: h + " · applied " + cfg, Importance: widget.SuccessImportance}
	case invBlocked:
		t = textView{Text: h + " · blocked: " + r.detail, Importance: widget.DangerImportance}
	case invNotApplied:
		t = textView{Text: h + " · not applied: " + r.detail, Importance: widget.DangerImportance}
	case invSkipped:
		t.Text = h + " · already configured: skipped"
	case invNoConfig:
		t = textView{Text: h + " · no config: in the inventory: drop its config on its row", Importance: widget.WarningImportance}
	case invNotAnswering:
		t = textView{Text: h + " · not answering yet at " + addr + ": not applied", Importance: widget.WarningImportance}
	}
	t.Text = printable.String(t.Text)
	return t
}

// inventoryVerdict is what an inventory node's card says of its
// inventory state when that is more than the card knows (Apply all's
// turn, a refusal, another node's card at its address), false when the
// card's own verdict stands.
func inventoryVerdict(r *inventoryRow) (textView, bool) {
	switch r.state {
	case invWrongNode, invQueued, invChecking, invBlocked, invNotApplied, invSkipped, invNoConfig, invNotAnswering:
		t := viewInventoryRow(r)
		if _, rest, ok := strings.Cut(t.Text, " · "); ok {
			t.Text = rest
		}
		t.Text = sentence(t.Text)
		return t, true
	}
	return textView{}, false
}

// viewApplyAll is the note beside Apply all: what it does, its progress,
// then the outcome counted from the rows' states.
func viewApplyAll(name string, rows []*inventoryRow, running, ran bool) string {
	count := map[invState]int{}
	for _, r := range rows {
		count[r.state]++
	}
	if running {
		left := count[invQueued] + count[invChecking]
		return fmt.Sprintf("Applying… %d applied, %d to go.", count[invApplied], left)
	}
	if !ran {
		return "Apply all sends each waiting node its own config from " + name + ", once its checks pass."
	}
	var parts []string
	add := func(n int, what string) {
		if n > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", n, what))
		}
	}
	add(count[invApplied], "applied")
	add(count[invBlocked]+count[invWrongNode], "blocked")
	add(count[invNotApplied]+count[invNoConfig]+count[invNotAnswering]+count[invWaiting]+count[invSilent], "not applied")
	add(count[invSkipped], "skipped (already configured)")
	add(count[invFound], "waiting for its config")
	return "Apply all: " + strings.Join(parts, ", ") + ". Each row says why."
}

// setInv puts r in state (detail: its words) and shows it with the
// summary (UI goroutine).
func (s *nodesStep) setInv(r *inventoryRow, state invState, detail string) {
	r.state, r.detail = state, detail
	setText(r.label, viewInventoryRow(r))
	for _, row := range s.rows { // its card says it (render)
		if row.member == r.node {
			s.render(row)
		}
	}
	s.showApplyAllNote()
}

// showApplyAllNote shows viewApplyAll (UI goroutine).
func (s *nodesStep) showApplyAllNote() {
	if s.applyAllNote == nil {
		return
	}
	if note := viewApplyAll(s.inventoryName(), s.invRows, s.applyingAll, s.appliedAll); s.applyAllNote.Text != note {
		s.applyAllNote.SetText(note)
	}
}

// statusLine is a followed node in one line: its stage and readiness,
// then what is wrong (the incident with its countdown), or its unmet
// conditions; coloured by how it is.
func statusLine(ns plan.NodeStatus) textView {
	st := ns.Status
	if st == nil {
		return textView{Text: "not answering (leaving maintenance mode, or rebooting)", Importance: widget.WarningImportance}
	}
	t := textView{Text: st.Stage + ", ready"}
	if !st.Ready {
		t.Text = st.Stage + ", not ready"
	}
	switch {
	case ns.Healthy():
		t.Importance = widget.SuccessImportance
	case st.Stage != "running":
		t.Importance = widget.WarningImportance
	}
	for _, d := range ns.Diagnoses {
		switch d.Severity {
		case "error":
			return textView{Text: t.Text + ": " + d.Message, Importance: widget.DangerImportance}
		case "warning":
			return textView{Text: t.Text + ": " + d.Message, Importance: widget.WarningImportance}
		}
	}
	if len(st.Unmet) > 0 {
		var parts []string
		for _, u := range st.Unmet {
			parts = append(parts, u.Name+": "+u.Reason)
		}
		t.Text += " (" + strings.Join(parts, "; ") + ")"
	}
	return t
}
