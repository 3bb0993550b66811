package cli

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/dustin/go-humanize"

	"github.com/talosflash/talosflash/app/elevate"
	"github.com/talosflash/talosflash/app/plan"
	"github.com/talosflash/talosflash/factory"
	"github.com/talosflash/talosflash/imaging"
	"github.com/talosflash/talosflash/imaging/devices"
)

// imageFlags are the flags that choose what to flash, shared by flash and schematic.
type imageFlags struct {
	role, profiles, version, factoryURL, arch string
	installer, installerFile, image           string

	factory *factory.Client // one client (and HTTP client) per run
}

func (f *imageFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.role, "role", "", "role or profile name: controlplane, worker, or one from --profiles")
	fs.StringVar(&f.profiles, "profiles", "", "YAML file with custom profiles (overlay, extensions, kernel args, version)")
	fs.StringVar(&f.version, "version", "", "Talos version, e.g. "+factory.DefaultTalosVersion+" (default: the profile's)")
	fs.StringVar(&f.factoryURL, "factory", factory.DefaultBaseURL, "Image Factory base URL")
	fs.StringVar(&f.arch, "arch", "", "architecture (default arm64)")
	fs.StringVar(&f.installer, "installer", "", "existing installer image, e.g. factory.talos.dev/metal-installer/<id>:"+factory.DefaultTalosVersion)
	fs.StringVar(&f.installerFile, "installer-file", "", "GitOps installer file, e.g. talos/installer-worker.yaml")
	fs.StringVar(&f.image, "image", "", "local .raw.xz or .raw image file (no download)")
}

// client is the run's Image Factory client; its HTTP client also downloads.
func (f *imageFlags) client() *factory.Client {
	if f.factory == nil {
		f.factory = factory.NewClient(f.factoryURL, nil)
	}
	return f.factory
}

// profile resolves --role/--profiles/--version/--arch into one profile.
func (f *imageFlags) profile() (factory.Profile, error) {
	all, err := loadProfiles(f.profiles)
	if err != nil {
		return factory.Profile{}, err
	}
	p, err := factory.FindProfile(all, f.role)
	if err != nil {
		return factory.Profile{}, withCode(ExitUsage, err)
	}
	if f.version != "" {
		if err := factory.ValidateVersion(f.version); err != nil {
			return factory.Profile{}, withCode(ExitUsage, err)
		}
		p.TalosVersion = f.version
	}
	if f.arch != "" {
		p.Arch = f.arch
	}
	return p, nil
}

// loadProfiles is the builtin roles, overridden and extended by the user's
// profile file when one is given.
func loadProfiles(path string) ([]factory.Profile, error) {
	if path == "" {
		return factory.BuiltinProfiles(), nil
	}
	all, err := factory.LoadProfiles(path)
	if err != nil {
		return nil, withCode(ExitUsage, err)
	}
	return all, nil
}

// matchProfile recognises an installer's schematic among the known
// profiles offline, so a cached image of a built-in role flashes with no
// factory at all.
func (f *imageFlags) matchProfile(im *plan.Image) error {
	if im.Schematic != nil {
		return nil // the installer file carried its schematic
	}
	all, err := loadProfiles(f.profiles)
	if err != nil {
		return err
	}
	im.Recognize(all)
	return nil
}

// resolve turns the flags into exactly one image choice.
func (f *imageFlags) resolve(ctx context.Context, register bool) (*plan.Image, error) {
	chosen := 0
	for _, s := range []string{f.role, f.installer, f.installerFile, f.image} {
		if s != "" {
			chosen++
		}
	}
	if chosen != 1 {
		return nil, usageErrorf("choose exactly one of --role, --installer, --installer-file, --image")
	}
	switch {
	case f.image != "":
		if _, err := os.Stat(f.image); err != nil {
			return nil, withCode(ExitUsage, fmt.Errorf("image file: %w", err))
		}
		return plan.FromFile(f.image), nil
	case f.installer != "":
		ref, err := factory.ParseInstallerRef(f.installer)
		if err != nil {
			return nil, withCode(ExitUsage, err)
		}
		if f.version != "" && f.version != ref.Version {
			return nil, usageErrorf("--version %s contradicts the installer's version %s", f.version, ref.Version)
		}
		im := plan.FromInstallerRef(f.client(), ref, f.arch)
		if err := f.matchProfile(im); err != nil {
			return nil, err
		}
		im.LookupSchematic(ctx, f.client())
		return im, nil
	case f.installerFile != "":
		im, err := plan.FromInstallerFile(f.client(), f.installerFile, f.arch)
		if err != nil {
			return nil, withCode(ExitUsage, err)
		}
		if register {
			if err := im.Register(ctx, f.client()); err != nil {
				return nil, err
			}
		}
		if err := f.matchProfile(im); err != nil {
			return nil, err
		}
		im.LookupSchematic(ctx, f.client())
		return im, nil
	}
	p, err := f.profile()
	if err != nil {
		return nil, err
	}
	return plan.FromProfile(ctx, f.client(), p, register)
}

type flashFlags struct {
	imageFlags
	device            string
	yes, jsonOut      bool
	noCache, noVerify bool
	forceNonRemovable bool
	allowLoop         bool
	forceRaw          bool
	format            string
	cacheDir          string
	elevated          bool
}

func runFlash(ctx context.Context, args []string, env Env) error {
	var f flashFlags
	fs := newFlagSet("flash", env)
	f.imageFlags.register(fs)
	fs.StringVar(&f.device, "device", "", "target block device (e.g. /dev/sdb) or image file")
	fs.BoolVar(&f.yes, "yes", false, "do not ask to confirm the device (scripts)")
	fs.BoolVar(&f.jsonOut, "json", false, "machine-readable progress: one JSON object per line on stdout")
	fs.BoolVar(&f.noCache, "no-cache", false, "stream the download straight to the card, keep nothing")
	fs.BoolVar(&f.noVerify, "no-verify", false, "skip reading the card back (not recommended)")
	fs.BoolVar(&f.forceNonRemovable, "force-non-removable", false, "allow a disk that is not removable (still never a system disk)")
	fs.BoolVar(&f.allowLoop, "allow-loop", false, "allow a loop device as target (testing)")
	fs.BoolVar(&f.forceRaw, "force-raw", false, "write an image that does not start like a disk (no MBR/GPT)")
	fs.StringVar(&f.format, "format", "xz", "download format from the factory: xz or zst")
	fs.StringVar(&f.cacheDir, "cache-dir", "", "image cache directory (default: user cache dir)")
	fs.BoolVar(&f.elevated, "elevated", false, "internal: this process is the privileged write step")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if f.device == "" {
		return usageErrorf("flash: --device is required (list candidates with: talosflash devices)")
	}
	if f.elevated {
		// The unprivileged parent cannot signal us (we run as root under
		// pkexec); it cancels by closing our stdin.
		var cancel context.CancelFunc
		ctx, cancel = context.WithCancel(ctx)
		defer cancel()
		go func() {
			_, _ = io.Copy(io.Discard, env.Stdin)
			cancel()
		}()
	}

	var rep reporter
	if f.jsonOut {
		rep = newJSONReporter(env.Stdout, env.Stderr, f.elevated)
	} else {
		rep = newTermReporter(env.Stderr, isTerminal(env.Stderr))
	}
	defer rep.Finish()
	err := flash(ctx, &f, env, rep)
	if err != nil {
		rep.Error(exitCode(err), oneLine(err.Error()))
	}
	return err
}

// flash checks the device, resolves the image, confirms, and runs the
// shared flash job (app/plan.Flash).
func flash(ctx context.Context, f *flashFlags, env Env, rep reporter) error {
	opts := devices.Options{ForceNonRemovable: f.forceNonRemovable, AllowLoop: f.allowLoop, CreateFile: true}

	// Safety first, before any download: a refused device costs nothing.
	disk, err := devices.Check(f.device, 0, opts)
	if err != nil {
		return err
	}

	if f.format != "xz" && f.format != "zst" {
		return usageErrorf("flash: --format %q: want xz or zst", f.format)
	}
	im, err := f.resolve(ctx, false) // plan.Flash registers when it downloads
	if err != nil {
		return err
	}
	im.UseFormat(f.format)
	rep.Info("image: %s", im.Label)
	if im.SchematicID != "" {
		rep.Info("schematic %s, Talos %s, %s", im.SchematicID, im.Version, im.FileName())
	}
	for _, w := range plan.ImageWarnings(im) {
		rep.Warning(w)
	}

	if !f.yes {
		if err := confirmDevice(ctx, env.Stdin, env.Stderr, disk.Path, disk.String()); err != nil {
			return err
		}
	}

	cache, err := openCache(f.cacheDir)
	if err != nil {
		return err
	}
	job := plan.Job{
		Image: im, Device: disk.Path, Cache: cache, Factory: f.client(),
		NoCache: f.noCache, NoVerify: f.noVerify, ForceRaw: f.forceRaw, Safety: opts,
		Progress: rep.Progress,
		Status:   func(msg string) { rep.Info("%s", msg) },
	}
	if !f.elevated && disk.Transport != devices.TransportFile {
		// Only the write step runs as root, on the downloaded file.
		job.Elevate, job.NeedsElevation = devices.ElevatedCommand, devices.NeedsElevation
	}
	out, err := plan.Flash(ctx, job)
	if err != nil {
		return err
	}
	rep.Finish()
	verified := "not verified (--no-verify)"
	if out.Verified {
		verified = "verified by read-back (" + out.VerifyMode + ")"
	}
	rep.Info("wrote %s to %s, sha256 %s, %s", humanize.IBytes(uint64(out.Bytes)), disk.Path, out.SHA256, verified)
	rep.Result(elevate.ResultEvent{
		Device: disk.Path, Bytes: out.Bytes, SHA256: out.SHA256, Verified: out.Verified,
		VerifyMode: out.VerifyMode, Schematic: im.SchematicID, Version: im.Version,
	})
	if im.Role != "" {
		rep.Info("next: boot the Pi from this card, then `talosflash nodes` and `talosflash apply --node IP --file %s.yaml --role %s`", im.Role, im.Role)
	}
	return nil
}

func openCache(dir string) (*imaging.Cache, error) {
	if dir != "" {
		return &imaging.Cache{Dir: dir}, nil
	}
	c, err := imaging.DefaultCache()
	if err != nil {
		return nil, fmt.Errorf("image cache: %w", err)
	}
	return c, nil
}
