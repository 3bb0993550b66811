package gui

import (
	"image/color"
	"strconv"
	"strings"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/canvas"
	"fyne.io/fyne/v2/container"
	"fyne.io/fyne/v2/dialog"
	"fyne.io/fyne/v2/driver/desktop"
	"fyne.io/fyne/v2/theme"
	"fyne.io/fyne/v2/widget"
)

// keyButton is a button that Enter activates too (Fyne's takes only Space)
// and that passes Esc to the window, so the keyboard works wherever the
// focus is.
type keyButton struct {
	widget.Button
	ui *UI
}

func newKeyButton(ui *UI, label string, icon fyne.Resource, tapped func()) *keyButton {
	b := &keyButton{ui: ui}
	b.Text, b.Icon, b.OnTapped = label, icon, tapped
	b.ExtendBaseWidget(b)
	return b
}

// primaryButton is the step's main action: highlighted, placed bottom-right.
func primaryButton(ui *UI, label string, icon fyne.Resource, tapped func()) *keyButton {
	b := newKeyButton(ui, label, icon, tapped)
	b.Importance = widget.HighImportance
	return b
}

// TypedKey implements fyne.Focusable.
func (b *keyButton) TypedKey(ev *fyne.KeyEvent) {
	switch ev.Name {
	case fyne.KeyReturn, fyne.KeyEnter:
		if !b.Disabled() && b.OnTapped != nil {
			b.OnTapped()
		}
	case fyne.KeyEscape:
		if b.ui != nil {
			b.ui.escape()
		}
	default:
		b.Button.TypedKey(ev)
	}
}

// modal is the dialog shown now: Enter runs its primary action, Esc
// dismisses it.
type modal struct {
	dialog  dialog.Dialog
	primary *keyButton // nil: Enter dismisses (an information dialog)
	files   bool       // a file dialog: Enter is its own (open the selection)
}

// track makes d the dialog Enter and Esc act on until it closes. The
// focus leaves the window's widgets, so Enter reaches the dialog, not the
// button that opened it.
func (ui *UI) track(m *modal) {
	ui.Window.Canvas().Unfocus()
	m.dialog.SetOnClosed(func() {
		if ui.modal == m {
			ui.modal = nil
		}
	})
	ui.modal = m
}

// showModal shows a dialog whose buttons are dismiss (left) and confirm
// (right, primary); confirm may be nil for an information dialog. It
// returns the dialog's primary button (nil when none).
func (ui *UI) showModal(title string, content fyne.CanvasObject, dismissText string, confirm *keyButton, size fyne.Size) *modal {
	m := &modal{primary: confirm}
	dismiss := newKeyButton(ui, dismissText, nil, nil)
	d := dialog.NewCustomWithoutButtons(title, content, ui.Window)
	m.dialog = d
	buttons := []fyne.CanvasObject{dismiss}
	if confirm != nil {
		buttons = append(buttons, confirm)
		next := confirm.OnTapped
		confirm.OnTapped = func() {
			m.dialog.Hide()
			if next != nil {
				next()
			}
		}
	} else {
		dismiss.Importance = widget.HighImportance
	}
	dismiss.OnTapped = d.Hide
	d.SetButtons(buttons)
	if size.Width > 0 {
		d.Resize(size)
	}
	ui.track(m)
	d.Show()
	return m
}

// typedKey handles keys that reach the window with nothing focused.
func (ui *UI) typedKey(ev *fyne.KeyEvent) {
	switch ev.Name {
	case fyne.KeyReturn, fyne.KeyEnter:
		if m := ui.modal; m != nil {
			if m.files {
				return
			}
			if m.primary == nil {
				m.dialog.Hide()
			} else if !m.primary.Disabled() {
				m.primary.OnTapped()
			}
			return
		}
		if b := ui.primaryAction(); b != nil && b.Visible() && !b.Disabled() && b.OnTapped != nil {
			b.OnTapped()
		}
	case fyne.KeyEscape:
		ui.escape()
	}
}

// typedRune handles characters typed with nothing focused: on the Nodes
// step an address starts in its field (digits, '.', ':', IPv6 hex).
func (ui *UI) typedRune(r rune) {
	if ui.modal != nil || ui.tabs.SelectedIndex() != tabNodes || !strings.ContainsRune("0123456789.:abcdefABCDEF[]", r) {
		return
	}
	ui.Window.Canvas().Focus(ui.nodes.manual)
	ui.nodes.manual.TypedRune(r)
}

// escape closes the dialog shown, if any.
func (ui *UI) escape() {
	if m := ui.modal; m != nil {
		m.dialog.Hide()
	}
}

// primaryAction is the current step's main button (Enter), nil when none.
func (ui *UI) primaryAction() *keyButton {
	switch ui.tabs.SelectedIndex() {
	case tabImage:
		return ui.image.next
	case tabTarget:
		return ui.target.next
	case tabFlash:
		return ui.flash.primary()
	case tabNodes:
		return ui.nodes.scan
	}
	return nil
}

// tabKeys are the keys that, with Alt, switch to a step.
var tabKeys = map[fyne.KeyName]int{fyne.Key1: tabImage, fyne.Key2: tabTarget, fyne.Key3: tabFlash, fyne.Key4: tabNodes}

// addTabShortcuts makes Alt+1..4 switch steps.
func (ui *UI) addTabShortcuts() {
	for k, i := range tabKeys {
		ui.Window.Canvas().AddShortcut(&desktop.CustomShortcut{KeyName: k, Modifier: fyne.KeyModifierAlt}, func(fyne.Shortcut) {
			ui.switchTab(i)
		})
	}
}

// switchTab shows step i (Alt+1…4), unless a dialog is open.
func (ui *UI) switchTab(i int) {
	if ui.modal == nil && !ui.choosing {
		ui.tabs.SelectIndex(i)
	}
}

// minSize keeps the window at least w x h: the steps' texts and buttons
// need it (Fyne takes the content's minimum as the window's).
func minSize(content fyne.CanvasObject, w, h float32) fyne.CanvasObject {
	r := canvas.NewRectangle(color.Transparent)
	r.SetMinSize(fyne.NewSize(w, h))
	return container.NewStack(r, content)
}

// appTheme is the default theme with a focus highlight that shows on the
// blue primary buttons too (the default blends blue into blue). It is
// neutral, white on the dark theme and black on the light one: a focused
// drop-down is filled with it whole (Fyne's Select), and the amber it was
// made every role and node drop-down look like a warning.
type appTheme struct{ fyne.Theme }

func (t appTheme) Color(n fyne.ThemeColorName, v fyne.ThemeVariant) color.Color {
	if n == theme.ColorNameFocus {
		if v == theme.VariantLight {
			return color.NRGBA{A: 0x38}
		}
		return color.NRGBA{R: 0xff, G: 0xff, B: 0xff, A: 0x40}
	}
	return t.Theme.Color(n, v)
}

// bar is a progress bar whose empty track is neutral, so 0% looks empty
// (Fyne's track is the primary colour at half strength).
type bar struct {
	widget.BaseWidget
	Value float64 // 0..1
	track *canvas.Rectangle
	fill  *canvas.Rectangle
	label *canvas.Text
}

func newBar() *bar {
	b := &bar{}
	b.ExtendBaseWidget(b)
	return b
}

// SetValue sets the fraction done (clamped to 0..1).
func (b *bar) SetValue(v float64) {
	b.Value = min(max(v, 0), 1)
	b.Refresh()
}

func (b *bar) CreateRenderer() fyne.WidgetRenderer {
	b.track = canvas.NewRectangle(theme.Color(theme.ColorNameInputBackground))
	b.fill = canvas.NewRectangle(theme.Color(theme.ColorNamePrimary))
	b.label = canvas.NewText("", theme.Color(theme.ColorNameForeground))
	b.label.Alignment = fyne.TextAlignCenter
	r := &barRenderer{b: b}
	r.update()
	return r
}

type barRenderer struct{ b *bar }

func (r *barRenderer) Layout(s fyne.Size) {
	b := r.b
	b.track.Resize(s)
	b.fill.Resize(fyne.NewSize(s.Width*float32(b.Value), s.Height))
	b.label.Resize(s)
	b.label.Move(fyne.NewPos(0, (s.Height-b.label.MinSize().Height)/2))
}

func (r *barRenderer) MinSize() fyne.Size {
	return fyne.NewSize(theme.Size(theme.SizeNameText)*6, theme.Size(theme.SizeNameText)+2*theme.Size(theme.SizeNameInnerPadding))
}

func (r *barRenderer) Refresh() {
	r.update()
	r.Layout(r.b.Size())
	canvas.Refresh(r.b)
}

// update applies the value and the theme.
func (r *barRenderer) update() {
	b := r.b
	radius := theme.Size(theme.SizeNameInputRadius)
	b.track.FillColor, b.track.CornerRadius = theme.Color(theme.ColorNameInputBackground), radius
	b.fill.FillColor, b.fill.CornerRadius = theme.Color(theme.ColorNamePrimary), radius
	b.label.Text = percent(b.Value)
	b.label.Color = theme.Color(theme.ColorNameForeground)
	b.label.TextSize = theme.Size(theme.SizeNameText)
}

func (r *barRenderer) Objects() []fyne.CanvasObject {
	return []fyne.CanvasObject{r.b.track, r.b.fill, r.b.label}
}

func (r *barRenderer) Destroy() {}

func percent(v float64) string {
	return strconv.Itoa(int(v*100)) + "%" // floor: 100% only when done
}

// escEntry is a text field that keeps the window's keys: Esc closes the
// dialog shown, else releases the focus (Enter then reaches the step's
// primary button), and Alt+1…4 switch steps while it has the focus.
type escEntry struct {
	widget.Entry
	ui *UI
}

func newEscEntry(ui *UI) *escEntry {
	e := &escEntry{ui: ui}
	e.ExtendBaseWidget(e)
	return e
}

// TypedKey implements fyne.Focusable.
func (e *escEntry) TypedKey(ev *fyne.KeyEvent) {
	if ev.Name == fyne.KeyEscape && e.ui != nil {
		if e.ui.modal != nil {
			e.ui.escape()
		} else {
			e.ui.Window.Canvas().Unfocus()
		}
		return
	}
	e.Entry.TypedKey(ev)
}

// TypedShortcut implements fyne.Shortcutable: Alt+1…4 are the window's.
func (e *escEntry) TypedShortcut(s fyne.Shortcut) {
	if c, ok := s.(*desktop.CustomShortcut); ok && e.ui != nil && c.Modifier == fyne.KeyModifierAlt {
		if i, ok := tabKeys[c.KeyName]; ok {
			e.ui.switchTab(i)
			return
		}
	}
	e.Entry.TypedShortcut(s)
}
