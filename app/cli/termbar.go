package cli

import (
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/dustin/go-humanize"
	"golang.org/x/term"

	"github.com/talosflash/talosflash/imaging"
)

// Progress on a terminal is redrawn in place ("\r" + clear to end of line),
// which only works while the line fits: a line that wraps leaves its first
// rows behind on every redraw and floods the screen. So the line is fitted
// to the terminal's width, read on every redraw (a resize takes effect at
// once).

const (
	defaultTermWidth = 80 // not a terminal, or its size is unknown
	minBarWidth      = 10
	maxBarWidth      = 40
)

// termWidth returns the columns of the terminal w writes to (TIOCGWINSZ),
// or 80.
func termWidth(w io.Writer) int {
	if f, ok := w.(*os.File); ok {
		if cols, _, err := term.GetSize(int(f.Fd())); err == nil && cols > 0 {
			return cols
		}
	}
	return defaultTermWidth
}

// fitProgress renders p in fewer than cols columns (writing into the last
// column makes some terminals wrap). As the width shrinks it narrows the
// bar, then drops it, then the byte counts, then the rate; the stage, the
// percentage and the time left stay as long as they fit:
//
//	write    [##########..........]  50%  512 MiB / 1.0 GiB  40 MiB/s  ETA 13s
//	write     50%  512 MiB / 1.0 GiB  40 MiB/s  ETA 13s
//	write     50%  40 MiB/s  ETA 13s
//	write     50%  ETA 13s
//
// Fields have fixed widths (numbers right-aligned), so the layout depends
// only on the width and the total: the bar does not jump as the rate or
// the time left change length, or vanish when the ETA does.
func fitProgress(p imaging.Progress, cols int) string {
	avail := cols - 1
	stage := fmt.Sprintf("%-8s", p.Stage)
	var pct, amount, rate, eta field
	if p.Total > 0 {
		pct = field{text: fmt.Sprintf("%.0f%%", fraction(p)*100), width: len("100%")}
		total := humanize.IBytes(uint64(p.Total))
		w := max(len(total), len("1023 MiB"))
		amount = field{text: fmt.Sprintf("%*s / %s", w, humanize.IBytes(uint64(p.Done)), total), width: w + 3 + len(total)}
		eta = field{"", len("ETA 59m59s"), true}
		if d := p.ETA.Round(time.Second); d > 0 {
			eta.text = "ETA " + d.String()
		} else if p.ETA > 0 {
			eta.text = "ETA <1s"
		}
	} else {
		amount = field{text: humanize.IBytes(uint64(p.Done)), width: len("1023 MiB")} // size unknown: no percentage
	}
	rate = field{width: len("1023 MiB/s")}
	if p.Rate > 0 {
		rate.text = humanize.IBytes(uint64(p.Rate)) + "/s"
	}

	if p.Total > 0 {
		// With the bar: "stage [bar] pct  amount  rate  eta".
		rest := []field{pct, amount, rate, eta}
		if bar := avail - len(stage) - len(" [] ") - width(rest); bar >= minBarWidth {
			bar = min(bar, maxBarWidth)
			n := int(fraction(p) * float64(bar))
			return strings.TrimRight(stage+" ["+strings.Repeat("#", n)+strings.Repeat(".", bar-n)+"] "+render(rest), " ")
		}
	}
	candidates := [][]field{{pct, amount, rate, eta}, {pct, rate, eta}, {pct, eta}, {pct}}
	if p.Total <= 0 {
		candidates = [][]field{{amount, rate}, {amount}}
	}
	for _, fields := range candidates {
		if len(stage)+1+width(fields) <= avail {
			return strings.TrimRight(stage+" "+render(fields), " ")
		}
		// Too narrow for the aligned fields: the same ones, unpadded.
		if line := stage + " " + compact(fields); len(line) <= avail {
			return line
		}
	}
	last := candidates[len(candidates)-1][0]
	line := strings.TrimRight(stage, " ") + " " + last.text
	return line[:min(len(line), max(avail, 0))]
}

// field is one part of the progress line, padded to width (on the right
// when left-aligned).
type field struct {
	text  string
	width int
	left  bool
}

// width is the columns fields take, two spaces apart.
func width(fields []field) int {
	w := 2 * (len(fields) - 1)
	for _, f := range fields {
		w += max(f.width, len(f.text))
	}
	return w
}

// render pads each field to its width, two spaces apart.
func render(fields []field) string {
	parts := make([]string, len(fields))
	for i, f := range fields {
		if f.left {
			parts[i] = fmt.Sprintf("%-*s", f.width, f.text)
		} else {
			parts[i] = fmt.Sprintf("%*s", f.width, f.text)
		}
	}
	return strings.Join(parts, "  ")
}

// compact joins the non-empty fields' text, two spaces apart.
func compact(fields []field) string {
	var parts []string
	for _, f := range fields {
		if t := strings.TrimSpace(f.text); t != "" {
			parts = append(parts, t)
		}
	}
	return strings.Join(parts, "  ")
}

func fraction(p imaging.Progress) float64 {
	if p.Total <= 0 {
		return 0
	}
	return min(float64(p.Done)/float64(p.Total), 1)
}
