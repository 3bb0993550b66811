// Package gui is talosflash's Fyne desktop app: pick a role, pick a card,
// flash it, then hand the booted node its machine config. Every decision is
// made by app/plan (the CLI's too) and the library packages below it;
// this package only wires widgets to them and keeps the UI responsive: all
// work runs off the UI goroutine and every widget update goes through
// fyne.Do.
package gui

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os/exec"
	"strings"
	"sync"
	"time"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/app"
	"fyne.io/fyne/v2/canvas"
	"fyne.io/fyne/v2/container"
	"fyne.io/fyne/v2/theme"
	"fyne.io/fyne/v2/widget"

	"github.com/talosflash/talosflash/app/plan"
	"github.com/talosflash/talosflash/assets"
	"github.com/talosflash/talosflash/factory"
	"github.com/talosflash/talosflash/imaging"
	"github.com/talosflash/talosflash/imaging/devices"
	"github.com/talosflash/talosflash/internal/printable"
	"github.com/talosflash/talosflash/inventory"
	"github.com/talosflash/talosflash/node"
)

// AppID is the Fyne application ID (also in FyneApp.toml).
const AppID = "io.github.talosflash"

// Options configure Run (the binary started without arguments).
type Options struct {
	FactoryURL   string         // "" -> factory.DefaultBaseURL
	ProfilesFile string         // user profiles merged over the builtin ones; "" none
	Cache        *imaging.Cache // nil -> imaging.DefaultCache()
	// AllowLoop makes loop devices selectable (`talosflash gui
	// --allow-loop`): the whole flow on a loop device, without a card.
	AllowLoop bool
	// Devices are preselected in step 2 once listed and safe (several:
	// written at once).
	Devices []string
	// Subnets, when set, are what "Scan this network" scans instead of
	// this machine's networks (`talosflash gui --subnet CIDR`).
	Subnets []netip.Prefix
	// Inventory is a talosflash.yaml whose nodes the Nodes step shows and
	// waits for from the start (`talosflash gui --inventory F`).
	Inventory string
	// Version is the app's build version (app/cli.Version): the elevated
	// write runs the cgo-free CLI of this version when one is installed
	// (devices.ElevatedCommandFor); "" re-runs the app itself.
	Version string
}

// Deps are everything the UI talks to. Nil fields get the real
// implementation (see DefaultDeps); tests inject fakes or test servers.
type Deps struct {
	Factory  *factory.Client
	Cache    *imaging.Cache
	Profiles []factory.Profile

	// ListDevices enumerates candidate targets (devices.List).
	ListDevices func() ([]devices.Disk, error)
	// CardHolds says in one line what a card already holds (the node and
	// image talosflash wrote on it; inventory.ReadCardPath), "" when it
	// holds no Talos image or cannot be read (no permission).
	CardHolds func(path string) string
	// Open opens the target for writing with the safety checks
	// (devices.Opener wrapped to imaging.Target).
	Open func(path string, size int64) (imaging.Target, error)
	// NeedsElevation says whether writing path needs root
	// (devices.NeedsElevation); the write then runs in an elevated child.
	NeedsElevation func(path string) bool
	// ElevatedCommand builds the elevated child (devices.ElevatedCommand).
	ElevatedCommand func(args []string) (*exec.Cmd, error)
	// UDisks, when set (Linux), opens the cards for the user before the
	// elevated child is tried (plan.Job.UDisks).
	UDisks *devices.UDisks

	// Apply sends a config (plan.ApplyJob.ApplyConfig; nil: plan's, node.Apply).
	Apply         func(ctx context.Context, opts node.ApplyOptions) (*node.ApplyResult, error)
	Discover      func(ctx context.Context, opts node.DiscoverOptions) ([]node.Node, error)
	Probe         func(ctx context.Context, addr string) (*node.Node, error)
	LocalPrefixes func() ([]netip.Prefix, error)

	// Safety are the device rules (AllowLoop); they reach the elevated child.
	Safety devices.Options
	// Preselect are the cards chosen in step 2 once listed and safe.
	Preselect []string
	// Inventory, when set, lists its nodes in the Nodes step from the
	// start, each waited for at its address (InventoryPort, default 50000;
	// every InventoryEvery, default 3s).
	Inventory      *inventory.Inventory
	InventoryPort  int
	InventoryEvery time.Duration
	// Recheck reads the inventory's files again before "Flash all cards"
	// writes (plan.Settings.Recheck): the app stays open while the user
	// edits them. Nil: the inventory as loaded.
	Recheck func(nodes []inventory.Node) (*plan.Settings, []inventory.Node, error)
	// Eject makes a written card safe to remove (devices.Eject).
	Eject func(ctx context.Context, path string) devices.Ejected

	// PortalOpenFile asks the desktop's file chooser (XDG portal) for a
	// file; ErrNoPortal: the app's own dialog is used (PortalOpenFile).
	PortalOpenFile func(ctx context.Context, req FileRequest) (string, error)

	// DeviceEvents says when a block device appeared, went or changed
	// (BlockEvents: kernel uevents); the list is then read again. A nil
	// channel: no events, the list is polled while step 2 is shown.
	DeviceEvents func(ctx context.Context) <-chan struct{}
	// RefreshEvery is the device list polling interval while step 2 is
	// shown and there are no device events; 0 -> 2 s, negative: never.
	RefreshEvery time.Duration
}

// DefaultDeps builds the real dependencies from opts.
func DefaultDeps(opts Options) (Deps, error) {
	// The inventory's defaults (factory:, profiles:) as the CLI takes them.
	settings, err := plan.LoadSettings(plan.Defaults{Inventory: opts.Inventory, ProfilesFile: opts.ProfilesFile,
		FactoryURL: opts.FactoryURL, HTTPClient: factory.NewHTTPClient()})
	var unusable *plan.InventoryError
	switch {
	case errors.As(err, &unusable):
		return Deps{}, fmt.Errorf("inventory: %w", err)
	case err != nil:
		return Deps{}, err
	}
	cache := opts.Cache
	if cache == nil {
		c, err := imaging.DefaultCache()
		if err != nil {
			return Deps{}, err
		}
		cache = c
	}
	elevation := plan.DefaultElevation(opts.Version) // the root decision, the CLI's
	d := Deps{Factory: settings.Factory, Cache: cache, Profiles: settings.Profiles, Inventory: settings.Inventory,
		Safety: devices.Options{AllowLoop: opts.AllowLoop}, Preselect: opts.Devices,
		NeedsElevation: elevation.Needs, ElevatedCommand: elevation.Command, UDisks: elevation.UDisks, Recheck: settings.Recheck}
	if len(opts.Subnets) > 0 {
		subnets := opts.Subnets
		d.LocalPrefixes = func() ([]netip.Prefix, error) { return subnets, nil }
	}
	d.fill()
	return d, nil
}

// fill sets the real implementation for every nil field.
func (d *Deps) fill() {
	if d.Factory == nil {
		s, _ := plan.LoadSettings(plan.Defaults{HTTPClient: factory.NewHTTPClient()}) // no file named: no error
		d.Factory = s.Factory
	}
	if len(d.Profiles) == 0 {
		d.Profiles = factory.BuiltinProfiles()
	}
	if d.ListDevices == nil {
		d.ListDevices = devices.List
	}
	if d.CardHolds == nil {
		d.CardHolds = readCardSummary
	}
	if d.Open == nil {
		d.Open = plan.DeviceOpener(d.Safety)
	}
	elevation := plan.DefaultElevation("")
	if d.NeedsElevation == nil {
		d.NeedsElevation = elevation.Needs
	}
	if d.ElevatedCommand == nil {
		d.ElevatedCommand = elevation.Command
	}
	if d.Eject == nil {
		d.Eject = devices.Eject
	}
	if d.Discover == nil {
		d.Discover = node.Discover
	}
	if d.Probe == nil {
		d.Probe = node.Probe
	}
	if d.LocalPrefixes == nil {
		d.LocalPrefixes = node.LocalPrefixes
	}
	if d.PortalOpenFile == nil {
		d.PortalOpenFile = PortalOpenFile
	}
	if d.DeviceEvents == nil {
		d.DeviceEvents = BlockEvents
	}
	if d.RefreshEvery == 0 {
		d.RefreshEvery = 2 * time.Second
	}
}

// Run starts the desktop app and blocks until its window is closed.
func Run(opts Options) error {
	deps, err := DefaultDeps(opts)
	if err != nil {
		return err
	}
	a := app.NewWithID(AppID)
	ui := New(a, deps)
	ui.Window.ShowAndRun()
	ui.Close()
	return nil
}

// UI is the one window of the app.
type UI struct {
	Window fyne.Window
	deps   Deps

	ctx    context.Context // ends when the window closes
	cancel context.CancelFunc

	// uiMu serializes widget updates from background goroutines (via do)
	// with each other; the GL driver already runs them on one goroutine,
	// the test driver runs them inline.
	uiMu sync.Mutex

	tabs  *container.AppTabs
	modal *modal // the dialog shown now, nil when none

	choosing bool                // a file chooser (portal or fallback) is open
	chooser  *fileChooser        // the fallback chooser shown now, nil when none
	folders  map[fileKind]string // the folder each kind of file was chosen from last in this window

	// session is the state the steps share (they observe it, not each
	// other's widgets).
	session *Session

	image  *imageStep
	target *targetStep
	flash  *flashStep
	nodes  *nodesStep
}

// The window's minimum size: every step's text and buttons fit.
const (
	MinWidth  = 820
	MinHeight = 600
)

// Tab indexes of the steps.
const (
	tabImage = iota
	tabTarget
	tabFlash
	tabNodes
)

// New builds the window (not shown yet). Call Close when done (Run does).
func New(a fyne.App, deps Deps) *UI {
	deps.fill()
	quietFavoritesLog()
	icon := fyne.NewStaticResource("icon.png", assets.Icon)
	a.SetIcon(icon)
	a.Settings().SetTheme(appTheme{theme.DefaultTheme()})
	w := a.NewWindow("talosflash: Talos Linux for Raspberry Pi")
	w.SetIcon(icon)

	ui := &UI{Window: w, deps: deps, session: NewSession(deps.Factory, deps.Profiles)}
	ui.ctx, ui.cancel = context.WithCancel(context.Background())

	ui.image = newImageStep(ui)
	ui.target = newTargetStep(ui)
	ui.flash = newFlashStep(ui)
	ui.nodes = newNodesStep(ui)

	ui.tabs = container.NewAppTabs(
		container.NewTabItem("1  Image", ui.image.content),
		container.NewTabItem("2  Card", ui.target.content),
		container.NewTabItem("3  Flash", ui.flash.content),
		container.NewTabItem("4  Nodes", ui.nodes.content),
	)
	ui.tabs.OnSelected = func(*container.TabItem) {
		ui.target.setVisible(ui.tabs.SelectedIndex() == tabTarget)
		switch ui.tabs.SelectedIndex() {
		case tabTarget:
			ui.target.Refresh() // a card may have been swapped
		}
		// Enter: the step's primary button. On the Nodes step typing an IP
		// goes to its field (typedRune) without focusing it first: a
		// focused field's blinking cursor redraws the window 60 times a
		// second (4 % of a core with software GL, docs/PERFORMANCE.md).
		w.Canvas().Unfocus()
	}
	// The window pads its content: the content's minimum is the window's
	// less the padding, so the window's is MinWidth x MinHeight.
	pad := 2 * theme.Padding()
	w.SetContent(minSize(ui.tabs, MinWidth-pad, MinHeight-pad))
	w.Resize(fyne.NewSize(1000, 700))
	w.Canvas().SetOnTypedKey(ui.typedKey)
	w.Canvas().SetOnTypedRune(ui.typedRune)
	ui.addTabShortcuts()
	w.SetOnDropped(ui.HandleDrop)
	w.SetOnClosed(ui.Close)

	ui.image.selectFirst()
	ui.target.start()
	return ui
}

// Close stops background work (device polling, flashes, scans).
func (ui *UI) Close() { ui.cancel() }

// do runs fn on the UI goroutine (fyne.Do), serialized with other updates.
func (ui *UI) do(fn func()) {
	fyne.Do(func() {
		ui.uiMu.Lock()
		defer ui.uiMu.Unlock()
		fn()
	})
}

// showError shows err as a dialog: what failed, why, and what to do.
// Call on the UI goroutine.
func (ui *UI) showError(title string, err error) {
	msg := errorText(err)
	if hint := errorHint(err); hint != "" {
		msg += "\n\n" + hint
	}
	ui.showModal(title, container.NewVScroll(wrapLabel(msg)), "Close", nil, fyne.NewSize(620, 260))
}

// errorText is the error with the first letter capitalized, escaped.
func errorText(err error) string {
	if s := errString(err); s != "" {
		return sentence(s)
	}
	return "unknown error"
}

// errString is err's text for a label, escaped (printable.Lines): an error
// may quote a file the user did not write (a YAML line), the factory's or
// a node's answer, a card's partition names or a card reader's model.
// Every error text the app shows goes through it (TestGUIShowsErrorsOnlyEscaped).
func errString(err error) string {
	return printable.Lines(err.Error())
}

// sentence capitalizes a library's lower-case message for display.
func sentence(msg string) string {
	if msg == "" {
		return msg
	}
	return strings.ToUpper(msg[:1]) + msg[1:]
}

// errorHint says what the user can do about the common failures.
func errorHint(err error) string {
	var elev *devices.ElevationError
	var refused *devices.RefusedError
	var ioErr *devices.IOError
	var fhttp *factory.HTTPError
	var cfgErr *node.ConfigError
	var id *plan.IdentityError
	var role *plan.RoleMismatchError
	var noConfig *plan.NoConfigError
	switch {
	case errors.As(err, &noConfig):
		return "Add the config: lines it names to the inventory and start talosflash again, or drop each node's config on its row."
	case errors.As(err, &role): // no "send anyway": the config would make the node another role's machine
		if role.Want != "" {
			return "Choose " + role.Want + " for " + role.Name + " instead (\"Choose config…\" or drop it on the row)."
		}
		return "Choose the " + string(role.Role) + ".yaml that talosctl gen config wrote for this node instead."
	case errors.As(err, &id): // the node, not the file: before the config errors it also is
		if id.WrongImage() {
			return "In step 1 choose Node " + id.Want.Hostname + ", flash its card, and boot the Pi from it again. The config is fine."
		}
		return "Put each card in its own Pi: `talosflash card DEVICE` (or the card list in step 2) says which node a card is for. The config is fine."
	case errors.Is(err, context.Canceled):
		return "The operation was cancelled."
	case errors.As(err, &elev):
		return "Run this in a terminal:\n" + elev.Command
	case errors.As(err, &refused):
		return "Pick another card in step 2. talosflash never writes to system or fixed disks."
	case errors.Is(err, imaging.ErrVerifyMismatch):
		return "The card did not read back what was written: it is probably faulty or counterfeit. Try another card."
	case errors.As(err, &ioErr):
		return "Check that the card is inserted and not write-protected, then flash again."
	case errors.Is(err, imaging.ErrIncomplete):
		return "The card is incomplete and will not boot. Flash it again."
	case errors.Is(err, factory.ErrUnreachable):
		return "The Image Factory is unreachable: cached images and local image files (step 1) still work."
	case errors.Is(err, imaging.ErrNotFound), errors.As(err, &fhttp):
		return "Check the Talos version and the schematic in step 1, and that the Image Factory is reachable."
	case errors.As(err, &cfgErr), errors.Is(err, node.ErrInvalidConfig):
		return "Fix the file (it should be the controlplane.yaml / worker.yaml from `talosctl gen config`) and drop it again."
	case errors.Is(err, node.ErrNetwork):
		return "Check that the node is powered on, booted from the card and on this network (port 50000)."
	case errors.Is(err, node.ErrRefused):
		return "The node rejected the config; read its message above, fix the file and try again."
	}
	return ""
}

// wrapLabel is a word-wrapping label.
func wrapLabel(text string) *widget.Label {
	l := widget.NewLabel(text)
	l.Wrapping = fyne.TextWrapWord
	return l
}

// heading is a bold label.
func heading(text string) *widget.Label {
	return widget.NewLabelWithStyle(text, fyne.TextAlignLeading, fyne.TextStyle{Bold: true})
}

func errf(format string, args ...any) error { return fmt.Errorf(format, args...) }

// canvasCard is the rounded background of a list row.
func canvasCard() fyne.CanvasObject {
	r := canvas.NewRectangle(theme.Color(theme.ColorNameInputBackground))
	r.CornerRadius = theme.Size(theme.SizeNameInputRadius)
	return r
}

// readCardSummary reads a card's partition table and META, read-only and
// bounded, for the card list.
func readCardSummary(path string) string {
	rep, _, err := inventory.ReadCardPath(path)
	if err != nil {
		return ""
	}
	return rep.Summary()
}
