package inventory

import (
	"errors"
	"fmt"
	"net/netip"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/siderolabs/talos/pkg/machinery/constants"

	"github.com/talosflash/talosflash/factory"
	"github.com/talosflash/talosflash/internal/userfile"
	"github.com/talosflash/talosflash/node"
)

// maxInstallerFile bounds an installer file (as plan.MaxInstallerFile).
const maxInstallerFile = 1 << 20

// crossCheck compares each node's files with the node and with each other,
// offline: the installer file's schematic and version are the node's role
// image (its profile's schematic ID, computed as the factory does, at the
// inventory's Talos version); the config's installer image is the same
// image; its control-plane endpoint names a control plane of the inventory;
// all configs name one cluster. The configs were read (bounded) by
// checkConfig; only the fields checked are ever quoted: configs hold PKI.
func (p *parser) crossCheck(inv *Inventory, profiles []factory.Profile) {
	if p.opts.SkipFiles {
		return
	}

	seen := map[string]bool{} // a config shared by nodes says a thing once
	once := func(key string) bool {
		if seen[key] {
			return false
		}

		seen[key] = true

		return true
	}

	// The configs' one name (the inventory's cluster: only labels it).
	var cluster struct {
		name, where string
	}

	for _, n := range inv.Nodes {
		what := "node " + n.Hostname
		want, hasImage := roleImage(n, inv, profiles)

		if n.Installer != "" && hasImage {
			p.checkInstallerFile(inv, n, what, want, profiles)
		}

		cfg := p.configs[n.Config]
		if n.Config == "" || cfg == nil {
			continue
		}

		p.checkObligations(inv, n, what, cfg, profiles)

		wrongType := wrongRole(n, cfg) // said by checkConfig
		if hasImage && !wrongType && cfg.InstallImage != "" && once(n.Config+"\x00image\x00"+n.Profile+"\x00"+string(n.Board)) {
			p.checkInstallImage(inv, n, what, cfg, want, profiles)
		}

		if cfg.Endpoint != "" && once(n.Config+"\x00endpoint") {
			p.checkEndpoint(inv, n, cfg)
		}

		if cfg.ClusterName != "" {
			where := at(n.Config, cfg.ClusterNameLine)
			switch {
			case cluster.name == "":
				cluster.name, cluster.where = cfg.ClusterName, where
			case cfg.ClusterName != cluster.name && once(n.Config+"\x00cluster"):
				p.add(n.ConfigLine, "generate every node's config from one talosctl gen config run (one cluster, one name)",
					"%s: config %s names cluster %q, but %s names %q: one cluster has one name", what, where, cfg.ClusterName, cluster.where, cluster.name)
			}
		}
	}
}

// image is a node's role image: what its card and installer must be.
type image struct {
	profile     string
	board       factory.Board // "" for a profile of no known board
	schematicID string
	version     string
	ref         factory.InstallerRef
}

// label names the image: its profile, with its board when that is not the
// default one ("worker", "worker for rpi5").
func (im image) label() string { return profileLabel(im.profile, im.board) }

// profileLabel is a profile's name with its board when that is not the
// default ("controlplane", "controlplane for rpi5").
func profileLabel(profile string, b factory.Board) string {
	if b == "" || b == factory.DefaultBoard {
		return profile
	}
	return profile + " for " + string(b)
}

// installerFile is where the image's installer file is suggested to live:
// talos/installer-<role>.yaml, talos/installer-<role>-<board>.yaml on a
// board other than the default (a mixed cluster has one per role and
// board).
func (im image) installerFile() string {
	return InstallerFileName(im.profile, im.board)
}

// InstallerFileName is the installer file suggested for a profile on a
// board: talos/installer-<profile>.yaml on the default board,
// talos/installer-<profile>-<board>.yaml on another (a mixed cluster has
// one per role and board).
func InstallerFileName(profile string, b factory.Board) string {
	if b == "" || b == factory.DefaultBoard {
		return "talos/installer-" + profile + ".yaml"
	}
	return "talos/installer-" + profile + "-" + string(b) + ".yaml"
}

// roleImage is the image of n's profile built for n's board, at the
// inventory's Talos version (else the profile's), on the inventory's
// factory.
func roleImage(n Node, inv *Inventory, profiles []factory.Profile) (image, bool) {
	pr, err := factory.FindProfile(profiles, n.Profile)
	if err != nil {
		return image{}, false // reported where the profile is named
	}

	version := inv.TalosVersion
	if version == "" {
		version = pr.Version()
	}

	pr.TalosVersion = version
	if pr, err = pr.ForBoard(n.Board); err != nil {
		return image{}, false // reported at the node's board (parser.board)
	}

	id, err := pr.SchematicID()
	if err != nil {
		return image{}, false
	}

	return image{profile: pr.Name, board: pr.TargetBoard(), schematicID: id, version: version, ref: factory.NewInstallerRef(registryHost(inv.Factory), id, version)}, true
}

// registryHost is the installer registry of a factory URL ("": the public one).
func registryHost(factoryURL string) string {
	if u, err := url.Parse(factoryURL); err == nil && u.Host != "" {
		return u.Host
	}

	return strings.TrimPrefix(factory.DefaultBaseURL, "https://")
}

// profileOf names the profile whose schematic id is, on any board, for a
// message.
func profileOf(id string, profiles []factory.Profile) string {
	if pr, ok := factory.ProfileOfSchematicID(profiles, id); ok {
		return fmt.Sprintf("schematic %s (the %s image)", factory.ShortID(id), profileLabel(pr.Name, pr.TargetBoard()))
	}

	return fmt.Sprintf("schematic %s (no profile's image)", factory.ShortID(id))
}

// schematicCommand is how the right installer file is written.
func schematicCommand(inv *Inventory, want image) string {
	cmd := fmt.Sprintf("talosflash schematic --role %s", want.profile)
	if want.board != "" && want.board != factory.DefaultBoard {
		cmd += " --board " + string(want.board)
	}
	cmd += " --version " + want.version
	if inv.Profiles != "" {
		cmd += " --profiles " + inv.Profiles
	}

	return cmd + " --installer-yaml > " + want.installerFile()
}

// mismatch says how ref differs from want ("" when it is the image).
func mismatch(ref factory.InstallerRef, want image, profiles []factory.Profile) string {
	switch {
	case ref.SchematicID != want.schematicID:
		return fmt.Sprintf("names %s, not the %s image's %s", profileOf(ref.SchematicID, profiles), want.label(), factory.ShortID(want.schematicID))
	case ref.Version != want.version:
		return fmt.Sprintf("is for Talos %s, the inventory's version is %s", ref.Version, want.version)
	}

	return ""
}

// boardOf is the board an installer file is for: its schematic's overlay
// (the comments talosflash writes), else its schematic ID's profile on
// any board; "" when neither says.
func boardOf(inf *factory.InstallerFile, profiles []factory.Profile) factory.Board {
	if b, ok := factory.BoardOfSchematic(inf.Schematic); ok {
		return b
	}
	if pr, ok := factory.ProfileOfSchematicID(profiles, inf.Ref.SchematicID); ok {
		return pr.TargetBoard()
	}
	return ""
}

func (p *parser) checkInstallerFile(inv *Inventory, n Node, what string, want image, profiles []factory.Profile) {
	data, err := userfile.Read(n.Installer, maxInstallerFile)
	if errors.Is(err, os.ErrNotExist) || errors.Is(err, userfile.ErrNotRegular) {
		return // reported by fileRef
	}

	var inf *factory.InstallerFile
	if err == nil {
		inf, err = factory.ParseInstallerFile(data)
	}

	var sme *factory.SchematicMismatchError
	if err != nil && !errors.As(err, &sme) {
		p.add(n.InstallerLine, "write it with "+schematicCommand(inv, want), "%s: installer %s: %v", what, n.Installer, err)
		return
	}

	// Another board's installer: said as such (its overlay), not only as
	// another schematic, since the file is probably the right role's.
	if b := boardOf(inf, profiles); b != "" && want.board != "" && b != want.board && inf.Ref.SchematicID != want.schematicID {
		p.add(n.InstallerLine, "point installer: at the "+want.label()+" installer file, "+want.installerFile()+", written with "+schematicCommand(inv, want),
			"%s (%s, board %s): installer %s is for the %s (board %s, overlay %s), not the node's %s (overlay %s)",
			what, want.profile, want.board, at(n.Installer, inf.Line), b.Model(), b, b.Overlay().Name, want.board.Model(), want.board.Overlay().Name)
		return
	}

	if why := mismatch(inf.Ref, want, profiles); why != "" {
		p.add(n.InstallerLine, "point installer: at the "+want.label()+" installer file, or write it with "+schematicCommand(inv, want),
			"%s (%s): installer %s %s", what, want.label(), at(n.Installer, inf.Line), why)
	}
}

func (p *parser) checkInstallImage(inv *Inventory, n Node, what string, cfg *node.Config, want image, profiles []factory.Profile) {
	where := at(n.Config, cfg.InstallImageLine)
	fix := fmt.Sprintf("set %s to %s (talosctl gen config --config-patch @%s)", cfg.InstallImageFrom, want.ref, want.installerFile())
	if want.board != "" && want.board != factory.DefaultBoard {
		// A config shared with the default board's nodes names one
		// installer: the other board's nodes get their own copy.
		fix = fmt.Sprintf("set %s to %s: give %s's nodes their own config (talosctl machineconfig patch %s --patch @%s --output %s)",
			cfg.InstallImageFrom, want.ref, want.board, n.Config, want.installerFile(), boardConfigName(n.Config, want.board))
	}

	ref, err := factory.ParseInstallerRef(cfg.InstallImage)
	if err != nil {
		p.add(n.ConfigLine, fix, "%s (%s): config %s: %s %q is not the %s image: %v", what, want.label(), where, cfg.InstallImageFrom, cfg.InstallImage, want.label(), err)
		return
	}

	if why := mismatch(ref, want, profiles); why != "" {
		p.add(n.ConfigLine, fix, "%s (%s): config %s: %s %s", what, want.label(), where, cfg.InstallImageFrom, why)
	}
}

// boardConfigName is a config's name for a board's nodes: talos/worker.yaml
// -> talos/worker-rpi5.yaml.
func boardConfigName(config string, b factory.Board) string {
	ext := filepath.Ext(config)
	return strings.TrimSuffix(config, ext) + "-" + string(b) + ext
}

// checkEndpoint: the config's control-plane endpoint must reach a control
// plane of the inventory. An address of a worker, or one outside every
// control plane's subnet, is a problem; a DNS name, or an address inside a
// control plane's subnet that no node has (a VIP), cannot be checked
// offline and is a note.
func (p *parser) checkEndpoint(inv *Inventory, n Node, cfg *node.Config) {
	where := at(n.Config, cfg.EndpointLine)
	cps := controlPlanes(inv)
	fix := "use a control plane's address: " + cps

	u, err := url.Parse(cfg.Endpoint)
	if err != nil || u.Hostname() == "" {
		p.add(n.ConfigLine, fix, "config %s: the control-plane endpoint %q is not a URL", where, cfg.Endpoint)
		return
	}

	host := u.Hostname()
	note := func(format string, args ...any) {
		inv.Notes = append(inv.Notes, Problem{File: p.file, Line: n.ConfigLine, Message: fmt.Sprintf(format, args...)})
	}

	addr, err := netip.ParseAddr(host)
	if err != nil {
		// A name: the inventory's own hostnames are checked, others not.
		for _, m := range inv.Nodes {
			if strings.EqualFold(m.Hostname, host) || strings.EqualFold(m.ShortName(), host) {
				if !m.Role.IsControlPlane() {
					p.add(n.ConfigLine, fix, "config %s: the control-plane endpoint %s names %s, a %s", where, cfg.Endpoint, m.Hostname, roleName(m))
				}

				return
			}
		}

		note("config %s: the control-plane endpoint %s is a DNS name: not checked against the inventory's control planes (%s)", where, cfg.Endpoint, cps)

		return
	}

	for _, m := range inv.Nodes {
		if m.Address.IsValid() && m.Address.Addr() == addr.Unmap() {
			if !m.Role.IsControlPlane() {
				p.add(n.ConfigLine, fix, "config %s: the control-plane endpoint %s is %s's address, a %s", where, cfg.Endpoint, m.Hostname, roleName(m))
			}

			return
		}
	}

	for _, m := range inv.Nodes {
		if m.Role.IsControlPlane() && m.Address.IsValid() && m.Address.Masked().Contains(addr.Unmap()) {
			note("config %s: the control-plane endpoint %s is no node's address (a VIP?): not checked", where, cfg.Endpoint)
			return
		}
	}

	p.add(n.ConfigLine, fix, "config %s: the control-plane endpoint %s is no node of the inventory, nor in a control plane's subnet", where, cfg.Endpoint)
}

// controlPlanes lists the control planes' endpoints for a fix.
func controlPlanes(inv *Inventory) string {
	var out []string

	for _, m := range inv.Nodes {
		if m.Role.IsControlPlane() && m.Address.IsValid() {
			out = append(out, "https://"+netip.AddrPortFrom(m.Address.Addr(), 6443).String())
		}
	}

	if len(out) == 0 {
		return "https://CP-ADDRESS:6443 (the inventory has no control plane)"
	}

	return strings.Join(out, " or ")
}

func roleName(n Node) string {
	if n.Role == node.RoleUnknown {
		return "node of profile " + n.Profile
	}

	return n.Role.String()
}

// at is file:line (file alone when the line is unknown).
func at(file string, line int) string {
	if line <= 0 {
		return file
	}

	return fmt.Sprintf("%s:%d", file, line)
}

// checkObligations is the incident refused before any card: the node's
// image (its profile's schematic) has an extension that waits for an
// ExtensionServiceConfig its config lacks, so the node would stay in the
// booting stage and Talos would reboot it every BootTimeout, whatever the
// profile is called (a custom profile named worker that adds Newt).
func (p *parser) checkObligations(inv *Inventory, n Node, what string, cfg *node.Config, profiles []factory.Profile) {
	pr, err := factory.FindProfile(profiles, n.Profile)
	if err != nil {
		return // reported where the profile is named
	}

	for _, e := range pr.Extensions {
		se, ok := node.ServiceExtensionOf(e)
		if !ok || cfg.HasExtensionService(se.ConfigName) {
			continue
		}

		env := ""
		if len(se.Env) > 0 {
			env = " (environment: " + se.EnvText() + ")"
		}

		fix := fmt.Sprintf("add an ExtensionServiceConfig document named %s to %s%s, or %s",
			se.ConfigName, n.Config, env, profileFix(inv, n, pr, se.Extension, profiles))
		p.add(n.Line, fix, "%s: its image (profile %s) has %s, which waits for an ExtensionServiceConfig named %s, and its config %s (%s) has none: the node would stay in the booting stage and Talos would reboot it every %d min (BootTimeout)",
			what, pr.Name, se.Extension, se.ConfigName, n.Config, at(p.file, n.ConfigLine), int(constants.BootTimeout.Minutes()))
	}
}

// profileFix says how to give the node an image without ext: never the
// profile that has it. A built-in profile is replaced by another profile
// (the node's role's built-in when it lacks ext); a custom one is edited
// where it is defined.
func profileFix(inv *Inventory, n Node, pr factory.Profile, ext string, profiles []factory.Profile) string {
	builtin := false
	for _, b := range factory.BuiltinProfiles() {
		if b.Name == pr.Name {
			bid, _ := b.SchematicID()
			pid, _ := pr.SchematicID()
			builtin = bid == pid
		}
	}

	if !builtin {
		where := "the profiles file"
		if inv.Profiles != "" {
			where = inv.Profiles
		}

		return fmt.Sprintf("remove %s from profile %s in %s (a profile named like a built-in role replaces it)", ext, pr.Name, where)
	}

	for _, other := range profiles {
		if other.Name != pr.Name && !slices.Contains(other.Extensions, ext) && (n.Role == node.RoleUnknown || other.Name == n.Role.String()) {
			return fmt.Sprintf("give %s the profile %s (without %s)", n.Hostname, other.Name, ext)
		}
	}

	return fmt.Sprintf("give %s a profile without %s", n.Hostname, ext)
}
