// Package inventory reads a cluster inventory, talosflash.yaml: the
// cluster's named machines, each with its role (or profile), static
// address, gateway, DNS, interface, machine config and installer file.
//
//	cluster: home
//	factory: https://factory.talos.dev
//	talosVersion: v1.14.0
//	gateway: 192.168.1.1        # defaults for every node
//	dns: [192.168.1.1]
//	nodes:
//	  - hostname: cp-1
//	    role: controlplane
//	    address: 192.168.1.20/24
//	    config: talos/controlplane.yaml
//	    installer: installer-controlplane.yaml
//	  - hostname: worker-3
//	    role: worker
//	    board: rpi5               # a Raspberry Pi 5 (default: rpi4)
//	    address: 192.168.1.23/24
//	    installer: talos/installer-worker-rpi5.yaml
//
// Decoding is strict and checks everything it can offline: every problem
// is reported at once, each with file, line and the fix (Problems). Paths
// are relative to the inventory file's folder.
//
// A node's NetworkConfig is the value talosflash writes under META key
// 0x0a: a Talos PlatformNetworkConfig (addresses, links, routes, hostnames,
// resolvers, each `layer: platform`) that the metal platform applies at
// boot, before any machine config. It holds nothing secret.
package inventory

import (
	"errors"
	"fmt"
	"io"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/talosflash/talosflash/factory"
	"github.com/talosflash/talosflash/internal/editdistance"
	"github.com/talosflash/talosflash/internal/userfile"
	"github.com/talosflash/talosflash/node"
)

// DefaultFile is the inventory's name when none is given.
const DefaultFile = "talosflash.yaml"

// DefaultInterface is the Raspberry Pi 4's onboard Ethernet under Talos's
// predictable interface names (systemd-udevd NamePolicy "onboard":
// devicetree alias ethernet0 -> end0).
const DefaultInterface = "end0"

// MaxFile bounds the inventory file.
const MaxFile = 1 << 20

// Inventory is a decoded, checked talosflash.yaml.
type Inventory struct {
	Path         string // as given to Load ("" for Parse)
	Cluster      string
	Factory      string // "" = talosflash's default
	TalosVersion string // "" = the profile's default
	Profiles     string // resolved path of a profiles file, "" if none
	// Known are the profiles its nodes were checked against:
	// Options.Profiles, else the built-ins merged with its profiles: file.
	Known []factory.Profile
	Nodes []Node
	// Notes are what the checks could not decide (a control-plane
	// endpoint that is a DNS name or a VIP): said, not problems.
	Notes []Problem
}

// Node is one machine.
type Node struct {
	Hostname string
	Role     node.Role // controlplane, worker, or RoleUnknown for a custom profile that names none
	Profile  string    // the image profile: Profile if given, else Role
	// Board is the Raspberry Pi model: its image is the profile built for
	// it (factory.Profile.ForBoard). When the node names none: its
	// profile's board for a profile made for one board, else
	// factory.DefaultBoard (rpi4).
	Board     factory.Board
	Address   netip.Prefix
	Gateway   netip.Addr // invalid: no default route
	DNS       []netip.Addr
	Interface string
	Config    string // resolved path, "" if not given
	Installer string // resolved path, "" if not given
	Line      int    // where the node starts in the file
	// Lines of config:, installer: and board: (0: not given).
	ConfigLine, InstallerLine, BoardLine int
}

// ShortName is the node's name to Talos and Kubernetes: its hostname
// before the first dot (node.SplitHostname).
func (n Node) ShortName() string {
	short, _ := node.SplitHostname(n.Hostname)
	return short
}

// Options tell Load what else to check against.
type Options struct {
	// Profiles are the known image profiles (factory.BuiltinProfiles()
	// merged with --profiles). Nil: the built-ins, plus the inventory's
	// own `profiles:` file if it names one.
	Profiles []factory.Profile
	// SkipFiles: do not require config/installer files to exist.
	SkipFiles bool
}

// Problem is one thing wrong with the file.
type Problem struct {
	File    string
	Line    int // 0: the file as a whole
	Message string
	Fix     string
}

func (p Problem) Error() string {
	s := p.File
	if p.Line > 0 {
		s += fmt.Sprintf(":%d", p.Line)
	}

	s += ": " + p.Message
	if p.Fix != "" {
		s += " (fix: " + p.Fix + ")"
	}

	return s
}

// Problems is every problem found; it is the error Load returns.
type Problems []Problem

func (ps Problems) Error() string {
	lines := make([]string, len(ps))
	for i, p := range ps {
		lines[i] = p.Error()
	}

	return strings.Join(lines, "\n")
}

// Load reads and checks the inventory at path. The error, if any, is a
// Problems listing everything wrong (or a read error).
func Load(path string, opts Options) (*Inventory, error) {
	data, err := userfile.Read(path, MaxFile)
	if err != nil {
		return nil, fmt.Errorf("inventory: %w", err)
	}

	return Parse(data, path, filepath.Dir(path), opts)
}

// Parse checks an inventory's bytes; name labels the problems, dir is what
// relative paths are resolved against.
func Parse(data []byte, name, dir string, opts Options) (*Inventory, error) {
	p := &parser{file: name, dir: dir, opts: opts}
	inv := p.parse(data)

	if len(p.problems) > 0 {
		return inv, p.problems
	}

	return inv, nil
}

// Fields of the file, in the order they are documented.
var (
	topFields  = []string{"cluster", "factory", "talosVersion", "profiles", "gateway", "dns", "interface", "nodes"}
	nodeFields = []string{"hostname", "role", "profile", "board", "address", "gateway", "dns", "interface", "config", "installer"}
)

type parser struct {
	file     string
	dir      string
	opts     Options
	problems Problems
	// configs: what each config file read says (machine type, hostname).
	configs map[string]*node.Config
	// version, versionLine: the inventory's talosVersion (a node's image
	// is its profile at this version).
	version     string
	versionLine int
	saidVersion map[factory.Board]bool // a board too new for version, said once
}

func (p *parser) add(line int, fix, format string, args ...any) {
	p.problems = append(p.problems, Problem{File: p.file, Line: line, Message: fmt.Sprintf(format, args...), Fix: fix})
}

type defaults struct {
	gateway   netip.Addr
	dns       []netip.Addr
	iface     string
	gwLine    int
	ifaceLine int
}

func (p *parser) parse(data []byte) *Inventory {
	inv := &Inventory{Path: p.file}

	var doc yaml.Node

	dec := yaml.NewDecoder(strings.NewReader(string(data)))
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			p.add(0, "start from `talosflash inventory init`", "the file is empty")
		} else {
			line := yamlLine(err)
			msg := strings.TrimPrefix(err.Error(), "yaml: ")
			msg = strings.TrimPrefix(msg, fmt.Sprintf("line %d: ", line))
			p.add(line, "correct the YAML syntax", "%s", msg)
		}

		return inv
	}

	root := &doc
	if root.Kind == yaml.DocumentNode && len(root.Content) == 1 {
		root = root.Content[0]
	}

	if root.Kind != yaml.MappingNode {
		p.add(root.Line, "the file is a mapping with cluster:, nodes: ...", "the inventory is not a mapping")
		return inv
	}

	p.checkKeys(root, "the inventory", topFields)

	var def defaults

	def.iface = DefaultInterface

	profilesLine := 0
	nodesNode := (*yaml.Node)(nil)

	for i := 0; i+1 < len(root.Content); i += 2 {
		k, v := root.Content[i], root.Content[i+1]
		switch k.Value {
		case "cluster":
			inv.Cluster = p.str(v, "cluster")
		case "factory":
			inv.Factory = p.str(v, "factory")
			if inv.Factory != "" && !strings.HasPrefix(inv.Factory, "https://") && !strings.HasPrefix(inv.Factory, "http://") {
				p.add(v.Line, "write it as https://factory.talos.dev", "factory %q is not an http(s) URL", inv.Factory)
			}
		case "talosVersion":
			inv.TalosVersion = p.str(v, "talosVersion")
			if inv.TalosVersion != "" {
				if err := factory.ValidateVersion(inv.TalosVersion); err != nil {
					p.add(v.Line, "write it as v1.14.0", "talosVersion: %v", err)
				} else {
					p.version, p.versionLine = inv.TalosVersion, v.Line
				}
			}
		case "profiles":
			if s := p.str(v, "profiles"); s != "" {
				inv.Profiles = p.resolve(s)
				profilesLine = v.Line
			}
		case "gateway":
			def.gateway = p.addr(v, "gateway")
			def.gwLine = v.Line
		case "dns":
			def.dns = p.dns(v)
		case "interface":
			def.iface = p.iface(v)
			def.ifaceLine = v.Line
		case "nodes":
			nodesNode = v
		}
	}

	profiles := p.opts.Profiles
	if profiles == nil {
		profiles = factory.BuiltinProfiles()

		if inv.Profiles != "" {
			user, err := factory.LoadProfiles(inv.Profiles)
			if err != nil {
				p.add(profilesLine, "correct the profiles file, or remove profiles:", "%v", err)
			} else {
				profiles = user
			}
		}
	}

	inv.Known = profiles

	if nodesNode == nil || isNull(nodesNode) {
		p.add(root.Line, "add nodes: with one entry per machine (see `talosflash inventory init`)", "no nodes")
		return inv
	}

	if nodesNode.Kind != yaml.SequenceNode {
		p.add(nodesNode.Line, "make nodes: a list, each entry starting with `- hostname:`", "nodes is not a list")
		return inv
	}

	for _, n := range nodesNode.Content {
		if node, ok := p.node(n, def, profiles); ok {
			inv.Nodes = append(inv.Nodes, node)
		}
	}

	p.checkUnique(inv.Nodes)
	p.crossCheck(inv, profiles)

	return inv
}

func (p *parser) node(n *yaml.Node, def defaults, profiles []factory.Profile) (Node, bool) {
	if n.Kind != yaml.MappingNode {
		p.add(n.Line, "each node is a mapping: - hostname: ..., role: ..., address: ...", "a node is not a mapping")
		return Node{}, false
	}

	p.checkKeys(n, "a node", nodeFields)

	node := Node{Line: n.Line, Gateway: def.gateway, DNS: def.dns, Interface: def.iface, Board: factory.DefaultBoard}
	lines := map[string]int{}
	role, board := "", ""
	gatewaySet := false

	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		lines[k.Value] = v.Line

		switch k.Value {
		case "hostname":
			node.Hostname = p.str(v, "hostname")
		case "role":
			role = p.str(v, "role")
		case "profile":
			node.Profile = p.str(v, "profile")
		case "board":
			board = p.str(v, "board")
			node.BoardLine = v.Line
		case "address":
			node.Address = p.prefix(v)
		case "gateway":
			node.Gateway = p.addr(v, "gateway")
			gatewaySet = true
		case "dns":
			node.DNS = p.dns(v)
		case "interface":
			node.Interface = p.iface(v)
		case "config":
			node.Config = p.fileRef(v, "config", "generate the machine configs with talosctl gen config CLUSTER https://CP-ADDRESS:6443 --output-dir talos")
			node.ConfigLine = v.Line
		case "installer":
			node.InstallerLine = v.Line
			node.Installer = p.fileRef(v, "installer", "write it with talosflash schematic --role ROLE --installer-yaml > talos/installer-ROLE.yaml")
		}
	}

	what := "a node"
	if node.Hostname != "" {
		what = "node " + node.Hostname
	}

	if node.Hostname == "" {
		line, ok := lines["hostname"]
		if !ok {
			line = n.Line
		}

		p.add(line, "add hostname: (e.g. worker-1)", "a node has no hostname")
	} else if node.Hostname != "" {
		if msg := hostnameProblem(node.Hostname); msg != "" {
			p.add(lines["hostname"], "use lowercase letters, digits and '-', up to 63 characters, e.g. worker-1", "hostname %q: %s", node.Hostname, msg)
		}
	}

	p.roleAndProfile(&node, role, what, lines, profiles)
	p.board(&node, board, what, profiles)
	p.checkConfig(node, what, lines["config"])

	if line, ok := lines["address"]; !ok || isEmpty(n, "address") {
		if !ok {
			line = n.Line
		}

		p.add(line, "add address: with the prefix length, e.g. 192.168.1.21/24", "%s has no address", what)
	}

	if node.Address.IsValid() && node.Gateway.IsValid() {
		line := lines["gateway"]
		if !gatewaySet {
			line = def.gwLine
		}

		switch {
		case node.Gateway.Is4() != node.Address.Addr().Is4():
			p.add(line, "give a gateway of the same IP version as the address", "%s: gateway %s and address %s are not the same IP version", what, node.Gateway, node.Address)
		case !node.Address.Contains(node.Gateway):
			p.add(line, fmt.Sprintf("the gateway must be inside %s: correct the gateway or the address's prefix length", node.Address.Masked()),
				"%s: gateway %s is outside the address's subnet %s", what, node.Gateway, node.Address.Masked())
		case node.Gateway == node.Address.Addr():
			p.add(line, "the gateway is the router's address, not the node's", "%s: gateway %s is the node's own address", what, node.Gateway)
		case node.Gateway.Is4() && node.Address.Bits() < 31 && node.Gateway == node.Address.Masked().Addr():
			p.add(line, "the gateway is the router's address inside the subnet, e.g. its .1", "%s: gateway %s is the subnet %s's network address", what, node.Gateway, node.Address.Masked())
		case node.Gateway.Is4() && node.Address.Bits() < 31 && node.Gateway == lastAddr(node.Address):
			p.add(line, "the gateway is the router's address inside the subnet, e.g. its .1", "%s: gateway %s is the subnet %s's broadcast address", what, node.Gateway, node.Address.Masked())
		}
	}

	return node, true
}

func (p *parser) roleAndProfile(nd *Node, role, what string, lines map[string]int, profiles []factory.Profile) {
	hasRole := role != ""
	hasProfile := nd.Profile != ""

	if !hasRole && !hasProfile {
		p.add(nd.Line, "add role: controlplane or role: worker (or profile: NAME for a custom image)", "%s has no role or profile", what)
		return
	}

	if hasRole {
		r, err := node.ParseRole(role, false)
		if err != nil {
			fix := "use role: controlplane or role: worker"
			if strings.EqualFold(strings.TrimSpace(role), "init") {
				fix = "init is deprecated in Talos: use role: controlplane"
			}

			p.problems = append(p.problems, Problem{File: p.file, Line: lines["role"], Message: what + ": " + err.Error(), Fix: fix})
		}

		nd.Role = r
	}

	if hasProfile {
		names := make([]string, len(profiles))
		found := false

		for i, pr := range profiles {
			names[i] = pr.Name
			found = found || pr.Name == nd.Profile
		}

		if !found {
			msg := fmt.Sprintf("%s: unknown profile %q", what, nd.Profile)
			if near := editdistance.Closest(nd.Profile, names); near != "" {
				msg += fmt.Sprintf(" (did you mean %s?)", near)
			}

			p.problems = append(p.problems, Problem{
				File: p.file, Line: lines["profile"], Message: msg,
				Fix: "use one of " + strings.Join(names, ", ") + ", or define it in the profiles: file",
			})
		} else if r, err := node.ParseRole(nd.Profile, false); !hasRole && err == nil {
			nd.Role = r // a built-in role's profile
		}
	}

	if nd.Profile == "" {
		nd.Profile = nd.Role.String()
	}
}

// board reads the node's board: (when not given: its profile's board, for
// a profile made for one board, else DefaultBoard) and checks
// its profile can be built for it: a profile made for another board
// (`board: rpi4`, or an overlay that is a board's) is refused; a board
// whose overlay the node's Talos version lacks is checked at the
// inventory's version in crossCheck (boardVersion).
func (p *parser) board(nd *Node, name, what string, profiles []factory.Profile) {
	if nd.BoardLine != 0 {
		b, err := factory.ParseBoard(name)
		if err != nil {
			fix := "write board: " + strings.Join(factory.BoardNames(), " or ") + " (" + boardModels() + "), or leave it out for " + string(factory.DefaultBoard)
			var ub *factory.UnknownBoardError
			if errors.As(err, &ub) {
				near := editdistance.Closest(name, factory.BoardNames())
				if near == "" && ub.Near != "" {
					near = string(ub.Near) // an overlay's name: rpi_5 is board rpi5's
				}
				if near != "" {
					fix = "did you mean " + near + "? (" + factory.Board(near).Model() + ")"
				}
			}
			msg := fmt.Sprintf("%s: unknown board %q (valid: %s)", what, name, strings.Join(factory.BoardNames(), ", "))
			if name == "" {
				msg = what + ": board: is empty"
			}
			p.problems = append(p.problems, Problem{File: p.file, Line: nd.BoardLine, Message: msg, Fix: fix})
			return
		}
		nd.Board = b
	}

	pr, err := factory.FindProfile(profiles, nd.Profile)
	if err != nil {
		return // reported where the profile is named
	}

	if b := pr.TargetBoard(); nd.BoardLine == 0 && !pr.AnyBoard && b != "" {
		nd.Board = b // a profile for one board: its nodes are that board
	}

	if p.version != "" {
		pr.TalosVersion = p.version
	}

	var (
		mismatch *factory.BoardMismatchError
		tooOld   *factory.BoardVersionError
	)
	_, err = pr.ForBoard(nd.Board)
	switch {
	case errors.As(err, &tooOld) && p.version == "": // the profile's own version
		p.add(nd.Line, fmt.Sprintf("set talosVersion: %s or later (the inventory's, or profile %s's)", tooOld.MinVersion, pr.Name), "%s: %v", what, tooOld)
	case errors.As(err, &tooOld) && !p.saidVersion[nd.Board]: // once per board, at talosVersion:
		if p.saidVersion == nil {
			p.saidVersion = map[factory.Board]bool{}
		}
		p.saidVersion[nd.Board] = true
		p.add(p.versionLine, fmt.Sprintf("set talosVersion: %s or later (the %s has no Talos image before it)", tooOld.MinVersion, nd.Board.Model()),
			"talosVersion %s: %s (board %s) needs Talos %s or later: its overlay %s is offered from %s on", p.version, nd.Hostname, nd.Board, tooOld.MinVersion, nd.Board.Overlay().Name, tooOld.MinVersion)
	}
	if errors.As(err, &mismatch) {
		line := nd.BoardLine
		if line == 0 {
			line = nd.Line
		}
		p.add(line, fmt.Sprintf("give %s a profile for %s, write board: %s if it is a %s, or write board: %s in profile %s (instead of its overlay) so it follows each node's board",
			nd.Hostname, nd.Board, mismatch.ProfileBoard, mismatch.ProfileBoard.Model(), factory.AnyBoard, pr.Name),
			"%s (board %s, the %s): profile %s is for the %s (board %s, overlay %s)", what, nd.Board, nd.Board.Model(), pr.Name, mismatch.ProfileBoard.Model(), mismatch.ProfileBoard, mismatch.ProfileBoard.Overlay().Name)
	}
}

// boardModels names the boards for a fix ("rpi4 is the Raspberry Pi 4B,
// rpi5 the Raspberry Pi 5").
func boardModels() string {
	var out []string
	for i, b := range factory.Boards() {
		is := " the "
		if i == 0 {
			is = " is the "
		}
		out = append(out, string(b)+is+b.Model())
	}
	return strings.Join(out, ", ")
}

// checkConfig reads the node's machine config (only its machine type and
// static hostname are used; node.LoadConfig's errors carry no values) and
// reports a config of the wrong role, the incident's class: worker.yaml
// sent to the control plane.
func (p *parser) checkConfig(n Node, what string, line int) {
	if n.Config == "" || p.opts.SkipFiles {
		return
	}

	cfg, ok := p.configs[n.Config]
	if !ok {
		data, err := node.ReadConfigFile(n.Config)
		var unreadable *node.ConfigFileError
		if errors.As(err, &unreadable) && unreadable.Err != nil {
			err = unreadable.Err // the problem names the config already
		}

		if err == nil {
			cfg, err = node.LoadConfig(data)
		}

		if err != nil {
			if !errors.Is(err, os.ErrNotExist) {
				p.add(line, "point config: at the node's machine config from talosctl gen config", "%s: config %s: %v", what, n.Config, err)
			}

			cfg = nil
		}

		if p.configs == nil {
			p.configs = map[string]*node.Config{}
		}

		p.configs[n.Config] = cfg
	}

	if cfg == nil {
		return
	}

	if cfg.Role() == node.RoleInit && n.Role == node.RoleControlPlane {
		// A control plane to Talos, but deprecated, and the inventory has
		// no init role: the control plane's config, bootstrapped once by
		// `apply --bootstrap`, is what gen config writes today.
		p.add(line, "point config: at the controlplane config (talos/controlplane.yaml from talosctl gen config); `apply --bootstrap` bootstraps etcd once",
			"%s: config %s is an init config (machine.type at %s), deprecated in Talos: the inventory's control planes take controlplane configs", what, n.Config, at(n.Config, cfg.MachineTypeLine))
	} else if wrongRole(n, cfg) {
		says := "machine.type at " + at(n.Config, cfg.MachineTypeLine)
		if note := cfg.RoleNote(); note != "" {
			says = note + " (" + at(n.Config, cfg.MachineTypeLine) + ")"
		}
		p.add(line, fmt.Sprintf("point config: at the %s config (talos/%s.yaml from talosctl gen config), or correct role:", n.Role, n.Role),
			"%s: config %s is a %s config (%s), the node's role is %s", what, n.Config, configRoleWord(cfg), says, n.Role)
	}

	if cfg.Hostname != "" && n.Hostname != "" && !strings.EqualFold(cfg.Hostname, n.Hostname) {
		p.add(line, "remove the hostname from the config (the card sets it) or make them equal",
			"%s: config %s sets hostname %s, which would replace %s after the config is applied", what, n.Config, cfg.Hostname, n.Hostname)
	}
}

// wrongRole: the config's role, as Talos reads machine.type ("join" and a
// left-out type are a worker: node.Config.Role), is not the node's; a word
// Talos does not know is wrong too.
func wrongRole(n Node, cfg *node.Config) bool {
	if !n.Role.Known() {
		return false
	}
	if have := cfg.Role(); have.Known() {
		return have != n.Role
	}
	return cfg.MachineType != ""
}

// configRoleWord is the config's role for a message: Talos' reading, else
// the word as written.
func configRoleWord(cfg *node.Config) string {
	if r := cfg.Role(); r.Known() {
		return r.String()
	}
	return cfg.MachineType
}

func (p *parser) checkUnique(nodes []Node) {
	hosts := map[string]Node{}
	addrs := map[netip.Addr]Node{}

	for _, n := range nodes {
		if n.Hostname != "" {
			// A node's name to Talos (HostnameStatus splits an FQDN at its
			// first dot: hostname_spec.go ParseFQDN) and to Kubernetes (its
			// node name) is the short hostname, compared ignoring case.
			key := strings.ToLower(n.ShortName())
			switch first, ok := hosts[key]; {
			case ok && strings.EqualFold(first.Hostname, n.Hostname):
				p.add(n.Line, "give each node its own hostname", "hostname %s repeats the node at line %d", n.Hostname, first.Line)
			case ok:
				p.add(n.Line, "give each node its own hostname (its first label)", "hostname %s is node %s to Talos and Kubernetes (its short name), as the node at line %d", n.Hostname, key, first.Line)
			default:
				hosts[key] = n
			}
		}

		if n.Address.IsValid() {
			if first, ok := addrs[n.Address.Addr()]; ok {
				p.add(n.Line, "give each node its own address", "address %s of %s is also %s's (line %d)", n.Address.Addr(), n.Hostname, first.Hostname, first.Line)
			} else {
				addrs[n.Address.Addr()] = n
			}
		}
	}
}

func (p *parser) checkKeys(n *yaml.Node, what string, allowed []string) {
	seen := map[string]bool{}

	for i := 0; i+1 < len(n.Content); i += 2 {
		k := n.Content[i]
		if k.Kind != yaml.ScalarNode {
			p.add(k.Line, "use plain names as keys", "%s has a key that is not a name", what)
			continue
		}

		if !slices.Contains(allowed, k.Value) {
			fix := "valid fields: " + strings.Join(allowed, ", ")
			if near := editdistance.Closest(k.Value, allowed); near != "" {
				fix = "did you mean " + near + "?"
			}

			p.add(k.Line, fix, "unknown field %q in %s", k.Value, what)
		}

		if seen[k.Value] {
			p.add(k.Line, "keep one "+k.Value+":", "field %q repeated in %s", k.Value, what)
		}

		seen[k.Value] = true
	}
}

func (p *parser) str(v *yaml.Node, field string) string {
	if isNull(v) {
		return ""
	}

	if v.Kind != yaml.ScalarNode {
		p.add(v.Line, "write a single value", "%s must be a string", field)
		return ""
	}

	return strings.TrimSpace(v.Value)
}

func (p *parser) addr(v *yaml.Node, field string) netip.Addr {
	s := p.str(v, field)
	if s == "" {
		return netip.Addr{}
	}

	a, err := netip.ParseAddr(s)
	if err != nil {
		fix := "write an IP address, e.g. 192.168.1.1"
		if strings.Contains(s, "/") {
			fix = "write the address without /prefix"
		}

		p.add(v.Line, fix, "%s %q is not an IP address", field, s)

		return netip.Addr{}
	}

	if a.Is4In6() {
		fix := "write the IPv4 address " + a.Unmap().String()
		if unicastProblem(a.Unmap()) != "" {
			fix = "give the " + field + " server's or router's own unicast IPv4 address, e.g. 192.168.1.1"
		}
		p.add(v.Line, fix, "%s %s %s", field, a, mappedProblem)
		return netip.Addr{}
	}

	if msg := unicastProblem(a); msg != "" {
		p.add(v.Line, "give the "+field+" server's or router's own unicast address, e.g. 192.168.1.1", "%s %s %s", field, a, msg)
		return netip.Addr{}
	}

	return a
}

// mappedProblem: an IPv4-mapped IPv6 address (::ffff:a.b.c.d) stands for
// an IPv4 peer inside one host's sockets and is never an address on a
// network (RFC 4291 2.5.5.2); the unspecified, multicast and broadcast
// checks do not see through it.
const mappedProblem = "is an IPv4-mapped IPv6 address (::ffff:a.b.c.d: never an address on a network)"

// unicastProblem says why a cannot be a router's or DNS server's address
// ("" when it can): unspecified, multicast, the IPv4 broadcast address, or
// a link-local address with a zone (the zone names a link of this
// computer, not the node's; Talos takes none).
func unicastProblem(a netip.Addr) string {
	switch {
	case a.IsUnspecified():
		return "is the unspecified address (no host)"
	case a.IsMulticast():
		return "is a multicast address"
	case a == netip.AddrFrom4([4]byte{255, 255, 255, 255}):
		return "is the broadcast address"
	case a.Zone() != "":
		return "has a zone (%" + a.Zone() + "): write it without one"
	}

	return ""
}

// MaxDNS is how many DNS servers a node may have. META could carry
// thousands (a copy holds 256 KiB), but a node's resolv.conf is read as
// glibc and musl do, by its first 3 nameservers (MAXNS), and the kubelet
// drops any past 3 from the pods' resolv.conf: a 4th would never be asked.
const MaxDNS = 3

// dns reads a dns: field (one address or a list), at most MaxDNS.
func (p *parser) dns(v *yaml.Node) []netip.Addr {
	out := p.addrs(v, "dns")
	if len(out) > MaxDNS {
		p.add(v.Line, fmt.Sprintf("keep the first %d (a node asks no more than %d)", MaxDNS, MaxDNS), "dns: %d servers, at most %d", len(out), MaxDNS)
		return out[:MaxDNS]
	}

	return out
}

func (p *parser) addrs(v *yaml.Node, field string) []netip.Addr {
	if isNull(v) {
		return nil
	}

	items := []*yaml.Node{v}
	if v.Kind == yaml.SequenceNode {
		items = v.Content
	}

	var out []netip.Addr

	for _, it := range items {
		a := p.addr(it, field)
		if !a.IsValid() {
			continue
		}

		// A server named twice takes one of the MaxDNS places for nothing.
		if slices.Contains(out, a) {
			p.add(it.Line, "list each server once", "%s: %s is listed twice", field, a)
			continue
		}

		out = append(out, a)
	}

	return out
}

func (p *parser) prefix(v *yaml.Node) netip.Prefix {
	s := p.str(v, "address")
	if s == "" {
		return netip.Prefix{}
	}

	if !strings.Contains(s, "/") {
		if a, err := netip.ParseAddr(s); err == nil {
			p.add(v.Line, fmt.Sprintf("add the prefix length, e.g. %s/24", a), "address %q has no prefix length", s)
			return netip.Prefix{}
		}
	}

	pr, err := netip.ParsePrefix(s)
	if err != nil {
		p.add(v.Line, "write it in CIDR form, e.g. 192.168.1.21/24", "address %q is not a valid CIDR address", s)
		return netip.Prefix{}
	}

	a := pr.Addr()
	if a.Is4In6() {
		p.add(v.Line, fmt.Sprintf("write the IPv4 address %s with its prefix length, e.g. %s/24", a.Unmap(), a.Unmap()), "address %s %s", pr, mappedProblem)
		return netip.Prefix{}
	}

	if pr.Bits() == 0 {
		p.add(v.Line, "give the subnet's prefix length, e.g. /24", "address %s has the prefix length /0: every address would be on the node's link", pr)
		return netip.Prefix{}
	}

	if a.IsUnspecified() || a.IsMulticast() || a == netip.AddrFrom4([4]byte{255, 255, 255, 255}) {
		p.add(v.Line, "give the node's own unicast address", "address %s cannot be a node's", pr)
		return netip.Prefix{}
	}

	if a.Is4() && pr.Bits() <= 30 {
		if a == pr.Masked().Addr() {
			p.add(v.Line, "give a host address inside the subnet, e.g. the .21 of it", "address %s is the subnet's network address", pr)
			return netip.Prefix{}
		}

		if a == lastAddr(pr) {
			p.add(v.Line, "give a host address inside the subnet", "address %s is the subnet's broadcast address", pr)
			return netip.Prefix{}
		}
	}

	return pr
}

func (p *parser) iface(v *yaml.Node) string {
	s := p.str(v, "interface")
	if s == "" {
		return DefaultInterface
	}

	if msg := ifaceProblem(s); msg != "" {
		p.add(v.Line, "write a Linux interface name such as "+DefaultInterface+" (the Pi 4's onboard port) or eth0", "interface %q is not a Linux interface name: %s", s, msg)
	}

	return s
}

// ifaceProblem says why s is not a Linux interface name ("" when it is):
// the kernel's rules (dev_valid_name: 1 to 15 bytes, no '/', ':' or
// whitespace, not "." or "..") in printable ASCII, starting with a letter
// or digit as every interface a Pi has does (so not "-" or "...").
func ifaceProblem(s string) string {
	switch {
	case s == "" || len(s) > 15:
		return fmt.Sprintf("%d bytes, 1 to 15 allowed", len(s))
	case s == "." || s == "..":
		return "not a name"
	}

	for _, c := range []byte(s) {
		switch {
		case c <= ' ' || c >= 0x7f:
			return "only printable ASCII without spaces allowed"
		case c == '/' || c == ':':
			return fmt.Sprintf("contains %q", c)
		}
	}

	if c := s[0]; !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9') {
		return "must start with a letter or a digit"
	}

	return ""
}

func (p *parser) fileRef(v *yaml.Node, field, how string) string {
	s := p.str(v, field)
	if s == "" {
		return ""
	}

	path := p.resolve(s)
	if p.opts.SkipFiles {
		return path
	}

	st, err := os.Stat(path)
	switch {
	case err != nil:
		p.add(v.Line, fmt.Sprintf("%s, or correct the path (relative to %s)", how, displayDir(p.dir)), "%s file %s not found", field, path)
	case !st.Mode().IsRegular():
		p.add(v.Line, "point "+field+": at a regular file", "%s %s is not a regular file", field, path)
	}

	return path
}

func (p *parser) resolve(s string) string {
	if filepath.IsAbs(s) || p.dir == "" {
		return filepath.Clean(s)
	}

	return filepath.Join(p.dir, s)
}

func displayDir(d string) string {
	if d == "" || d == "." {
		return "the current folder"
	}

	return d
}

func lastAddr(p netip.Prefix) netip.Addr {
	b := p.Masked().Addr().As4()
	host := uint32(1)<<(32-p.Bits()) - 1
	v := uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3])
	v |= host

	return netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)})
}

// isEmpty: the mapping n has key with a null or blank value.
func isEmpty(n *yaml.Node, key string) bool {
	for i := 0; i+1 < len(n.Content); i += 2 {
		if n.Content[i].Value == key {
			v := n.Content[i+1]
			return isNull(v) || v.Kind == yaml.ScalarNode && strings.TrimSpace(v.Value) == ""
		}
	}

	return false
}

func isNull(n *yaml.Node) bool {
	return n.Kind == yaml.ScalarNode && n.Tag == "!!null"
}

// hostnameProblem says what is wrong with a hostname ("" if nothing): a
// DNS name of labels (lowercase letters, digits, '-', as Kubernetes node
// names must be), the first label at most 63 characters as Talos
// requires, 253 in all.
func hostnameProblem(h string) string {
	if len(h) > 253 {
		return "longer than 253 characters"
	}

	for i, label := range strings.Split(h, ".") {
		if label == "" {
			return "has an empty label"
		}

		if len(label) > 63 {
			if i == 0 {
				return "longer than 63 characters"
			}

			return "a label is longer than 63 characters"
		}

		if label[0] == '-' || label[len(label)-1] == '-' {
			return "a label starts or ends with '-'"
		}

		for _, c := range label {
			if c >= 'A' && c <= 'Z' {
				return fmt.Sprintf("contains the capital %q (Kubernetes node names are lowercase)", c)
			}

			if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-') {
				return fmt.Sprintf("contains %q", c)
			}
		}
	}

	return ""
}

// yamlLine pulls the line out of a yaml.v3 error ("yaml: line 7: ...").
func yamlLine(err error) int {
	var line int

	s := err.Error()
	if i := strings.Index(s, "line "); i >= 0 {
		_, _ = fmt.Sscanf(s[i:], "line %d", &line)
	}

	return line
}
