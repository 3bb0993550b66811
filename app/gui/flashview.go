package gui

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"fyne.io/fyne/v2/widget"
	"github.com/dustin/go-humanize"

	"github.com/talosflash/talosflash/app/plan"
	"github.com/talosflash/talosflash/factory"
	"github.com/talosflash/talosflash/imaging"
	"github.com/talosflash/talosflash/imaging/devices"
	"github.com/talosflash/talosflash/inventory"
)

// What the Flash step shows, as a function of the Session (flashView): the
// step's widgets only display it. The rules it keeps, which the
// model-based test checks after every action:
//   - the headline is green only when every card of the attempt is
//     written and verified; a failure anywhere makes it a warning;
//   - a failed card's bars say failed (or cancelled), never a time left;
//   - the header's "cached" and the Download row come from the same
//     reports: a cache hit is not a download, a download is not "cached";
//   - the write figure counts the image's decoded bytes;
//   - every line is about the Session's Attempt, or, without one, the
//     choice and cards now.

// barView is one progress row: the bar's value and the line under it.
type barView struct {
	Value      float64
	Detail     string
	Importance widget.Importance
}

// textView is a label's text and colour ("" hides it).
type textView struct {
	Text       string
	Importance widget.Importance
}

// cardRowView is one card's rows: Write, Verify and its result.
type cardRowView struct {
	Path, Name    string
	Write, Verify barView
	Result        textView
}

// flashView is everything the Flash step shows.
type flashView struct {
	Summary      string
	ShowDownload bool
	Download     barView
	Cards        []cardRowView
	Status       textView
	// The finish screen (Done): after a flash that wrote at least one card.
	Done  bool
	Title textView
	Body  string
	Eject textView
	// The buttons.
	StartVisible, StartEnabled, CancelEnabled, AnotherVisible, ToNodesVisible bool
	FlashAllEnabled                                                           bool // "Flash all cards…" (with an inventory): not while a flash runs
}

// flashInputs is the Session state the Flash step shows, and what step 1
// says blocks a flash (offline).
type flashInputs struct {
	Choice  *plan.Image
	Cards   []devices.Disk
	Cached  bool
	Attempt *Attempt
	Node    *inventory.Node
	Flashed []Flashed
	Offline string // why no download is possible now ("" when it is)
}

func (s *Session) flashInputs(offline string) flashInputs {
	return flashInputs{Choice: s.choice, Cards: s.cards, Cached: s.cached, Attempt: s.attempt, Node: s.node, Flashed: s.flashed, Offline: offline}
}

// viewFlash renders the Flash step from in.
func viewFlash(in flashInputs) flashView {
	var v flashView
	a := in.Attempt
	blocked := nodeBlocked(in.Node, len(in.Cards))
	if blocked == "" {
		blocked = in.Offline
	}
	v.Summary = flashSummary(in, blocked)
	canFlash := in.Choice != nil && len(in.Cards) > 0 && blocked == ""

	img := in.Choice
	cards := in.Cards
	if a != nil {
		img, cards = &a.Image, a.Cards
	}
	// No Download row for an image that is not downloaded: a local file,
	// or one in the cache (a "Download 0 % waiting" bar over a flash that
	// never downloads; the summary says "cached: no download").
	v.ShowDownload = (img == nil || img.LocalPath == "") && !(a == nil && in.Cached)
	v.Download = barView{Detail: "waiting"}
	if len(cards) == 0 {
		cards = []devices.Disk{{}} // the rows of one card, waiting
	}
	for _, d := range cards {
		row := cardRowView{Path: d.Path, Name: d.Name, Write: barView{Detail: "waiting"}, Verify: barView{Detail: "waiting"}}
		v.Cards = append(v.Cards, row)
	}
	v.StartVisible, v.StartEnabled, v.FlashAllEnabled = true, canFlash, true
	if a == nil {
		return v
	}

	v.Download = downloadView(a)
	if ims := a.images(); len(ims) == 1 && !a.Downloaded[a.downloadKey(ims[0])] && a.Cached {
		v.ShowDownload = false // from the cache
	}
	for i := range v.Cards {
		v.Cards[i].Write, v.Cards[i].Verify, v.Cards[i].Result = cardRows(a, i)
	}
	if a.Running {
		v.StartEnabled, v.CancelEnabled, v.FlashAllEnabled = false, !a.Cancelling, false
		v.Status = textView{Text: runningStatus(a)}
		return v
	}
	v.AnotherVisible = true
	good := a.Good()
	if len(good) == 0 {
		verb := "Failed: "
		if cancelled(a.Err) {
			verb = "Cancelled: "
		}
		v.Status = textView{Text: verb + stateLines(a), Importance: widget.DangerImportance}
		return v
	}
	v.StartVisible, v.ToNodesVisible = false, true // the same cards again: "Flash another card" first
	v.Done = true
	v.Title, v.Body = finishTitle(a), finishBody(a)
	v.Eject = ejectView(a)
	v.Status = textView{Text: "Put the card in the Pi and power it on, then give it its config under Nodes.", Importance: widget.SuccessImportance}
	if len(good) > 1 {
		v.Status.Text = "Put each card in its Pi and power them on, then give each node its config under Nodes."
	}
	var bad []string
	for _, r := range a.Results {
		if !r.OK() {
			bad = append(bad, r.Target)
		}
	}
	switch {
	case len(bad) > 0:
		v.Status = textView{Text: fmt.Sprintf("%d of %d cards failed (%s): see each card above. The others are ready for their Pis.", len(bad), len(a.Results), strings.Join(bad, ", ")),
			Importance: widget.WarningImportance}
	case !a.AllVerified():
		v.Status = textView{Text: "Written but not read back: the card was not verified. Flash it again to verify it before relying on it.", Importance: widget.WarningImportance}
	}
	return v
}

// flashSummary names what will be (or was) written where.
func flashSummary(in flashInputs, blocked string) string {
	c, cards, cached := in.Choice, in.Cards, in.Cached
	a := in.Attempt
	if a != nil {
		c, cards = &a.Image, a.Cards
	}
	img := "no image chosen (step 1)"
	switch {
	case a != nil: // each card's image ("Flash all cards"), or the one
		var labels []string
		for _, im := range a.images() {
			labels = append(labels, imageSummary(im)+imageSource(a, im))
		}
		img = strings.Join(labels, "; ")
	case c != nil:
		img = imageSummary(c)
		switch {
		case c.LocalPath != "":
		case cached:
			img += " (cached: no download)"
		default:
			img += " (downloaded from the Image Factory first)"
		}
	}
	card := "Card:  no card chosen (step 2)"
	switch len(cards) {
	case 0:
	case 1:
		card = "Card:  " + cardText(cards[0])
	default:
		names := make([]string, len(cards))
		for i, d := range cards {
			names[i] = cardText(d)
		}
		card = fmt.Sprintf("Cards: %d, written at once: %s", len(cards), strings.Join(names, "; "))
	}
	if a == nil && in.Node != nil {
		card += "\n" + nodeLine(in.Node, otherCards(in.Flashed, in.Cards))
	}
	if blocked != "" && a == nil {
		card += "\n" + blocked
	}
	return "Image: " + img + "\n" + card
}

// imageSource says where attempt a takes im from: the factory or the
// cache, as its download reports say.
func imageSource(a *Attempt, im *plan.Image) string {
	key := a.downloadKey(im)
	_, reported := a.Download[key]
	switch {
	case im.LocalPath != "":
		return ""
	case a.Downloaded[key] && a.Running:
		return " (downloading from the Image Factory)"
	case a.Downloaded[key] && a.cachedAfter(im):
		return " (downloaded from the Image Factory for this flash; cached now)"
	case a.Downloaded[key]:
		return " (the download from the Image Factory did not finish)"
	case a.Cached || reported:
		return " (cached: no download)"
	case a.Running:
		return " (downloaded from the Image Factory first)"
	}
	return " (not downloaded)"
}

// nodeLine is the Flash step's line for a node pick, with the cards
// already written for it in this session.
func nodeLine(n *inventory.Node, flashed []Flashed) string {
	line := fmt.Sprintf("Node:  %s, %s (written onto the card after the verify)", n.Hostname, n.Address)
	if prev := flashedFor(flashed, n.Hostname); len(prev) > 0 {
		line += "\n" + secondCardNote(n.Hostname, prev)
	}
	return line
}

// otherCards are the flashed cards that are not among cards: writing one
// of the cards again replaces it, it makes no other card.
func otherCards(flashed []Flashed, cards []devices.Disk) []Flashed {
	var out []Flashed
	for _, f := range flashed {
		if !slices.ContainsFunc(cards, func(d devices.Disk) bool { return d.Path == f.Card.Target }) {
			out = append(out, f)
		}
	}
	return out
}

func flashedFor(flashed []Flashed, hostname string) []Flashed {
	var out []Flashed
	for _, f := range flashed {
		if hostname != "" && strings.EqualFold(f.Node, hostname) {
			out = append(out, f)
		}
	}
	return out
}

// secondCardNote says that a node already has a card from this session.
func secondCardNote(hostname string, prev []Flashed) string {
	var where []string
	for _, f := range prev {
		where = append(where, f.Card.Target+" at "+f.At.Format("15:04"))
	}
	return fmt.Sprintf("⚠ A card for %s was already written in this session (%s): this makes another card for %s. Only one of them may boot, or two Pis answer at its address.",
		hostname, strings.Join(where, ", "), hostname)
}

// nodeBlocked is why Flash is disabled for a node pick ("" when it is not).
func nodeBlocked(n *inventory.Node, cards int) string {
	if n == nil || cards <= 1 {
		return ""
	}
	return fmt.Sprintf("%s is one node, so it goes on one card: choose one card in step 2, or a role in step 1 to flash %d cards.", n.Hostname, cards)
}

// downloadView is the Download row of an attempt: its image's, or with
// several images ("Flash all cards", downloaded at once) one bar for all,
// the line naming each.
func downloadView(a *Attempt) barView {
	ims := a.images()
	if len(ims) == 1 {
		return imageDownloadView(a, ims[0])
	}
	var b barView
	var lines []string
	for _, im := range ims {
		v := imageDownloadView(a, im)
		b.Value += v.Value / float64(len(ims))
		if v.Importance == widget.DangerImportance {
			b.Importance = v.Importance
		}
		lines = append(lines, im.Label+": "+v.Detail)
	}
	b.Detail = strings.Join(lines, "; ")
	return b
}

// imageDownloadView is the download of one image of an attempt.
func imageDownloadView(a *Attempt, im *plan.Image) barView {
	key := a.downloadKey(im)
	d, reported := a.Download[key]
	switch {
	case a.Building[key]:
		return barView{Detail: "waiting for the factory to build the image"}
	case a.Downloaded[key] && reported:
		b := barView{Detail: progressText(d, false)}
		if d.Total > 0 {
			b.Value = float64(d.Done) / float64(d.Total)
		}
		if !a.Running && !a.cachedAfter(im) && b.Value < 1 {
			b.Detail = "stopped at " + b.Detail
			if !cancelled(a.Err) {
				b.Importance = widget.DangerImportance
			}
		}
		return b
	case a.Downloaded[key]:
		return barView{Detail: "downloading"}
	case a.Cached || reported:
		return barView{Value: 1, Detail: "cached: no download"}
	case !a.Running:
		return barView{Detail: "not downloaded"}
	}
	return barView{Detail: "waiting"}
}

// cardRows are card i's Write and Verify rows and its result line.
func cardRows(a *Attempt, i int) (write, verify barView, result textView) {
	path := a.Cards[i].Path
	write, verify = barView{Detail: "waiting"}, barView{Detail: "waiting"}
	w, wrote := a.Write[path]
	if wrote {
		write = barView{Value: fraction(w), Detail: progressText(w, true)}
	}
	vp, verifying := a.Verify[path]
	if verifying {
		verify = barView{Value: fraction(vp), Detail: progressText(vp, false)}
	}
	if !a.Ended() {
		if a.Cancelling {
			for _, b := range []*barView{&write, &verify} {
				if b.Detail != "waiting" && b.Value < 1 {
					b.Detail = "cancelling at " + figure(b.Value)
				}
			}
		}
		return write, verify, result
	}
	r := a.Results[i]
	if r.Err == nil && r.OK() {
		write = barView{Value: 1, Detail: humanize.IBytes(uint64(r.Bytes)) + " written · done"}
		if heldAlready(r) {
			write.Detail = "nothing to write: the card already held the image · done"
		}
		if r.Verified {
			verify = barView{Value: 1, Detail: "read back and verified · done"}
		} else {
			verify = barView{Detail: "skipped: not read back", Importance: widget.WarningImportance}
		}
		if len(a.Cards) > 1 {
			result = textView{Text: "✓ " + r.Target + " " + verifiedText(r), Importance: widget.SuccessImportance}
			if !r.Verified {
				result.Importance = widget.WarningImportance
			}
		}
		return write, verify, result
	}
	// Failed or cancelled: the bars stop where the card was, and say so.
	word, imp := "failed", widget.DangerImportance
	if cancelled(r.Err) {
		word = "cancelled"
	}
	inVerify := verifying || errors.Is(r.Err, imaging.ErrVerifyMismatch)
	var werr *imaging.WriteError
	stopped := int64(0) // the decoded bytes the card took before it failed, as the write says
	if errors.As(r.Err, &werr) {
		stopped = werr.Offset
	}
	switch {
	case inVerify:
		write = barView{Value: 1, Detail: "written"}
		if wrote {
			write.Detail = humanize.IBytes(uint64(max(w.Done, w.Decoded))) + " written"
		}
		verify = barView{Value: verify.Value, Detail: word + " at " + figure(verify.Value), Importance: imp}
	case stopped > 0:
		write = barView{Value: write.Value, Detail: word + " after " + humanize.IBytes(uint64(stopped)) + " written", Importance: imp}
		for _, o := range a.Results { // the image's size, as a card that took it all says
			if o.Bytes > 0 {
				write.Value = min(float64(stopped)/float64(o.Bytes), 1)
				write.Detail = fmt.Sprintf("%s after %s of %s written (%s)", word, humanize.IBytes(uint64(stopped)), humanize.IBytes(uint64(o.Bytes)), figure(write.Value))
				break
			}
		}
		verify = barView{Detail: "not verified", Importance: imp}
	case wrote && a.Touched[path]:
		write = barView{Value: write.Value, Detail: word + " at " + writtenFigure(w), Importance: imp}
		verify = barView{Detail: "not verified", Importance: imp}
	default:
		write = barView{Detail: word + ": nothing written", Importance: imp}
		verify = barView{Detail: "not verified", Importance: imp}
	}
	verb := "Failed: "
	if cancelled(r.Err) {
		verb = "Cancelled: "
	}
	result = textView{Text: verb + r.Target + " " + cardState(r.Err, a.Touched[r.Target]), Importance: widget.DangerImportance}
	if len(a.Cards) > 1 || !cancelled(r.Err) {
		result.Text += " (" + errorText(r.Err) + ")"
	}
	return write, verify, result
}

func fraction(p imaging.Progress) float64 {
	if p.Total <= 0 {
		return 0
	}
	return min(float64(p.Done)/float64(p.Total), 1)
}

func figure(f float64) string { return fmt.Sprintf("%d %%", int(f*100)) }

// writtenFigure is how far a write got, in the image's decoded bytes.
func writtenFigure(p imaging.Progress) string {
	if p.Compressed {
		if p.Decoded > 0 {
			return humanize.IBytes(uint64(p.Decoded)) + " (" + figure(fraction(p)) + ")"
		}
		return figure(fraction(p))
	}
	if p.Total > 0 {
		return humanize.IBytes(uint64(p.Done)) + " of " + humanize.IBytes(uint64(p.Total)) + " (" + figure(fraction(p)) + ")"
	}
	return humanize.IBytes(uint64(p.Done))
}

// runningStatus is the status line of a running attempt: the stage
// reported last, else plan's line.
func runningStatus(a *Attempt) string {
	switch {
	case a.Cancelling:
		return "Cancelling…"
	case a.building():
		return "The Image Factory is building this image (the first time a schematic and version are asked for). This can take a few minutes…"
	case a.Stage == imaging.StageVerify:
		return "Reading the card back to verify it…"
	case a.Stage == imaging.StageWrite && len(a.Cards) > 1:
		return fmt.Sprintf("Writing %d cards…", len(a.Cards))
	case a.Stage == imaging.StageWrite:
		return "Writing the card…"
	case a.Stage == imaging.StageDownload && a.anyDownloaded():
		return "Downloading the image…"
	case a.Status != "":
		return sentence(a.Status)
	}
	return "Preparing " + a.Image.FileName() + "…"
}

// finishTitle is the finish screen's headline: green only when every card
// of the attempt is written and verified.
func finishTitle(a *Attempt) textView {
	good := a.Good()
	label := cardLabel(&a.Image)
	t := textView{Importance: widget.SuccessImportance}
	if len(good) == 1 {
		t.Text = "✓ Card ready. Label it: " + label
	} else {
		t.Text = fmt.Sprintf("✓ %d cards ready. Label each: %s", len(good), label)
	}
	if s := cardsReady(a.Results, a.Metas); s != "" { // written for its node
		t.Text = s
	}
	if a.AllVerified() {
		return t
	}
	t.Importance = widget.WarningImportance
	var bad []string
	for _, r := range a.Results {
		if !r.OK() {
			bad = append(bad, r.Target)
		}
	}
	if len(bad) == 0 {
		t.Text = "⚠ " + strings.TrimPrefix(t.Text, "✓ ") + " (written, not verified)"
		return t
	}
	labelIt := "Label it: " + label
	if len(good) > 1 {
		labelIt = "Label each: " + label
	}
	t.Text = fmt.Sprintf("⚠ %d of %d cards ready. %s. %s failed: see below.", len(good), len(a.Results), labelIt, strings.Join(bad, ", "))
	if ready := cardsReady(a.Results, a.Metas); ready != "" { // each card its node's ("Flash all cards")
		t.Text = fmt.Sprintf("⚠ %d of %d cards ready. %s failed: see below.\n%s", len(good), len(a.Results), strings.Join(bad, ", "), ready)
	}
	return t
}

// finishBody lists the written cards, the image and the notes.
func finishBody(a *Attempt) string {
	var body []string
	for _, r := range a.Results {
		if r.OK() {
			body = append(body, fmt.Sprintf("%s %s: %s, SHA-256 %s", r.Target, verifiedText(r), humanize.IBytes(uint64(r.Bytes)), factory.ShortID(r.SHA256)))
		}
	}
	for _, c := range a.images() { // each card's, with "Flash all cards"
		if c.LocalPath == "" {
			body = append(body, fmt.Sprintf("Talos %s · %s · schematic %s", c.Version, c.Label, c.SchematicID))
		} else {
			body = append(body, "Image "+c.LocalPath)
		}
	}
	if a.Outcome != nil {
		body = append(body, a.Outcome.Notes()...)
	}
	return strings.Join(body, "\n")
}

// ejectView says whether the written cards can be pulled out.
func ejectView(a *Attempt) textView {
	if a.Ejected == nil {
		return textView{Text: "Making the card safe to remove…"}
	}
	var lines []string
	powered, warn := true, false
	for i, e := range a.Ejected {
		who := ""
		if len(a.Ejected) > 1 && i < len(a.EjectedPaths) {
			who = a.EjectedPaths[i] + ": "
		}
		switch {
		case e.PoweredOff:
			lines = append(lines, who+"Safe to remove: the card was flushed and powered off.")
		case e.PowerOffFailed:
			powered, warn = false, true
			lines = append(lines, who+"Written and verified, but not yet safe to remove: "+e.Note+".")
		case !e.Flushed:
			powered = false
			lines = append(lines, who+"Written and synced; "+e.Note+".")
		default:
			powered = false
			lines = append(lines, who+"Safe to remove ("+e.Note+").")
		}
	}
	t := textView{Text: strings.Join(lines, "\n")}
	switch {
	case warn:
		t.Importance = widget.WarningImportance
	case powered:
		t.Importance = widget.SuccessImportance
	}
	return t
}

// stateLines is what each failed card was left as.
func stateLines(a *Attempt) string {
	var lines []string
	for _, r := range a.Results {
		if r.Err != nil {
			lines = append(lines, r.Target+" "+cardState(r.Err, a.Touched[r.Target]))
		}
	}
	return strings.Join(lines, "; ")
}

// progressText is "12 MiB of 80 MiB · 5.1 MiB/s · 10 seconds left"; a
// write that counts compressed bytes says the decoded bytes written and
// how much of the image was read.
func progressText(p imaging.Progress, write bool) string {
	var t string
	switch {
	case p.Compressed && write:
		t = humanize.IBytes(uint64(max(p.Decoded, 0))) + " written"
		if p.Total > 0 {
			t += " (" + figure(fraction(p)) + " of the image read)"
		}
	default:
		t = humanize.IBytes(uint64(max(p.Done, 0)))
		if p.Total > 0 {
			t += " of " + humanize.IBytes(uint64(p.Total))
			if p.Compressed {
				t += " (compressed)"
			}
		}
	}
	if p.Rate > 0 && !(p.Compressed && write) {
		t += " · " + humanize.IBytes(uint64(p.Rate)) + "/s"
	}
	switch {
	case p.Total > 0 && p.Done >= p.Total:
		t += " · done"
	case p.ETA >= time.Second:
		now := time.Now()
		t += " · " + humanize.RelTime(now, now.Add(p.ETA), "left", "")
	}
	return t
}
