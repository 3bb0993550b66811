package plan

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"

	"github.com/talosflash/talosflash/app/elevate"
	"github.com/talosflash/talosflash/factory"
	"github.com/talosflash/talosflash/imaging"
	"github.com/talosflash/talosflash/imaging/devices"
)

// Job is one card to flash: the CLI and the GUI fill it in and call Flash.
type Job struct {
	Image  *Image
	Device string // target block device or image file, already checked by the caller

	Cache   *imaging.Cache
	Factory *factory.Client // registration, and its HTTP client downloads the image
	// NoCache streams the download straight to the card (in process only).
	NoCache, NoVerify bool
	// ForceRaw writes a decoded stream that does not start like a disk
	// (no MBR signature, no GPT header).
	ForceRaw bool
	// Safety rules for Open and for the elevated child.
	Safety devices.Options

	// Open opens the target (nil: devices.Open with Safety).
	Open func(path string, size int64) (imaging.Target, error)
	// Elevate builds the privileged child (devices.ElevatedCommand) when
	// NeedsElevation says the write needs root; nil: always in process.
	Elevate        func(args []string) (*exec.Cmd, error)
	NeedsElevation func(path string) bool

	Progress imaging.ProgressFunc
	Status   func(msg string) // steps and notes for the user; may be nil
}

// Outcome is a finished flash.
type Outcome struct {
	imaging.Result
	Elevated  bool
	CachePath string   // the cached image it came from, "" when none
	Notes     []string // the device's warnings and what was unmounted, for the user
}

// Flash writes the job's image to its device:
//
//  1. a cached image is used as is, with no factory call (flashing a
//     second card works offline); otherwise the schematic is validated and
//     registered with the factory (it builds images only for schematics it
//     knows) and the image is downloaded with the factory client's HTTP client;
//  2. the image is written and verified in process (imaging.Flash), or,
//     when the device needs root, downloaded as the user and written by the
//     elevated child (app/elevate);
//  3. a cache entry found corrupt by the child is dropped (the child
//     flashed it as a plain file and leaves it alone).
func Flash(ctx context.Context, job Job) (*Outcome, error) {
	im := job.Image
	src := imaging.Source{Path: im.LocalPath}
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
	if job.Elevate != nil && job.NeedsElevation != nil && job.NeedsElevation(job.Device) {
		return job.flashElevated(ctx, src)
	}
	return job.flashInProcess(ctx, src)
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

func (job *Job) flashInProcess(ctx context.Context, src imaging.Source) (*Outcome, error) {
	open := job.Open
	if open == nil {
		open = DeviceOpener(job.Safety)
	}
	var (
		mu     sync.Mutex
		target imaging.Target
	)
	res, err := imaging.Flash(ctx, imaging.FlashOptions{
		Source: src,
		Target: job.Device,
		Open: func(path string, size int64) (imaging.Target, error) {
			t, err := open(path, size)
			mu.Lock()
			target = t
			mu.Unlock()
			return t, err
		},
		Verify:   !job.NoVerify,
		ForceRaw: job.ForceRaw,
		Progress: job.Progress,
	})
	if err != nil {
		return nil, err
	}
	out := &Outcome{Result: *res}
	if src.Path == "" {
		out.CachePath = res.Path // "" with NoCache
	}
	mu.Lock()
	defer mu.Unlock()
	if d, ok := target.(*devices.Device); ok {
		out.Notes = DeviceNotes(d)
		for _, n := range out.Notes {
			job.status(n)
		}
	}
	return out, nil
}

// DeviceNotes are what the user should know about an opened device after
// the flash: the mounts it had and the warnings of its Close.
func DeviceNotes(d *devices.Device) []string {
	var notes []string
	for _, m := range d.Unmounted {
		notes = append(notes, "unmounted "+m+" before writing")
	}
	for _, w := range d.Warnings() {
		notes = append(notes, "warning: "+w)
	}
	return notes
}

// flashElevated downloads as the user, then re-runs only the write step
// as root on the cached file and relays its events.
func (job *Job) flashElevated(ctx context.Context, src imaging.Source) (*Outcome, error) {
	local := src.Path
	if local == "" {
		// The child reads a file, so even --no-cache downloads one; it is
		// removed afterwards unless it was cached before.
		if src.NoCache && !src.Cache.Has(src.Key) {
			defer func() { _ = src.Cache.Remove(src.Key) }()
		}
		p, err := src.Cache.Fetch(ctx, src.HTTPClient, src.URL, src.Key, job.Progress)
		if err != nil {
			return nil, err
		}
		local = p
	}
	// pkexec starts the child in root's home: relative paths would name
	// other files there.
	local, err := filepath.Abs(local)
	if err != nil {
		return nil, err
	}
	device, err := filepath.Abs(job.Device)
	if err != nil {
		return nil, err
	}
	args := elevate.Args{Image: local, Device: device, NoVerify: job.NoVerify,
		ForceNonRemovable: job.Safety.ForceNonRemovable, AllowLoop: job.Safety.AllowLoop, ForceRaw: job.ForceRaw}
	cmd, err := job.Elevate(args.List())
	var manual *devices.ElevationError
	if errors.As(err, &manual) && strings.HasPrefix(manual.Command, "sudo ") {
		// Suggest what a person runs, not the child protocol.
		if exe, exeErr := os.Executable(); exeErr == nil {
			manual.Command = devices.ShellJoin(append([]string{"sudo", exe}, args.Human()...))
		}
	}
	if err != nil {
		return nil, err
	}
	job.status("writing " + job.Device + " needs administrator rights: asking for permission (" + cmd.Path + ")")
	out := &Outcome{Elevated: true}
	if src.Path == "" && !src.NoCache {
		out.CachePath = local
	}
	var res *elevate.ResultEvent
	err = elevate.Run(ctx, cmd, func(ev elevate.Event) {
		switch ev.Type {
		case elevate.TypeProgress:
			if job.Progress != nil {
				job.Progress(ev.Progress.Progress())
			}
		case elevate.TypeInfo, elevate.TypeWarning:
			job.status(ev.Message.Message)
		case elevate.TypeResult:
			res = ev.Result
		}
	})
	if errors.Is(err, imaging.ErrCorruptImage) && src.Path == "" {
		_ = src.Cache.Remove(src.Key) // we own the cache: the next run downloads again
	}
	if err != nil {
		return nil, err
	}
	out.Result = imaging.Result{Bytes: res.Bytes, SHA256: res.SHA256, Verified: res.Verified, VerifyMode: res.VerifyMode, Path: local}
	return out, nil
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
