package gui

import (
	"context"
	"errors"
	"slices"
	"time"

	"github.com/talosflash/talosflash/app/plan"
	"github.com/talosflash/talosflash/imaging"
	"github.com/talosflash/talosflash/imaging/devices"
)

// Attempt is a flash pressed in step 3: what it writes and everything that
// happened to it — plan's status lines, the last progress report of each
// stage and card, each card's result, the eject. The Flash step's lines
// are rendered from it alone (flashView): none outlives it, none describes
// an earlier one. It is forgotten (nil) once it ended and another image or
// a card it did not write is chosen.
type Attempt struct {
	Seq   int // distinct per attempt: late reports of an earlier one are dropped
	Image plan.Image
	// Images is each card's image, in Cards' order ("Flash all cards",
	// flashall.go: each node's); nil: Image on every card. Choice is then
	// step 1's choice when it started (nil: none), what the attempt is
	// about instead of Image.
	Images []*plan.Image
	Choice *plan.Image
	Cards  []devices.Disk
	Metas  []*plan.CardMeta // each card's node (picked in step 1, or Flash all's), written onto it
	Cached bool             // the image was cached when it started (a report may say otherwise)

	Running    bool
	Cancelling bool
	Status     string          // plan's last status line
	Stage      imaging.Stage   // the stage reported last
	Building   map[string]bool // the factory builds the image (late headers), by Progress.Image as Download
	// Download is each image's last download report, by its
	// Progress.Image ("" when the attempt has one image); Downloaded says
	// bytes came from the factory for that image in this attempt (a cache
	// hit reports its whole size at once, without a download).
	Download   map[string]imaging.Progress
	Downloaded map[string]bool
	// Write and Verify are each card's last report, by card path; Touched:
	// the card was written to, so it no longer holds what it held.
	Write, Verify map[string]imaging.Progress
	Touched       map[string]bool

	// Once ended: one result per card, in Cards' order; the job's error
	// and outcome.
	Results []imaging.CardResult
	Err     error
	Outcome *plan.Outcome
	// Ejected is the eject of each written card (EjectedPaths), nil until
	// the eject step is over.
	Ejected      []devices.Ejected
	EjectedPaths []string
}

// about says whether the attempt is about this image and these cards: the
// same image (a Flash all attempt: the same choice in step 1 as when it
// started, or none), and no card it did not write (fewer is still about
// it: a written card is unticked when it ends).
func (a *Attempt) about(c *plan.Image, cards []devices.Disk) bool {
	switch {
	case len(a.Images) > 0 && (c == nil) != (a.Choice == nil):
		return false
	case len(a.Images) > 0 && c != nil && !sameImage(c, a.Choice):
		return false
	case len(a.Images) == 0 && (c == nil || !sameImage(c, &a.Image)):
		return false
	}
	for _, d := range cards {
		if !slices.ContainsFunc(a.Cards, func(x devices.Disk) bool { return x.Path == d.Path }) {
			return false
		}
	}
	return true
}

// sameImage says x and y are the same image (the cache's key, or the same
// local file).
func sameImage(x, y *plan.Image) bool {
	return x.CacheKey() == y.CacheKey() && x.LocalPath == y.LocalPath
}

// images are the attempt's images, each once, in the cards' order.
func (a *Attempt) images() []*plan.Image { return attemptImages(&a.Image, a.Images) }

// imageOf is card i's image.
func (a *Attempt) imageOf(i int) *plan.Image {
	if i < len(a.Images) && a.Images[i] != nil {
		return a.Images[i]
	}
	return &a.Image
}

// downloadKey is the key of im's download reports (Progress.Image): plan
// names the image only when the attempt has several.
func (a *Attempt) downloadKey(im *plan.Image) string {
	if len(a.images()) > 1 {
		return im.Label
	}
	return ""
}

// building says the factory builds one of the images.
func (a *Attempt) building() bool {
	for _, b := range a.Building {
		if b {
			return true
		}
	}
	return false
}

// cachedAfter says im is in the cache after the attempt (a card was
// written from its cache entry).
func (a *Attempt) cachedAfter(im *plan.Image) bool {
	if a.Outcome == nil {
		return false
	}
	if len(a.Images) == 0 {
		return a.Outcome.CachePath != ""
	}
	for i := range a.Cards {
		if a.imageOf(i) == im && i < len(a.Outcome.CachePaths) && a.Outcome.CachePaths[i] != "" {
			return true
		}
	}
	return false
}

// anyDownloaded says bytes came from the factory for one of the images.
func (a *Attempt) anyDownloaded() bool {
	for _, d := range a.Downloaded {
		if d {
			return true
		}
	}
	return false
}

// Ended says the attempt is over (its Results are known).
func (a *Attempt) Ended() bool { return a != nil && !a.Running && a.Results != nil }

// Good are the cards written without an error.
func (a *Attempt) Good() []imaging.CardResult {
	var out []imaging.CardResult
	for _, r := range a.Results {
		if r.OK() {
			out = append(out, r)
		}
	}
	return out
}

// AllVerified: every card of the attempt is written and read back.
func (a *Attempt) AllVerified() bool {
	if !a.Ended() || len(a.Results) == 0 {
		return false
	}
	for _, r := range a.Results {
		if !r.OK() || !r.Verified {
			return false
		}
	}
	return true
}

// cardKey is the card a report is about: its Target, or the only card.
func (a *Attempt) cardKey(target string) string {
	if target == "" && len(a.Cards) == 1 {
		return a.Cards[0].Path
	}
	return target
}

// StartAttempt makes a the running attempt (its Seq is set).
func (s *Session) StartAttempt(a *Attempt) {
	s.attempts++
	a.Seq, a.Running = s.attempts, true
	a.Write, a.Verify, a.Touched = map[string]imaging.Progress{}, map[string]imaging.Progress{}, map[string]bool{}
	a.Download, a.Downloaded, a.Building = map[string]imaging.Progress{}, map[string]bool{}, map[string]bool{}
	s.attempt = a
	s.changed(ChangeAttempt)
}

// running is the attempt with this Seq while it runs, else nil.
func (s *Session) running(seq int) *Attempt {
	if a := s.attempt; a != nil && a.Seq == seq && a.Running {
		return a
	}
	return nil
}

// AttemptProgress records a progress report of attempt seq.
func (s *Session) AttemptProgress(seq int, p imaging.Progress) {
	a := s.running(seq)
	if a == nil || p.Stage == imaging.StageDone {
		return
	}
	a.Stage = p.Stage
	switch p.Stage {
	case imaging.StageBuild:
		a.Building[p.Image], a.Downloaded[p.Image] = true, true
	case imaging.StageDownload:
		// A cache hit reports its whole size at once, as the first report.
		if _, again := a.Download[p.Image]; again || p.Total <= 0 || p.Done < p.Total {
			a.Downloaded[p.Image] = true
		}
		a.Building[p.Image] = false
		a.Download[p.Image] = p
	case imaging.StageWrite, imaging.StageVerify:
		clear(a.Building)
		key := a.cardKey(p.Target)
		if key == "" { // a report for every card: each is touched
			if p.Stage == imaging.StageVerify || p.Done > 0 {
				for _, d := range a.Cards {
					a.Touched[d.Path] = true
				}
			}
			break
		}
		if p.Stage == imaging.StageVerify || p.Done > 0 {
			a.Touched[key] = true
		}
		if p.Stage == imaging.StageWrite {
			a.Write[key] = p
		} else {
			a.Verify[key] = p
		}
	default:
		return
	}
	s.changed(ChangeProgress)
}

// AttemptStatus records plan's status line of attempt seq.
func (s *Session) AttemptStatus(seq int, msg string) {
	if a := s.running(seq); a != nil {
		a.Status = msg
		s.changed(ChangeProgress)
	}
}

// CancelAttempt marks attempt seq as being cancelled.
func (s *Session) CancelAttempt(seq int) {
	if a := s.running(seq); a != nil {
		a.Cancelling = true
		s.changed(ChangeProgress)
	}
}

// EndAttempt records how attempt seq ended: each card's result (the
// job's, or its error on every card when it failed as a whole), and each
// written card as Flashed, with its own image and cache entry.
func (s *Session) EndAttempt(seq int, out *plan.Outcome, err error, now time.Time) {
	a := s.running(seq)
	if a == nil {
		return
	}
	a.Running, a.Outcome, a.Err = false, out, err
	a.Results = cardOutcomes(a.Cards, out, err)
	s.changed(ChangeAttempt)
	for i, r := range a.Results {
		if !r.OK() {
			continue
		}
		f := Flashed{Image: *a.imageOf(i), Card: r, At: now}
		if out != nil {
			f.CachePath = out.CachePath
			if i < len(out.CachePaths) {
				f.CachePath = out.CachePaths[i]
			}
		}
		if i < len(a.Metas) && a.Metas[i] != nil {
			f.Node, f.Address = a.Metas[i].Node, a.Metas[i].Address
		}
		s.AddFlashed(f)
	}
}

// AttemptEjected records the eject of attempt seq's written cards.
func (s *Session) AttemptEjected(seq int, paths []string, ej []devices.Ejected) {
	if a := s.attempt; a != nil && a.Seq == seq && !a.Running {
		a.EjectedPaths, a.Ejected = paths, ej
		s.changed(ChangeAttempt)
	}
}

// ForgetAttempt drops the attempt shown (a running one is never dropped).
func (s *Session) ForgetAttempt() {
	if s.attempt == nil || s.attempt.Running {
		return
	}
	s.attempt = nil
	s.changed(ChangeAttempt)
}

// cardOutcomes is each card's result: the job's cards, or, when it failed
// as a whole (cancelled, the download failed), its error on every card.
func cardOutcomes(disks []devices.Disk, out *plan.Outcome, err error) []imaging.CardResult {
	if out != nil && len(out.Cards) == len(disks) {
		return out.Cards
	}
	cards := make([]imaging.CardResult, len(disks))
	for i, d := range disks {
		cards[i] = imaging.CardResult{Target: d.Path, Err: err}
		if err == nil { // no result for the card: never say it was written
			cards[i].Err = errors.New("no result was reported for this card")
		}
	}
	return cards
}

func cancelled(err error) bool { return errors.Is(err, context.Canceled) }
