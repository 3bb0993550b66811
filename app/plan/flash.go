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
	// Growing: Image.LocalPath is still being downloaded by another
	// process (the elevated child reading what its parent downloads).
	Growing *imaging.Growing

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
	src := imaging.Source{Path: im.LocalPath, Growing: job.Growing}
	if im.LocalPath == "" {
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

// flashElevated downloads as the user, then re-runs only the write step
// as root on the cached file and relays its events. Several devices go to
// one child (one password prompt), which reports each card on its own.
func (job *Job) flashElevated(ctx context.Context, src imaging.Source) (*Outcome, error) {
	if job.ForceRaw {
		// The child refuses it: as root it would copy any file onto a disk.
		return nil, errors.New("flash: --force-raw is not passed to the elevated write; run the whole flash as root instead")
	}
	local := src.Path
	var dl *imaging.Download
	follow := false
	if local == "" {
		// The child reads a file, so even --no-cache downloads one; it is
		// removed afterwards unless it was cached before.
		if src.NoCache && !src.Cache.Has(src.Key) {
			defer func() { _ = src.Cache.Remove(src.Key) }()
		}
		// The child writes the card while we download: it follows the
		// partial file, its sizes fed on its stdin, to the "done" that
		// comes once the entry is whole, checked and in place.
		dl = src.Cache.StartDownload(ctx, src.HTTPClient, src.URL, src.Key, job.Progress)
		defer dl.Cancel() // a child that failed early: the partial stays, resumable
		p, growing, err := dl.Partial()
		if err != nil {
			return nil, err
		}
		local, follow = p, growing
	}
	// pkexec starts the child in root's home: relative paths would name
	// other files there.
	local, err := filepath.Abs(local)
	if err != nil {
		return nil, err
	}
	devs := slices.Clone(job.Devices)
	for i, d := range devs {
		if devs[i], err = filepath.Abs(d); err != nil {
			return nil, err
		}
	}
	args := elevate.Args{Image: local, Devices: devs, NoVerify: job.NoVerify, Follow: follow,
		ForceNonRemovable: job.Safety.ForceNonRemovable, AllowLoop: job.Safety.AllowLoop}
	args.Meta = job.encodedMeta()
	cmd, err := job.Elevate(args.List())
	var manual *devices.ElevationError
	if errors.As(err, &manual) && strings.HasPrefix(manual.Command, "sudo ") {
		// Suggest what a person runs, not the child protocol: on the
		// cached file, once the download is whole.
		if follow {
			if p, derr := dl.Wait(); derr == nil {
				args.Image = p
			}
		}
		if exe, exeErr := os.Executable(); exeErr == nil {
			manual.Command = devices.ShellJoin(append([]string{"sudo", exe}, args.Human()...))
		}
	}
	if err != nil {
		return nil, err
	}
	job.status("writing " + strings.Join(devs, ", ") + " needs administrator rights: asking for permission (" + cmd.Path + ")")
	out := &Outcome{Elevated: true}
	if src.Path == "" && !src.NoCache {
		out.CachePath, _ = src.Cache.Path(src.Key) // the entry, once the partial is in place
	}
	results := map[string]*contract.ResultEvent{}
	cardErrs := map[string]error{}
	var feed func(io.Writer)
	if follow {
		feed = func(w io.Writer) { _, _ = dl.WriteFeed(w) }
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
	downloadFailed := false
	if err == nil && dl != nil {
		// The child verified its cards from the whole download: the entry
		// is in place (or the download's own failure is the flash's).
		if _, derr := dl.Wait(); derr != nil {
			err, downloadFailed = derr, true
		}
	}
	if errors.Is(err, imaging.ErrCorruptImage) && src.Path == "" {
		_ = src.Cache.Remove(src.Key) // we own the cache: the next run downloads again
	}
	if err != nil && (len(cardErrs)+len(results) == 0 || ctx.Err() != nil || downloadFailed) {
		// The job failed as a whole: the child itself (it started no card),
		// cancelled, or the download.
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
			cards[i].Err = job.childNode(i, r)
		case err != nil:
			cards[i].Err = err // the child failed after reporting other cards
		default:
			cards[i].Err = &elevate.Error{Code: -1, Message: "the elevated write reported nothing for " + d}
		}
	}
	return outcome(out, cards)
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
