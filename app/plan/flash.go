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
	Image *Image
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
	// Stream, in the elevated child, is the image its parent sends on its
	// stdin (elevate.ReceiveImage): the decoded image, written as it
	// comes; Image then only names it.
	Stream *elevate.Received

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
	CachePath string // the cached image it came from, "" when none
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

// Flash writes the job's image to its device:
//
//  1. a cached image is used as is, with no factory call (flashing a
//     second card works offline); otherwise the schematic is validated and
//     registered with the factory (it builds images only for schematics it
//     knows) and the image is downloaded with the factory client's HTTP client;
//  2. the image is written and verified in process (imaging.FlashAll), or,
//     when the device needs root, downloaded as the user and written by the
//     elevated child (app/elevate);
//  3. a cache entry found corrupt by the child is dropped (the child
//     flashed it as a plain file and leaves it alone).
func Flash(ctx context.Context, job Job) (*Outcome, error) {
	im := job.Image
	src := imaging.Source{Path: im.LocalPath}
	if job.Stream != nil {
		size, err := job.Stream.Size()
		if err != nil {
			return nil, err
		}
		src = imaging.Source{Stream: job.Stream, StreamSize: size, StreamSum: job.Stream.SHA256}
	} else if im.LocalPath == "" {
		if job.Cache == nil || job.Factory == nil {
			return nil, errors.New("flash: a download needs a cache and a factory client")
		}
		src = imaging.Source{URL: im.URL, Key: im.CacheKey(), Cache: job.Cache, NoCache: job.NoCache, HTTPClient: job.Factory.HTTPClient()}
		cached, err := job.cached()
		if err != nil {
			return nil, err // a cache that can't be used: say so, not "factory unreachable"
		}
		if !cached {
			job.status("registering the schematic with " + job.Factory.BaseURL())
			if err := im.Register(ctx, job.Factory); err != nil {
				return nil, err
			}
			job.status("downloading " + im.URL)
		} else {
			job.status("using the cached image")
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
			return job.flashInProcess(ctx, src, opened)
		}
		// One child writes every card (one password prompt).
		return job.flashElevated(ctx, src)
	}
	return job.flashInProcess(ctx, src, nil)
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
func (job *Job) cached() (bool, error) {
	if job.NoCache {
		return false, nil
	}
	return job.Cache.Lookup(job.Image.CacheKey())
}

func (job *Job) status(msg string) {
	if job.Status != nil {
		job.Status(msg)
	}
}

// flashInProcess writes the cards in this process; opened are cards
// already open (through UDisks2), each used once, the others opened by
// Job.Open.
func (job *Job) flashInProcess(ctx context.Context, src imaging.Source, opened map[string]imaging.Target) (*Outcome, error) {
	open := job.Open
	if open == nil {
		open = DeviceOpener(job.Safety)
	}
	if opened != nil {
		byPath := open
		open = func(path string, size int64) (imaging.Target, error) {
			if t, ok := opened[path]; ok {
				delete(opened, path)
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
	cards, err := imaging.FlashAll(ctx, imaging.FlashOptions{
		Source:    src,
		Targets:   job.Devices,
		Open:      open,
		Verify:    !job.NoVerify,
		ForceRaw:  job.ForceRaw,
		Progress:  job.Progress,
		CheckHead: job.checkHead(),
	})
	if err != nil {
		return nil, err
	}
	for _, c := range cards {
		for _, n := range c.Notes {
			job.status(n)
		}
	}
	out := &Outcome{UDisks: opened != nil}
	if src.Path == "" && !src.NoCache && slices.ContainsFunc(cards, func(c imaging.CardResult) bool { return c.SHA256 != "" }) {
		out.CachePath, _ = src.Cache.Path(src.Key) // the entry the cards were written from
	}
	job.writeMetas(cards)
	return outcome(out, cards)
}

// ErrForceRawElevated: --force-raw is never passed to the elevated child
// (as root it would copy any bytes onto a disk); a flash that needs it
// through UDisks2 (which opens the card for the user) or as root.
var ErrForceRawElevated = errors.New("--force-raw is not passed to the elevated write (pkexec)")

// flashElevated re-runs only the write step as root: the child (one for
// every card: one password prompt) gets no path to read, the image comes
// on its stdin. This process opens, downloads and decodes the image as
// the user (imaging.OpenDecoded: a first download is decoded as it
// arrives, read once from the network) and sends the decoded bytes
// (elevate.SendImage); a card's result counts only when it names exactly
// the bytes sent (their count and SHA-256), so a stream damaged on the way
// fails the card.
func (job *Job) flashElevated(ctx context.Context, src imaging.Source) (*Outcome, error) {
	if job.ForceRaw {
		return nil, fmt.Errorf("%w; run the whole flash as root instead", ErrForceRawElevated)
	}
	devs := slices.Clone(job.Devices)
	var err error
	for i, d := range devs {
		// pkexec starts the child in root's home: relative paths would
		// name other files there.
		if devs[i], err = filepath.Abs(d); err != nil {
			return nil, err
		}
	}
	args := elevate.Args{Devices: devs, NoVerify: job.NoVerify,
		ForceNonRemovable: job.Safety.ForceNonRemovable, AllowLoop: job.Safety.AllowLoop}
	args.Meta = job.encodedMeta()
	cmd, err := job.Elevate(args.List())
	var manual *devices.ElevationError
	if errors.As(err, &manual) && strings.HasPrefix(manual.Command, "sudo ") {
		// Suggest what a person runs, not the child protocol: the whole
		// flash as root, on the image file (downloaded into the cache
		// first, and kept there, so the command has it).
		if image, ierr := job.imageFile(ctx, src); ierr == nil {
			if exe, exeErr := os.Executable(); exeErr == nil {
				manual.Command = devices.ShellJoin(append([]string{"sudo", exe}, args.Human(image)...))
			}
		}
	}
	if err != nil {
		return nil, err
	}
	srcCtx, stopSource := context.WithCancel(ctx)
	defer stopSource()
	img, err := imaging.OpenDecoded(srcCtx, src, devs, false, job.Progress)
	if err != nil {
		return nil, err // nothing asked, nothing written
	}
	defer img.Close()
	job.status("writing " + strings.Join(devs, ", ") + " needs administrator rights: asking for permission (" + cmd.Path + ")")
	out := &Outcome{Elevated: true}
	if src.Path == "" && !src.NoCache {
		out.CachePath, _ = src.Cache.Path(src.Key) // the entry, once the download is in place
	}
	results := map[string]*contract.ResultEvent{}
	cardErrs := map[string]error{}
	var (
		sent    elevate.Sent
		sendErr error
	)
	feed := func(fctx context.Context, w io.Writer) error {
		stop := context.AfterFunc(fctx, stopSource) // the child is gone: stop decoding
		defer stop()
		sent, sendErr = elevate.SendImage(w, img, img.Size())
		return sendErr
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
	sourceFailed := sendErr != nil && err == sendErr // the image failed here, not in the child
	if sourceFailed && sent.Bytes > 0 {
		// The child stopped on it, its cards written part of the way.
		err = fmt.Errorf("%w (after %s were sent to the elevated write: %w)", err, humanbytes.Exact(sent.Bytes), imaging.ErrIncomplete)
	}
	if errors.Is(err, imaging.ErrCorruptImage) && !sourceFailed && src.Path == "" && src.Stream == nil {
		// The child found the image corrupt (its disk layout): we own the
		// cache, the next run downloads again. (Corrupt data found here
		// was dropped by the decoder already.)
		_ = src.Cache.Remove(src.Key)
	}
	if err != nil && (len(cardErrs)+len(results) == 0 || ctx.Err() != nil || sourceFailed) {
		// The job failed as a whole: the child itself (it started no card),
		// cancelled, or the image.
		return nil, err
	}
	cards := make([]imaging.CardResult, len(devs))
	for i, d := range devs {
		cards[i].Target = d
		switch r, e := results[d], cardErrs[d]; {
		case e != nil:
			cards[i].Err = e
		case r != nil:
			cards[i] = r.Card()
			cards[i].Target = d
			if cards[i].Err = sentCard(sent, r); cards[i].Err == nil {
				cards[i].Err = job.childNode(i, r)
			}
		case err != nil:
			cards[i].Err = err // the child failed after reporting other cards
		default:
			cards[i].Err = &elevate.Error{Code: -1, Message: "the elevated write reported nothing for " + d}
		}
	}
	return outcome(out, cards)
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
