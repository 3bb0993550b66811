package plan

import (
	"fmt"

	"github.com/talosflash/talosflash/node"
)

// What a member was seen doing: every read of a node (a probe, a status
// read, an apply, a bootstrap) goes into its member, and the questions
// below are answered from it.

// ObserveProbe records what answered at the member's address (nil, err:
// nothing did). A node that answers in maintenance mode waits for its
// config; one that asks for a client certificate has one.
func (m *Member) ObserveProbe(n *node.Node, err error) {
	switch {
	case err != nil || n == nil:
		m.State = StateAbsent
	case n.Configured:
		if m.State == StateUnknown || m.State == StateMaintenance || m.State == StateAbsent {
			m.State = StateConfigured
		}
	default:
		m.State = StateMaintenance
	}
}

// ObserveApplied records that the member took a config of role took in
// this run: its role, when it was not known (a typed address), is what
// the config says.
func (m *Member) ObserveApplied(took node.Role) {
	m.State = StateApplied
	m.Took = took
	if !m.Role.Known() && took.Known() {
		m.Role = took
	}
}

// ObserveConfig records that m took config (of role took) in this run
// (ObserveApplied); a control plane's config also says where the
// cluster's CNI comes from (CNI).
func (c *Cluster) ObserveConfig(m *Member, took node.Role, config []byte) {
	m.ObserveApplied(took)
	if m.Took.IsControlPlane() {
		if cni, err := node.CNIOf(config); err == nil {
			c.cni = &cni
		}
	}
}

// ObserveStatus records a status read (Watch).
func (m *Member) ObserveStatus(ns NodeStatus) {
	st := ns.Status
	if st == nil {
		m.State = StateAbsent
		return
	}
	if st.Nodename != "" {
		m.Nodename = st.Nodename
	}
	if etcd := st.Service("etcd"); etcd != nil {
		m.EtcdRunning = etcd.State == "Running"
		if !m.Role.Known() {
			m.Role = node.RoleControlPlane // only control planes run etcd
		}
	}
	m.State = stateOf(ns)
}

// stateOf is the state a status read shows.
func stateOf(ns NodeStatus) State {
	st := ns.Status
	for _, d := range ns.Diagnoses {
		switch {
		case d.Code == "extension-config-missing":
			return StateStuck
		case d.Severity == "error" && d.Code != "unreachable":
			return StateFailing
		}
	}
	etcd := st.Service("etcd")
	switch {
	case st.Stage == "running" && st.Ready:
		return StateReady
	case st.Stage == "running" && etcd != nil && etcd.State != "Running":
		return StateAwaitingBoot
	case st.Stage == "running":
		return StateRunning
	case st.Stage == "booting":
		return StateBooting
	case st.Stage == "maintenance":
		return StateMaintenance
	}
	return StateConfigured
}

// ObserveBootstrapped records the member whose etcd was bootstrapped.
func (c *Cluster) ObserveBootstrapped(m *Member) {
	c.Bootstrapped = m
	m.EtcdRunning = true
}

// Configured: the member has a config as far as seen (it asked for a
// client certificate, took one in this run, or reported a stage past
// maintenance).
func (m *Member) Configured() bool {
	switch m.State {
	case StateUnknown, StateAbsent, StateMaintenance:
		return false
	}
	return true
}

// RefusalCode names why an action may not be taken on a member now.
type RefusalCode string

const (
	RefusalNoConfig         RefusalCode = "no-config"         // the inventory gives it no config file
	RefusalConfigured       RefusalCode = "configured"        // it has a config: patch changes it, not apply
	RefusalMaintenance      RefusalCode = "maintenance"       // it waits for its first config
	RefusalNotAnswering     RefusalCode = "not-answering"     // nothing answered at its address
	RefusalNotControlPlane  RefusalCode = "not-control-plane" // a worker: no etcd
	RefusalInit             RefusalCode = "init"              // an init config starts etcd by itself
	RefusalBootstrapped     RefusalCode = "bootstrapped"      // the cluster's etcd was bootstrapped already
	RefusalNoRole           RefusalCode = "no-role"           // a custom profile naming no role: cannot be ordered or gated
	RefusalUnknownSchematic RefusalCode = "unknown-schematic" // no profile: which installer is its role's is not known
)

// Refusal is why an action may not be taken on a member now, with what
// to do instead. It is an error: errors.Is ErrRefusal.
type Refusal struct {
	Member *Member
	Action string // "apply", "bootstrap", "upgrade", "patch"
	Code   RefusalCode
	Why    string
	Fix    string
}

func (r *Refusal) Error() string {
	s := fmt.Sprintf("%s %s: %s", r.Action, r.Member.Name(), r.Why)
	if r.Fix != "" {
		s += " (" + r.Fix + ")"
	}
	return s
}

// Is makes a refusal of the inventory's making (no config, no role) a
// failed check (exit 7) and the others the node's state (exit 8).
func (r *Refusal) Is(target error) bool {
	switch r.Code {
	case RefusalNoConfig, RefusalNoRole:
		return target == node.ErrInvalidConfig
	}
	return target == node.ErrRefused
}

func (c *Cluster) refuse(m *Member, action string, code RefusalCode, why, fix string) *Refusal {
	return &Refusal{Member: m, Action: action, Code: code, Why: why, Fix: fix}
}

// MayApply: may the member be sent its first config now?
func (c *Cluster) MayApply(m *Member) *Refusal {
	switch {
	case m.Entry != nil && m.Config == "":
		return c.refuse(m, "apply", RefusalNoConfig, "the inventory gives it no config",
			fmt.Sprintf("add config: talos/%s.yaml to %s in %s", orWord(m.Role.String(), "ROLE"), m.Name(), c.inventoryPath()))
	case m.Configured():
		return c.refuse(m, "apply", RefusalConfigured, "it has a config already (it asks for a client certificate)",
			"change it with talosflash patch --node "+m.Endpoint.Host+" --talosconfig FILE")
	}
	return nil
}

// MayBootstrap: may etcd be bootstrapped on the member now?
func (c *Cluster) MayBootstrap(m *Member) *Refusal {
	switch {
	case c.Bootstrapped != nil && c.Bootstrapped != m:
		return c.refuse(m, "bootstrap", RefusalBootstrapped, "etcd was bootstrapped on "+c.Bootstrapped.Name()+" already",
			"a cluster is bootstrapped once, on one control plane")
	case m.EtcdRunning:
		return c.refuse(m, "bootstrap", RefusalBootstrapped, "its etcd runs: the cluster is bootstrapped", "")
	case m.Role == node.RoleWorker:
		return c.refuse(m, "bootstrap", RefusalNotControlPlane, "it is a worker: etcd runs on control planes only",
			bootstrapFix(c))
	case m.Role == node.RoleInit:
		return c.refuse(m, "bootstrap", RefusalInit, "an init config starts etcd as the cluster's first member by itself", "")
	case m.State == StateMaintenance || m.State == StateAbsent:
		return c.refuse(m, "bootstrap", RefusalMaintenance, "it has no config yet", "apply its control plane config first")
	}
	return nil
}

// MayUpgrade: may the member be upgraded (or a rolling upgrade take it)?
func (c *Cluster) MayUpgrade(m *Member) *Refusal {
	switch {
	case m.Entry != nil && !m.Role.Known():
		return c.refuse(m, "upgrade", RefusalNoRole, fmt.Sprintf("it has no role (profile %s names none): the rolling upgrade takes control planes first, each after etcd's health check", m.ProfileName()),
			"give it role: controlplane or role: worker in the inventory")
	case m.State == StateMaintenance:
		return c.refuse(m, "upgrade", RefusalMaintenance, "it waits for its first config in maintenance mode", "apply its config first")
	}
	return nil
}

// MayPatch: may the member's running config be patched now?
func (c *Cluster) MayPatch(m *Member) *Refusal {
	if m.State == StateMaintenance {
		return c.refuse(m, "patch", RefusalMaintenance, "it waits for its first config: there is no config to patch",
			"apply its config with talosflash apply")
	}
	return nil
}

func bootstrapFix(c *Cluster) string {
	if cp := c.FirstControlPlane(); cp != nil {
		return "bootstrap " + cp.Name() + ", the first control plane"
	}
	return "bootstrap a control plane"
}

func (c *Cluster) inventoryPath() string {
	if c.Inventory != nil && c.Inventory.Path != "" {
		return c.Inventory.Path
	}
	return "the inventory"
}

func orWord(s, word string) string {
	if s == "" {
		return word
	}
	return s
}
