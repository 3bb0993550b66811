package node

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/blang/semver/v4"
	"github.com/cosi-project/runtime/pkg/resource"
	"github.com/cosi-project/runtime/pkg/safe"
	"github.com/siderolabs/image-factory/pkg/schematic"
	"github.com/siderolabs/talos/pkg/machinery/api/common"
	"github.com/siderolabs/talos/pkg/machinery/api/machine"
	"github.com/siderolabs/talos/pkg/machinery/client"
	"github.com/siderolabs/talos/pkg/machinery/constants"
	"github.com/siderolabs/talos/pkg/machinery/resources/network"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/talosflash/talosflash/factory"
)

// Upgrade errors.
var (
	// ErrNoSchematic: the node does not say which schematic it booted, so
	// its own installer cannot be built; talosflash never falls back to the
	// generic installer (no Raspberry Pi overlay, no extensions).
	ErrNoSchematic = errors.New("the node does not report its Image Factory schematic")
	// ErrExtensionMissing: the target version lacks one of the node's extensions.
	ErrExtensionMissing = errors.New("extension not available for the target version")
	// ErrDowngrade: the target version is older than the running one.
	ErrDowngrade = errors.New("talosflash does not downgrade")
	// ErrUpgradeFailed: the installer ran and failed, or the node came back
	// wrong; errors.Is(err, ErrRefused) too (exit 8).
	ErrUpgradeFailed error = refusal("upgrade failed")
	// ErrNotHealthy: the node did not become healthy (running, ready)
	// within the wait before its upgrade; nothing was sent.
	// errors.Is(err, ErrRefused) too (exit 8).
	ErrNotHealthy error = refusal("not healthy before the upgrade")
	// ErrOtherNode: the node at the address says it is another than the one
	// meant (UpgradeOptions.Hostname); nothing was sent. It fails the
	// checks, as apply --inventory's identity: errors.Is(err, ErrInvalidConfig) (exit 7).
	ErrOtherNode error = invalidConfig("another node answers there")
	// ErrExtensionConfigMissing: the installer's image has an extension
	// the node does not run now and whose ExtensionServiceConfig its config
	// lacks: after the reboot the service waits for it, the node stays
	// booting and reboots every BootTimeout (the incident). Nothing was
	// sent. It fails the incident checks: errors.Is(err, ErrInvalidConfig) (exit 7).
	ErrExtensionConfigMissing error = invalidConfig("the image's extension has no ExtensionServiceConfig in the node's config")
)

// refusal is a sentinel that also matches ErrRefused.
type refusal string

func (r refusal) Error() string        { return string(r) }
func (r refusal) Is(target error) bool { return target == ErrRefused }

// UpgradeOptions configure Upgrade.
type UpgradeOptions struct {
	To      string          // target Talos version, e.g. v1.14.6
	Factory *factory.Client // builds the installer reference (registry host) and checks it exists
	DryRun  bool            // plan and check only: nothing is sent to the node
	Wait    WaitOptions     // waiting for the node before and after the reboot
	// OnPlan, if set, gets the checked plan before anything is sent (to show it).
	OnPlan func(*UpgradeResult)
	// Schematic, when set, is the schematic whose installer is used (a
	// cluster's role image, e.g. from the inventory): the node is upgraded
	// to it, and must come back with it, whatever it booted, unless it
	// brings an extension whose ExtensionServiceConfig the node's config
	// lacks (ErrExtensionConfigMissing). Nil: the schematic the node booted.
	Schematic *schematic.Schematic
	// Hostname, when set, is the node meant (an inventory's): the node at
	// the address must say it is that host, compared as Talos splits an
	// FQDN (Node.IsHost), or nothing is sent (ErrOtherNode).
	Hostname string
	// BeforeReboot, when set, runs once the new version is installed and
	// before the node is rebooted (talosctl v1.14's --drain goes there:
	// cmd/talosctl/cmd/talos/upgrade.go drains after the installer ran); on
	// the legacy API, which reboots by itself, before MachineService.Upgrade.
	// Its error stops the upgrade with the node not rebooted.
	BeforeReboot func(ctx context.Context, res *UpgradeResult) error
}

// UpgradeResult is the plan and, unless a dry run, what happened.
type UpgradeResult struct {
	Endpoint    string
	From, To    string
	Booted      *Booted // what the node booted (its schematic)
	Image       string  // the installer: <factory host>/metal-installer/<schematic>:<To>
	SchematicID string  // the installer's schematic: the node's booted one, or UpgradeOptions.Schematic's
	Digest      string  // the installer's digest as the factory named it ("" if not said)
	API         string  // "LifecycleService" (Talos >= 1.13) or "MachineService.Upgrade" (older)
	UpToDate    bool    // already runs To: nothing to do
	DryRun      bool
	Rebooted    bool
	Healthy     bool   // back on To with its services healthy
	BootedAfter string // schematic ID after the reboot
	// What was sent and done (see State): Phase is the furthest step
	// reached; the flags say what the node received for certain.
	Phase           string
	InstallerPulled bool
	InstallerRun    bool // the installer ran and exited 0 (MachineService.Upgrade: accepted)
	RebootRequested bool
	unanswered      string // a request sent without an answer (cut by ctx)
}

// lifecycleRange is where talosctl v1.14 uses LifecycleService.Upgrade
// (cmd/talosctl/cmd/talos/upgrade.go talosUpgradeAPIVersionRange); below
// it, MachineService.Upgrade. A pre-release such as v1.13.0-beta.1 is in it.
var lifecycleRange = semver.MustParseRange(">1.13.0-alpha.2 <2.0.0")

// UsesLifecycleService reports whether talosctl v1.14 upgrades a node
// running version with LifecycleService.Upgrade.
func UsesLifecycleService(version string) bool {
	v, err := parseTalosVersion(version)
	return err == nil && lifecycleRange(v)
}

func parseTalosVersion(v string) (semver.Version, error) {
	if !strings.HasPrefix(v, "v") {
		return semver.Version{}, fmt.Errorf("version %q: want a Talos version vX.Y.Z", v)
	}
	sv, err := semver.Parse(v[1:])
	if err != nil {
		return semver.Version{}, fmt.Errorf("version %q: want a Talos version vX.Y.Z", v)
	}
	return sv, nil
}

// PlanUpgrade connects with the talosconfig, reads the node's version and
// the schematic it booted, builds that schematic's installer for opts.To
// and checks the factory has it. Nothing is sent to the node.
func PlanUpgrade(ctx context.Context, endpoint string, tc *Talosconfig, opts UpgradeOptions) (*UpgradeResult, error) {
	res, s, err := planUpgrade(ctx, endpoint, tc, opts)
	if s != nil {
		s.Close()
	}
	return res, err
}

func planUpgrade(ctx context.Context, endpoint string, tc *Talosconfig, opts UpgradeOptions) (*UpgradeResult, *session, error) {
	opts.Wait = opts.Wait.withDefaults()
	if tc == nil {
		return nil, nil, fmt.Errorf("upgrade: %w: none given", ErrTalosconfig)
	}
	if opts.Factory == nil {
		return nil, nil, errors.New("upgrade: no Image Factory client")
	}
	to, err := parseTalosVersion(opts.To)
	if err != nil {
		return nil, nil, err
	}
	s, err := dialSecure(ctx, endpoint, tc)
	if err != nil {
		return nil, nil, err
	}
	s.timeout = opts.Wait.CallTimeout
	res := &UpgradeResult{Endpoint: s.endpoint, To: opts.To, DryRun: opts.DryRun}

	cctx, cancel := context.WithTimeout(ctx, opts.Wait.CallTimeout)
	defer cancel()
	v, err := s.c.Version(cctx)
	if err != nil {
		return res, s, fmt.Errorf("upgrade: %w", s.err(cctx, "version request", err))
	}
	if len(v.GetMessages()) > 0 {
		res.From = v.GetMessages()[0].GetVersion().GetTag()
	}
	from, err := parseTalosVersion(res.From)
	if err != nil {
		return res, s, fmt.Errorf("upgrade: the node reports %w", err)
	}
	res.API = "LifecycleService"
	if !lifecycleRange(from) {
		res.API = "MachineService.Upgrade"
	}
	res.Booted, err = readBooted(cctx, s.c)
	if err != nil {
		return res, s, fmt.Errorf("upgrade: %w", s.err(cctx, "extension status request", err))
	}
	if res.Booted == nil || res.Booted.SchematicID == "" {
		return res, s, fmt.Errorf("%w (%s runs an image without factory extension statuses); refusing to guess an installer: "+
			"run talosctl upgrade --image with the installer from your talos/installer-<role>.yaml", ErrNoSchematic, s.endpoint)
	}
	if res.Booted.SchematicID == factory.EmptySchematicID {
		return res, s, fmt.Errorf("%w (%s booted the empty schematic: its installer is the generic one, without the Raspberry Pi overlay); "+
			"refusing to upgrade with it: run talosctl upgrade --image with the installer from your talos/installer-<role>.yaml", ErrNoSchematic, s.endpoint)
	}
	if opts.Hostname != "" {
		if err := s.isHost(cctx, opts.Hostname); err != nil {
			return res, s, err
		}
	}
	res.SchematicID = res.Booted.SchematicID
	if opts.Schematic != nil {
		if res.SchematicID, err = factory.SchematicID(opts.Schematic); err != nil {
			return res, s, fmt.Errorf("upgrade %s: the role's schematic: %w", s.endpoint, err)
		}
		if res.SchematicID != res.Booted.SchematicID {
			if err := s.checkNewExtensions(cctx, opts.Schematic, res.Booted); err != nil {
				return res, s, err
			}
		}
	}
	switch {
	case to.EQ(from) && res.SchematicID == res.Booted.SchematicID:
		res.UpToDate = true
		return res, s, nil
	case to.LT(from):
		return res, s, fmt.Errorf("upgrade %s: %s is older than the running %s: %w", s.endpoint, opts.To, res.From, ErrDowngrade)
	}
	if err := checkTargetExtensions(ctx, opts, res); err != nil {
		return res, s, err
	}
	ref := factory.NewInstallerRef(opts.Factory.RegistryHost(), res.SchematicID, opts.To)
	res.Image = ref.String()
	opts.Wait.Progress(fmt.Sprintf("%s: checking %s on the factory (a first request builds it, this can take minutes)", s.endpoint, res.Image))
	res.Digest, err = opts.Factory.InstallerDigest(ctx, ref)
	if err != nil {
		return res, s, fmt.Errorf("upgrade %s: %w", s.endpoint, err)
	}
	return res, s, nil
}

// isHost refuses a node that says it is another than want (its
// HostnameStatus, as Talos splits an FQDN).
func (s *session) isHost(ctx context.Context, want string) error {
	h, err := safe.StateGet[*network.HostnameStatus](ctx, s.c.COSI, resource.NewMetadata(network.NamespaceName, network.HostnameStatusType, network.HostnameID, resource.VersionUndefined))
	if err != nil {
		return fmt.Errorf("upgrade %s: %w: %s's hostname cannot be read to check it is %s (%v); nothing was sent", s.endpoint, ErrOtherNode, s.endpoint, want, s.err(ctx, "hostname request", err))
	}
	if err := CheckHost(s.endpoint, want, h.TypedSpec().Hostname, h.TypedSpec().Domainname); err != nil {
		return fmt.Errorf("upgrade %s: %w", s.endpoint, err)
	}
	return nil
}

// CheckHost is the identity rule of a configured node meant by name (an
// inventory's): the node at endpoint, which reports host and domain
// (HostnameStatus), is want when Node.IsHost says so; else ErrOtherNode.
func CheckHost(endpoint, want, host, domain string) error {
	n := Node{Hostname: printable(host, maxName), Domainname: printable(domain, maxName)}
	if n.IsHost(want) {
		return nil
	}
	return fmt.Errorf("%w: the node at %s says it is %q, not %s; nothing was sent (put each card in its own Pi, or correct the inventory's address)",
		ErrOtherNode, endpoint, n.FQDN(), want)
}

// checkNewExtensions refuses an installer whose image brings an extension
// the node does not run now (booted) and whose ExtensionServiceConfig its
// running config lacks: the incident, at the next boot. The config is read
// (os:admin, as the upgrade needs) only then.
func (s *session) checkNewExtensions(ctx context.Context, target *schematic.Schematic, booted *Booted) error {
	has := schematicHas(target)
	var added []ServiceExtension
	for _, se := range serviceExtensions {
		if has(se.Extension) && !booted.HasExtension(se.Extension) {
			added = append(added, se)
		}
	}
	if len(added) == 0 {
		return nil
	}
	data, err := readMachineConfig(ctx, s)
	if err != nil {
		return fmt.Errorf("upgrade %s: %w: the installer's image adds %s, and the node's config cannot be read to check it has its ExtensionServiceConfig (%v); nothing was sent",
			s.endpoint, ErrExtensionConfigMissing, added[0].Extension, err)
	}
	cfg, err := LoadConfig(data)
	if err != nil {
		return fmt.Errorf("upgrade %s: %w: the installer's image adds %s, and the node's config cannot be checked (%v); nothing was sent", s.endpoint, ErrExtensionConfigMissing, added[0].Extension, err)
	}
	for _, se := range added {
		if !cfg.HasExtensionService(se.ConfigName) {
			return fmt.Errorf("upgrade %s: %w: the installer's image adds %s, which the node (%s) does not run now, but its config has no ExtensionServiceConfig named %q: "+
				"after the reboot the %s service waits for it, the node stays booting and reboots every BootTimeout (%d min); nothing was sent. "+
				"Is this the node you mean? Add the document first (talosflash patch --replace-document ExtensionServiceConfig/%s FILE), or flash or upgrade it with the image it should run",
				s.endpoint, ErrExtensionConfigMissing, se.Extension, booted, se.ConfigName, se.ConfigName, int(constants.BootTimeout.Minutes()), se.ConfigName)
		}
	}
	return nil
}

// checkTargetExtensions refuses a target version the factory offers without one
// of the node's extensions: the installer would drop it (for Newt: the
// tunnel, for an ExtensionServiceConfig-dependent extension: worse).
func checkTargetExtensions(ctx context.Context, opts UpgradeOptions, res *UpgradeResult) error {
	sc := res.Booted.Schematic
	if opts.Schematic != nil {
		sc = opts.Schematic
	}
	if sc == nil {
		return nil // the node's Talos does not carry the schematic YAML: the factory's build decides
	}
	want := sc.Customization.SystemExtensions.OfficialExtensions
	if len(want) == 0 {
		return nil
	}
	offered, err := opts.Factory.Extensions(ctx, opts.To)
	if errors.Is(err, factory.ErrUnknownVersion) {
		return fmt.Errorf("upgrade %s: %w: the factory at %s does not offer Talos %s", res.Endpoint, factory.ErrInstallerMissing, opts.Factory.BaseURL(), opts.To)
	}
	if err != nil {
		return fmt.Errorf("upgrade %s: %w", res.Endpoint, err)
	}
	var missing []string
	for _, w := range want {
		found := false
		for _, o := range offered {
			found = found || o.Name == w
		}
		if !found {
			missing = append(missing, w)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("%w: %s not offered for %s by %s: the upgraded node would lose %s",
			ErrExtensionMissing, strings.Join(missing, ", "), opts.To, opts.Factory.BaseURL(), strings.Join(missing, ", "))
	}
	return nil
}

// Upgrade upgrades one node to opts.To with the installer of the schematic
// it booted (never the generic installer): PlanUpgrade, then on Talos >=
// 1.13 what talosctl v1.14 does (ImageService.Pull, LifecycleService.Upgrade,
// Reboot), on older Talos MachineService.Upgrade (which reboots by itself);
// then it waits for the node to come back (new boot ID, stage running and
// ready, version To, services healthy) and checks it booted the same schematic.
func Upgrade(ctx context.Context, endpoint string, tc *Talosconfig, opts UpgradeOptions) (*UpgradeResult, error) {
	opts.Wait = opts.Wait.withDefaults()
	res, s, err := planUpgrade(ctx, endpoint, tc, opts)
	if s != nil {
		defer s.Close()
	}
	if err != nil || res.UpToDate || opts.DryRun {
		return res, err
	}
	res.Phase = PhaseNothingSent
	if opts.OnPlan != nil {
		opts.OnPlan(res)
	}
	// A Ctrl-C at any step says what was sent and where the node is.
	parent := ctx
	stopped := func(err error) error {
		if ie := interruption(parent, "upgrade", s.endpoint, res.State); ie != nil {
			return ie
		}
		return err
	}
	progress := func(format string, args ...any) {
		opts.Wait.Progress(s.endpoint + ": " + fmt.Sprintf(format, args...))
	}
	// Never take down a node that is not healthy yet (e.g. still starting
	// after the previous step): wait for it first, within the same bound.
	progress("waiting until the node is healthy before its upgrade (up to %s)", opts.Wait.Timeout.Round(time.Second))
	pctx, pcancel := context.WithTimeout(ctx, opts.Wait.Timeout)
	err = s.waitHealthy(pctx, opts.Wait, res.From)
	pcancel()
	if err != nil {
		return res, stopped(fmt.Errorf("upgrade %s: %w, nothing sent: %w", s.endpoint, ErrNotHealthy, err))
	}
	bootID, err := s.bootID(ctx, opts.Wait)
	if err != nil {
		return res, stopped(fmt.Errorf("upgrade %s: read boot ID: %w", s.endpoint, err))
	}

	wctx, wcancel := context.WithTimeout(ctx, opts.Wait.Timeout)
	defer wcancel()
	if res.API == "LifecycleService" {
		err = s.lifecycleUpgrade(wctx, res, progress)
		if status.Code(err) == codes.Unimplemented && !res.InstallerRun {
			res.API = "MachineService.Upgrade"
		} else if err != nil {
			return res, stopped(err)
		}
	}
	if res.API == "MachineService.Upgrade" {
		if opts.BeforeReboot != nil {
			if err := opts.BeforeReboot(ctx, res); err != nil {
				return res, stopped(err)
			}
		}
		progress("MachineService.Upgrade with %s", res.Image)
		if ctx.Err() != nil {
			return res, stopped(ctx.Err())
		}
		cctx, cancel := context.WithTimeout(ctx, opts.Wait.CallTimeout)
		//lint:ignore SA1019 the legacy API is the only one Talos < 1.13 has (talosctl falls back the same way)
		_, err := s.c.UpgradeWithOptions(cctx, client.WithUpgradeImage(res.Image))
		cancel()
		if err != nil {
			// The node answers MachineService.Upgrade before its installer
			// starts: an answer with an error means nothing runs. Only a
			// request without an answer may have started it.
			if unanswered(err) {
				res.Phase, res.unanswered = PhaseInstallerSent, "upgrade"
			}
			return res, stopped(fmt.Errorf("upgrade %s: %w", s.endpoint, s.err(cctx, "upgrade", err)))
		}
		// It installs and reboots by itself.
		res.Phase, res.InstallerRun, res.RebootRequested = PhaseRebootRequested, true, true
	} else {
		if opts.BeforeReboot != nil {
			if err := opts.BeforeReboot(ctx, res); err != nil {
				return res, stopped(err)
			}
		}
		progress("rebooting into the new installation")
		if ctx.Err() != nil {
			return res, stopped(ctx.Err())
		}
		cctx, cancel := context.WithTimeout(ctx, opts.Wait.CallTimeout)
		_, err := s.c.RebootWithResponse(cctx)
		cancel()
		if err != nil {
			res.unanswered = "reboot"
			return res, stopped(fmt.Errorf("upgrade %s: reboot: %w", s.endpoint, s.err(cctx, "reboot", err)))
		}
		res.Phase, res.RebootRequested = PhaseRebootRequested, true
	}

	err = poll(wctx, opts.Wait, func(ctx context.Context) (bool, string, error) {
		id, err := s.bootID(ctx, opts.Wait)
		if err != nil {
			return false, s.endpoint + ": rebooting (API not answering)", nil
		}
		if id != bootID {
			return true, s.endpoint + ": boot ID changed", nil
		}
		return false, s.endpoint + ": waiting for the reboot", nil
	})
	if err != nil {
		return res, stopped(fmt.Errorf("upgrade %s: the reboot was requested but the node did not come back with a new boot ID: %w", s.endpoint, err))
	}
	res.Rebooted, res.Phase = true, PhaseRebooted
	progress("rebooted; waiting for it to be ready")
	if err := s.waitHealthy(wctx, opts.Wait, opts.To); err != nil {
		return res, stopped(fmt.Errorf("upgrade %s: %w", s.endpoint, err))
	}
	cctx, cancel := context.WithTimeout(ctx, opts.Wait.CallTimeout)
	defer cancel()
	after, err := readBooted(cctx, s.c)
	if err != nil {
		return res, stopped(fmt.Errorf("upgrade %s: %w", s.endpoint, s.err(cctx, "extension status request", err)))
	}
	if after != nil {
		res.BootedAfter = after.SchematicID
	}
	if res.BootedAfter != res.SchematicID {
		return res, fmt.Errorf("%w: %s came back with schematic %q, not %s", ErrUpgradeFailed, s.endpoint, res.BootedAfter, res.SchematicID)
	}
	res.Healthy, res.Phase = true, PhaseHealthy
	progress("running %s, schematic %s, services healthy", opts.To, factory.ShortID(res.BootedAfter))
	return res, nil
}

// lifecycleUpgrade pulls the installer into the system containerd and runs
// it through LifecycleService.Upgrade, as talosctl v1.14 does.
// It records in res how far it got.
func (s *session) lifecycleUpgrade(ctx context.Context, res *UpgradeResult, progress func(string, ...any)) error {
	image := res.Image
	ctr := &common.ContainerdInstance{Driver: common.ContainerDriver_CRI, Namespace: common.ContainerdNamespace_NS_SYSTEM}
	progress("pulling %s", image)
	if ctx.Err() != nil {
		return ctx.Err()
	}
	pull, err := s.c.ImageClient.Pull(ctx, &machine.ImageServicePullRequest{Containerd: ctr, ImageRef: image})
	if err != nil {
		return fmt.Errorf("upgrade %s: pull: %w", s.endpoint, s.err(ctx, "image pull", err))
	}
	res.Phase = PhasePullSent
	for {
		m, err := pull.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return fmt.Errorf("upgrade %s: pull: %w", s.endpoint, s.err(ctx, "image pull", err))
		}
		if name := m.GetName(); name != "" {
			progress("pulled %s", name)
		}
	}
	res.Phase, res.InstallerPulled = PhasePulled, true
	progress("LifecycleService.Upgrade with %s", image)
	if ctx.Err() != nil {
		return ctx.Err()
	}
	up, err := s.c.LifecycleClient.Upgrade(ctx, &machine.LifecycleServiceUpgradeRequest{Containerd: ctr,
		Source: &machine.InstallArtifactsSource{ImageName: image}})
	if err != nil {
		return fmt.Errorf("upgrade %s: %w", s.endpoint, err)
	}
	res.Phase = PhaseInstallerSent
	exit, last := int32(-1), ""
	for {
		m, err := up.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			if status.Code(err) == codes.Unimplemented {
				return fmt.Errorf("upgrade %s: %w", s.endpoint, err)
			}
			if notInStore(err) {
				// The node answered before any installer ran
				// (internal/app/lifecycle/container.go: containerd's
				// GetImage failed): nothing installed, nothing to reboot.
				res.Phase = PhasePulled
				return fmt.Errorf("%w: %s: the node has no installer image %s in its containerd store (pulled, then gone: pull again); nothing was installed and the node was not rebooted", ErrUpgradeFailed, s.endpoint, image)
			}
			return fmt.Errorf("upgrade %s: %w", s.endpoint, s.err(ctx, "upgrade", err))
		}
		switch p := m.GetProgress().GetResponse().(type) {
		case *machine.LifecycleServiceInstallProgress_Message:
			last = oneLine(p.Message) // installer output (paths, images), not config
			progress("installer: %s", last)
		case *machine.LifecycleServiceInstallProgress_ExitCode:
			exit = p.ExitCode
		}
	}
	switch exit {
	case 0:
		res.Phase, res.InstallerRun = PhaseInstalled, true
		return nil
	case -1:
		return fmt.Errorf("%w: %s: the installer stream ended without an exit code", ErrUpgradeFailed, s.endpoint)
	}
	res.Phase = PhaseInstallFailed
	return fmt.Errorf("%w: %s: the installer exited with code %d (last message: %s); the node was not rebooted", ErrUpgradeFailed, s.endpoint, exit, last)
}

// notInStore: LifecycleService.Upgrade's answer when the installer image is
// not in the containerd instance and namespace the request names (Talos
// >= 1.13: Internal "upgrade failed: installer image %q not found in
// containerd store: ...", internal/app/lifecycle/lifecycle.go, container.go).
func notInStore(err error) bool {
	st, ok := status.FromError(err)
	return ok && st.Code() == codes.Internal && strings.Contains(st.Message(), "not found in containerd store")
}

// bootID reads /proc/sys/kernel/random/boot_id, as talosctl does to tell a reboot.
func (s *session) bootID(ctx context.Context, opts WaitOptions) (string, error) {
	cctx, cancel := context.WithTimeout(ctx, opts.CallTimeout)
	defer cancel()
	id, err := s.readSmall(cctx, bootIDPath, 128)
	if err != nil {
		return "", s.err(cctx, "read", err)
	}
	return strings.TrimSpace(id), nil
}

const bootIDPath = "/proc/sys/kernel/random/boot_id"

// readSmall reads a small file through MachineService.Read, at most max
// bytes of it (the stream is a node's).
func (s *session) readSmall(ctx context.Context, path string, max int64) (string, error) {
	rc, err := s.c.Read(ctx, path)
	if err != nil {
		return "", err
	}
	defer rc.Close() //nolint:errcheck
	b, err := io.ReadAll(io.LimitReader(rc, max))
	if err != nil {
		return "", err
	}
	return string(b), nil
}

// waitHealthy waits for stage running and ready, version want, and every
// service running with no failing health check (etcd and kubelet included).
func (s *session) waitHealthy(ctx context.Context, opts WaitOptions, want string) error {
	v, err := s.waitReady(ctx, opts, true)
	if err != nil {
		return err
	}
	if v != want {
		return fmt.Errorf("%w: the node came back running %s, not %s", ErrUpgradeFailed, v, want)
	}
	return poll(ctx, opts, func(ctx context.Context) (bool, string, error) {
		list, err := s.services(ctx, opts)
		if err != nil {
			return false, s.endpoint + ": services not readable yet", nil
		}
		var waiting []string
		for _, si := range list {
			h := si.GetHealth()
			if (si.GetState() != "Running" && si.GetState() != "Finished") || (h != nil && !h.GetUnknown() && !h.GetHealthy()) {
				waiting = append(waiting, si.GetId()+" "+si.GetState()+" "+healthWord(si))
			}
		}
		if len(waiting) > 0 {
			return false, s.endpoint + ": waiting for " + strings.Join(waiting, ", "), nil
		}
		return true, s.endpoint + ": all services healthy", nil
	})
}

// UpgradeAll upgrades nodes one at a time, each only after the previous one
// is back and healthy; it stops at the first failure (the remaining nodes
// are left alone). report gets each node's result as it ends.
func UpgradeAll(ctx context.Context, endpoints []string, tc *Talosconfig, opts UpgradeOptions, report func(*UpgradeResult)) error {
	for _, ep := range endpoints {
		res, err := Upgrade(ctx, ep, tc, opts)
		if res != nil && report != nil {
			report(res)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// oneLine folds a node's progress text onto one printable line of bounded length.
func oneLine(s string) string {
	s = strings.Map(func(r rune) rune {
		if r < ' ' || r == 0x7f {
			return ' '
		}
		return r
	}, s)
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > 200 {
		s = s[:200] + "…"
	}
	return s
}

// unanswered: a call's error says the request may have reached the node
// without its answer coming back (cut, timed out, connection lost), not
// that the node answered with an error.
func unanswered(err error) bool {
	st, ok := status.FromError(err)
	if !ok {
		return true
	}
	switch st.Code() {
	case codes.DeadlineExceeded, codes.Canceled, codes.Unavailable, codes.Unknown:
		return true
	}
	return false
}
