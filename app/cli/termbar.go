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
func fitProgress(p imaging.Progress, cols int) string {
	avail := cols - 1
	stage := fmt.Sprintf("%-8s", p.Stage)
	var pct, amount, rate, eta string
	if p.Total > 0 {
		pct = fmt.Sprintf("%3.0f%%", fraction(p)*100)
		amount = humanize.IBytes(uint64(p.Done)) + " / " + humanize.IBytes(uint64(p.Total))
	} else {
		amount = humanize.IBytes(uint64(p.Done)) // size unknown: no percentage
	}
	if p.Rate > 0 {
		rate = humanize.IBytes(uint64(p.Rate)) + "/s"
	}
	if p.ETA > 0 {
		eta = "ETA " + p.ETA.Round(time.Second).String()
	}

	if p.Total > 0 {
		// With the bar: "stage [bar] pct  amount  rate  eta".
		rest := join(pct, amount, rate, eta)
		if bar := avail - len(stage) - 1 - 2 - 1 - len(rest); bar >= minBarWidth {
			bar = min(bar, maxBarWidth)
			n := int(fraction(p) * float64(bar))
			return stage + " [" + strings.Repeat("#", n) + strings.Repeat(".", bar-n) + "] " + rest
		}
	}
	candidates := [][]string{{pct, amount, rate, eta}, {pct, rate, eta}, {pct, eta}, {pct}}
	if p.Total <= 0 {
		candidates = [][]string{{amount, rate, eta}, {amount, rate}, {amount}}
	}
	for _, parts := range candidates {
		if line := stage + " " + join(parts...); len(line) <= avail {
			return line
		}
	}
	line := strings.TrimRight(stage, " ") + " " + join(candidates[len(candidates)-1]...)
	return line[:min(len(line), max(avail, 0))]
}

func fraction(p imaging.Progress) float64 {
	if p.Total <= 0 {
		return 0
	}
	return min(float64(p.Done)/float64(p.Total), 1)
}

// join joins the non-empty parts with two spaces.
func join(parts ...string) string {
	var kept []string
	for _, s := range parts {
		if s != "" {
			kept = append(kept, s)
		}
	}
	return strings.Join(kept, "  ")
}
