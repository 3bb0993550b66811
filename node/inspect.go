package node

import (
	"fmt"
	"sort"
	"strings"

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
	CodeExtensionConfigUnused  = "extension-config-unused"
	CodeSchematicUnknown       = "schematic-unknown"
	CodeInstallImageMissing    = "install-image-missing"
	CodeInstallImageGeneric    = "install-image-generic"
	CodeInstallImageForeign    = "install-image-not-factory"
	CodeInstallImageMismatch   = "install-image-schematic-mismatch"
	CodeRoleMismatch           = "role-mismatch"
	CodeNoMachineConfig        = "no-machine-config"
)

// Finding is one problem Inspect found, with the fix to show the user.
type Finding struct {
	Severity Severity
	Code     string
	Message  string
	Fix      string
}

// ServiceExtension is a system extension whose service only starts once an
// ExtensionServiceConfig with ConfigName exists (its service definition in
// siderolabs/extensions has `depends: - configuration: true`, or it needs
// credentials from that document).
type ServiceExtension struct {
	Extension  string   // official name, e.g. "siderolabs/newt"
	ConfigName string   // ExtensionServiceConfig name
	Env        []string // environment variables the user must provide
}

// ServiceExtensions lists the known extensions that need an
// ExtensionServiceConfig (checked against siderolabs/extensions:
// network/newt/newt.yaml and network/cloudflared/cloudflared.yaml declare
// `configuration: true`; tailscale takes TS_AUTHKEY from the document).
func ServiceExtensions() []ServiceExtension {
	return []ServiceExtension{
		{Extension: "siderolabs/newt", ConfigName: "newt", Env: []string{"PANGOLIN_ENDPOINT", "NEWT_ID", "NEWT_SECRET"}},
		{Extension: "siderolabs/cloudflared", ConfigName: "cloudflared", Env: []string{"TUNNEL_TOKEN"}},
		{Extension: "siderolabs/tailscale", ConfigName: "tailscale", Env: []string{"TS_AUTHKEY"}},
	}
}

// InspectOptions extends Inspect.
type InspectOptions struct {
	// Flashed is the schematic written to the card (nil: derive it from the
	// config's installer image via Resolve).
	Flashed *schematic.Schematic
	// Role is the intended role ("controlplane" or "worker"; "" skips the check).
	Role string
	// Resolve maps a schematic ID to its schematic (e.g. factory.Client.Schematic).
	// Optional: an installer image alone only names the schematic ID.
	Resolve func(id string) (*schematic.Schematic, error)
	// Node is the node address used in the suggested upgrade command.
	Node string
	// Installer is the role's factory installer reference for fixes; ""
	// derives it from Flashed (or the config's installer if that is a factory one).
	Installer string
}

// Inspect runs the incident checks: extensions that need a service config
// the config lacks, an installer image that would drop the Pi overlay or
// belongs to another schematic, and a config for the wrong role.
func Inspect(cfg *Config, flashed *schematic.Schematic, wantRole string) []Finding {
	return InspectWith(cfg, InspectOptions{Flashed: flashed, Role: wantRole})
}

// InspectWith is Inspect with all options.
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

	flashed, flashedID := opts.Flashed, ""
	if flashed != nil {
		if id, err := factory.SchematicID(flashed); err == nil {
			flashedID = id
		}
	}

	installer := opts.Installer
	if installer == "" {
		installer = roleInstaller(flashedID, ref, refErr == nil && cfg.InstallImage != "")
	}
	upgrade := UpgradeCommand(opts.Node, installer)

	out = append(out, checkInstallImage(cfg, ref, refErr, flashedID, installer, upgrade)...)

	// The schematic the node runs: the flashed one, else the installer's.
	var nodeSchematic *schematic.Schematic
	switch {
	case flashed != nil:
		nodeSchematic = flashed
	case refErr == nil && cfg.InstallImage != "" && opts.Resolve != nil:
		if s, err := opts.Resolve(ref.SchematicID); err == nil && s != nil {
			nodeSchematic = s
		}
	}
	if nodeSchematic == nil {
		out = append(out, Finding{
			Severity: SeverityInfo,
			Code:     CodeSchematicUnknown,
			Message:  "the node's schematic is unknown (no flashed schematic given and the installer image names only a schematic ID), so its extensions were not checked",
			Fix:      "pass the schematic or the profile the card was flashed with",
		})
	} else {
		out = append(out, checkExtensions(cfg, nodeSchematic)...)
	}

	sort.SliceStable(out, func(i, j int) bool { return rank(out[i].Severity) < rank(out[j].Severity) })
	return out
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

func normalizeRole(r string) string {
	r = strings.ToLower(strings.TrimSpace(r))
	if r == "init" {
		return "controlplane"
	}
	return r
}

func checkRole(cfg *Config, want string) []Finding {
	if cfg.MachineType == "" {
		return []Finding{{
			Severity: SeverityError,
			Code:     CodeNoMachineConfig,
			Message:  "the file has no v1alpha1 machine config document (machine: / cluster:), only " + strings.Join(cfg.Kinds, ", ") + "; a node in maintenance mode needs a complete config",
			Fix:      "apply the full controlplane.yaml / worker.yaml generated by `talosctl gen config`, with this file as a patch",
		}}
	}
	if want == "" || normalizeRole(want) == normalizeRole(cfg.MachineType) {
		return nil
	}
	return []Finding{{
		Severity: SeverityError,
		Code:     CodeRoleMismatch,
		Message:  fmt.Sprintf("this is a %s config (machine.type) but the node is meant to be a %s", sanitize(cfg.MachineType), sanitize(want)),
		Fix:      fmt.Sprintf("apply the %s config to this node (e.g. %s.yaml)", normalizeRole(want), normalizeRole(want)),
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

func registryHost() string { return strings.TrimPrefix(factory.DefaultBaseURL, "https://") }

// isGenericInstaller matches Sidero's plain installer image, which has no
// board overlay: ghcr.io/siderolabs/installer[:tag] (or a mirror of it).
func isGenericInstaller(image string) bool {
	name := image
	if i := strings.IndexAny(name, "@"); i >= 0 {
		name = name[:i]
	}
	if i := strings.LastIndex(name, ":"); i > strings.LastIndex(name, "/") {
		name = name[:i]
	}
	return strings.HasSuffix(name, "siderolabs/installer") || name == "installer"
}

func checkInstallImage(cfg *Config, ref factory.InstallerRef, refErr error, flashedID, installer, upgrade string) []Finding {
	fix := func(base string) string {
		if installer == "" {
			return base
		}
		return fmt.Sprintf("%s: set machine.install.image to %s, and upgrade only with the role's installer: %s", base, installer, upgrade)
	}
	switch {
	case cfg.InstallImage == "":
		return []Finding{{
			Severity: SeverityWarning,
			Code:     CodeInstallImageMissing,
			Message:  "machine.install.image is not set, so Talos falls back to the generic installer without the Raspberry Pi overlay",
			Fix:      fix("add the factory installer of this node's schematic"),
		}}
	case isGenericInstaller(cfg.InstallImage):
		return []Finding{{
			Severity: SeverityWarning,
			Code:     CodeInstallImageGeneric,
			Message: "machine.install.image is the generic installer (" + sanitize(cfg.InstallImage) + ") without the Raspberry Pi overlay: " +
				"an install or `talosctl upgrade` with it replaces the Pi bootloader/overlay and the node may not boot again",
			Fix: fix("use the Image Factory installer"),
		}}
	case refErr != nil:
		return []Finding{{
			Severity: SeverityWarning,
			Code:     CodeInstallImageForeign,
			Message:  "machine.install.image is not an Image Factory installer, so it cannot be checked against the flashed schematic: " + sanitize(refErr.Error()),
			Fix:      fix("use the Image Factory installer"),
		}}
	case flashedID != "" && ref.SchematicID != flashedID:
		return []Finding{{
			Severity: SeverityWarning,
			Code:     CodeInstallImageMismatch,
			Message: fmt.Sprintf("machine.install.image uses schematic %s but the card was flashed with schematic %s: the next install/upgrade switches the node to other extensions/overlay",
				short(ref.SchematicID), short(flashedID)),
			Fix: fix("match the flashed schematic"),
		}}
	}
	return nil
}

func short(id string) string {
	if len(id) > 12 {
		return id[:12] + "…"
	}
	return id
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

func checkExtensions(cfg *Config, s *schematic.Schematic) []Finding {
	var out []Finding
	present := map[string]bool{}
	for _, e := range s.Customization.SystemExtensions.OfficialExtensions {
		present[extensionName(e)] = true
	}
	for _, se := range ServiceExtensions() {
		has := cfg.HasExtensionService(se.ConfigName)
		switch {
		case present[se.Extension] && !has:
			out = append(out, Finding{
				Severity: SeverityError,
				Code:     CodeExtensionConfigMissing,
				Message: fmt.Sprintf("the node's image contains %s, but the config has no ExtensionServiceConfig named %q: the %s service waits for it, "+
					"Talos stays in the booting stage and reboots after BootTimeout (%d min), about every 71 minutes",
					se.Extension, se.ConfigName, se.ConfigName, int(constants.BootTimeout.Minutes())),
				Fix: fmt.Sprintf("either add this document to the config (fill in the values):\n---\napiVersion: v1alpha1\nkind: ExtensionServiceConfig\nname: %s\nenvironment:\n%s"+
					"or flash the node with a schematic without %s (e.g. the worker profile)", se.ConfigName, envLines(se.Env), se.Extension),
			})
		case has && !present[se.Extension]:
			out = append(out, Finding{
				Severity: SeverityInfo,
				Code:     CodeExtensionConfigUnused,
				Message:  fmt.Sprintf("the config has an ExtensionServiceConfig %q but the node's image does not contain %s; the document has no effect", se.ConfigName, se.Extension),
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
	if node == "" {
		node = "<node-ip>"
	}
	if installerRef == "" {
		installerRef = "factory.talos.dev/metal-installer/<schematic-id>:<version>"
	}
	return "talosctl upgrade --nodes " + shellWord(node) + " --image " + shellWord(installerRef)
}

func shellWord(s string) string {
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("-_./:@<>[]", r)) {
			return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
		}
	}
	return s // placeholders such as <node-ip> are meant to be edited
}
