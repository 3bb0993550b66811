package plan

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/talosflash/talosflash/factory"
	"github.com/talosflash/talosflash/factory/factorytest"
	"github.com/talosflash/talosflash/internal/testkit"
	"github.com/talosflash/talosflash/kube"
	"github.com/talosflash/talosflash/node"
	"github.com/talosflash/talosflash/node/nodetest"
	"github.com/talosflash/talosflash/node/nodetest/kubetest"
)

// Control planes first, then workers, each in the inventory's order.
func TestRolloutOrder(t *testing.T) {
	in := []*Member{{Hostname: "w1", Role: "worker"}, {Hostname: "cp1", Role: "controlplane"}, {Hostname: "w2", Role: "worker"}, {Hostname: "cp2", Role: "init"}}
	var got []string
	for _, n := range RolloutOrder(in) {
		got = append(got, n.Hostname)
	}
	if strings.Join(got, ",") != "cp1,cp2,w1,w2" {
		t.Fatalf("order %v", got)
	}
	if (&Member{Hostname: "Worker-1.home.arpa"}).KubeName() != "worker-1" {
		t.Fatal("Kubernetes node name: the short hostname, lower case")
	}
}

// A control plane whose etcd is not healthy is not taken down: the gate
// stops the rollout before anything is sent, and the workers after it are
// untouched.
func TestRolloutEtcdGateStopsBeforeSending(t *testing.T) {
	pki, err := nodetest.NewPKI()
	if err != nil {
		t.Fatal(err)
	}
	cp := factory.BuiltinProfiles()[0]
	wk := factory.BuiltinProfiles()[1]
	cpn := nodetest.StartNode(t, nodetest.NodeOptions{PKI: pki, Schematic: cp.Schematic()}) // etcd waits for its bootstrap
	wn := nodetest.StartNode(t, nodetest.NodeOptions{PKI: pki, Schematic: wk.Schematic(), Worker: true, Hostname: "worker-1"})
	data, err := pki.Talosconfig("home", "os:admin", "127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), "talosconfig")
	if err := os.WriteFile(p, data, 0o600); err != nil {
		t.Fatal(err)
	}
	tc, err := node.LoadTalosconfig(p, "")
	if err != nil {
		t.Fatal(err)
	}
	fac := factorytest.New(t)
	fac.SetVersions("v1.14.5", "v1.14.6")
	job := RolloutJob{To: "v1.14.6", Talosconfig: tc, Factory: factory.NewClient(fac.URL, fac.Client()), Kube: &kube.Access{},
		Wait: node.WaitOptions{Timeout: 5 * time.Second, Every: 10 * time.Millisecond},
		Nodes: []*Member{
			testMember(t, "worker-1", node.RoleWorker, "worker", wn.Addr()),
			testMember(t, "cp-1", node.RoleControlPlane, "controlplane", cpn.Addr()),
		}}
	res, err := Rollout(context.Background(), job)
	var re *RolloutError
	if !errors.As(err, &re) || re.Hostname != "cp-1" || re.Step != StepGate || !errors.Is(err, node.ErrRefused) || !errors.Is(err, ErrRolloutStopped) {
		t.Fatalf("rollout: %v", err)
	}
	if len(res.Nodes) != 2 || !strings.Contains(res.Nodes[0].State, "etcd on cp-1 is Preparing") || !strings.HasSuffix(res.Nodes[0].State, "nothing was sent") ||
		res.Nodes[1].Step != StepUntouched {
		t.Fatalf("states: %q / %q", res.Nodes[0].State, res.Nodes[1].State)
	}
	if len(cpn.Pulled())+len(wn.Pulled())+cpn.Reboots()+wn.Reboots() != 0 {
		t.Fatal("something was sent")
	}
}

// Each node gets its role's installer only when it is that node and the
// installer cannot start the incident: the inventory's worker-1 address
// answered by the control plane (it says it is cp-1, runs Newt with its
// config) would lose Newt to the worker installer; cp-1 whose card was
// flashed with the worker image and whose config has no Newt document
// would get the Newt installer and then reboot every BootTimeout. Both
// refused before anything is sent, in the dry run and the real run.
func TestRolloutRefusesTheWrongNodeAndTheIncident(t *testing.T) {
	pki, err := nodetest.NewPKI()
	if err != nil {
		t.Fatal(err)
	}
	cp, wk := factory.BuiltinProfiles()[0], factory.BuiltinProfiles()[1]
	cpCfg, err := os.ReadFile("../../node/testdata/talos114/valid/controlplane.yaml")
	if err != nil {
		t.Fatal(err)
	}
	noNewt := cpCfg[:strings.LastIndex(string(cpCfg), "---\napiVersion: v1alpha1\nkind: ExtensionServiceConfig")]
	realCP := nodetest.StartNode(t, nodetest.NodeOptions{PKI: pki, Schematic: cp.Schematic(), Bootstrapped: true, Hostname: "cp-1", Config: cpCfg})
	wrongCard := nodetest.StartNode(t, nodetest.NodeOptions{PKI: pki, Schematic: wk.Schematic(), Bootstrapped: true, Hostname: "cp-1", Config: noNewt})
	tc := rolloutTalosconfig(t, pki)
	fac := factorytest.New(t)
	fac.SetVersions("v1.14.5", "v1.14.6")
	for _, p := range []factory.Profile{cp, wk} {
		if _, err := fac.AddSchematic(p.Schematic()); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range []struct {
		name string
		node *Member
		n    *nodetest.Node
		want string
	}{
		{"another node there", testMember(t, "worker-1", node.RoleWorker, "worker", realCP.Addr()), realCP, `says it is "cp-1"`},
		{"Newt without its document", testMember(t, "cp-1", node.RoleControlPlane, "controlplane", wrongCard.Addr()), wrongCard, `no ExtensionServiceConfig named "newt"`},
	} {
		for _, dry := range []bool{true, false} {
			job := RolloutJob{To: "v1.14.6", Talosconfig: tc, Factory: factory.NewClient(fac.URL, fac.Client()), Kube: &kube.Access{}, DryRun: dry,
				Wait: node.WaitOptions{Timeout: 5 * time.Second, Every: 10 * time.Millisecond}, Nodes: []*Member{c.node}, NoSnapshot: true}
			res, err := Rollout(context.Background(), job)
			if !errors.Is(err, ErrRolloutStopped) || !errors.Is(err, node.ErrInvalidConfig) || !strings.Contains(err.Error(), c.want) ||
				!strings.Contains(res.Nodes[0].State, "nothing was sent") || res.Nodes[0].Step != StepPlan {
				t.Fatalf("%s (dry run %v): %v; state %q", c.name, dry, err, res.Nodes[0].State)
			}
			if len(c.n.Pulled())+len(c.n.Upgrades())+c.n.Reboots() != 0 {
				t.Fatalf("%s: sent: pulls %v upgrades %v reboots %d", c.name, c.n.Pulled(), c.n.Upgrades(), c.n.Reboots())
			}
		}
	}
}

func rolloutTalosconfig(t testing.TB, pki *nodetest.PKI) *node.Talosconfig {
	t.Helper()
	data, err := pki.Talosconfig("home", "os:admin", "127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), "talosconfig")
	if err := os.WriteFile(p, data, 0o600); err != nil {
		t.Fatal(err)
	}
	tc, err := node.LoadTalosconfig(p, "")
	if err != nil {
		t.Fatal(err)
	}
	return tc
}

// The rollout orders and gates by role: a node whose inventory profile
// names no role (a custom profile without role:) could be a control plane
// taken down after the workers with no etcd gate. Refused before anything
// is sent, naming the node, in the dry run too.
func TestRolloutRefusesANodeWithoutRole(t *testing.T) {
	for _, dry := range []bool{true, false} {
		job := RolloutJob{To: "v1.14.6", DryRun: dry, Kube: &kube.Access{}, Nodes: []*Member{
			testMember(t, "cp-1", node.RoleControlPlane, "controlplane", "127.0.0.1:1"),
			testMember(t, "edge-1", node.RoleUnknown, "edge", "127.0.0.1:2"),
		}}
		res, err := Rollout(context.Background(), job)
		if !errors.Is(err, ErrRolloutRole) || !errors.Is(err, node.ErrInvalidConfig) || !strings.Contains(err.Error(), "edge-1 (profile edge) has no role") {
			t.Fatalf("dry run %v: %v", dry, err)
		}
		for _, n := range res.Nodes {
			if n.Step != StepUntouched {
				t.Fatalf("%s: %s", n.Hostname, n.Step)
			}
		}
	}
}

// oneControlPlane is a bootstrapped control plane with its Kubernetes API
// on loopback, its config edited by edit, and the access to that API.
func oneControlPlane(t testing.TB, cni bool, edit func([]byte) []byte) (*nodetest.Node, *kubetest.Server, *kube.Access, *node.Talosconfig, []byte) {
	t.Helper()
	pki, err := nodetest.NewPKI()
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := os.ReadFile("../../node/testdata/talos114/valid/controlplane.yaml")
	if err != nil {
		t.Fatal(err)
	}
	cfg = edit(cfg)
	// The cluster's API on loopback, at a port free here (its endpoint).
	cfg = bytes.ReplaceAll(cfg, []byte("https://192.168.1.20:6443"), []byte("https://127.0.0.1:"+strconv.Itoa(testkit.FreePort(t, "127.0.0.1"))))
	cluster, err := nodetest.ClusterOf(cfg)
	if err != nil {
		t.Fatal(err)
	}
	n := nodetest.StartNode(t, nodetest.NodeOptions{PKI: pki, Schematic: factory.BuiltinProfiles()[0].Schematic(), Bootstrapped: true, Hostname: "cp-1", Config: cfg, Cluster: cluster, CNI: cni})
	tc := rolloutTalosconfig(t, pki)
	var api *kubetest.Server
	for deadline := time.Now().Add(10 * time.Second); api == nil; time.Sleep(10 * time.Millisecond) {
		if api = n.KubeAPI(); api == nil && time.Now().After(deadline) {
			t.Fatal("the fake control plane runs no Kubernetes API")
		}
	}
	data, err := node.FetchKubeconfig(t.Context(), n.Addr(), tc)
	if err != nil {
		t.Fatal(err)
	}
	kc, err := kube.Parse(data)
	if err != nil {
		t.Fatal(err)
	}
	if err := kube.SetServer(kc, "", api.URL()); err != nil {
		t.Fatal(err)
	}
	access, err := kube.Open("kubeconfig", kc, "", 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	return n, api, access, tc, cfg
}

func upgradeFactory(t testing.TB) *factory.Client {
	fac := factorytest.New(t)
	fac.SetVersions("v1.14.5", "v1.14.6")
	if _, err := fac.AddSchematic(factory.BuiltinProfiles()[0].Schematic()); err != nil {
		t.Fatal(err)
	}
	return factory.NewClient(fac.URL, fac.Client())
}

// The Kubernetes node cordoned and drained is the name the node registers
// with (its Nodenames resource, as talosctl upgrade reads it): with
// KubeNodeConfig registerWithFQDN and a domain, cp-1.lab.example, not the
// inventory's cp-1 (issue 38).
func TestRolloutDrainsTheNodesKubernetesName(t *testing.T) {
	n, api, access, tc, _ := oneControlPlane(t, true, func(cfg []byte) []byte {
		if !bytes.Contains(cfg, []byte("kind: HostnameConfig\nauto: stable")) || !bytes.Contains(cfg, []byte("kind: KubeNodeConfig\n")) {
			t.Fatal("controlplane.yaml's HostnameConfig or KubeNodeConfig changed")
		}
		cfg = bytes.Replace(cfg, []byte("kind: HostnameConfig\nauto: stable"), []byte("kind: HostnameConfig\nhostname: cp-1.lab.example"), 1)
		return bytes.Replace(cfg, []byte("kind: KubeNodeConfig\n"), []byte("kind: KubeNodeConfig\nregisterWithFQDN: true\n"), 1)
	})
	m := testMember(t, "cp-1", node.RoleControlPlane, "controlplane", n.Addr())
	res, err := Rollout(t.Context(), RolloutJob{Nodes: []*Member{m}, To: "v1.14.6", Talosconfig: tc, Factory: upgradeFactory(t), Snapshot: filepath.Join(t.TempDir(), "etcd.db"),
		Kube: access, Wait: node.WaitOptions{Timeout: 20 * time.Second, Every: 10 * time.Millisecond}, Drain: kube.DrainOptions{Timeout: 10 * time.Second},
		Follow: FollowOptions{Wait: 20 * time.Second, WatchOptions: WatchOptions{Interval: 20 * time.Millisecond}}})
	if err != nil {
		t.Fatalf("rollout: %v (%+v)", err, res.Nodes[0])
	}
	cordoned := false
	for _, r := range api.Requests() {
		if strings.HasPrefix(r, "PATCH ") && strings.HasSuffix(strings.Fields(r)[1], "/nodes/cp-1") {
			t.Fatalf("the inventory's name was cordoned: %s", r)
		}
		cordoned = cordoned || strings.HasPrefix(r, "PATCH ") && strings.Contains(r, "/nodes/cp-1.lab.example")
	}
	if !cordoned || m.KubeName() != "cp-1.lab.example" || !strings.Contains(res.Nodes[0].State, "upgraded") {
		t.Fatalf("cordoned %v, name %q, state %q; requests %v", cordoned, m.KubeName(), res.Nodes[0].State, api.Requests())
	}
}

// A node that does not become healthy before its upgrade stops the
// rollout, nothing sent, and the refusal says what it waits for, as
// status does: its unmet condition (nodeReady) and its Kubernetes node's
// missing CNI with the fix (issue 38), not only "context deadline exceeded".
func TestRolloutGateNamesTheUnmetCondition(t *testing.T) {
	n, _, access, tc, cfg := oneControlPlane(t, false, func(cfg []byte) []byte { return cfg })
	cni, err := node.CNIOf(cfg)
	if err != nil {
		t.Fatal(err)
	}
	m := testMember(t, "cp-1", node.RoleControlPlane, "controlplane", n.Addr())
	var said []string
	res, err := Rollout(t.Context(), RolloutJob{Nodes: []*Member{m}, To: "v1.14.6", Talosconfig: tc, Factory: upgradeFactory(t), Kube: access, CNI: &cni, NoSnapshot: true,
		Wait:  node.WaitOptions{Timeout: time.Second, Every: 10 * time.Millisecond},
		Event: func(ev RolloutEvent) { said = append(said, ev.Text) }})
	if !errors.Is(err, node.ErrNotHealthy) || !errors.Is(err, ErrRolloutStopped) {
		t.Fatalf("rollout: %v", err)
	}
	for _, want := range []string{"nothing sent", "it waits for nodeReady", "no CNI yet", "Flannel is off"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the refusal %q does not say %q", err, want)
		}
	}
	if !slices.ContainsFunc(said, func(s string) bool { return strings.Contains(s, "before its upgrade (up to 1s)") }) {
		t.Errorf("the wait's bound is not said before it starts: %q", said)
	}
	if len(n.Pulled())+len(n.Upgrades())+n.Reboots() != 0 || res.Nodes[0].Cordon {
		t.Fatal("something was sent")
	}
}
