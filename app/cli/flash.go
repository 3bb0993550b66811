package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"runtime/debug"
	"slices"
	"strings"

	"github.com/talosflash/talosflash/app/contract"
	"github.com/talosflash/talosflash/app/elevate"
	"github.com/talosflash/talosflash/app/plan"
	"github.com/talosflash/talosflash/factory"
	"github.com/talosflash/talosflash/imaging"
	"github.com/talosflash/talosflash/imaging/devices"
	"github.com/talosflash/talosflash/inventory"
)

func init() {
	placeholders["board"] = "BOARD"
	for _, cmd := range []string{"flash", "schematic"} {
		h := commandHelp[cmd]
		if i := slices.Index(h.order, "role"); i >= 0 && !slices.Contains(h.order, "board") {
			h.order = slices.Insert(slices.Clone(h.order), i+1, "board")
		}
		commandHelp[cmd] = h
	}
	h := commandHelp["flash"]
	h.example += "\ntalosflash --flash --role worker --board rpi5 --device /dev/sdc   # a Raspberry Pi 5"
	commandHelp["flash"] = h
	h = commandHelp["schematic"]
	h.about += "\n--installer-yaml prints the role's installer file for its board: a mixed\n" +
		"cluster has one per role and board, talos/installer-ROLE.yaml for the Pi 4\n" +
		"and talos/installer-ROLE-rpi5.yaml for the Pi 5 (inventory check holds each\n" +
		"node's installer: against its board)."
	h.example += "\ntalosflash schematic --role worker --board rpi5 --installer-yaml > talos/installer-worker-rpi5.yaml"
	commandHelp["schematic"] = h
}

// boardUsage is --board's help.
var boardUsage = "board the role is built for: " + strings.Join(factory.BoardNames(), " or ") +
	" (" + factory.BoardRPi4.Model() + ", the default; " + factory.BoardRPi5.Model() + " from Talos " + factory.BoardRPi5.MinTalosVersion() +
	"); with --inventory each node's board: is its own"

// imageFlags are the flags that choose what to flash, shared by flash and schematic.
type imageFlags struct {
	role, board, profiles, version, factoryURL, arch string
	installer, installerFile, image                  string
	format                                           string // factory compression: zst or xz
	allowUnknown                                     bool   // flash --allow-unknown-image
	// imageCache is the flash's image cache directory: a local --image in
	// it is known by its entry's path (plan.Choice.CacheDir).
	imageCache string

	// From flash --inventory --hostname (inventory_flash.go): the nodes the
	// cards are for, which fix the image, and the inventory's Talos version.
	nodes            []inventory.Node
	inventoryVersion string

	settings *plan.Settings // the run's profiles and factory client (load)
	cmd      string         // the command's name, for messages
}

func (f *imageFlags) register(fs *flag.FlagSet) {
	f.cmd = fs.Name()
	fs.StringVar(&f.role, "role", "", "role or profile name: controlplane, worker, or one from --profiles")
	fs.StringVar(&f.board, "board", "", boardUsage)
	fs.StringVar(&f.profiles, "profiles", "", "YAML file with custom profiles (overlay, extensions, kernel args, version)")
	fs.StringVar(&f.version, "version", "", "Talos version, e.g. "+factory.DefaultTalosVersion+" (default: the profile's)")
	fs.StringVar(&f.factoryURL, "factory", factory.DefaultBaseURL, "Image Factory base URL")
	fs.StringVar(&f.arch, "arch", "", "architecture (default arm64)")
	fs.StringVar(&f.installer, "installer", "", "existing installer image, e.g. factory.talos.dev/metal-installer/<id>:"+factory.DefaultTalosVersion)
	fs.StringVar(&f.installerFile, "installer-file", "", "GitOps installer file, e.g. talos/installer-worker.yaml")
	fs.StringVar(&f.format, "format", plan.DefaultFormat, "factory download format: zst or xz")
}

// parseBoard is --board ("" when not given); a typo is bad usage with the
// board it is probably a typo of (its overlay's name too: rpi_5).
func (f *imageFlags) parseBoard() (factory.Board, error) {
	if f.board == "" {
		return "", nil
	}
	b, err := factory.ParseBoard(f.board)
	if err != nil {
		return "", usageErrorf("%s: --board: %v", f.cmd, err)
	}
	return b, nil
}

// load applies the run's defaults once (plan.LoadSettings): --profiles and
// --factory, else those of the inventory (flash --inventory; "" none).
func (f *imageFlags) load(inventoryFile string) (*plan.Settings, error) {
	if f.settings == nil {
		s, err := loadSettings(plan.Defaults{Inventory: inventoryFile, ProfilesFile: f.profiles, FactoryURL: f.factoryURL})
		if err != nil {
			return nil, err
		}
		f.settings = s
	}
	return f.settings, nil
}

// client is the run's Image Factory client (one HTTP client per run,
// which also downloads); the settings are loaded already.
func (f *imageFlags) client() *factory.Client { return f.settings.Factory }

// loadProfiles is the builtin roles, overridden and extended by the user's
// profile file when one is given (plan.LoadSettings).
func loadProfiles(path string) ([]factory.Profile, error) {
	s, err := loadSettings(plan.Defaults{ProfilesFile: path})
	if err != nil {
		return nil, err
	}
	return s.Profiles, nil
}

// resolve turns the flags into exactly one image choice (resolveCards, for
// a choice without several nodes' images).
func (f *imageFlags) resolve(ctx context.Context, register bool) (*plan.Image, plan.Obligations, error) {
	ims, obl, err := f.resolveCards(ctx, register)
	if err != nil {
		return nil, obl, err
	}
	return ims[0], obl, nil
}

// resolveCards turns the flags into the image of each card: plan.ChooseImages
// decides, with the inventory's nodes when flash names them (one image per
// node, nodes of one profile sharing it; without nodes, one image); a
// choice that contradicts them is bad usage (exit 2), refused before
// anything is touched.
func (f *imageFlags) resolveCards(ctx context.Context, register bool) ([]*plan.Image, plan.Obligations, error) {
	s, err := f.load("")
	if err != nil {
		return nil, plan.Obligations{}, err
	}
	board, err := f.parseBoard()
	if err != nil {
		return nil, plan.Obligations{}, err
	}
	if f.image != "" {
		if _, err := os.Stat(f.image); err != nil {
			return nil, plan.Obligations{}, withCode(contract.ExitUsage, fmt.Errorf("image file: %w", err))
		}
	}
	ims, obl, err := plan.ChooseImages(ctx, plan.Choice{
		Role: f.role, InstallerRef: f.installer, InstallerFile: f.installerFile, ImageFile: f.image, Board: board,
		Nodes: f.nodes, Profiles: s.Profiles, Version: f.version, InventoryVersion: f.inventoryVersion,
		Arch: f.arch, Format: f.format, Factory: s.Factory, Register: register, Lookup: true,
		AllowUnknown: f.allowUnknown, CacheDir: f.imageCache,
	})
	return ims, obl, choiceError(err)
}

// doorFlags are the flags that choose an image, as the CLI names plan's doors.
var doorFlags = map[plan.Door]string{
	plan.DoorRole: "--role", plan.DoorInstallerRef: "--installer", plan.DoorInstallerFile: "--installer-file",
	plan.DoorImageFile: "--image", plan.DoorNode: "--hostname",
}

// choiceError renders plan.ChooseImage's refusals with the CLI's flag names
// and exit code 2; other errors (the factory's) keep theirs.
func choiceError(err error) error {
	var (
		conflict *plan.ConflictError
		unknown  *plan.UnknownImageError
	)
	switch {
	case err == nil:
		return nil
	case errors.As(err, &unknown):
		return usageErrorf("flash: %s", unknown.Describe(doorFlags[unknown.Door], "give --allow-unknown-image (its card then names no profile)"))
	case errors.As(err, &conflict):
		return usageErrorf("flash: %s", conflict.Describe(doorFlags[conflict.Door]))
	case plan.IsChoiceError(err):
		return withCode(contract.ExitUsage, err)
	}
	return err
}

type flashFlags struct {
	imageFlags
	devices           deviceList
	yes, jsonOut      bool
	noCache, noVerify bool
	forceNonRemovable bool
	allowLoop         bool
	createFile        bool
	forceRaw          bool
	cacheDir          string
	elevated          bool
	// streams, in the elevated child, is each card's image as its parent
	// sends it on stdin (never a path the child opens; several images:
	// --card-image).
	streams []*elevate.Received
	nodes   nodeFlags // --inventory --hostname (inventory_flash.go)
}

// flashFlagSet is flash's FlagSet, every flag bound to f (the elevated
// child's gate is tested against all of them).
func flashFlagSet(env Env, f *flashFlags) *flag.FlagSet {
	fs := newFlagSet("flash", env)
	f.imageFlags.register(fs)
	fs.StringVar(&f.image, "image", "", "local image file, .raw.xz, .raw.zst, .raw.gz or .raw (no download)")
	fs.BoolVar(&f.allowUnknown, "allow-unknown-image", false, "with --inventory: flash an image talosflash cannot recognise as the node's (a local file of unknown content, a schematic of no profile); its card then names no profile")
	fs.Var(&f.devices, "device", "target block device (e.g. /dev/sdb) or image file; repeat it to write several cards from one download")
	fs.BoolVar(&f.yes, "yes", false, "do not ask to confirm the device (scripts)")
	fs.BoolVar(&f.jsonOut, "json", false, "machine-readable progress: one JSON object per line on stdout")
	fs.BoolVar(&f.noCache, "no-cache", false, "stream the download straight to the card, keep nothing")
	fs.BoolVar(&f.noVerify, "no-verify", false, "skip reading the card back (not recommended)")
	fs.BoolVar(&f.forceNonRemovable, "force-non-removable", false, "allow a disk that is not removable (still never a system disk)")
	fs.BoolVar(&f.allowLoop, "allow-loop", false, "allow a loop device as target (testing)")
	fs.BoolVar(&f.createFile, "create-file", false, "write the image into a new file when --device does not exist (an existing file is written without it; never a bare disk name such as sdb: ./sdb is the file)")
	fs.BoolVar(&f.forceRaw, "force-raw", false, "write an image that does not start like a disk (no MBR/GPT)")
	fs.StringVar(&f.cacheDir, "cache-dir", "", "image cache directory (default: user cache dir)")
	fs.BoolVar(&f.elevated, "elevated", false, "internal: this process is the privileged write step")
	f.nodes.register(fs)
	return fs
}

func runFlash(ctx context.Context, args []string, env Env) error {
	var f flashFlags
	fs := flashFlagSet(env, &f)
	// The root child's gate (elevated.go) runs right after parsing, before
	// the flag checks every command shares: those read files (--profiles)
	// and quote them.
	gate := func() error {
		if !f.elevated && underPkexec() {
			// pkexec runs us as root on any arguments: only the child's.
			return usageErrorf("flash: under pkexec talosflash runs only the elevated write of a flash started by talosflash itself")
		}
		if !f.elevated {
			return nil
		}
		return checkElevated(fs, &f)
	}
	if err := parseFlagsGated(fs, args, gate); err != nil {
		return err
	}
	if len(f.devices) == 0 {
		return usageErrorf("flash: --device is required (list candidates with: talosflash devices)")
	}
	if _, err := f.parseBoard(); err != nil { // a typo never reaches a card or the network
		return err
	}
	// The pipeline's live heap is ~30 MiB and Go's default GC lets the heap
	// grow to twice that: a 40 MiB soft limit keeps the whole process under
	// 64 MiB at no measurable CPU cost (docs/PERFORMANCE.md). The elevated
	// child gets it too (pkexec clears GOMEMLIMIT).
	if os.Getenv("GOMEMLIMIT") == "" {
		defer setMemoryLimit(setMemoryLimit(flashMemoryLimit))
	}
	if f.elevated {
		// The image comes on stdin. The unprivileged parent cannot signal
		// us (we run as root under pkexec); it cancels by closing stdin.
		var cancel context.CancelFunc
		ctx, cancel = context.WithCancel(ctx)
		defer cancel()
		if err := f.receive(ctx, env.Stdin, cancel); err != nil { // inventory_flash.go
			return err
		}
	}

	rep := newFlashPrinter(&f, env)
	defer rep.Finish()
	if err := flash(ctx, &f, env, rep); err != nil {
		return rep.Failed(err)
	}
	return nil
}

// flashMemoryLimit is the Go soft memory limit of a flash (see runFlash).
const flashMemoryLimit = 40 << 20

// setMemoryLimit is debug.SetMemoryLimit (tests watch it).
var setMemoryLimit = debug.SetMemoryLimit

// deviceList is --device, repeatable.
type deviceList []string

func (d *deviceList) String() string { return strings.Join(*d, ",") }

func (d *deviceList) Set(v string) error {
	*d = append(*d, v)
	return nil
}

// flash checks the devices, resolves the image, confirms, and runs the
// shared flash job (app/plan.Flash).
func flash(ctx context.Context, f *flashFlags, env Env, rep flashPrinter) error {
	// A new file only when asked; the root child never creates one
	// (elevated.go: --create-file is not a flag of it).
	// The root child writes block devices only, judged where they are
	// opened (devices.Options.BlockOnly): its gate's stat is advice, a
	// symlink swapped after it names a file by the time of the open.
	opts := devices.Options{ForceNonRemovable: f.forceNonRemovable, AllowLoop: f.allowLoop, CreateFile: f.createFile || f.elevated && ElevatedFileTargets,
		BlockOnly: f.elevated && !ElevatedFileTargets}

	// Safety first, before any download: a refused device costs nothing.
	disks, err := plan.CheckCards(f.devices, opts)
	var twice *plan.CardTwiceError
	switch {
	case errors.As(err, &twice):
		return usageErrorf("flash: %s is named twice in --device", twice.Path)
	case err != nil:
		return err
	}

	if err := f.nodes.chooseImage(&f.imageFlags, len(disks)); err != nil {
		return err
	}
	var (
		im  *plan.Image
		ims []*plan.Image // each card's, with inventory nodes (inventory_flash.go)
		obl plan.Obligations
	)
	if f.elevated {
		if _, err := f.load(""); err != nil { // the factory client's defaults; the child reads no file
			return err
		}
		im = &plan.Image{Label: "the image talosflash sends on stdin"}
	} else {
		f.imageCache = cacheDirOf(f.cacheDir)
		if ims, obl, err = f.resolveCards(ctx, false); err != nil { // plan.Flash registers when it downloads
			return err
		}
	}
	if len(ims) > 0 {
		im = ims[0]
	}
	// Each image's warnings right under its own lines (the Newt warning
	// of a cluster's run is the control plane image's, not the worker's
	// below it), then the decision's own notes.
	said := map[string]bool{}
	for _, one := range distinctImages(im, ims) {
		rep.Info("image: %s", one.Label)
		if one.SchematicID != "" {
			rep.Info("schematic %s, Talos %s, %s", one.SchematicID, one.Version, one.FileName())
		}
		for _, w := range plan.ImageWarnings(one) {
			if !said[w] && slices.Contains(obl.Warnings, w) {
				rep.Warning(w)
				said[w] = true
			}
		}
	}
	for _, w := range obl.Warnings {
		if !said[w] {
			rep.Warning(w)
		}
	}

	if !f.yes {
		for _, disk := range disks {
			if err := confirmDevice(ctx, env.Stdin, env.Stderr, disk.Path, disk.String()); err != nil {
				return err
			}
		}
	}

	var cache *imaging.Cache
	if !f.elevated { // the child writes a given file: no cache of root's to open
		if cache, err = openCache(f.cacheDir); err != nil {
			return err
		}
	}
	job := plan.Job{
		Image: im, Cache: cache, Factory: f.client(),
		NoCache: f.noCache, NoVerify: f.noVerify, ForceRaw: f.forceRaw, Safety: opts,
		Progress: rep.Progress,
		Status:   func(msg string) { rep.Info("%s", msg) },
	}
	if job.Meta, err = f.nodes.metas(ims, f.devices); err != nil {
		return err
	}
	f.cardImages(&job, ims)
	for _, d := range disks {
		job.Devices = append(job.Devices, d.Path)
	}
	if !f.elevated {
		// Only the write step of a card the user cannot open needs more:
		// UDisks2, else the elevated child (plan decides per card).
		job.SetElevation(plan.DefaultElevation(Version))
	}
	out, err := plan.Flash(ctx, job)
	if errors.Is(err, plan.ErrForceRawElevated) {
		// UDisks2 could not open the card, and the child refuses
		// --force-raw: as root it writes any bytes onto a disk.
		return usageErrorf("flash: %v (sudo talosflash --flash ... --force-raw)", err)
	}
	if out == nil {
		return err // nothing written: the image, or the elevated child itself
	}
	// The elevated child reports each card as an event; its parent prints
	// the lines for the user (printed here too, they would show twice).
	summary := !f.elevated
	if len(out.Cards) == 1 && err != nil {
		if f.elevated { // the card's failure, not the child's: its parent keeps the card
			rep.CardError(out.Cards[0].Target, nil, exitCode(err), oneLine(err.Error()))
		}
		return err // one card: its failure is the command's
	}
	rep.Finish()
	var firstErr error
	for i, c := range out.Cards {
		node := job.CardMeta(i)
		if c.Err != nil {
			code := exitCode(c.Err)
			rep.CardError(c.Target, node, code, oneLine(c.Err.Error()))
			if summary {
				rep.Info("%s: FAILED: %s", cardName(c.Target, node), oneLine(c.Err.Error()))
			}
			if firstErr == nil {
				firstErr = withCode(code, err) // the exit code of the first failed card
			}
			continue
		}
		if summary {
			rep.Info("%s", cardLine(c)) // a card that held the image already says so, not "wrote"
			if node != nil {
				rep.Info("%s", cardReady(node))
			}
		}
		rep.Result(resultEvent(c, node, cardImage(im, ims, i)))
	}
	if summary && len(f.nodes.nodes) > 1 {
		rep.Info("%s", nodesSummary(out.Cards, job.Meta))
	}
	if firstErr != nil {
		return firstErr
	}
	if err != nil || !summary {
		return err
	}
	if len(f.nodes.nodes) > 0 {
		rep.Info("%s", f.nodes.nodeNext())
	} else if im.ProfileName() != "" {
		card := "this card"
		if len(disks) > 1 {
			card = "these cards"
		}
		rep.Info("next: label %s %s, boot the Pi from it, then `talosflash nodes` and `talosflash apply --node IP --file %s.yaml` (checked against what the node booted)", card, im.ProfileName(), im.ProfileName())
	}
	return nil
}

// resultEvent is a written card's "result" event (node: what was written
// onto it, nil for none).
func resultEvent(c imaging.CardResult, node *plan.CardMeta, im *plan.Image) contract.ResultEvent {
	ev := contract.NewResultEvent(c)
	ev.Schematic, ev.Version = im.SchematicID, im.Version
	if node != nil {
		ev.Node, ev.Address = node.Node, node.Address
	}
	return ev
}

// cacheDirOf is the directory of the cache a flash uses: --cache-dir,
// else the user's ("" when there is none).
func cacheDirOf(dir string) string {
	if dir != "" {
		return dir
	}
	if c, err := imaging.DefaultCache(); err == nil {
		return c.Dir
	}
	return ""
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
