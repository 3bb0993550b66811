package cli

import (
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/dustin/go-humanize"

	"github.com/talosflash/talosflash/app/contract"
	"github.com/talosflash/talosflash/app/plan"
	"github.com/talosflash/talosflash/imaging"
)

// flashPrinter shows the flash job (plan.Flash): its progress as a
// terminal bar (termReporter) or JSON lines (jsonReporter), restic's
// ui/backup shape; the command's code never asks which.
type flashPrinter interface {
	Progress(p imaging.Progress)
	Info(format string, args ...any)
	Warning(msg string)
	Result(r contract.ResultEvent) // machine-readable; the terminal view prints its own line
	// CardError is one card's failure when several are flashed (node:
	// the node it was for, nil for none; machine-readable, the terminal
	// view prints its own line).
	CardError(device string, node *plan.CardMeta, code int, msg string)
	// Failed is the flash's failure; it returns the command's error (the
	// JSON view writes it as its "error" event, Main prints the text).
	Failed(err error) error
	Finish()
}

// newFlashPrinter chooses the printer: JSON lines with --json (in the
// elevated child, human lines too, as events its parent relays), else the
// terminal view on stderr.
func newFlashPrinter(f *flashFlags, env Env) flashPrinter {
	if f.jsonOut {
		return newJSONReporter(env.Stdout, env.Stderr, f.elevated)
	}
	return newTermReporter(env.Stderr, isTerminal(env.Stderr))
}

// jsonReporter writes one JSON object per line to out (stdout): the typed
// events of app/contract, stable keys for scripts and nothing else there.
// Human text (Info) goes to human (stderr), except in the elevated child
// (relayInfo), which sends it as "info" events for its parent to relay.
type jsonReporter struct {
	*contract.Writer
	mu        sync.Mutex
	human     io.Writer
	relayInfo bool
	last      map[string]time.Time // per stage (and card)
}

func newJSONReporter(out, human io.Writer, relayInfo bool) *jsonReporter {
	return &jsonReporter{Writer: contract.NewWriter(out), human: human, relayInfo: relayInfo, last: map[string]time.Time{}}
}

func (r *jsonReporter) Progress(p imaging.Progress) {
	r.mu.Lock()
	// At most ~4 lines a second per stage, but always the stage's last one.
	now := time.Now()
	key := string(p.Stage) + " " + p.Target + " " + p.Image
	if p.Total <= 0 || p.Done < p.Total {
		if now.Sub(r.last[key]) < 250*time.Millisecond {
			r.mu.Unlock()
			return
		}
	}
	r.last[key] = now
	r.mu.Unlock()
	r.Writer.Progress(p)
}

func (r *jsonReporter) Info(format string, args ...any) {
	if r.relayInfo {
		r.Writer.Info(format, args...)
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	fmt.Fprintf(r.human, format+"\n", args...)
}

// Warning is a "warning" event for scripts and, outside the elevated child,
// the same line on stderr for the human watching.
func (r *jsonReporter) Warning(msg string) {
	r.Writer.Warning(msg)
	if !r.relayInfo {
		r.mu.Lock()
		defer r.mu.Unlock()
		fmt.Fprintf(r.human, "warning: %s\n", msg)
	}
}

func (r *jsonReporter) Finish() {}

// Failed writes the "error" event; Main writes no second one.
func (r *jsonReporter) Failed(err error) error {
	r.Error(exitCode(err), oneLine(err.Error()))
	return reported(err)
}

// CardError is a card's "error" line, with its node's name and address.
func (r *jsonReporter) CardError(device string, node *plan.CardMeta, code int, msg string) {
	e := contract.ErrorEvent{Code: code, Message: msg, Device: device}
	if node != nil {
		e.Node, e.Address = node.Node, node.Address
	}
	r.ErrorEvent(e)
}

// termReporter draws a single-line bar on a terminal, or prints a line per
// stage change and every few seconds when stderr is not a terminal.
type termReporter struct {
	mu        sync.Mutex
	out       io.Writer
	tty       bool
	stage     imaging.Stage
	lastOut   time.Time
	drawn     bool
	finalDone bool // the current stage's 100% line is out
	// several cards: the last report of each, in order of appearance
	cards     map[string]imaging.Progress
	cardOrder []string
}

func newTermReporter(out io.Writer, tty bool) *termReporter {
	return &termReporter{out: out, tty: tty}
}

func (r *termReporter) Progress(p imaging.Progress) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if p.Stage == imaging.StageDone {
		return // the summary line says it better
	}
	if p.Target != "" || p.Image != "" {
		r.cardProgress(p)
		return
	}
	now := time.Now()
	changed := p.Stage != r.stage
	if changed {
		r.finalDone = false
	}
	if changed && r.drawn && r.tty {
		fmt.Fprintln(r.out)
		r.drawn = false
	}
	r.stage = p.Stage
	interval := 100 * time.Millisecond
	if !r.tty {
		interval = 5 * time.Second
	}
	final := p.Total > 0 && p.Done >= p.Total
	if final && r.finalDone {
		return
	}
	if !changed && !final && now.Sub(r.lastOut) < interval {
		return
	}
	r.finalDone = final
	r.lastOut = now
	line := formatProgress(p, 30)
	if r.tty {
		line = fitProgress(p, termWidth(r.out)) // termbar.go: never wraps
		fmt.Fprintf(r.out, "\r\033[K%s", line)
		r.drawn = true
	} else {
		fmt.Fprintln(r.out, line)
	}
}

// cardProgress draws one line for all cards (and, with several images,
// their downloads): "sdb write 45%  sdc write 44%".
func (r *termReporter) cardProgress(p imaging.Progress) {
	if r.cards == nil {
		r.cards = map[string]imaging.Progress{}
	}
	key := p.Target
	if key == "" {
		key = p.Image
	}
	if _, ok := r.cards[key]; !ok {
		r.cardOrder = append(r.cardOrder, key)
	}
	r.cards[key] = p
	if r.stage != "cards" && r.drawn && r.tty {
		fmt.Fprintln(r.out)
		r.drawn = false
	}
	changed := r.stage != "cards"
	r.stage = "cards"
	interval := 100 * time.Millisecond
	if !r.tty {
		interval = 5 * time.Second
	}
	now := time.Now()
	if !changed && now.Sub(r.lastOut) < interval {
		return
	}
	r.lastOut = now
	parts := make([]string, 0, len(r.cardOrder))
	for _, t := range r.cardOrder {
		c := r.cards[t]
		part := fmt.Sprintf("%s %s", filepath.Base(t), c.Stage)
		if c.Total > 0 {
			part += fmt.Sprintf(" %3.0f%%", fraction(c)*100)
		}
		if c.Rate > 0 {
			part += " " + humanize.IBytes(uint64(c.Rate)) + "/s"
		}
		parts = append(parts, part)
	}
	line := strings.Join(parts, "  ")
	if r.tty {
		if w := termWidth(r.out) - 1; w > 0 && len(line) > w {
			line = line[:w]
		}
		fmt.Fprintf(r.out, "\r\033[K%s", line)
		r.drawn = true
	} else {
		fmt.Fprintln(r.out, line)
	}
}

func (r *termReporter) Info(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.drawn {
		fmt.Fprintln(r.out)
		r.drawn = false
	}
	fmt.Fprintf(r.out, format+"\n", args...)
}

func (r *termReporter) Warning(msg string) { r.Info("warning: %s", msg) }

func (r *termReporter) Result(contract.ResultEvent) {}

// Failed: Main prints the error.
func (r *termReporter) Failed(err error) error { return err }

func (r *termReporter) CardError(string, *plan.CardMeta, int, string) {}

func (r *termReporter) Finish() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.drawn {
		fmt.Fprintln(r.out)
		r.drawn = false
	}
}

// formatProgress renders "write    [#####.....]  45%  610 MB / 1.3 GB  42 MB/s  ETA 17s".
func formatProgress(p imaging.Progress, width int) string {
	if p.Stage == imaging.StageBuild {
		return "the factory is building this image (first download of it); waiting for it"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%-8s ", p.Stage)
	if p.Total > 0 {
		frac := float64(p.Done) / float64(p.Total)
		if frac > 1 {
			frac = 1
		}
		n := int(frac * float64(width))
		fmt.Fprintf(&b, "[%s%s] %3.0f%%  %s / %s", strings.Repeat("#", n), strings.Repeat(".", width-n),
			frac*100, humanize.IBytes(uint64(p.Done)), humanize.IBytes(uint64(p.Total)))
	} else {
		b.WriteString(humanize.IBytes(uint64(p.Done)))
	}
	if p.Rate > 0 {
		fmt.Fprintf(&b, "  %s/s", humanize.IBytes(uint64(p.Rate)))
	}
	if p.ETA > 0 {
		fmt.Fprintf(&b, "  ETA %s", p.ETA.Round(time.Second))
	}
	return b.String()
}

// cardLine is a written card's line: a card that already held the image
// (every unit found identical by the direct read that verifies it,
// imaging.CardResult.Skipped) says so, not the same "wrote" as a fresh
// card; otherwise what was written and what the card already had.
func cardLine(c imaging.CardResult) string {
	if c.Bytes > 0 && c.Written == 0 && c.Skipped == c.Bytes {
		return fmt.Sprintf("%s already held the image, verified (%s read, nothing written), sha256 %s", c.Target, humanize.IBytes(uint64(c.Bytes)), c.SHA256)
	}
	verified := "not verified (--no-verify)"
	if c.Verified {
		verified = "verified by read-back (" + c.VerifyMode + ")"
	}
	return fmt.Sprintf("wrote %s to %s (%s written, %s already on the card), sha256 %s, %s", humanize.IBytes(uint64(c.Bytes)), c.Target,
		humanize.IBytes(uint64(c.Written)), humanize.IBytes(uint64(c.Skipped)), c.SHA256, verified)
}
