package node

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"github.com/blang/semver/v4"
	"github.com/siderolabs/image-factory/pkg/schematic"
	"github.com/siderolabs/talos/pkg/machinery/constants"

	"github.com/talosflash/talosflash/factory"
)

// Severity of a Finding.
type Severity string

const (
	SeverityError   Severity = "error"   // the node will not come up as intended
	SeverityWarning Severity = "warning" // works now, breaks later (e.g. on upgrade)
	SeverityInfo    Severity = "info"    // a check that could not be done
)

// Finding codes (stable, for tests, the CLI and the GUI).
const (
	CodeExtensionConfigMissing = "extension-config-missing"
	// CodeExtensionConfigIncomplete: the document is there but does not set
	// a variable the extension needs (ServiceExtension.Required).
	CodeExtensionConfigIncomplete = "extension-config-incomplete"
	CodeExtensionConfigUnused     = "extension-config-unused"
	CodeSchematicUnknown          = "schematic-unknown"
	CodeInstallImageMissing       = "install-image-missing"
	CodeInstallImageGeneric       = "install-image-generic"
	CodeInstallImageForeign       = "install-image-not-factory"
	CodeInstallImageMismatch      = "install-image-schematic-mismatch"
	CodeRoleMismatch              = "role-mismatch"
	CodeNoMachineConfig           = "no-machine-config"
	CodeBootedUnknown             = "booted-unknown-fallback"
	CodeCheckedAgainstConfig      = "checked-against-config-installer"
	// Talos 1.14 rules (node/nodetest/talos114.go has the node's side).
	CodeInstallConflict      = "unattended-install-and-machine-install" // a 1.14 node refuses the config
	CodeUICNoDiskSelector    = "unattended-install-no-disk-selector"    // v1.14.0-rc.1 refuses it
	CodeControlPlaneOnlyDocs = "control-plane-only-documents"           // v1.14.0-rc.1 refuses KubeProxyConfig on a worker
)

// Finding is one problem Inspect found, with the fix to show the user.
type Finding struct {
	Severity Severity
	Code     string
	Message  string
	Fix      string
}

// ServiceExtension is a system extension whose service only starts once an
// ExtensionServiceConfig with ConfigName exists.
type ServiceExtension struct {
	Extension  string   // official name, e.g. "siderolabs/newt"
	ConfigName string   // ExtensionServiceConfig name (the extension's service name)
	Env        []string // environment variables the user must provide, where known
	// Required are the variables without which the service cannot work,
	// where the extension takes its settings from its environment only.
	Required []string
}

// serviceExtensions is the one list of extensions that wait for their
// ExtensionServiceConfig: their service definition in siderolabs/extensions
// (<group>/<name>/<name>.yaml) declares `depends: - configuration: true`, so
// without the document the service never starts, Talos stays in the booting
// stage and reboots after BootTimeout. Checked against siderolabs/extensions
// (network/newt, network/cloudflared, network/tailscale, network/bird2,
// network/lldpd, network/nebula, network/netbird, network/zerotier,
// power/nut-client, storage/multipath-tools), siderolabs/extensions of
// 2026-08-20. The document is named after the service, not the extension.
var serviceExtensions = []ServiceExtension{
	// Newt is configured by its environment only (network/newt/README.md
	// "Configure the extension via ExtensionServiceConfig": the three
	// variables; newt.yaml mounts no config).
	{Extension: "siderolabs/newt", ConfigName: "newt", Env: []string{"PANGOLIN_ENDPOINT", "NEWT_ID", "NEWT_SECRET"},
		Required: []string{"PANGOLIN_ENDPOINT", "NEWT_ID", "NEWT_SECRET"}},
	{Extension: "siderolabs/cloudflared", ConfigName: "cloudflared", Env: []string{"TUNNEL_TOKEN"}},
	{Extension: "siderolabs/tailscale", ConfigName: "tailscale", Env: []string{"TS_AUTHKEY"}},
	{Extension: "siderolabs/bird2", ConfigName: "bird2"},
	{Extension: "siderolabs/lldpd", ConfigName: "lldpd"},
	{Extension: "siderolabs/nebula", ConfigName: "nebula"},
	{Extension: "siderolabs/netbird", ConfigName: "netbird"},
	{Extension: "siderolabs/zerotier", ConfigName: "zerotier"},
	{Extension: "siderolabs/nut-client", ConfigName: "nut-client"},
	{Extension: "siderolabs/multipath-tools", ConfigName: "multipathd"}, // service multipathd.yaml
}

// ServiceExtensions lists the extensions that need an ExtensionServiceConfig.
func ServiceExtensions() []ServiceExtension { return slices.Clone(serviceExtensions) }

// InspectOptions says what the config is checked against.
type InspectOptions struct {
	// Booted is what the node reports it booted (Node.Booted). When set, it
	// is the truth for the extension and installer checks, whatever the
	// user declared.
	Booted *Booted
	// Flashed is the schematic the user says is on the card (a role or
	// profile): the fallback when Booted is nil.
	Flashed *schematic.Schematic
	// Role is the intended role (RoleUnknown skips the check).
	Role Role
	// Fallback, when Booted is nil and Flashed is set, says where Flashed
	// comes from (e.g. "the role you declared (worker)"), for the finding
	// that tells the user the check used their word, not the node's.
	Fallback string
	// Resolve maps a schematic ID to its schematic (e.g. factory.Client.Schematic).
	// Optional: an installer image alone only names the schematic ID.
	Resolve func(id string) (*schematic.Schematic, error)
	// Node is the node address used in the suggested upgrade command.
	Node string
	// Installer is the node's factory installer reference for fixes; ""
	// derives it from the booted/flashed schematic (or the config's installer).
	Installer string
	// TalosVersion is what the node reports ("" unknown). A config with
	// Talos 1.14 documents, or a node >= v1.14, gets the 1.14 advice.
	TalosVersion string
	// InstallerPatch is the user's talos/installer-<role>.yaml patch, if
	// one was found (FindInstallerPatch): fixes name it.
	InstallerPatch string
	// Profiles are the known profiles (nil: the built-ins): a fix that
	// names a profile to flash instead names one without the extension.
	Profiles []factory.Profile
}

// FindInstallerPatch looks for the user's installer patch of role
// (talos/installer-<role>.yaml, as `talosflash` writes it) next to the
// config file, in a talos/ directory beside it, or in ../talos/. "" if none.
// role is the config's role as Talos reads it (Config.Role: a "join" or
// a left-out machine.type is a worker); init's patch is the control plane's.
func FindInstallerPatch(configPath string, role Role) string {
	if role == RoleInit {
		role = RoleControlPlane
	}
	if configPath == "" || !role.Known() {
		return ""
	}
	name := "installer-" + string(role) + ".yaml"
	dir := filepath.Dir(configPath)
	for _, p := range []string{filepath.Join(dir, name), filepath.Join(dir, "talos", name), filepath.Join(dir, "..", "talos", name)} {
		if st, err := os.Stat(p); err == nil && st.Mode().IsRegular() {
			return filepath.Clean(p)
		}
	}
	return ""
}

// InspectWith runs the incident checks: extensions that need a service
// config the config lacks, an installer image that would drop the Pi
// overlay or belongs to another schematic than the node's, and a config for
// the wrong role.
func InspectWith(cfg *Config, opts InspectOptions) []Finding {
	if cfg == nil {
		return nil
	}

	var out []Finding

	out = append(out, checkRole(cfg, opts.Role)...)

	ref, refErr := factory.InstallerRef{}, error(nil)
	if cfg.InstallImage != "" {
		ref, refErr = factory.ParseInstallerRef(cfg.InstallImage)
	}

	nodeID := ""
	switch {
	case opts.Booted != nil:
		nodeID = opts.Booted.SchematicID
	case opts.Flashed != nil:
		if id, err := factory.SchematicID(opts.Flashed); err == nil {
			nodeID = id
		}
	}

	installer := opts.Installer
	if installer == "" {
		installer = roleInstaller(nodeID, ref, refErr == nil && cfg.InstallImage != "")
	}
	upgrade := UpgradeCommand(opts.Node, installer)

	is114 := cfg.Talos114 || atLeast114(opts.TalosVersion)
	out = append(out, checkInstallImage(cfg, ref, refErr, nodeID, opts.Booted != nil, installer, upgrade, is114, opts.InstallerPatch)...)
	out = append(out, inspect114(cfg, opts.InstallerPatch)...)

	switch {
	case opts.Booted != nil:
		out = append(out, checkExtensions(cfg, opts.Profiles, opts.Booted.HasExtension, "the node booted an image with")...)
	case opts.Flashed != nil:
		out = append(out, Finding{
			Severity: SeverityInfo,
			Code:     CodeBootedUnknown,
			Message:  "the node exposes no extension statuses (Talos <= 1.12 or an image not from the Image Factory), so the checks fall back to " + orDefault(opts.Fallback, "the schematic you named"),
			Fix:      "make sure the card really was flashed with that role; a node running Talos >= 1.13 from the Image Factory reports what it booted",
		})
		out = append(out, checkExtensions(cfg, opts.Profiles, schematicHas(opts.Flashed), "the card was flashed (as you say) with")...)
	default:
		var s *schematic.Schematic
		if refErr == nil && cfg.InstallImage != "" && opts.Resolve != nil {
			if r, err := opts.Resolve(ref.SchematicID); err == nil && r != nil {
				s = r
			}
		}
		if s == nil {
			out = append(out, Finding{
				Severity: SeverityInfo,
				Code:     CodeSchematicUnknown,
				Message:  "what the node booted is unknown (it exposes no extension statuses, no role was given, and the installer image names only a schematic ID), so its extensions were not checked",
				Fix:      "pass the role or profile the card was flashed with",
			})
		} else {
			// Circular: the config is checked against its own installer,
			// which says nothing about the card in the Pi.
			out = append(out, Finding{
				Severity: SeverityInfo,
				Code:     CodeCheckedAgainstConfig,
				Message: fmt.Sprintf("the node does not report what it booted (no extension statuses) and no role was given: "+
					"checking against the schematic of the config's own install image (%s), which says nothing about the card in the node", factory.ShortID(ref.SchematicID)),
				Fix: "pass the role or profile the card was flashed with (--role; in the app, \"Card flashed as\") to check against the card you flashed",
			})
			out = append(out, checkExtensions(cfg, opts.Profiles, schematicHas(s), "the config's installer schematic has")...)
		}
	}

	sort.SliceStable(out, func(i, j int) bool { return rank(out[i].Severity) < rank(out[j].Severity) })
	return out
}

func safeNames(kinds []string) string {
	out := make([]string, len(kinds))
	for i, k := range kinds {
		out[i] = safeName(k)
	}
	return strings.Join(out, ", ")
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

func schematicHas(s *schematic.Schematic) func(string) bool {
	present := map[string]bool{}
	for _, e := range s.Customization.SystemExtensions.OfficialExtensions {
		present[extensionName(e)] = true
	}
	return func(name string) bool { return present[extensionName(name)] }
}

func rank(s Severity) int {
	switch s {
	case SeverityError:
		return 0
	case SeverityWarning:
		return 1
	default:
		return 2
	}
}

func checkRole(cfg *Config, want Role) []Finding {
	if cfg.MachineType == "" && cfg.Role() == RoleUnknown {
		return []Finding{{
			Severity: SeverityError,
			Code:     CodeNoMachineConfig,
			Message:  "the file has no v1alpha1 machine config document (machine: / cluster:), only " + safeNames(cfg.Kinds) + "; a node in maintenance mode needs a complete config",
			Fix:      "apply the full controlplane.yaml / worker.yaml generated by `talosctl gen config`, with this file as a patch",
		}}
	}
	// The role as Talos reads it ("join" and a left-out type are a
	// worker); a word Talos refuses is no role's config.
	have := cfg.Role()
	if !want.Known() || have.Known() && have.Same(want) {
		return nil
	}
	word, says := string(have), "machine.type"
	if !have.Known() {
		word = cfg.MachineType
	} else if n := cfg.RoleNote(); n != "" {
		says = n
	}
	fix := want
	if fix.IsControlPlane() {
		fix = RoleControlPlane // init is deprecated: the config to apply is controlplane.yaml
	}
	return []Finding{{
		Severity: SeverityError,
		Code:     CodeRoleMismatch,
		Message:  fmt.Sprintf("this is a %s config (%s) but the node is meant to be %s", sanitize(word), says, want.WithArticle()),
		Fix:      fmt.Sprintf("apply the %s config to this node (e.g. %s.yaml)", fix, fix),
	}}
}

// roleInstaller is the factory installer the node should use: built from the
// flashed schematic when known, else the config's own factory installer.
func roleInstaller(flashedID string, ref factory.InstallerRef, refOK bool) string {
	switch {
	case flashedID != "" && refOK:
		return factory.InstallerRef{Registry: ref.Registry, Repository: ref.Repository, SchematicID: flashedID, Version: ref.Version}.String()
	case flashedID != "":
		return factory.NewInstallerRef(registryHost(), flashedID, factory.DefaultTalosVersion).String()
	case refOK:
		return ref.String()
	}
	return ""
}

// registryHost is the default factory's installer registry.
func registryHost() string { return factory.NewClient(factory.DefaultBaseURL, nil).RegistryHost() }

func checkInstallImage(cfg *Config, ref factory.InstallerRef, refErr error, nodeID string, booted bool, installer, upgrade string, is114 bool, patch string) []Finding {
	fix := func(base string) string {
		if installer == "" {
			return base
		}
		field := cfg.InstallImageFrom
		switch {
		case cfg.UnattendedInstall > 0 || field == "" && cfg.Talos114:
			// Talos 1.14: never .machine.install next to an UnattendedInstallConfig (the node refuses both).
			field = fmt.Sprintf("installer.image of the UnattendedInstallConfig (document %d)", cfg.UnattendedInstall)
			if patch != "" {
				field += " and in your patch " + printable(patch, 512)
			}
		case field == "":
			field = "machine.install.image"
		}
		return fmt.Sprintf("%s: set %s to %s, and upgrade only with the node's installer: %s (or `talosflash upgrade`, which reads the node's schematic and never uses another)", base, field, installer, upgrade)
	}
	switch {
	case cfg.InstallImage == "" && is114:
		// Talos 1.14 installs the factory installer of the boot entry when
		// installer.image is empty (controllers/runtime/unattended_install.go),
		// and a Pi booted from a raw image is installed already.
		return nil
	case cfg.InstallImage == "":
		return []Finding{{
			Severity: SeverityWarning,
			Code:     CodeInstallImageMissing,
			Message:  "no installer image is set (machine.install.image or UnattendedInstallConfig), so Talos falls back to the generic installer without the Raspberry Pi overlay",
			Fix:      fix("add the factory installer of this node's schematic"),
		}}
	case factory.IsGenericInstaller(cfg.InstallImage):
		return []Finding{{
			Severity: SeverityWarning,
			Code:     CodeInstallImageGeneric,
			Message: cfg.InstallImageFrom + " is the generic installer (" + sanitize(cfg.InstallImage) + ") without the Raspberry Pi overlay: " +
				"an install or `talosctl upgrade` with it replaces the Pi bootloader/overlay and the node may not boot again",
			Fix: fix("use the Image Factory installer"),
		}}
	case refErr != nil:
		return []Finding{{
			Severity: SeverityWarning,
			Code:     CodeInstallImageForeign,
			Message:  cfg.InstallImageFrom + " is not an Image Factory installer, so it cannot be checked against the node's schematic: " + sanitize(refErr.Error()),
			Fix:      fix("use the Image Factory installer"),
		}}
	case nodeID != "" && ref.SchematicID != nodeID:
		what := "the card was flashed with"
		if booted {
			what = "the node booted"
		}
		return []Finding{{
			Severity: SeverityWarning,
			Code:     CodeInstallImageMismatch,
			Message: fmt.Sprintf("%s uses schematic %s but %s schematic %s: the install and every later `talosctl upgrade` with it switch the node to other extensions/overlay",
				cfg.InstallImageFrom, factory.ShortID(ref.SchematicID), what, factory.ShortID(nodeID)),
			Fix: fix("match the node's schematic"),
		}}
	}
	return nil
}

// atLeast114 reports whether a node's reported version is Talos >= 1.14.
func atLeast114(v string) bool {
	sv, err := semver.ParseTolerant(strings.TrimSpace(v))
	return err == nil && sv.GE(semver.Version{Major: 1, Minor: 14})
}

// inspect114 are the Talos 1.14 rules the local machinery (v1.13) cannot
// check, as findings; the node's side is node/nodetest/talos114.go.
func inspect114(cfg *Config, patch string) []Finding {
	var out []Finding
	v1 := slices.Index(cfg.Kinds, "v1alpha1") + 1
	inPatch := ""
	if patch != "" {
		inPatch = " (your patch " + printable(patch, 512) + " too)"
	}
	if cfg.UnattendedInstall > 0 && cfg.MachineInstall {
		out = append(out, Finding{
			Severity: SeverityError,
			Code:     CodeInstallConflict,
			Message: fmt.Sprintf("the config has an UnattendedInstallConfig (document %d) and a machine.install section (document %d, v1alpha1): "+
				"a Talos 1.14 node refuses it: \"UnattendedInstallConfig config is incompatible with v1alpha1 config (.machine.install)\"", cfg.UnattendedInstall, v1),
			Fix: fmt.Sprintf("delete the install: section under machine: in document %d (v1alpha1); on Talos 1.14 the installer image goes to installer.image of the UnattendedInstallConfig (document %d)%s",
				v1, cfg.UnattendedInstall, inPatch),
		})
	}
	if cfg.UnattendedInstall > 0 && !cfg.UICDiskSelector {
		out = append(out, Finding{
			Severity: SeverityWarning,
			Code:     CodeUICNoDiskSelector,
			Message: fmt.Sprintf("the UnattendedInstallConfig (document %d) has no provisioning.diskSelector.match (an installer patch merged over the generated document drops it): "+
				"Talos v1.14.0-rc.1 refuses that (\"provisioning.volumeSelector.match is required\") and the 1.14 sources keep the rule; the node's dry run decides for its version", cfg.UnattendedInstall),
			Fix: fmt.Sprintf("add to the UnattendedInstallConfig (document %d)%s, as talosctl gen config writes it (the Pi's SD card is /dev/mmcblk0):\n"+
				"provisioning:\n    diskSelector:\n        match: disk.dev_path == \"/dev/mmcblk0\"\n", cfg.UnattendedInstall, inPatch),
		})
	}
	if cfg.Role() == RoleWorker && len(cfg.ControlPlaneOnly) > 0 { // "join" and a left-out type too, as Talos reads them
		kinds := slices.Sorted(slices.Values(cfg.ControlPlaneOnly))
		out = append(out, Finding{
			Severity: SeverityWarning,
			Code:     CodeControlPlaneOnlyDocs,
			Message: fmt.Sprintf("this %s config has %s, which Talos v1.14.0-rc.1 allows on control plane machines only (\"the following document kinds are only allowed on control plane machines: [%s]\"); "+
				"the 1.14 sources keep the rule; the node's dry run decides for its version", RoleWorker, safeNames(kinds), strings.Join(kinds, " ")),
			Fix: fmt.Sprintf("delete the %s document(s) from this worker config: apply such a patch (e.g. patch.yaml) with --config-patch-control-plane, not --config-patch", safeNames(kinds)),
		})
	}
	return out
}

// extensionName reduces "siderolabs/newt", "ghcr.io/siderolabs/newt:v1.2@sha256:…"
// to "siderolabs/newt".
func extensionName(e string) string {
	e = strings.ToLower(strings.TrimSpace(e))
	if i := strings.Index(e, "@"); i >= 0 {
		e = e[:i]
	}
	if i := strings.LastIndex(e, ":"); i > strings.LastIndex(e, "/") {
		e = e[:i]
	}
	parts := strings.Split(e, "/")
	if len(parts) >= 2 {
		return parts[len(parts)-2] + "/" + parts[len(parts)-1]
	}
	return e
}

// profileWithout names a profile to flash instead of an image with ext
// ("" none): the config's role's profile, else the worker's, when it does
// not have ext. Never a profile that has it: a profiles file may make
// "worker" an image with Newt (a profile named like a built-in replaces
// it), and its name is then no fix (issue 37).
func profileWithout(profiles []factory.Profile, ext string, role Role) string {
	if profiles == nil {
		profiles = factory.BuiltinProfiles()
	}
	names := []string{string(RoleWorker)}
	if role.IsControlPlane() {
		names = []string{string(RoleControlPlane), string(RoleWorker)}
	}
	for _, name := range names {
		for _, p := range profiles {
			if p.Name == name && !slices.ContainsFunc(p.Extensions, func(e string) bool { return extensionName(e) == ext }) {
				return name
			}
		}
	}
	return ""
}

func checkExtensions(cfg *Config, profiles []factory.Profile, has func(ext string) bool, source string) []Finding {
	var out []Finding
	for _, se := range serviceExtensions {
		hasDoc := cfg.HasExtensionService(se.ConfigName)
		present := has(se.Extension)
		switch {
		case present && !hasDoc:
			doc := se.Document()
			instead := ""
			if p := profileWithout(profiles, se.Extension, cfg.Role()); p != "" {
				instead = " (e.g. the " + p + " profile)"
			}
			out = append(out, Finding{
				Severity: SeverityError,
				Code:     CodeExtensionConfigMissing,
				Message: fmt.Sprintf("%s %s, but the config has no ExtensionServiceConfig named %q: the %s service waits for it, "+
					"Talos stays in the booting stage and reboots after BootTimeout (%d min), about every 71 minutes",
					source, se.Extension, se.ConfigName, se.ConfigName, int(constants.BootTimeout.Minutes())),
				Fix: fmt.Sprintf("either add this document to the config (fill in the values):\n%s"+
					"or flash the node with a schematic without %s%s", doc, se.Extension, instead),
			})
		case present && len(cfg.ExtensionServiceUnset(se.ConfigName, se.Required)) > 0:
			unset := cfg.ExtensionServiceUnset(se.ConfigName, se.Required)
			out = append(out, Finding{
				Severity: SeverityWarning,
				Code:     CodeExtensionConfigIncomplete,
				Message: fmt.Sprintf("the ExtensionServiceConfig %q does not set %s: %s needs %s (its environment is its only configuration), so the %s service starts without it and does not work",
					se.ConfigName, strings.Join(unset, ", "), se.Extension, strings.Join(se.Required, ", "), se.ConfigName),
				Fix: fmt.Sprintf("give the document its whole environment:\n---\napiVersion: v1alpha1\nkind: ExtensionServiceConfig\nname: %s\nenvironment:\n%s(on a running node: talosflash patch --replace-document ExtensionServiceConfig/%s FILE)",
					se.ConfigName, envLines(se.Required), se.ConfigName),
			})
		case hasDoc && !present:
			out = append(out, Finding{
				Severity: SeverityInfo,
				Code:     CodeExtensionConfigUnused,
				Message:  fmt.Sprintf("the config has an ExtensionServiceConfig %q but %s is not in the image (%s); the document has no effect", se.ConfigName, se.Extension, strings.TrimSuffix(source, " with")),
				Fix:      fmt.Sprintf("flash a schematic with %s if the node should run it", se.Extension),
			})
		}
	}
	return out
}

func envLines(env []string) string {
	var b strings.Builder
	for _, e := range env {
		fmt.Fprintf(&b, "  - %s=...\n", e)
	}
	return b.String()
}

// UpgradeCommand is the talosctl upgrade command that keeps the node on its
// role's factory installer. Without --image, talosctl upgrades to the generic
// installer and drops the Raspberry Pi overlay.
func UpgradeCommand(node, installerRef string) string {
	if installerRef == "" {
		installerRef = "factory.talos.dev/metal-installer/<schematic-id>:<version>"
	}
	return Talosctl("", node, "upgrade", "--image", installerRef)
}

func shellWord(s string) string {
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("-_./:@<>[]", r)) {
			return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
		}
	}
	return s // placeholders such as <node-ip> are meant to be edited
}
