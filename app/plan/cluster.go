package plan

import (
	"errors"
	"fmt"
	"net/netip"
	"strings"

	"github.com/siderolabs/image-factory/pkg/schematic"

	"github.com/talosflash/talosflash/factory"
	"github.com/talosflash/talosflash/internal/editdistance"
	"github.com/talosflash/talosflash/inventory"
	"github.com/talosflash/talosflash/node"
)

// Cluster is the one model of the user's cluster: its members, each with
// its role, image, config, address and last observed state, and the
// answers to what the front ends ask of it (which members are control
// planes, which one is bootstrapped, where the CNI comes from, who gets
// the kubeconfig, may this member be applied, bootstrapped, upgraded or
// patched now). It is built once per run from the inventory
// (Settings.Cluster), or from the addresses the user typed when there is
// none (ClusterAt); the CLI's commands and the app's Nodes step take their
// members from it and render its answers.
type Cluster struct {
	Name      string               // the inventory's cluster ("" none)
	Inventory *inventory.Inventory // nil: members from typed addresses
	Profiles  []factory.Profile
	Members   []*Member
	// Bootstrapped is the member whose etcd was bootstrapped, once seen
	// (ObserveBootstrapped): a cluster is bootstrapped once, on one node.
	Bootstrapped *Member

	cni *node.CNI // what the control plane's config, sent in this run, says of the CNI
}

// Member is one node of the cluster.
type Member struct {
	// Hostname is the inventory's name ("" for a typed address).
	Hostname string
	// Role is the inventory's role; for a typed address what was learnt
	// of it (the image it booted, the config it took), else RoleUnknown.
	Role node.Role
	// Profile is its image profile built for its Board (nil: unknown, a
	// typed address): the image its card and its installer must be, and
	// the one a rolling upgrade installs (Schematic, SchematicID).
	Profile *factory.Profile
	// Board is the inventory's board ("" for a typed address).
	Board factory.Board
	// Config is its machine config file ("" none given).
	Config   string
	Endpoint node.Endpoint
	// Entry is its inventory node (nil for a typed address), Inventory
	// the inventory's file.
	Entry     *inventory.Node
	Inventory string
	// State is the last observed (Observe*).
	State State
	// EtcdRunning: its etcd service was seen running (a control plane
	// bootstrapped, or joined).
	EtcdRunning bool
	// Took is the role of the config it took in this run (RoleUnknown:
	// none).
	Took node.Role
	// Nodename is the Kubernetes node name the node said it registers
	// with (its Nodenames resource; "" not read yet).
	Nodename string
}

// State is what a member was last seen doing.
type State string

const (
	StateUnknown      State = ""                   // not observed yet
	StateAbsent       State = "not answering"      // nothing answered at its address
	StateMaintenance  State = "maintenance"        // waits for its config
	StateApplied      State = "applied"            // took its config in this run, not read since
	StateBooting      State = "booting"            // boots with its config
	StateStuck        State = "stuck"              // waits for an extension's ExtensionServiceConfig (the incident)
	StateRunning      State = "running"            // runs its config; its Kubernetes node is not Ready yet
	StateReady        State = "ready"              // running, ready, its Kubernetes node Ready
	StateFailing      State = "failing"            // another error diagnosis (a failed service, etcd unhealthy)
	StateConfigured   State = "configured"         // has a config (asks for a client certificate); nothing more known
	StateAwaitingBoot State = "awaiting bootstrap" // a control plane that runs, its etcd waiting for the cluster's bootstrap
)

// Name is how messages call the member: its hostname, else its address.
func (m *Member) Name() string {
	if m.Hostname != "" {
		return m.Hostname
	}
	return m.Endpoint.Host
}

// ShortName is its name to Talos and Kubernetes (node.SplitHostname).
func (m *Member) ShortName() string {
	short, _ := node.SplitHostname(m.Hostname)
	return short
}

// KubeName is its Kubernetes node name: what the node said (its
// Nodenames resource: the FQDN with KubeNodeConfig registerWithFQDN),
// else the short hostname, lower case, as Talos names it by default
// (controllers/k8s/nodename.go).
func (m *Member) KubeName() string {
	if m.Nodename != "" {
		return m.Nodename
	}
	return strings.ToLower(m.ShortName())
}

// ProfileName is its profile's name ("" unknown).
func (m *Member) ProfileName() string {
	if m.Profile == nil {
		return ""
	}
	return m.Profile.Name
}

// Schematic is its role's image schematic (nil: no profile).
func (m *Member) Schematic() *schematic.Schematic {
	if m.Profile == nil {
		return nil
	}
	return m.Profile.Schematic()
}

// SchematicID is its profile's schematic ID ("" unknown).
func (m *Member) SchematicID() string {
	if m.Profile == nil {
		return ""
	}
	id, err := m.Profile.SchematicID()
	if err != nil {
		return ""
	}
	return id
}

// Needs are the ExtensionServiceConfigs its image waits for: a config
// without one keeps the node booting until BootTimeout (the incident).
func (m *Member) Needs() []node.ServiceExtension {
	if m.Profile == nil {
		return nil
	}
	var out []node.ServiceExtension
	for _, e := range m.Profile.Extensions {
		if se, ok := node.ServiceExtensionOf(e); ok {
			out = append(out, se)
		}
	}
	return out
}

// NewCluster is the inventory's cluster: every node a member, its
// endpoint at port (0: node.DefaultPort), its profile among profiles
// (the inventory's Known when nil).
func NewCluster(inv *inventory.Inventory, profiles []factory.Profile, port int) *Cluster {
	if profiles == nil {
		profiles = inv.Known
	}
	c := &Cluster{Name: inv.Cluster, Inventory: inv, Profiles: profiles}
	for i := range inv.Nodes {
		n := &inv.Nodes[i]
		m := &Member{Hostname: n.Hostname, Role: n.Role, Config: n.Config, Entry: n, Inventory: inv.Path,
			Endpoint: node.EndpointAt(n.Address.Addr(), port), Board: n.Board}
		if p, err := factory.FindProfile(profiles, n.Profile); err == nil {
			// Its role's image on its board: a Pi 5 worker's schematic is the
			// rpi_5 worker's (inventory.Load refused a profile that cannot be
			// built for the node's board; unchecked, it stays as it is).
			if n.Board != "" {
				q := p
				if inv.TalosVersion != "" { // the version its board is checked at
					q.TalosVersion = inv.TalosVersion
				}
				if bp, err := q.ForBoard(n.Board); err == nil {
					bp.TalosVersion = p.TalosVersion
					p = bp
				}
			}
			m.Profile = &p
		}
		c.Members = append(c.Members, m)
	}
	return c
}

// ClusterAt is the cluster of the addresses the user typed (no
// inventory): members of unknown role and image, each address parsed
// once (a typo is an *InputError, nothing looked up).
func ClusterAt(profiles []factory.Profile, addresses ...string) (*Cluster, error) {
	c := &Cluster{Profiles: profiles}
	for _, a := range addresses {
		ep, err := node.ParseEndpoint(a)
		if err != nil {
			return nil, &InputError{Setting: "node", Err: err}
		}
		c.Members = append(c.Members, &Member{Endpoint: ep})
	}
	return c, nil
}

// ControlPlanes are the members that are control planes (init counts),
// in the inventory's order.
func (c *Cluster) ControlPlanes() []*Member {
	var out []*Member
	for _, m := range c.Members {
		if m.Role.IsControlPlane() {
			out = append(out, m)
		}
	}
	return out
}

// FirstControlPlane is the member whose etcd a run bootstraps: the
// inventory's first control plane (nil: none).
func (c *Cluster) FirstControlPlane() *Member {
	if cps := c.ControlPlanes(); len(cps) > 0 {
		return cps[0]
	}
	return nil
}

// ControlPlaneAddrs are the control planes' addresses (an API endpoint at
// one of them is the cluster's own).
func (c *Cluster) ControlPlaneAddrs() []netip.Addr {
	var out []netip.Addr
	for _, m := range c.ControlPlanes() {
		if a := m.Endpoint.Addr(); a.IsValid() {
			out = append(out, a)
		}
	}
	return out
}

// Find is the member called hostname (ignoring case, as DNS does), with
// the closest name when there is none.
func (c *Cluster) Find(hostname string) (*Member, error) {
	var names []string
	for _, m := range c.Members {
		if m.Hostname != "" && strings.EqualFold(m.Hostname, hostname) {
			return m, nil
		}
		names = append(names, m.Hostname)
	}
	msg := fmt.Sprintf("no node %q", hostname)
	if c.Inventory != nil {
		msg += " in " + c.Inventory.Path
	}
	if near := editdistance.Closest(hostname, names); near != "" {
		msg += fmt.Sprintf(" (did you mean %s?)", near)
	} else if len(names) > 0 {
		msg += " (nodes: " + strings.Join(names, ", ") + ")"
	}
	return nil, &InputError{Setting: "hostname", Err: errors.New(msg)}
}

// Select is the members called hostnames, in the order named, each once;
// every member when none is named.
func (c *Cluster) Select(hostnames []string) ([]*Member, error) {
	if len(hostnames) == 0 {
		return c.Members, nil
	}
	var out []*Member
	for _, h := range hostnames {
		m, err := c.Find(h)
		if err != nil {
			return nil, err
		}
		if !containsMember(out, m) {
			out = append(out, m)
		}
	}
	return out, nil
}

func containsMember(ms []*Member, m *Member) bool {
	for _, o := range ms {
		if o == m {
			return true
		}
	}
	return false
}

// At is the member whose address is a (nil: none): an answer at an
// inventory address is expected to be that node.
func (c *Cluster) At(a netip.Addr) *Member {
	a = a.Unmap()
	for _, m := range c.Members {
		if m.Endpoint.Addr() == a {
			return m
		}
	}
	return nil
}

// Track is the member at ep: the inventory's node at that address, else
// the member of that typed address, added once (a node found by a scan or
// typed in the app).
func (c *Cluster) Track(ep node.Endpoint) *Member {
	for _, m := range c.Members {
		if m.Endpoint == ep || m.Entry != nil && ep.Addr().IsValid() && m.Endpoint.Addr() == ep.Addr() {
			return m
		}
	}
	m := &Member{Endpoint: ep}
	c.Members = append(c.Members, m)
	return m
}

// AtEndpoint is At for a host:port text ("" or a name: nil).
func (c *Cluster) AtEndpoint(endpoint string) *Member {
	ep, err := node.ParseEndpoint(endpoint)
	if err != nil || !ep.Addr().IsValid() {
		return nil
	}
	return c.At(ep.Addr())
}

// KubeconfigSource is the control plane asked for the kubeconfig: the one
// named (hostname), else the first; an error names what is missing.
func (c *Cluster) KubeconfigSource(hostname string) (*Member, error) {
	for _, m := range c.ControlPlanes() {
		if hostname == "" || strings.EqualFold(hostname, m.Hostname) {
			return m, nil
		}
	}
	where := "the inventory"
	if c.Inventory != nil {
		where = c.Inventory.Path
	}
	if hostname != "" {
		return nil, &InputError{Setting: "hostname", Err: fmt.Errorf("%s has no control plane named %q", where, hostname)}
	}
	return nil, &InputError{Setting: "inventory", Err: fmt.Errorf("%s has no control plane (role: controlplane)", where)}
}

// CNIConfig is the config file the cluster's CNI is read from: the first
// control plane's, which deploys it ("" none).
func (c *Cluster) CNIConfig() string {
	if cp := c.FirstControlPlane(); cp != nil {
		return cp.Config
	}
	return ""
}

// CNI is what the control plane's config says of the CNI: the one a
// control plane took in this run (ObserveConfig), else the inventory's
// first control plane's file (nil: no config to read).
func (c *Cluster) CNI() *node.CNI {
	if c.cni != nil {
		return c.cni
	}
	file := c.CNIConfig()
	if file == "" {
		return nil
	}
	data, err := node.ReadConfigFile(file)
	if err != nil {
		return nil
	}
	cni, err := node.CNIOf(data)
	if err != nil {
		return nil
	}
	return &cni
}
