package gui

import (
	"errors"
	"testing"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/driver/desktop"
	"fyne.io/fyne/v2/test"
	"fyne.io/fyne/v2/theme"
)

// An empty bar is empty: no fill, "0%"; it fills in proportion and never
// shows 100% before the end.
func TestBarIsHonest(t *testing.T) {
	test.NewTempApp(t)
	b := newBar()
	b.Resize(fyne.NewSize(200, 30))
	test.WidgetRenderer(b).Layout(b.Size())
	if w := b.fill.Size().Width; w != 0 || b.label.Text != "0%" {
		t.Fatalf("0%%: fill %v wide, label %q", w, b.label.Text)
	}
	if b.track.FillColor == b.fill.FillColor {
		t.Fatal("the empty track has the fill's colour")
	}
	b.SetValue(0.5)
	if w := b.fill.Size().Width; w != 100 || b.label.Text != "50%" {
		t.Fatalf("50%%: fill %v wide, label %q", w, b.label.Text)
	}
	b.SetValue(0.999)
	if b.label.Text != "99%" {
		t.Fatalf("99.9%% shows %q", b.label.Text)
	}
}

// A dialog takes the focus from the window, so Enter reaches it and not
// the button that opened it; Esc or Enter closes an information dialog.
func TestDialogTakesFocusAndKeys(t *testing.T) {
	h := newHarness(t, nil)
	h.onUI(func() {
		c := h.ui.Window.Canvas()
		c.Focus(h.ui.image.next)
		h.ui.showError("Something failed", errors.New("boom"))
		if c.Focused() != nil || h.ui.modal == nil {
			t.Fatalf("focus %v, modal %v", c.Focused(), h.ui.modal)
		}
		h.ui.typedKey(&fyne.KeyEvent{Name: fyne.KeyReturn})
		if h.ui.modal != nil || h.ui.tabs.SelectedIndex() != tabImage {
			t.Fatalf("Enter: modal %v, tab %d", h.ui.modal, h.ui.tabs.SelectedIndex())
		}
		// A focused button passes Esc to the window.
		h.ui.showError("Again", errors.New("boom"))
		h.ui.image.next.TypedKey(&fyne.KeyEvent{Name: fyne.KeyEscape})
		if h.ui.modal != nil {
			t.Fatal("Esc on a focused button left the dialog open")
		}
	})
}

func TestWindowMinimumSize(t *testing.T) {
	h := newHarness(t, nil)
	h.onUI(func() {
		m := h.ui.Window.Content().MinSize().AddWidthHeight(2*theme.Padding(), 2*theme.Padding()) // the window pads its content
		if m.Width < MinWidth || m.Height < MinHeight {
			t.Fatalf("window minimum %v, want at least %dx%d", m, MinWidth, MinHeight)
		}
	})
}

// The README's keyboard promises in every step: Alt+1…4 switch steps while
// a text field has the focus, Esc releases it (then Enter is the step's
// primary button), and Enter after clicking a card runs Next.
func TestKeyboardPromisesWithFocus(t *testing.T) {
	h := newHarness(t, nil)
	h.onUI(func() {
		c := h.ui.Window.Canvas()
		for i, e := range []*escEntry{h.ui.image.version, h.ui.image.ref, h.ui.nodes.manual} {
			for _, k := range []fyne.KeyName{fyne.Key4, fyne.Key2, fyne.Key1, fyne.Key3} {
				c.Focus(e)
				e.TypedShortcut(&desktop.CustomShortcut{KeyName: k, Modifier: fyne.KeyModifierAlt})
				if got, want := h.ui.tabs.SelectedIndex(), tabKeys[k]; got != want {
					t.Fatalf("field %d: Alt+%s went to step %d, want %d", i, k, got+1, want+1)
				}
			}
			c.Focus(e)
			e.TypedKey(&fyne.KeyEvent{Name: fyne.KeyEscape})
			if c.Focused() != nil {
				t.Fatalf("field %d: Esc kept the focus", i)
			}
		}
		// Nodes: the primary button is Scan, bottom-right; nothing is
		// focused (no blinking cursor) and an IP typed goes to its field.
		if h.ui.tabs.SelectIndex(tabNodes); h.ui.primaryAction() != h.ui.nodes.scan || c.Focused() != nil {
			t.Fatalf("the Nodes step: primary %v, focus %v", h.ui.primaryAction(), c.Focused())
		}
		for _, r := range "127.0.0.5" {
			h.ui.typedRune(r)
		}
		if h.ui.nodes.manual.Text != "127.0.0.5" || c.Focused() != h.ui.nodes.manual {
			t.Fatalf("typed IP: field %q, focus %v", h.ui.nodes.manual.Text, c.Focused())
		}
		h.ui.nodes.manual.SetText("")
		c.Unfocus()
		// Card: a click gives the list the focus; Enter still runs Next.
		h.ui.tabs.SelectIndex(tabTarget)
		h.ui.target.list.Select(0)
		c.Focus(h.ui.target.list)
		h.ui.target.list.TypedKey(&fyne.KeyEvent{Name: fyne.KeyReturn})
		if h.ui.tabs.SelectedIndex() != tabFlash {
			t.Fatalf("Enter after clicking a card: step %d", h.ui.tabs.SelectedIndex()+1)
		}
	})
}

// The focus highlight is neutral (no hue): a focused drop-down is filled
// with it, and the role and node drop-downs were drawn amber, the colour
// of warnings (issue 39). It still differs from the primary colour, so a
// focused primary button shows it.
func TestFocusColourIsNotAWarning(t *testing.T) {
	th := appTheme{theme.DefaultTheme()}
	for _, v := range []fyne.ThemeVariant{theme.VariantDark, theme.VariantLight} {
		r, g, b, a := th.Color(theme.ColorNameFocus, v).RGBA()
		if r != g || g != b || a < 0x2000 {
			t.Errorf("variant %d: focus colour %x %x %x %x: not a neutral highlight", v, r, g, b, a)
		}
		if th.Color(theme.ColorNameFocus, v) == th.Color(theme.ColorNamePrimary, v) {
			t.Errorf("variant %d: focus is the primary colour", v)
		}
	}
}
