package gui

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/test"
	"fyne.io/fyne/v2/widget"

	"github.com/talosflash/talosflash/factory"
	"github.com/talosflash/talosflash/factory/factorytest"
	"github.com/talosflash/talosflash/imaging"
	"github.com/talosflash/talosflash/imaging/devices"
	"github.com/talosflash/talosflash/imaging/imagetest"
	"github.com/talosflash/talosflash/internal/testkit"
	"github.com/talosflash/talosflash/inventory"
	"github.com/talosflash/talosflash/node/nodetest"
)

// The model-based test of issue 29: random sequences of what a user does
// (pick a node, a role, cards; flash, with a card that fails; cancel;
// flash all cards, each its node's image; go back; flash another; apply
// all with a blocked node; apply one config)
// from a seed, on real parts on loopback (the fake factory, fake nodes,
// file cards), checking after every step that what the window says is
// true (checkInvariants). A failing seed is printed with its steps; add
// it to regressionSeeds. TALOSFLASH_MODEL_SEEDS=N runs N more random
// seeds, TALOSFLASH_MODEL_SEED=S one seed.

// regressionSeeds are seeds that failed once, and the default ones.
var regressionSeeds = []uint64{1, 2, 3, 4, 5, 6, 64300, 813564}

const modelSteps = 24

// modelWorld is the app with an inventory (cp-1, worker-1, worker-2 on
// loopback, each with its config), three cards (the third runs out of
// space after 1 MiB) and the fake nodes: cp-1 booted the control plane
// image, worker-1 the worker image, and at worker-2's address worker-1's
// second card answers (Apply all blocks it).
type modelWorld struct {
	*harness
	cards []string
	full  string
	dir   string
	nodes map[string]*nodetest.Server // by inventory hostname
	addrs map[string]string
	inv   *inventory.Inventory
}

func newModelWorld(t *testing.T) *modelWorld {
	t.Helper()
	talosImageOnce.Do(func() { talosImage = imagetest.NewTalos(t, 8<<20, 5, 1<<20) })
	srv := factorytest.New(t)
	for _, p := range factory.BuiltinProfiles() {
		id, err := p.SchematicID()
		if err != nil {
			t.Fatal(err)
		}
		srv.AddImage(id, p.Version(), "metal-arm64.raw.xz", talosImage.XZ)
		srv.AddImage(id, p.Version(), "metal-arm64.raw.zst", talosImage.Zstd(t))
	}
	dir := t.TempDir()
	kit := testkit.Inventory{Configs: true}
	inv, err := inventory.Load(kit.Write(t, dir), inventory.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ips := kit.IPs()
	port := testkit.FreePort(t, ips[:]...)
	w := &modelWorld{dir: dir, nodes: map[string]*nodetest.Server{}, addrs: map[string]string{}, inv: inv}
	var disks []devices.Disk
	for _, n := range []string{"card-a.img", "card-b.img", "card-full.img"} {
		p := testkit.WriteFile(t, dir, n, "")
		w.cards = append(w.cards, p)
		disks = append(disks, devices.Disk{Name: n, Path: p, Size: 64 << 20, SizeHuman: "64 MiB", Model: "Test card", Transport: devices.TransportFile, Safe: true})
	}
	w.full = w.cards[2]
	deps := Deps{
		Factory:        factory.NewClient(srv.URL, srv.Client()),
		Cache:          &imaging.Cache{Dir: filepath.Join(dir, "cache")},
		ListDevices:    func() ([]devices.Disk, error) { return disks, nil },
		NeedsElevation: func(string) bool { return false },
		PortalOpenFile: noPortal,
		DeviceEvents:   func(context.Context) <-chan struct{} { return nil },
		RefreshEvery:   -1,
		Inventory:      inv, InventoryPort: port, InventoryEvery: 10 * time.Millisecond,
		Eject: func(context.Context, string) devices.Ejected {
			return devices.Ejected{Flushed: true, Note: "image file"}
		},
	}
	deps.fill()
	open := deps.Open
	deps.Open = func(path string, size int64) (imaging.Target, error) {
		tg, err := open(path, size)
		if err != nil || path != w.full {
			return tg, err
		}
		return &fullCard{Target: tg, limit: 1 << 20}, nil
	}
	ui := New(test.NewTempApp(t), deps)
	t.Cleanup(ui.Close)
	ui.Window.Resize(fyne.NewSize(1000, 700))
	w.harness = &harness{t: t, ui: ui, factory: srv, image: talosImage}
	for i, host := range testkit.Hostnames {
		profile, name := "worker", host
		switch i {
		case 0:
			profile = "controlplane"
		case 2:
			name = "worker-1" // worker-1's second card in worker-2's Pi
		}
		addr := ips[i] + ":" + strconv.Itoa(port)
		w.addrs[host] = addr
		w.nodes[host] = nodetest.Start(t, nodetest.Options{Addr: addr, Hostname: name, Schematic: builtin(t, profile).Schematic()})
	}
	w.waitFor("the device list and the nodes", func() bool {
		if len(ui.target.disks) != 3 {
			return false
		}
		for _, r := range ui.nodes.invRows {
			if r.row == nil {
				return false
			}
		}
		return true
	})
	return w
}

// userModel is what the user picked, as the test remembers it.
type userModel struct {
	node  string   // hostname picked in step 1, "" none
	cards []string // ticked in step 2
}

// action is one thing the user does; it returns what it did, for the log.
type action struct {
	name string
	do   func(w *modelWorld, m *userModel, r *rand.Rand) string
}

var actions = []action{
	{"pick node", func(w *modelWorld, m *userModel, r *rand.Rand) string {
		hosts := []string{"", "cp-1", "worker-1", "worker-2"}
		h := hosts[r.IntN(len(hosts))]
		w.onUI(func() {
			sel := w.ui.image.nodes.sel
			if h == "" {
				sel.SetSelected(noNodeOption)
				return
			}
			for _, o := range sel.Options {
				if strings.HasPrefix(o, h+" ") {
					sel.SetSelected(o)
				}
			}
		})
		m.node = h
		return "node " + orDefault(h, "none")
	}},
	{"pick role", func(w *modelWorld, m *userModel, r *rand.Rand) string {
		role := []string{"controlplane", "worker"}[r.IntN(2)]
		w.onUI(func() { w.ui.image.selectProfile(role) })
		return "role " + role
	}},
	{"toggle card", func(w *modelWorld, m *userModel, r *rand.Rand) string {
		c := w.cards[r.IntN(len(w.cards))]
		w.onUI(func() {
			w.ui.tabs.SelectIndex(tabTarget)
			for i, d := range w.ui.target.disks {
				if d.Path == c {
					w.ui.target.list.Select(i)
				}
			}
		})
		if i := slices.Index(m.cards, c); i >= 0 {
			m.cards = slices.Delete(m.cards, i, i+1)
		} else {
			m.cards = append(m.cards, c)
		}
		return "toggle " + filepath.Base(c)
	}},
	{"flash", func(w *modelWorld, m *userModel, r *rand.Rand) string { return w.flashNow(false) }},
	{"flash", func(w *modelWorld, m *userModel, r *rand.Rand) string { return w.flashNow(false) }},
	{"flash and cancel", func(w *modelWorld, m *userModel, r *rand.Rand) string { return w.flashNow(true) }},
	{"flash all", func(w *modelWorld, m *userModel, r *rand.Rand) string { return w.flashAll() }},
	{"go back", func(w *modelWorld, m *userModel, r *rand.Rand) string {
		tab := r.IntN(3)
		w.onUI(func() { w.ui.tabs.SelectIndex(tab) })
		return "tab " + strconv.Itoa(tab+1)
	}},
	{"flash another", func(w *modelWorld, m *userModel, r *rand.Rand) string {
		shown := false
		w.onUI(func() {
			if shown = w.ui.flash.another.Visible(); shown {
				test.Tap(w.ui.flash.another)
			}
		})
		if !shown {
			return "flash another (not shown)"
		}
		m.cards = nil // the button's promise: start over with no card
		return "flash another"
	}},
	{"apply all", func(w *modelWorld, m *userModel, r *rand.Rand) string {
		on := false
		w.onUI(func() {
			w.ui.tabs.SelectIndex(tabNodes)
			if on = !w.ui.nodes.applyAll.Disabled(); on {
				tapApplyAll(w.ui)
			}
		})
		if !on {
			return "apply all (disabled)"
		}
		w.waitFor("apply all", func() bool { return !w.ui.nodes.applyingAll })
		return "apply all"
	}},
	{"apply one config", func(w *modelWorld, m *userModel, r *rand.Rand) string {
		host := testkit.Hostnames[r.IntN(3)]
		file := []string{"controlplane.yaml", "worker.yaml"}[r.IntN(2)]
		return w.applyOne(host, file)
	}},
}

// flashNow presses Flash and confirms (and, cancel, cancels at once),
// then waits for the end; nothing when Flash is off.
func (w *modelWorld) flashNow(cancel bool) string {
	on := false
	w.onUI(func() {
		w.ui.tabs.SelectIndex(tabFlash)
		if on = w.ui.flash.start.Visible() && !w.ui.flash.start.Disabled(); on {
			test.Tap(w.ui.flash.start)
		}
	})
	if !on {
		return "flash (off)"
	}
	var btn *keyButton
	w.onUI(func() {
		for _, o := range test.LaidOutObjects(w.ui.Window.Canvas().Overlays().Top()) {
			if b, ok := o.(*keyButton); ok && b.Text == "Erase and flash" {
				btn = b
			}
		}
		if btn == nil {
			w.t.Fatal("no confirmation")
		}
		test.Tap(btn)
		if cancel {
			test.Tap(w.ui.flash.cancel)
		}
	})
	w.waitFor("the flash to end", func() bool { return w.ui.flash.finished() })
	w.onUI(func() {
		if w.ui.modal != nil {
			w.ui.escape() // the failure's dialog
		}
	})
	if cancel {
		return "flash, cancel"
	}
	return "flash"
}

// overlayButton is the top dialog's button labelled text (nil: none).
func (w *modelWorld) overlayButton(text string) *keyButton {
	var btn *keyButton
	w.onUI(func() {
		if top := w.ui.Window.Canvas().Overlays().Top(); top != nil {
			for _, o := range test.LaidOutObjects(top) {
				if b, ok := o.(*keyButton); ok && b.Text == text {
					btn = b
				}
			}
		}
	})
	return btn
}

// flashAll presses "Flash all cards…" and takes its pairing of the ticked
// cards with the inventory's nodes (in order), then waits for the end.
func (w *modelWorld) flashAll() string {
	on := false
	w.onUI(func() {
		w.ui.tabs.SelectIndex(tabFlash)
		if on = !w.ui.flash.all.Disabled(); on {
			test.Tap(w.ui.flash.all)
		}
	})
	if !on {
		return "flash all (off)"
	}
	escape := func() { w.onUI(func() { w.ui.escape() }) }
	next := w.overlayButton("Next")
	if next == nil {
		escape() // "choose the cards first"
		return "flash all (no card)"
	}
	w.onUI(func() { test.Tap(next) })
	ok := w.overlayButton("Erase and flash")
	if ok == nil {
		escape()
		return "flash all (refused)"
	}
	w.onUI(func() { test.Tap(ok) })
	w.waitFor("the flash to end", func() bool { return w.ui.flash.finished() })
	w.onUI(func() {
		if w.ui.modal != nil {
			w.ui.escape() // the failure's dialog
		}
	})
	return "flash all"
}

// applyOne drops file on host's row and applies it when nothing blocks.
func (w *modelWorld) applyOne(host, file string) string {
	var row *nodeRow
	w.onUI(func() {
		w.ui.tabs.SelectIndex(tabNodes)
		for _, r := range w.ui.nodes.rows {
			if r.node.Addr == w.addrs[host] {
				row = r
			}
		}
		w.ui.Window.Content().Refresh()
	})
	if row == nil {
		return "apply " + file + " to " + host + " (no row)"
	}
	path := filepath.Join(w.dir, "talos", file)
	w.onUI(func() {
		data, err := os.ReadFile(path)
		if err != nil {
			w.t.Fatal(err)
		}
		w.ui.nodes.checkAndPrompt(row, file, path, data)
	})
	w.waitFor("the check", func() bool { return row.act == rowIdle })
	what := "apply " + file + " to " + host
	sent := false
	w.onUI(func() {
		if p := w.ui.nodes.openPrompt(); p != nil && !p.apply.Disabled() {
			test.Tap(p.apply)
			sent = true
		} else if w.ui.modal != nil {
			what += " (refused)"
			w.ui.escape()
		}
	})
	if sent {
		w.waitFor("the apply", func() bool { return row.act == rowIdle })
		w.onUI(func() {
			if w.ui.modal != nil {
				w.ui.escape()
			}
		})
	}
	return what
}

// weighted picks cards and flashes more often than the rest: most
// sequences then write cards.
var weighted = func() []int {
	var w []int
	for i, a := range actions {
		n := 1
		if a.name == "toggle card" || a.name == "flash" {
			n = 3
		}
		for range n {
			w = append(w, i)
		}
	}
	return w
}()

func TestModelUserSequences(t *testing.T) {
	seeds := slices.Clone(regressionSeeds)
	if s := os.Getenv("TALOSFLASH_MODEL_SEED"); s != "" {
		n, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatal(err)
		}
		seeds = []uint64{n}
	}
	if s := os.Getenv("TALOSFLASH_MODEL_SEEDS"); s != "" {
		n, _ := strconv.Atoi(s)
		for range n {
			seeds = append(seeds, rand.Uint64()%1_000_000)
		}
	}
	for _, seed := range seeds {
		t.Run(fmt.Sprint(seed), func(t *testing.T) { runModel(t, seed) })
	}
}

func runModel(t *testing.T, seed uint64) {
	w := newModelWorld(t)
	r := rand.New(rand.NewPCG(seed, 29))
	m := &userModel{}
	var log []string
	defer func() {
		if !t.Failed() {
			t.Logf("seed %d: %s", seed, strings.Join(log, "; ")) // -v
		}
		if t.Failed() {
			t.Logf("seed %d failed after these steps (TALOSFLASH_MODEL_SEED=%d replays it; keep it in regressionSeeds):\n  %s", seed, seed, strings.Join(log, "\n  "))
		}
	}()
	w.onUI(func() { w.check(t, m, "start") })
	for i := range modelSteps {
		a := actions[weighted[r.IntN(len(weighted))]]
		log = append(log, a.do(w, m, r))
		w.onUI(func() { w.check(t, m, fmt.Sprintf("step %d (%s)", i+1, log[len(log)-1])) })
		if t.Failed() {
			return
		}
	}
}

var pathRE = regexp.MustCompile(`/[^\s,;()]*card-(a|b|full)\.img`)

// check asserts what the window says after each step (UI goroutine).
func (w *modelWorld) check(t *testing.T, m *userModel, when string) {
	t.Helper()
	ui := w.ui
	f := ui.flash
	a := ui.session.Attempt()
	fail := func(format string, args ...any) { t.Errorf(when+": "+format, args...) }

	// The headline is green only when every card of the attempt is
	// verified, and shown only after a card was written.
	if f.done.Visible() {
		if a == nil || len(a.Good()) == 0 {
			fail("finish screen %q without a written card", f.doneTitle.Text)
		} else if green := f.doneTitle.Importance == widget.SuccessImportance; green != a.AllVerified() {
			fail("headline %q green=%v, every card verified=%v", f.doneTitle.Text, green, a.AllVerified())
		}
	}
	// A failed card's bars say so; no bar counts compressed bytes.
	for i, cp := range f.cards {
		for _, d := range []*widget.Label{cp.write.detail, cp.verify.detail} {
			if strings.Contains(d.Text, "(compressed)") {
				fail("a bar counts compressed bytes: %q", d.Text)
			}
		}
		if a == nil || !a.Ended() || i >= len(a.Results) || a.Results[i].Err == nil {
			continue
		}
		for _, d := range []*widget.Label{cp.write.detail, cp.verify.detail} {
			if d.Text == "waiting" || strings.Contains(d.Text, " left") || strings.HasSuffix(d.Text, "· done") && d == cp.verify.detail {
				fail("failed card %s's bar says %q", a.Results[i].Target, d.Text)
			}
		}
	}
	// No line of the Flash step is about a card that is neither the
	// attempt's nor (without one) chosen: nothing of an earlier attempt.
	allowed := map[string]bool{}
	for _, d := range ui.session.Cards() {
		allowed[d.Path] = true
	}
	if a != nil {
		clear(allowed)
		for _, d := range a.Cards {
			allowed[d.Path] = true
		}
	} else if f.status.Text != "" || f.done.Visible() {
		fail("status %q / finish screen shown without an attempt", f.status.Text)
	}
	texts := []string{f.summary.Text, f.status.Text}
	if f.done.Visible() {
		texts = append(texts, f.doneTitle.Text, f.doneBody.Text, f.eject.Text)
	}
	for _, cp := range f.cards {
		texts = append(texts, cp.write.detail.Text, cp.verify.detail.Text, cp.result.Text)
	}
	for _, text := range texts {
		for _, line := range strings.Split(text, "\n") {
			if strings.HasPrefix(line, "⚠ A card for") { // the session's earlier cards for the node: said on purpose
				continue
			}
			for _, p := range pathRE.FindAllString(line, -1) {
				if !allowed[p] {
					fail("the Flash step says %q: %s is not a card of this attempt", line, p)
				}
			}
		}
	}
	// Each card is written from its own image ("Flash all cards": its
	// node's role), the summary and the finish screen name each image,
	// and the session records each card with the image it took.
	if a != nil {
		for _, im := range a.images() {
			if !strings.Contains(f.summary.Text, imageSummary(im)) {
				fail("the summary %q does not name the image %s", f.summary.Text, im.Label)
			}
			if f.done.Visible() && im.LocalPath == "" && !strings.Contains(f.doneBody.Text, "schematic "+im.SchematicID) {
				fail("the finish screen %q does not name the image %s", f.doneBody.Text, im.Label)
			}
		}
		for i, d := range a.Cards {
			im := a.imageOf(i)
			if len(a.Images) > 0 && i < len(a.Metas) && a.Metas[i] != nil {
				if n := nodeNamed(w.inv, a.Metas[i].Node); n == nil || im.ProfileName() != n.Profile {
					fail("%s is for %s but takes the %s image", d.Path, a.Metas[i].Node, im.ProfileName())
				}
			}
			if !a.Ended() || !a.Results[i].OK() {
				continue
			}
			var last *Flashed // the session's latest record of the card
			for _, x := range ui.session.Flashed() {
				if x.Card.Target == d.Path {
					last = &x
				}
			}
			if last == nil || last.Image.SchematicID != im.SchematicID {
				fail("the session does not record %s with its image %s", d.Path, im.Label)
			}
		}
	}
	// A pick is never dropped without a message: the node stays picked,
	// and a card the user ticked is ticked or named in step 2's line.
	if got := ui.session.Node(); (got == nil) != (m.node == "") || got != nil && got.Hostname != m.node {
		fail("node pick %v, the user picked %q", got, m.node)
	}
	for _, c := range m.cards {
		if !ui.target.isChosen(c) && !strings.Contains(ui.target.status.Text, c) {
			fail("%s was unticked without a word (step 2 says %q)", c, ui.target.status.Text)
		}
	}
	m.cards = slices.Clone(ui.target.chosen)
	// Apply all's counts are the rows' outcomes as their lines say them.
	if note := ui.nodes.applyAllNote.Text; strings.HasPrefix(note, "Apply all: ") {
		count := map[string]int{}
		for _, r := range ui.nodes.invRows {
			_, rest, _ := strings.Cut(r.label.Text, " · ")
			switch {
			case strings.HasPrefix(rest, "applied "):
				count["applied"]++
			case strings.HasPrefix(rest, "blocked: "), r.label.Importance == widget.DangerImportance && !strings.HasPrefix(rest, "not applied"):
				count["blocked"]++
			case strings.HasPrefix(rest, "already configured"):
				count["skipped (already configured)"]++
			}
		}
		for what, n := range count {
			if !strings.Contains(note, fmt.Sprintf("%d %s", n, what)) {
				fail("note %q, but %d row(s) say %s", note, n, what)
			}
		}
	}
	// A row's Newt warning follows the config its node took.
	for host, srv := range w.nodes {
		for _, row := range ui.nodes.rows {
			if row.node.Addr != w.addrs[host] {
				continue
			}
			took := false
			for _, req := range srv.Requests() {
				if !req.DryRun {
					took = bytes.Contains(req.Config, []byte("kind: ExtensionServiceConfig\nname: newt"))
				}
			}
			needs := strings.Contains(row.badge.Text, "needs an ExtensionServiceConfig newt")
			newt := row.node.Booted != nil && row.node.Booted.HasExtension("siderolabs/newt")
			if needs != (newt && !took) {
				fail("%s's row says %q (booted newt %v, took its config %v)", host, row.badge.Text, newt, took)
			}
		}
	}
}

// nodeNamed is the inventory's node called host (nil: none).
func nodeNamed(inv *inventory.Inventory, host string) *inventory.Node {
	for i := range inv.Nodes {
		if strings.EqualFold(inv.Nodes[i].Hostname, host) {
			return &inv.Nodes[i]
		}
	}
	return nil
}
