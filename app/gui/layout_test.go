package gui

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/canvas"
	"fyne.io/fyne/v2/test"
	"fyne.io/fyne/v2/theme"
	"fyne.io/fyne/v2/widget"

	"github.com/talosflash/talosflash/node"
	"github.com/talosflash/talosflash/node/nodetest"
)

// The window sizes every dialog is checked at: the minimum and a common one.
var layoutSizes = []fyne.Size{{Width: MinWidth, Height: MinHeight}, {Width: 1280, Height: 800}}

// textBox is one drawn text: where it is, how wide it is drawn, and the
// widget that owns it.
type textBox struct {
	text       string
	pos, size  fyne.Size // pos as a size: x, y
	owner      fyne.CanvasObject
	ownerPos   fyne.Size
	ownerSize  fyne.Size
	inScroller bool
	clip       [2]fyne.Position // the nearest scroll's viewport: top-left, bottom-right
}

// drawnTexts walks o's tree (as the canvas draws it) and returns every
// non-empty text with its absolute place and owning widget.
func drawnTexts(o fyne.CanvasObject) []textBox {
	var out []textBox
	var walk func(o fyne.CanvasObject, at fyne.Position, owner fyne.CanvasObject, ownerAt fyne.Position, scroll bool, clip [2]fyne.Position)
	walk = func(o fyne.CanvasObject, at fyne.Position, owner fyne.CanvasObject, ownerAt fyne.Position, scroll bool, clip [2]fyne.Position) {
		if o == nil || !o.Visible() {
			return
		}
		abs := at.Add(o.Position())
		switch o.(type) {
		case *widget.Label, *breakLabel, *widget.Button, *keyButton, *widget.Check, *widget.Select:
			owner, ownerAt = o, abs
		case *widget.Entry, *escEntry:
			return // an entry scrolls its text by design
		}
		if _, ok := o.(interface{ ScrollToTop() }); ok {
			scroll = true
			end := abs.Add(o.Size()) // inside every enclosing scroll's viewport
			clip = [2]fyne.Position{{X: max(clip[0].X, abs.X), Y: max(clip[0].Y, abs.Y)}, {X: min(clip[1].X, end.X), Y: min(clip[1].Y, end.Y)}}
		}
		switch x := o.(type) {
		case *canvas.Text:
			w := fyne.MeasureText(x.Text, x.TextSize, x.TextStyle)
			if strings.TrimSpace(x.Text) == "" || owner == nil || owner.Size().IsZero() ||
				abs.Y+w.Height <= clip[0].Y || abs.Y >= clip[1].Y { // scrolled out of view: not drawn
				return
			}
			out = append(out, textBox{text: x.Text, pos: fyne.NewSize(abs.X, abs.Y), size: w, owner: owner,
				ownerPos: fyne.NewSize(ownerAt.X, ownerAt.Y), ownerSize: owner.Size(), inScroller: scroll, clip: clip})
		case *fyne.Container:
			for _, c := range x.Objects {
				walk(c, abs, owner, ownerAt, scroll, clip)
			}
		case fyne.Widget:
			for _, c := range test.WidgetRenderer(x).Objects() {
				walk(c, abs, owner, ownerAt, scroll, clip)
			}
		}
	}
	walk(o, fyne.NewPos(-o.Position().X, -o.Position().Y), nil, fyne.Position{}, false, [2]fyne.Position{{X: -1e6, Y: -1e6}, {X: 1e6, Y: 1e6}})
	return out
}

// assertTextFits checks the dialog shown now: every text is drawn whole
// inside its widget (no clipped line, no "…" cut into a choice), inside the
// window, and no two texts overlap.
func assertTextFits(t *testing.T, ui *UI, name string) {
	t.Helper()
	top := ui.Window.Canvas().Overlays().Top()
	if top == nil {
		t.Fatalf("%s: no dialog shown", name)
	}
	assertObjectTextFits(t, ui, top, name)
	assertNoMidWordBreaks(t, top, name)
}

// assertObjectTextFits is assertTextFits for any object on the window.
func assertObjectTextFits(t *testing.T, ui *UI, top fyne.CanvasObject, name string) {
	t.Helper()
	for range 3 { // wrapped texts know their height once laid out at their width
		top.Refresh()
	}
	win := ui.Window.Canvas().Size()
	texts := drawnTexts(top)
	if len(texts) == 0 {
		t.Fatalf("%s: no text found", name)
	}
	const slack = 1.5
	for _, b := range texts {
		if b.pos.Width < b.ownerPos.Width-slack || b.pos.Width+b.size.Width > b.ownerPos.Width+b.ownerSize.Width+slack {
			t.Errorf("%s: %q (x %.0f…%.0f) sticks out of its %T (x %.0f…%.0f)", name, b.text, b.pos.Width, b.pos.Width+b.size.Width,
				b.owner, b.ownerPos.Width, b.ownerPos.Width+b.ownerSize.Width)
		}
		if b.pos.Height < b.ownerPos.Height-slack || b.pos.Height+b.size.Height > b.ownerPos.Height+b.ownerSize.Height+slack {
			t.Errorf("%s: %q (y %.0f…%.0f) is cut by its %T (y %.0f…%.0f)", name, b.text, b.pos.Height, b.pos.Height+b.size.Height,
				b.owner, b.ownerPos.Height, b.ownerPos.Height+b.ownerSize.Height)
		}
		if !b.inScroller && (b.pos.Width < 0 || b.pos.Width+b.size.Width > win.Width+slack) {
			t.Errorf("%s: %q (x %.0f…%.0f) is outside the %.0f-wide window", name, b.text, b.pos.Width, b.pos.Width+b.size.Width, win.Width)
		}
		if sel, ok := b.owner.(*widget.Select); ok && sel.Selected != "" && b.text != sel.Selected {
			t.Errorf("%s: the choice %q is shown as %q", name, sel.Selected, b.text)
		}
	}
	// The part of a text its scroll's viewport shows (a row cut at the
	// viewport's bottom edge does not overlap the buttons below it).
	shownY := func(b textBox) (float32, float32) {
		return max(b.pos.Height, b.clip[0].Y), min(b.pos.Height+b.size.Height, b.clip[1].Y)
	}
	for i, a := range texts {
		for _, b := range texts[i+1:] {
			ay0, ay1 := shownY(a)
			by0, by1 := shownY(b)
			if a.pos.Width < b.pos.Width+b.size.Width-slack && b.pos.Width < a.pos.Width+a.size.Width-slack &&
				ay0 < by1-slack && by0 < ay1-slack {
				t.Errorf("%s: %q (%v %v in %T %v, clip %v) and %q (%v %v) overlap", name, a.text, a.pos, a.size, a.owner, a.ownerSize, a.clip, b.text, b.pos, b.size)
			}
		}
	}
}

// Each dialog at the window's minimum size and at 1280x800: the erase
// confirmation (one card, three cards), an error, the apply prompt with the
// Newt fix (shown whole), the bootstrap prompt and the file chooser.
func TestDialogsLayout(t *testing.T) {
	for _, size := range layoutSizes {
		t.Run(fmt.Sprintf("%.0fx%.0f", size.Width, size.Height), func(t *testing.T) {
			h, paths := multiHarness(t)
			h.onUI(func() { h.ui.Window.Resize(size) })
			ui := h.ui
			h.onUI(func() {
				ui.image.selectProfile("worker")
				ui.target.selectPath(paths[0])
				ui.tabs.SelectIndex(tabFlash)
				test.Tap(ui.flash.start)
				assertTextFits(t, ui, "confirm one card")
				ui.escape()
				ui.target.selectPath(paths[1])
				ui.target.selectPath(paths[2])
				test.Tap(ui.flash.start)
				assertTextFits(t, ui, "confirm three cards")
				ui.escape()
				ui.showError("Flashing "+paths[0]+" failed", fmt.Errorf("write %s at offset 1048576: %w", paths[0], errors.New("input/output error: the card stopped answering while the image was written and verified")))
				assertTextFits(t, ui, "error")
				ui.escape()
			})
			c := h.openChooser(ui.image.openImageFile)
			h.onUI(func() {
				c.path.SetText("/no/such/folder/image.raw.xz")
				test.Tap(c.open)
				assertTextFits(t, ui, "file chooser")
				ui.escape()
			})

			srv := nodetest.Start(t, nodetest.Options{Schematic: newtElsewhere(t)})
			file, _ := filepath.Abs("testdata/worker.yaml")
			_, p := h.dropOnProbedNode(srv, file)
			h.onUI(func() {
				assertTextFits(t, ui, "apply prompt")
				// The Newt fix is shown whole: its box is as high as its text.
				found := false
				for _, b := range drawnTexts(ui.Window.Canvas().Overlays().Top()) {
					if strings.Contains(b.text, "kind: ExtensionServiceConfig") {
						found = true
					}
				}
				if !found || p.override == nil {
					t.Error("the Newt fix is not shown")
				}
				assertFixesWhole(t, ui)
				ui.escape()
			})

			r := func() *nodeRow {
				var r *nodeRow
				h.onUI(func() { r = ui.nodes.addNode(nodeConfigured("127.0.0.1:1")) })
				return r
			}()
			h.onUI(func() {
				test.Tap(r.bootBtn)
				assertTextFits(t, ui, "bootstrap prompt")
				ui.escape()
				// The Nodes step with a node that does not say what it
				// booted: "Card flashed as" shows its whole choice.
				u := ui.nodes.addNode(node.Node{Addr: "127.0.0.1:2", Maintenance: true})
				u.flashed.SetSelected(unknownFlash)
				ui.Window.Content().Refresh()
				assertObjectTextFits(t, ui, u.box, "node row")
			})
		})
	}
}

// assertFixesWhole checks every fix box in the dialog shows all its lines.
func assertFixesWhole(t *testing.T, ui *UI) {
	t.Helper()
	boxes := 0
	defer func() {
		if boxes == 0 {
			t.Error("no fix box that sizes to its text")
		}
	}()
	var walk func(o fyne.CanvasObject)
	walk = func(o fyne.CanvasObject) {
		switch x := o.(type) {
		case *fyne.Container:
			if c, ok := x.Layout.(*capHeight); ok {
				boxes++
				need := c.content.MinSize().Height
				if need <= c.max && x.Size().Height+1 < need {
					t.Errorf("a fix box is %.0f high for %.0f of text: its last lines are cut", x.Size().Height, need)
				}
			}
			for _, c := range x.Objects {
				walk(c)
			}
		case fyne.Widget:
			for _, c := range test.WidgetRenderer(x).Objects() {
				walk(c)
			}
		}
	}
	walk(ui.Window.Canvas().Overlays().Top())
}

func nodeConfigured(addr string) node.Node { return node.Node{Addr: addr, Configured: true} }

// An installer reference breaks only after "/" or ":" (never inside the
// tag, as "…f9:v" / "1.14.5"); a token too wide stays whole.
func TestBreakLinesAtReferenceBoundaries(t *testing.T) {
	ref := "installs factory.talos.dev/metal-installer/29a2fae6a7f059e83882db3447b6411d474c6154d8cd1a34ec27779ab198f50d:v1.14.5 to /dev/mmcblk0"
	width := func(s string) float32 { return float32(len(s)) } // one unit per byte
	for _, w := range []float32{10, 30, 70, 80, 200} {
		got := breakLines(ref, w, width)
		for _, line := range strings.Split(got, "\n") {
			if strings.HasSuffix(line, ":v") || strings.HasPrefix(line, "1.14.5") || strings.HasPrefix(line, "talos.dev") {
				t.Errorf("width %v: broken inside a token: %q", w, line)
			}
		}
		// Joined back, nothing but the break points changed.
		if joined := strings.ReplaceAll(got, "\n", ""); strings.ReplaceAll(joined, " ", "") != strings.ReplaceAll(ref, " ", "") {
			t.Errorf("width %v: %q is not the reference", w, got)
		}
	}
	if got := breakLines(ref, 200, width); got != ref {
		t.Errorf("wide enough: %q", got)
	}
}

// Each step at 820x600 and 1280x800, with three cards chosen and after
// they were flashed (one failing): every text inside its widget and the
// window, none overlapping.
func TestStepsLayout(t *testing.T) {
	for _, size := range layoutSizes {
		t.Run(fmt.Sprintf("%.0fx%.0f", size.Width, size.Height), func(t *testing.T) {
			h, paths := multiHarness(t)
			ui := h.ui
			settle := func(name string) {
				t.Helper()
				for range 3 {
					ui.Window.Content().Refresh()
				}
				assertObjectTextFits(t, ui, ui.Window.Content(), name)
				assertNoMidWordBreaks(t, ui.Window.Content(), name)
			}
			h.onUI(func() {
				ui.Window.Resize(size)
				ui.image.selectProfile("controlplane")
				settle("image step")
				ui.tabs.SelectIndex(tabTarget)
				for _, p := range paths {
					ui.target.selectPath(p)
				}
				settle("card step")
				ui.tabs.SelectIndex(tabFlash)
				settle("flash step")
				test.Tap(ui.flash.start)
			})
			h.tapDialogButton("Erase and flash")
			h.waitFor("finish", func() bool { return ui.flash.finished() })
			h.waitFor("eject", func() bool { return (ui.session.Attempt() != nil && ui.session.Attempt().Ejected != nil) })
			h.onUI(func() {
				ui.escape() // nothing failed alone: no dialog; one failed: the finish screen says so
				settle("finish screen")
				ui.tabs.SelectIndex(tabNodes)
				ui.nodes.addNode(node.Node{Addr: "127.0.0.1:2", Maintenance: true, Hostname: "talos-abc-def", TalosVersion: "v1.12.6"})
				settle("nodes step")
			})
		})
	}
}

// The window's minimum is MinWidth x MinHeight with its padding: every
// step's content fits inside it, the Nodes step with a node that does
// not say what it booted, a control plane offered its bootstrap and an
// applied one (the row's buttons made it 980 px wide, and the window's
// own padding 828 x 608: the right-hand buttons were cut at 820 x 600).
func TestWindowMinimumIsTheMinimum(t *testing.T) {
	h, _ := multiHarness(t)
	ui := h.ui
	h.onUI(func() {
		ui.tabs.SelectIndex(tabNodes)
		u := ui.nodes.addNode(node.Node{Addr: "127.0.0.1:2", Maintenance: true, Hostname: "talos-abc-def", TalosVersion: "v1.12.6", MAC: "dc:a6:32:1a:2b:31"})
		u.flashed.SetSelected(unknownFlash)
		ui.nodes.addNode(nodeConfigured("127.0.0.1:3"))
		pad := 2 * theme.Padding()
		for i := range ui.tabs.Items {
			ui.tabs.SelectIndex(i)
			if got := ui.Window.Content().MinSize(); got.Width+pad > MinWidth || got.Height+pad > MinHeight {
				t.Errorf("step %d: the window needs %.0f x %.0f with its padding, more than %d x %d", i+1, got.Width+pad, got.Height+pad, MinWidth, MinHeight)
			}
		}
	})
}

// assertNoMidWordBreaks checks that no label of o wraps inside a word
// ("controlpl" / "ane"): two consecutive lines of one widget joined with
// nothing between them, a letter on each side.
func assertNoMidWordBreaks(t *testing.T, o fyne.CanvasObject, name string) {
	t.Helper()
	texts := drawnTexts(o)
	for i := 1; i < len(texts); i++ {
		a, b := texts[i-1], texts[i]
		if a.owner != b.owner || a.text == "" || b.text == "" {
			continue
		}
		full := ownerText(a.owner)
		last, first := rune(a.text[len(a.text)-1]), rune(b.text[0])
		if isWordRune(last) && isWordRune(first) && strings.Contains(full, a.text+b.text) {
			t.Errorf("%s: %q is broken inside a word: %q / %q", name, full, a.text, b.text)
		}
	}
}

func ownerText(o fyne.CanvasObject) string {
	switch w := o.(type) {
	case *widget.Label:
		return w.Text
	case *breakLabel:
		return w.Text
	}
	return ""
}

func isWordRune(r rune) bool {
	return r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9'
}
