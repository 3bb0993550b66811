package gui

import (
	"image/color"
	"strings"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/canvas"
	"fyne.io/fyne/v2/container"
	"fyne.io/fyne/v2/theme"
	"fyne.io/fyne/v2/widget"
)

// breakLabel is a label that wraps only where a reference or a command may
// be broken: after a space, "/" or ":" (Fyne's word wrap breaks a long
// token anywhere, so an installer reference came out as "…f9:v" / "1.14.5").
// A token wider than the label stays whole. Its minimum width is its widest
// token, so it never widens the window beyond that.
type breakLabel struct {
	widget.BaseWidget
	Text       string
	TextStyle  fyne.TextStyle
	Importance widget.Importance

	label *widget.Label
	width float32 // the width the lines were broken for
}

func newBreakLabel(text string) *breakLabel {
	b := &breakLabel{Text: text, label: widget.NewLabel("")}
	b.ExtendBaseWidget(b)
	b.relabel()
	return b
}

// SetText replaces the text.
func (b *breakLabel) SetText(text string) {
	b.Text = text
	b.relabel()
	b.Refresh()
}

// Resize breaks the lines for the new width.
func (b *breakLabel) Resize(s fyne.Size) {
	if s.Width != b.width {
		b.width = s.Width
		b.relabel()
	}
	b.BaseWidget.Resize(s)
}

// MinSize is the widest token's width and the height of the lines at the
// current width.
func (b *breakLabel) MinSize() fyne.Size {
	pad := 2 * theme.InnerPadding()
	widest := float32(0)
	for _, tok := range breakTokens(b.Text) {
		widest = max(widest, b.measure(strings.TrimSpace(tok)))
	}
	return fyne.NewSize(widest+pad, b.label.MinSize().Height)
}

func (b *breakLabel) measure(s string) float32 {
	return fyne.MeasureText(s, theme.TextSize(), b.TextStyle).Width
}

func (b *breakLabel) relabel() {
	b.label.TextStyle, b.label.Importance = b.TextStyle, b.Importance
	text := b.Text
	if b.width > 0 {
		text = breakLines(b.Text, b.width-2*theme.InnerPadding(), b.measure)
	}
	b.label.SetText(text)
}

func (b *breakLabel) Refresh() {
	b.relabel()
	b.BaseWidget.Refresh()
}

func (b *breakLabel) CreateRenderer() fyne.WidgetRenderer {
	return widget.NewSimpleRenderer(b.label)
}

// breakTokens splits text into the pieces a line may end after: each ends
// with a space, "/" or ":" (or the end of a line, kept as "\n").
func breakTokens(text string) []string {
	var toks []string
	start := 0
	for i, r := range text {
		switch r {
		case ' ', '/', ':':
			toks = append(toks, text[start:i+1])
			start = i + 1
		case '\n':
			if i > start {
				toks = append(toks, text[start:i])
			}
			toks = append(toks, "\n")
			start = i + 1
		}
	}
	if start < len(text) {
		toks = append(toks, text[start:])
	}
	return toks
}

// breakLines lays text out in lines no wider than width (as measure says),
// breaking only after a space, "/" or ":".
func breakLines(text string, width float32, measure func(string) float32) string {
	var out strings.Builder
	line := ""
	flush := func() {
		out.WriteString(strings.TrimRight(line, " "))
		line = ""
	}
	for _, tok := range breakTokens(text) {
		if tok == "\n" {
			flush()
			out.WriteByte('\n')
			continue
		}
		if line != "" && measure(strings.TrimRight(line+tok, " ")) > width {
			flush()
			out.WriteByte('\n')
			tok = strings.TrimLeft(tok, " ")
		}
		line += tok
	}
	flush()
	return out.String()
}

// fixBox shows a fix (a command, a YAML document) whole: it grows with its
// text and scrolls only past maxHeight; Copy puts the exact text on the
// clipboard (the lines shown may be broken for the width).
func fixBox(ui *UI, fix string, maxHeight float32) fyne.CanvasObject {
	text := newBreakLabel(fix)
	text.TextStyle = fyne.TextStyle{Monospace: true}
	text.relabel()
	scroll := container.NewVScroll(text)
	capped := container.New(&capHeight{content: text, max: maxHeight}, scroll)
	copyBtn := newKeyButton(ui, "Copy", theme.ContentCopyIcon(), nil)
	copyBtn.OnTapped = func() {
		fyne.CurrentApp().Clipboard().SetContent(fix)
		copyBtn.SetText("Copied")
	}
	return container.NewBorder(nil, nil, widget.NewLabel("Fix:"), container.NewVBox(copyBtn),
		container.NewStack(canvasCard(), capped))
}

// capHeight gives its one object the content's height up to max (the
// object is a scroll over content, which scrolls past it).
type capHeight struct {
	content fyne.CanvasObject
	max     float32
}

func (c *capHeight) MinSize([]fyne.CanvasObject) fyne.Size {
	m := c.content.MinSize()
	return fyne.NewSize(m.Width, min(m.Height, c.max))
}

func (c *capHeight) Layout(objs []fyne.CanvasObject, size fyne.Size) {
	for _, o := range objs {
		o.Move(fyne.NewPos(0, 0))
		o.Resize(size)
	}
}

// wideSelect keeps a select wide enough for its longest option, so the
// choice shown is never cut to "unknown / …".
func wideSelect(sel *widget.Select) fyne.CanvasObject {
	widest := float32(0)
	for _, o := range append([]string{sel.PlaceHolder}, sel.Options...) {
		widest = max(widest, fyne.MeasureText(o, theme.TextSize(), fyne.TextStyle{}).Width)
	}
	// text + the drop-down icon + the select's inner padding on both sides
	r := canvas.NewRectangle(color.Transparent)
	r.SetMinSize(fyne.NewSize(widest+theme.IconInlineSize()+4*theme.InnerPadding(), 0))
	return container.NewStack(r, sel)
}
