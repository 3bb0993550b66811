package plan

import (
	"errors"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/talosflash/talosflash/factory"
	"github.com/talosflash/talosflash/inventory"
	"github.com/talosflash/talosflash/node"
)

// threeNodes is the user's cluster: cp-1, worker-1, worker-2, cp-1 with
// its config, worker-2 without.
func threeNodes(t *testing.T) *Cluster {
	t.Helper()
	inv := &inventory.Inventory{Path: "talosflash.yaml", Cluster: "home", Known: factory.BuiltinProfiles()}
	for i, n := range []struct {
		host   string
		role   node.Role
		config string
	}{{"cp-1", node.RoleControlPlane, "talos/controlplane.yaml"}, {"worker-1", node.RoleWorker, "talos/worker.yaml"}, {"worker-2", node.RoleWorker, ""}} {
		inv.Nodes = append(inv.Nodes, inventory.Node{Hostname: n.host, Role: n.role, Profile: string(n.role), Config: n.config,
			Address: netip.PrefixFrom(netip.AddrFrom4([4]byte{192, 168, 1, byte(20 + i)}), 24)})
	}
	return NewCluster(inv, nil, 0)
}

func TestClusterMembers(t *testing.T) {
	c := threeNodes(t)
	if len(c.Members) != 3 || c.Members[0].Endpoint.String() != "192.168.1.20:50000" || c.Members[0].Profile.Name != "controlplane" ||
		len(c.Members[0].Needs()) != 1 || c.Members[0].Needs()[0].ConfigName != "newt" || len(c.Members[1].Needs()) != 0 {
		t.Fatalf("members %+v", c.Members[0])
	}
	if cp := c.FirstControlPlane(); cp == nil || cp.Hostname != "cp-1" || len(c.ControlPlanes()) != 1 {
		t.Fatalf("first control plane %v", cp)
	}
	if a := c.ControlPlaneAddrs(); len(a) != 1 || a[0] != netip.MustParseAddr("192.168.1.20") {
		t.Fatalf("control plane addresses %v", a)
	}
	// init is a control plane (Talos' machine.Type.IsControlPlane).
	c.Members[2].Role = node.RoleInit
	if len(c.ControlPlanes()) != 2 || c.FirstControlPlane() != c.Members[0] {
		t.Fatal("init is a control plane")
	}
	if c.CNIConfig() != "talos/controlplane.yaml" {
		t.Fatalf("the CNI comes from %q", c.CNIConfig())
	}
	if m := c.At(netip.MustParseAddr("::ffff:192.168.1.21")); m == nil || m.Hostname != "worker-1" {
		t.Fatalf("At: %v", m)
	}
	if m := c.AtEndpoint("192.168.1.22:50001"); m == nil || m.Hostname != "worker-2" {
		t.Fatalf("AtEndpoint: %v", m)
	}
	if _, err := c.Find("wroker-1"); err == nil || !strings.Contains(err.Error(), "did you mean worker-1?") {
		t.Fatalf("Find: %v", err)
	}
	sel, err := c.Select([]string{"WORKER-1", "cp-1", "worker-1"})
	if err != nil || len(sel) != 2 || sel[0].Hostname != "worker-1" || sel[1].Hostname != "cp-1" {
		t.Fatalf("Select: %v, %v", sel, err)
	}
	// A node found at another address is a member of its own, once.
	ep, _ := node.ParseEndpoint("192.168.1.99")
	if m := c.Track(ep); m.Entry != nil || c.Track(ep) != m || len(c.Members) != 4 {
		t.Fatal("Track")
	}
	if m := c.Track(c.Members[1].Endpoint); m != c.Members[1] {
		t.Fatal("Track of an inventory address is its member")
	}
	if (&Member{Hostname: "Worker-1.home.arpa"}).KubeName() != "worker-1" {
		t.Fatal("KubeName")
	}
}

func TestKubeconfigSource(t *testing.T) {
	c := threeNodes(t)
	for _, tc := range []struct{ host, want, err string }{
		{"", "cp-1", ""}, {"CP-1", "cp-1", ""}, {"worker-1", "", `no control plane named "worker-1"`}, {"nope", "", "no control plane named"},
	} {
		m, err := c.KubeconfigSource(tc.host)
		switch {
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("%q: %v", tc.host, err)
		case tc.err == "" && (err != nil || m.Hostname != tc.want):
			t.Errorf("%q: %v, %v", tc.host, m, err)
		}
	}
	none := NewCluster(&inventory.Inventory{Nodes: []inventory.Node{{Hostname: "w", Role: node.RoleWorker}}}, nil, 0)
	if _, err := none.KubeconfigSource(""); err == nil || !strings.Contains(err.Error(), "no control plane") {
		t.Fatalf("no control plane: %v", err)
	}
}

// ClusterAt: typed addresses, each parsed once; a typo is a usage error,
// nothing looked up.
func TestClusterAt(t *testing.T) {
	c, err := ClusterAt(nil, "127.0.0.1", "[::1]:50001")
	if err != nil || len(c.Members) != 2 || c.Members[1].Endpoint.String() != "[::1]:50001" || c.Members[0].Role.Known() {
		t.Fatalf("%v %v", c, err)
	}
	var in *InputError
	if _, err := ClusterAt(nil, "127.0.3.3l"); !errors.As(err, &in) || !errors.Is(err, node.ErrNotAddress) {
		t.Fatalf("typo: %v", err)
	}
}

// Each action's rule, one table: the member's role and observed state.
func TestClusterMay(t *testing.T) {
	for _, tc := range []struct {
		name                                  string
		member                                int // of threeNodes
		role                                  node.Role
		state                                 State
		etcd, bootstrappedOther, customNoRole bool
		apply, bootstrap, upgrade, patch      RefusalCode // "" allowed
	}{
		{name: "a control plane waiting for its config", member: 0, state: StateMaintenance,
			bootstrap: RefusalMaintenance, upgrade: RefusalMaintenance, patch: RefusalMaintenance},
		{name: "a control plane not seen yet", member: 0},
		{name: "a control plane that took its config", member: 0, state: StateApplied, apply: RefusalConfigured},
		{name: "a control plane whose etcd runs", member: 0, state: StateReady, etcd: true, apply: RefusalConfigured, bootstrap: RefusalBootstrapped},
		{name: "a second control plane after the bootstrap", member: 0, state: StateAwaitingBoot, bootstrappedOther: true, apply: RefusalConfigured, bootstrap: RefusalBootstrapped},
		{name: "a worker", member: 1, state: StateRunning, apply: RefusalConfigured, bootstrap: RefusalNotControlPlane},
		{name: "an init node", member: 0, role: node.RoleInit, state: StateRunning, apply: RefusalConfigured, bootstrap: RefusalInit},
		{name: "a node without a config", member: 2, state: StateMaintenance, apply: RefusalNoConfig, bootstrap: RefusalNotControlPlane, upgrade: RefusalMaintenance, patch: RefusalMaintenance},
		{name: "a custom profile naming no role", member: 1, customNoRole: true, state: StateRunning, apply: RefusalConfigured, upgrade: RefusalNoRole},
		{name: "stuck waiting for Newt's document", member: 1, state: StateStuck, apply: RefusalConfigured, bootstrap: RefusalNotControlPlane},
	} {
		c := threeNodes(t)
		m := c.Members[tc.member]
		if tc.role != "" {
			m.Role = tc.role
		}
		if tc.customNoRole {
			m.Role = node.RoleUnknown
		}
		m.State, m.EtcdRunning = tc.state, tc.etcd
		if tc.bootstrappedOther {
			c.ObserveBootstrapped(c.Members[1])
		}
		for _, a := range []struct {
			action string
			got    *Refusal
			want   RefusalCode
		}{{"apply", c.MayApply(m), tc.apply}, {"bootstrap", c.MayBootstrap(m), tc.bootstrap}, {"upgrade", c.MayUpgrade(m), tc.upgrade}, {"patch", c.MayPatch(m), tc.patch}} {
			code := RefusalCode("")
			if a.got != nil {
				code = a.got.Code
				if a.got.Action != a.action || !strings.Contains(a.got.Error(), m.Name()) {
					t.Errorf("%s: %s refusal %q", tc.name, a.action, a.got.Error())
				}
			}
			if code != a.want {
				t.Errorf("%s: may %s: %q, want %q", tc.name, a.action, code, a.want)
			}
		}
	}
	// The fix of a missing config names the file to add, as the CLI and
	// the app say it; the refusal fails the checks (exit 7).
	c := threeNodes(t)
	r := c.MayApply(c.Members[2])
	if !strings.Contains(r.Fix, "add config: talos/worker.yaml to worker-2 in talosflash.yaml") || !errors.Is(r, node.ErrInvalidConfig) {
		t.Fatalf("no config: %v", r)
	}
	if r := c.MayApply(c.Members[0]); r != nil {
		t.Fatal(r)
	}
	c.Members[0].State = StateConfigured
	if r := c.MayApply(c.Members[0]); !errors.Is(r, node.ErrRefused) || !strings.Contains(r.Fix, "talosflash patch") {
		t.Fatalf("configured: %v", r)
	}
}

// What a read shows is the member's state; a typed address learns its
// role from the config it took, or from etcd.
func TestClusterObserve(t *testing.T) {
	m := &Member{}
	m.ObserveProbe(&node.Node{Maintenance: true}, nil)
	if m.State != StateMaintenance || m.Configured() {
		t.Fatal(m.State)
	}
	m.ObserveApplied("controlplane")
	if m.State != StateApplied || m.Role != node.RoleControlPlane || !m.Took.IsControlPlane() || !m.Configured() {
		t.Fatalf("%+v", m)
	}
	st := func(stage string, ready bool, svcs ...node.ServiceStatus) NodeStatus {
		return NodeStatus{Status: &node.Status{Stage: stage, Ready: ready, Services: svcs}}
	}
	for _, tc := range []struct {
		ns   NodeStatus
		want State
	}{
		{NodeStatus{}, StateAbsent},
		{st("booting", false), StateBooting},
		{st("running", false, node.ServiceStatus{ID: "etcd", State: "Preparing"}), StateAwaitingBoot},
		{st("running", false), StateRunning},
		{st("running", true, node.ServiceStatus{ID: "etcd", State: "Running"}), StateReady},
		{NodeStatus{Status: &node.Status{Stage: "booting"}, Diagnoses: []Diagnosis{{Severity: "error", Code: "extension-config-missing"}}}, StateStuck},
		{NodeStatus{Status: &node.Status{Stage: "running"}, Diagnoses: []Diagnosis{{Severity: "error", Code: "service-failed"}}}, StateFailing},
	} {
		w := &Member{}
		w.ObserveStatus(tc.ns)
		if w.State != tc.want {
			t.Errorf("%+v: %q, want %q", tc.ns.Status, w.State, tc.want)
		}
	}
	w := &Member{}
	w.ObserveStatus(st("running", true, node.ServiceStatus{ID: "etcd", State: "Running"}))
	if !w.EtcdRunning || w.Role != node.RoleControlPlane {
		t.Fatalf("etcd: %+v", w)
	}
}

// A reboot is a new boot ID against the last one seen, across reads that
// did not answer or answered without one (a node coming up again): the
// row's "1 reboot(s) seen" (a read with an empty boot ID broke the chain).
func TestRebootsCountedAcrossReadsWithoutABootID(t *testing.T) {
	c := StatusCheck{}
	m := &Member{Hostname: "worker-1"}
	now := time.Now()
	read := func(prev *NodeStatus, boot string, answered bool) *NodeStatus {
		var st *node.Status
		if answered {
			st = &node.Status{Stage: "booting", BootID: boot}
		}
		ns := c.Diagnose(now, m, st, nil, prev)
		return &ns
	}
	ns := read(nil, "a", true)
	for _, step := range []struct {
		boot     string
		answered bool
	}{{"", false}, {"", true}, {"a", true}, {"", true}, {"b", true}, {"", false}, {"b", true}} {
		ns = read(ns, step.boot, step.answered)
	}
	if ns.Reboots != 1 {
		t.Fatalf("%d reboots counted, want 1", ns.Reboots)
	}
}
