package plan

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"github.com/talosflash/talosflash/app/contract"
	"github.com/talosflash/talosflash/app/elevate"
	"github.com/talosflash/talosflash/factory"
	"github.com/talosflash/talosflash/imaging"
	"github.com/talosflash/talosflash/imaging/devices"
	"github.com/talosflash/talosflash/internal/humanbytes"
)

// Job is a list of cards to flash (one card is a list of one): the CLI
// and the GUI fill it in and call Flash.
type Job struct {
	Image *Image // every card's image, unless Images says otherwise
	// Devices are the target block devices or image files, already checked
	// by the caller, written from one download and one decode; each is
	// written, verified and reported on its own (Outcome.Cards) and one
	// failing does not stop the others. With several, progress reports
	// name their card (Progress.Target).
	Devices []string
	// Meta, per device in order, is the node each card is flashed for
	// (cardnode.go): checked against the image before any card is touched,
	// written onto the card once verified. A card that ends OK carries its
	// node; nil: the card stays the image.
	Meta []*CardMeta

	Cache   *imaging.Cache
	Factory *factory.Client // registration, and its HTTP client downloads the image
	// NoCache streams the download straight to the card (in process only).
	NoCache, NoVerify bool
	// ForceRaw writes a decoded stream that does not start like a disk
	// (no MBR signature, no GPT header).
	ForceRaw bool
	// Safety rules for Open and for the elevated child.
	Safety devices.Options
	// Images, when set, is per device in order the image each card is
	// written from (a nil entry: Image): one run for a cluster, its control
	// plane's card and its workers' cards. Cards of one image (the same
	// local file, or the same cache key) share one download and one
	// decode; the images are downloaded and decoded at once
	// (imaging.FlashGroups), in one job: one outcome, one UDisks2 prompt
	// or one elevated child. An image that cannot be had (its download,
	// its registration) fails its own cards only.
	Images []*Image
	// Streams, in the elevated child, is per device in order the image
	// its parent sends on its stdin (elevate.ReceiveImages: one image, or
	// several): the decoded image, written as it comes; cards with the
	// same stream are written from it, and Image then only names it.
	Streams []*elevate.Received

	// Open opens the target (nil: devices.Open with Safety).
	Open func(path string, size int64) (imaging.Target, error)
	// Elevate builds the privileged child (devices.ElevatedCommand) when
	// NeedsElevation says the write needs root; nil: always in process.
	Elevate        func(args []string) (*exec.Cmd, error)
	NeedsElevation func(path string) bool
	// UDisks, when set, is tried first for the devices NeedsElevation
	// names (Linux, not root): UDisks2 opens them for the user and the
	// write runs in this process; absent or refusing, the elevated child
	// writes them (Flash says why in a status line). nil: never tried.
	UDisks *devices.UDisks

	// cardFile, set while the cards were opened through UDisks2, opens a
	// card again for its META.
	cardFile func(path string) (*os.File, error)

	Progress imaging.ProgressFunc
	Status   func(msg string) // steps and notes for the user; may be nil
}

// DefaultFormat is the factory compression a download uses unless told:
// the one that gives a verified card soonest. zstd: download + flash +
// verify of the factory's image took 0.72x the time of the .raw.xz (and
// 0.71x the CPU) for a 3 % smaller download (docs/PERFORMANCE.md).
const DefaultFormat = "zst"

// Outcome is a finished flash: every card of the job, in order, each with
// its own result (imaging.CardResult, the one form of a card's result).
type Outcome struct {
	Cards     []imaging.CardResult
	Elevated  bool
	UDisks    bool   // the cards were opened through UDisks2
	CachePath string // the cached image it came from, "" when none (with several images: the first card's)
	// CachePaths is the cached image each card came from, in order ("":
	// none).
	CachePaths []string
}

// Notes are every card's notes, in order (each prefixed by its card when
// there are several).
func (o *Outcome) Notes() []string {
	var notes []string
	for _, c := range o.Cards {
		for _, n := range c.Notes {
			if len(o.Cards) > 1 {
				n = c.Target + ": " + n
			}
			notes = append(notes, n)
		}
	}
	return notes
}

// CardsError is a flash where some cards failed: it unwraps to each
// failure (errors.Is/As see them all). With one card it reads as that
// card's error.
type CardsError struct {
	Failed []imaging.CardResult
	Total  int
}

func (e *CardsError) Error() string {
	if e.Total == 1 && len(e.Failed) == 1 {
		return e.Failed[0].Err.Error()
	}
	msg := fmt.Sprintf("%d of %d cards failed", len(e.Failed), e.Total)
	for _, c := range e.Failed {
		msg += "; " + c.Target + ": " + c.Err.Error()
	}
	return msg
}

func (e *CardsError) Unwrap() []error {
	errs := make([]error, len(e.Failed))
	for i, c := range e.Failed {
		errs[i] = c.Err
	}
	return errs
}

// outcome collects the cards: a CardsError when any failed.
func outcome(out *Outcome, cards []imaging.CardResult) (*Outcome, error) {
	out.Cards = cards
	var failed []imaging.CardResult
	for _, c := range cards {
		if c.Err != nil {
			failed = append(failed, c)
		}
	}
	if len(failed) > 0 {
		return out, &CardsError{Failed: failed, Total: len(cards)}
	}
	return out, nil
}

// Flash writes the job's image (each card's, Job.Images) to its devices:
//
//  1. a cached image is used as is, with no factory call (flashing a
//     second card works offline); otherwise the schematic is validated and
//     registered with the factory (it builds images only for schematics it
//     knows) and the image is downloaded with the factory client's HTTP
//     client; with several images, one that cannot be had fails its own
//     cards only;
//  2. the images are written and verified in process (imaging.FlashAll;
//     several at once, imaging.FlashGroups), or, when a device needs root,
//     downloaded and decoded as the user and written by one elevated child
//     (app/elevate);
//  3. a cache entry found corrupt by the child is dropped (the child
//     flashed it as a plain file and leaves it alone).
func Flash(ctx context.Context, job Job) (*Outcome, error) {
	groups, err := job.groups()
	if err != nil {
		return nil, err
	}
	for _, g := range groups {
		if g.src, g.err = job.source(ctx, g, len(groups) > 1); g.err != nil && len(groups) == 1 {
			return nil, g.err
		}
	}
	if job.Elevate != nil && job.NeedsElevation != nil && slices.ContainsFunc(job.Devices, job.NeedsElevation) {
		if job.ForceRaw && job.UDisks == nil {
			return nil, fmt.Errorf("%w; run the whole flash as root instead", ErrForceRawElevated)
		}
		opened, err := job.openUDisks(ctx)
		if err != nil {
			return nil, err
		}
		if opened != nil {
			return job.flashInProcess(ctx, groups, opened)
		}
		// One child writes every card (one password prompt).
		return job.flashElevated(ctx, groups)
	}
	return job.flashInProcess(ctx, groups, nil)
}

// group is the cards of one image: one download and one decode.
type group struct {
	image  *Image
	stream *elevate.Received
	cards  []int // indices into Job.Devices
	src    imaging.Source
	err    error // the image could not be had: its cards fail
	// storeChecked: the image's META store was read and checked for its
	// cards' nodes before any was opened (checkHead; false for a stream).
	storeChecked bool
}

// devices are the group's cards' paths.
func (g *group) devices(job *Job) []string {
	devs := make([]string, len(g.cards))
	for i, c := range g.cards {
		devs[i] = job.Devices[c]
	}
	return devs
}

// groups splits the job's cards by image (Images, Streams), in the order
// of each image's first card.
func (job *Job) groups() ([]*group, error) {
	switch {
	case len(job.Images) > 0 && len(job.Images) != len(job.Devices):
		return nil, fmt.Errorf("flash: %d images for %d devices", len(job.Images), len(job.Devices))
	case len(job.Streams) > 0 && len(job.Streams) != len(job.Devices):
		return nil, fmt.Errorf("flash: %d image streams for %d devices", len(job.Streams), len(job.Devices))
	}
	var groups []*group
	byKey := map[any]*group{}
	for i := range job.Devices {
		im := job.Image
		var st *elevate.Received
		if i < len(job.Images) && job.Images[i] != nil {
			im = job.Images[i]
		}
		if i < len(job.Streams) {
			st = job.Streams[i]
		}
		if im == nil {
			return nil, errors.New("flash: no image")
		}
		var key any = st
		if st == nil {
			key = im.groupKey()
		}
		g := byKey[key]
		if g == nil {
			g = &group{image: im, stream: st}
			byKey[key] = g
			groups = append(groups, g)
		}
		g.cards = append(g.cards, i)
	}
	if len(groups) == 0 {
		groups = []*group{{image: job.Image}} // no device: FlashAll says so
	}
	return groups, nil
}

// groupKey is what makes two images one: the same local file, or the
// same cache entry.
func (im *Image) groupKey() string {
	if im.LocalPath != "" {
		if abs, err := filepath.Abs(im.LocalPath); err == nil {
			return "file:" + abs
		}
		return "file:" + im.LocalPath
	}
	return "cache:" + im.CacheKey()
}

// source is where the group's image comes from: the stream the parent
// sends (the elevated child), a local file, or the cache (a cached image
// is used with no factory call: flashing a second card works offline;
// otherwise the schematic is registered first, as the factory builds
// images only for schematics it knows). named: several images, say which
// in the status lines.
func (job *Job) source(ctx context.Context, g *group, named bool) (imaging.Source, error) {
	im := g.image
	if g.stream != nil {
		size, err := g.stream.Size()
		if err != nil {
			return imaging.Source{}, err
		}
		return imaging.Source{Stream: g.stream, StreamSize: size, StreamSum: g.stream.SHA256}, nil
	}
	if im.LocalPath != "" {
		return imaging.Source{Path: im.LocalPath}, nil
	}
	if job.Cache == nil || job.Factory == nil {
		return imaging.Source{}, errors.New("flash: a download needs a cache and a factory client")
	}
	src := imaging.Source{URL: im.URL, Key: im.CacheKey(), Cache: job.Cache, NoCache: job.NoCache, HTTPClient: job.Factory.HTTPClient()}
	cached, err := job.cached(im)
	if err != nil {
		return imaging.Source{}, err // a cache that can't be used: say so, not "factory unreachable"
	}
	of := ""
	if named {
		of = " (" + im.Label + ")"
	}
	if cached {
		job.status("using the cached image" + of)
		return src, nil
	}
	job.status("registering the schematic with " + job.Factory.BaseURL() + of)
	if err := im.Register(ctx, job.Factory); err != nil {
		return imaging.Source{}, err
	}
	job.status("downloading " + im.URL)
	return src, nil
}

// openUDisks opens, through UDisks2, every card the user cannot open
// (polkit asks once: UDisks2's open-device is auth_admin_keep). nil, nil:
// use the elevated child instead, already said in a status line. A
// dismissed password prompt ends the flash (nothing written): the user
// said no, and a second prompt from pkexec right after it would ask the
// same question again. Refusals of the safety rules and a descriptor that
// is not the checked card end it too: pkexec would not change them.
func (job *Job) openUDisks(ctx context.Context) (map[string]imaging.Target, error) {
	if job.UDisks == nil {
		return nil, nil
	}
	opened := map[string]imaging.Target{}
	closeAll := func() {
		for _, t := range opened {
			_ = t.Close()
		}
	}
	for _, d := range job.Devices {
		if !job.NeedsElevation(d) || opened[d] != nil {
			continue
		}
		dev, err := job.UDisks.Open(ctx, d, 0, job.Safety)
		if err == nil {
			opened[d] = dev
			continue
		}
		closeAll()
		var ue *devices.UDisksError
		switch {
		case errors.Is(err, devices.ErrUDisksDismissed):
			return nil, fmt.Errorf("flash cancelled at the password prompt of UDisks2, nothing was written (not asking again through pkexec): %w", err)
		case errors.Is(err, devices.ErrNoUDisks) && job.ForceRaw:
			return nil, fmt.Errorf("UDisks2 is not running, and %w; run the whole flash as root instead", ErrForceRawElevated)
		case errors.As(err, &ue) && job.ForceRaw:
			return nil, fmt.Errorf("UDisks2 refused (%s), and %w; run the whole flash as root instead", ue.Error(), ErrForceRawElevated)
		case errors.Is(err, devices.ErrNoUDisks):
			job.status("UDisks2 is not running: asking for the administrator password (pkexec) instead")
			return nil, nil
		case errors.As(err, &ue):
			job.status("UDisks2 refused: " + ue.Error() + ": asking for the administrator password (pkexec) instead")
			return nil, nil
		}
		return nil, err
	}
	names := slices.Sorted(maps.Keys(opened))
	job.status("opened " + strings.Join(names, ", ") + " through UDisks2: writing as " + currentUser() + ", no root process")
	job.cardFile = func(path string) (*os.File, error) { return job.UDisks.OpenFile(ctx, path, job.Safety) }
	return opened, nil
}

// currentUser names the user for a status line.
func currentUser() string {
	if u, err := user.Current(); err == nil {
		return u.Username
	}
	return fmt.Sprintf("uid %d", os.Getuid())
}

// cached says whether the image is in the cache and passes the checks
// Cache.Fetch makes (milliseconds, no decode). A damaged entry counts as
// absent (Fetch replaces it, so the schematic is registered first); a cache
// that can't be used at all (a symlinked directory on the way) is an error.
// --no-cache never uses an entry.
func (job *Job) cached(im *Image) (bool, error) {
	if job.NoCache {
		return false, nil
	}
	return job.Cache.Lookup(im.CacheKey())
}

func (job *Job) status(msg string) {
	if job.Status != nil {
		job.Status(msg)
	}
}

// flashInProcess writes the cards in this process; opened are cards
// already open (through UDisks2), each used once, the others opened by
// Job.Open. One image is one imaging.FlashAll; several run at once
// (imaging.FlashGroups), each image failing on its own.
func (job *Job) flashInProcess(ctx context.Context, groups []*group, opened map[string]imaging.Target) (*Outcome, error) {
	open := job.Open
	if open == nil {
		open = DeviceOpener(job.Safety)
	}
	if opened != nil {
		var mu sync.Mutex // several images open their cards at once
		byPath := open
		open = func(path string, size int64) (imaging.Target, error) {
			mu.Lock()
			t, ok := opened[path]
			delete(opened, path)
			mu.Unlock()
			if ok {
				return t, nil
			}
			return byPath(path, size)
		}
		defer func() {
			for _, t := range opened { // refused before the pipeline took it
				_ = t.Close()
			}
		}()
	}
	opts := make([]imaging.FlashOptions, 0, len(groups))
	var run []*group // the groups with an image to flash
	for _, g := range groups {
		if g.err != nil {
			continue
		}
		run = append(run, g)
		opts = append(opts, imaging.FlashOptions{
			Source:    g.src,
			Targets:   g.devices(job),
			Open:      open,
			Verify:    !job.NoVerify,
			ForceRaw:  job.ForceRaw,
			Progress:  job.progressOf(g, len(groups) > 1),
			CheckHead: job.checkHead(g),
		})
	}
	cards := make([]imaging.CardResult, len(job.Devices))
	var perGroup [][]imaging.CardResult
	var err error
	switch {
	case len(groups) == 1:
		var one []imaging.CardResult
		if one, err = imaging.FlashAll(ctx, opts[0]); err != nil {
			return nil, err
		}
		perGroup = [][]imaging.CardResult{one}
	case len(opts) > 0:
		if perGroup, err = imaging.FlashGroups(ctx, opts); err != nil {
			return nil, err
		}
	}
	out := &Outcome{UDisks: opened != nil, CachePaths: make([]string, len(job.Devices))}
	for _, g := range groups {
		for _, c := range g.cards {
			cards[c] = imaging.CardResult{Target: job.Devices[c], Err: g.err}
		}
	}
	for i, g := range run {
		src := g.src
		cache := ""
		if src.Path == "" && src.Stream == nil && !src.NoCache && slices.ContainsFunc(perGroup[i], func(c imaging.CardResult) bool { return c.SHA256 != "" }) {
			cache, _ = src.Cache.Path(src.Key) // the entry the cards were written from
		}
		for j, c := range g.cards {
			cards[c] = perGroup[i][j]
			out.CachePaths[c] = cache
		}
	}
	for _, c := range cards {
		for _, n := range c.Notes {
			job.status(n)
		}
	}
	out.CachePath = firstNonEmpty(out.CachePaths)
	checked := make([]bool, len(job.Devices))
	for _, g := range run {
		for _, c := range g.cards {
			checked[c] = g.storeChecked
		}
	}
	job.writeMetas(cards, checked)
	return outcome(out, cards)
}

// progressOf is the job's Progress for a group's reports; with several
// images, a download names its image (Progress.Image).
func (job *Job) progressOf(g *group, named bool) imaging.ProgressFunc {
	fn := job.Progress
	if fn == nil || !named {
		return fn
	}
	label := g.image.Label
	return func(p imaging.Progress) {
		if p.Target == "" {
			p.Image = label
		}
		fn(p)
	}
}

func firstNonEmpty(list []string) string {
	for _, s := range list {
		if s != "" {
			return s
		}
	}
	return ""
}

// ErrForceRawElevated: --force-raw is never passed to the elevated child
// (as root it would copy any bytes onto a disk); a flash that needs it
// through UDisks2 (which opens the card for the user) or as root.
var ErrForceRawElevated = errors.New("--force-raw is not passed to the elevated write (pkexec)")

// flashElevated re-runs only the write step as root: the child (one for
// every card, of every image: one password prompt) gets no path to read,
// the images come on its stdin. This process opens, downloads and decodes
// each image as the user (imaging.OpenDecoded: a first download is decoded
// as it arrives, read once from the network) and sends the decoded bytes
// (elevate.SendImages: one image, or several interleaved); a card's
// result counts only when it names exactly the bytes sent of its image
// (their count and SHA-256), so a stream damaged on the way fails the
// card.
func (job *Job) flashElevated(ctx context.Context, groups []*group) (*Outcome, error) {
	if job.ForceRaw {
		return nil, fmt.Errorf("%w; run the whole flash as root instead", ErrForceRawElevated)
	}
	// The child's cards: those of the images there are, in the job's order.
	var run []*group
	imageOf := map[int]int{} // job card -> index of its image in run
	for _, g := range groups {
		if g.err == nil {
			for _, c := range g.cards {
				imageOf[c] = len(run)
			}
			run = append(run, g)
		}
	}
	cards := make([]imaging.CardResult, len(job.Devices))
	for _, g := range groups {
		for _, c := range g.cards {
			cards[c] = imaging.CardResult{Target: job.Devices[c], Err: g.err}
		}
	}
	out := &Outcome{Elevated: true, CachePaths: make([]string, len(job.Devices))}
	if len(run) == 0 {
		return outcome(out, cards) // no image to send: nothing asked
	}
	multi := len(run) > 1
	var (
		jobCard []int // the child's cards, as the job's indices
		devs    []string
		metas   []string
		images  []int
	)
	encoded := job.encodedMeta()
	for i, d := range job.Devices {
		gi, ok := imageOf[i]
		if !ok {
			continue
		}
		// pkexec starts the child in root's home: relative paths would
		// name other files there.
		abs, err := filepath.Abs(d)
		if err != nil {
			return nil, err
		}
		jobCard, devs, images = append(jobCard, i), append(devs, abs), append(images, gi)
		if encoded != nil {
			metas = append(metas, encoded[i])
		}
	}
	args := elevate.Args{Devices: devs, NoVerify: job.NoVerify,
		ForceNonRemovable: job.Safety.ForceNonRemovable, AllowLoop: job.Safety.AllowLoop, Meta: metas}
	if multi {
		args.Images = images
	}
	cmd, err := job.Elevate(args.List())
	var manual *devices.ElevationError
	if errors.As(err, &manual) && strings.HasPrefix(manual.Command, "sudo ") {
		// Suggest what a person runs, not the child protocol: the whole
		// flash as root, on the image file (downloaded into the cache
		// first, and kept there, so the command has it); one command an
		// image.
		if human := job.humanCommands(ctx, run, args); human != "" {
			manual.Command = human
		}
	}
	if err != nil {
		return nil, err
	}
	srcCtx, stopSource := context.WithCancel(ctx)
	defer stopSource()
	imgs := make([]io.Reader, len(run))
	sizes := make([]int64, len(run))
	for i, g := range run {
		// The image's checks before any card is touched, here where the
		// image file is (the child gets a stream): before the password
		// prompt.
		img, err := imaging.OpenDecoded(srcCtx, g.src, devs, false, job.progressOf(g, multi), job.checkHead(g))
		if err != nil && !multi {
			return nil, err // nothing asked, nothing written
		}
		if err != nil { // this image fails its cards; the others go on
			imgs[i], sizes[i] = failedImage{err}, -1
			continue
		}
		defer img.Close()
		imgs[i], sizes[i] = img, img.Size()
	}
	job.status("writing " + strings.Join(devs, ", ") + " needs administrator rights: asking for permission (" + cmd.Path + ")")
	for i, g := range run {
		if src := g.src; src.Path == "" && !src.NoCache {
			cache, _ := src.Cache.Path(src.Key) // the entry, once the download is in place
			for _, c := range g.cards {
				out.CachePaths[c] = cache
			}
			if i == 0 {
				out.CachePath = cache
			}
		}
	}
	results := map[string]*contract.ResultEvent{}
	cardErrs := map[string]error{}
	sent := make([]elevate.Sent, len(run)) // as they are if the child never started
	sendErrs := make([]error, len(run))
	feed := func(fctx context.Context, w io.Writer) error {
		stop := context.AfterFunc(fctx, stopSource) // the child is gone: stop decoding
		defer stop()
		sent, sendErrs = elevate.SendImages(w, imgs, sizes)
		if multi {
			// An image that fails fails its cards only: not the child's
			// run.
			return nil
		}
		return sendErrs[0] // the one image failed: the run did (the child is stopped)
	}
	// card is the job's device a child event names: with one card, that
	// card, whatever path the child printed (it may resolve a symlink).
	card := func(dev string) string {
		if len(devs) == 1 {
			return devs[0]
		}
		return dev
	}
	err = elevate.RunFed(ctx, cmd, func(ev contract.Event) {
		switch ev.Type {
		case contract.TypeProgress:
			if job.Progress != nil {
				job.Progress(ev.Progress.Progress())
			}
		case contract.TypeInfo, contract.TypeWarning:
			job.status(ev.Message.Message)
		case contract.TypeResult:
			results[card(ev.Result.Device)] = ev.Result
		case contract.TypeError:
			if ev.Error.Device != "" {
				cardErrs[card(ev.Error.Device)] = &elevate.Error{Code: ev.Error.Code, Message: ev.Error.Message, Reported: true}
			}
		}
	}, feed)
	sourceFailed := !multi && sendErrs[0] != nil && err == sendErrs[0] // the image failed here, not in the child
	if sourceFailed && sent[0].Bytes > 0 {
		// The child stopped on it, its cards written part of the way.
		err = fmt.Errorf("%w (after %s were sent to the elevated write: %w)", err, humanbytes.Exact(sent[0].Bytes), imaging.ErrIncomplete)
	}
	if !multi && errors.Is(err, imaging.ErrCorruptImage) && !sourceFailed {
		job.dropCorrupt(run[0].src)
	}
	if err != nil && (len(cardErrs)+len(results) == 0 || ctx.Err() != nil || sourceFailed) {
		// The job failed as a whole: the child itself (it started no card),
		// cancelled, or the image.
		return nil, err
	}
	for ci, i := range jobCard {
		d, gi := devs[ci], images[ci]
		c := &cards[i]
		c.Target = d
		switch r, e := results[d], cardErrs[d]; {
		case sendErrs[gi] != nil:
			// The image failed here (its download, its data): said as in
			// process, not as the child's "stream stopped".
			c.Err = sendErrs[gi]
			if sent[gi].Bytes > 0 {
				c.Err = fmt.Errorf("%w (after %s were sent to the elevated write: %w)", c.Err, humanbytes.Exact(sent[gi].Bytes), imaging.ErrIncomplete)
			}
		case e != nil:
			c.Err = e
		case r != nil:
			*c = r.Card()
			c.Target = d
			if c.Err = sentCard(sent[gi], r); c.Err == nil {
				c.Err = job.childNode(i, r)
			}
		case err != nil:
			c.Err = err // the child failed after reporting other cards
		default:
			c.Err = &elevate.Error{Code: -1, Message: "the elevated write reported nothing for " + d}
		}
	}
	if multi {
		for gi, g := range run {
			// The child found an image corrupt (its disk layout): we own
			// the cache, the next run downloads it again.
			if sendErrs[gi] == nil && slices.ContainsFunc(g.cards, func(c int) bool { return errors.Is(cards[c].Err, imaging.ErrCorruptImage) }) {
				job.dropCorrupt(g.src)
			}
		}
	}
	return outcome(out, cards)
}

// dropCorrupt removes a cache entry the elevated child found corrupt (its
// disk layout): we own the cache, the next run downloads again. (Corrupt
// data found here was dropped by the decoder already; a local file is the
// user's.)
func (job *Job) dropCorrupt(src imaging.Source) {
	if src.Path == "" && src.Stream == nil && src.Cache != nil {
		_ = src.Cache.Remove(src.Key)
	}
}

// failedImage is an image that could not be opened, sent as failed.
type failedImage struct{ err error }

func (f failedImage) Read([]byte) (int, error) { return 0, f.err }

// humanCommands is the flash as commands a person runs as root, one an
// image (its file downloaded into the cache first), "" when one of the
// files cannot be had.
func (job *Job) humanCommands(ctx context.Context, run []*group, args elevate.Args) string {
	exe, err := os.Executable()
	if err != nil {
		return ""
	}
	var cmds []string
	for gi, g := range run {
		image, err := job.imageFile(ctx, g.src)
		if err != nil {
			return ""
		}
		a := args
		if len(run) > 1 {
			a.Devices, a.Meta, a.Images = nil, nil, nil
			for ci, d := range args.Devices {
				if args.Images[ci] == gi {
					a.Devices = append(a.Devices, d)
					if ci < len(args.Meta) {
						a.Meta = append(a.Meta, args.Meta[ci])
					}
				}
			}
		}
		cmds = append(cmds, devices.ShellJoin(append([]string{"sudo", exe}, a.Human(image)...)))
	}
	return strings.Join(cmds, " && ")
}

// sentCard checks a card the child reports written against what was sent
// to it: all of the image, and a card holding exactly those bytes.
func sentCard(sent elevate.Sent, r *contract.ResultEvent) error {
	switch {
	case !sent.Complete:
		return fmt.Errorf("%w: the elevated write reported the card written before it was sent the whole image (%s sent)", imaging.ErrIncomplete, humanbytes.Exact(sent.Bytes))
	case r.Bytes != sent.Bytes || r.SHA256 != sent.SHA256:
		return fmt.Errorf("%w: the card holds %s with sha256 %s, the image sent was %s with sha256 %s", imaging.ErrVerifyMismatch, humanbytes.Exact(r.Bytes), r.SHA256, humanbytes.Exact(sent.Bytes), sent.SHA256)
	}
	return nil
}

// imageFile is the image as a file a person can name in a command: the
// local file, else the cache entry (downloaded first if need be).
func (job *Job) imageFile(ctx context.Context, src imaging.Source) (string, error) {
	if src.Path != "" {
		return filepath.Abs(src.Path)
	}
	return src.Cache.Fetch(ctx, src.HTTPClient, src.URL, src.Key, job.Progress)
}

// DeviceOpener is devices.Opener as the pipeline's Open.
func DeviceOpener(opts devices.Options) func(path string, size int64) (imaging.Target, error) {
	open := devices.Opener(opts)
	return func(path string, size int64) (imaging.Target, error) {
		d, err := open(path, size)
		if err != nil {
			return nil, err // never a typed-nil *Device inside the interface
		}
		return d, nil
	}
}
