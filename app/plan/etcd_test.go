package plan

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/talosflash/talosflash/factory"
	"github.com/talosflash/talosflash/kube"
	"github.com/talosflash/talosflash/node"
	"github.com/talosflash/talosflash/node/nodetest"
)

// The snapshot comes from the first control plane whose etcd runs healthy
// (cp-1's waits for its bootstrap: passed over, and said); a dry run
// chooses it and sends nothing; only workers, or control planes whose etcd
// holds nothing yet, are said as such.
func TestTakeSnapshotFromTheFirstHealthyControlPlane(t *testing.T) {
	pki, err := nodetest.NewPKI()
	if err != nil {
		t.Fatal(err)
	}
	cp := factory.BuiltinProfiles()[0]
	waiting := nodetest.StartNode(t, nodetest.NodeOptions{PKI: pki, Schematic: cp.Schematic(), Hostname: "cp-1"})
	healthy := nodetest.StartNode(t, nodetest.NodeOptions{PKI: pki, Schematic: cp.Schematic(), Hostname: "cp-2", Bootstrapped: true})
	worker := nodetest.StartNode(t, nodetest.NodeOptions{PKI: pki, Worker: true, Hostname: "worker-1"})
	tc := rolloutTalosconfig(t, pki)
	members := []*Member{
		testMember(t, "worker-1", node.RoleWorker, "worker", worker.Addr()),
		testMember(t, "cp-1", node.RoleControlPlane, "controlplane", waiting.Addr()),
		testMember(t, "cp-2", node.RoleControlPlane, "controlplane", healthy.Addr()),
	}
	path := filepath.Join(t.TempDir(), "etcd.db")

	dry, err := TakeSnapshot(t.Context(), SnapshotJob{Members: members, Talosconfig: tc, Path: path, DryRun: true})
	if err != nil || dry.From.Hostname != "cp-2" || dry.Snapshot != nil || healthy.EtcdSnapshots() != 0 {
		t.Fatalf("dry run: %+v, %v", dry, err)
	}
	if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
		t.Fatal("a dry run wrote the file")
	}
	out, err := TakeSnapshot(t.Context(), SnapshotJob{Members: members, Talosconfig: tc, Path: path})
	if err != nil {
		t.Fatal(err)
	}
	rev, keys := healthy.EtcdRevision()
	if out.From.Hostname != "cp-2" || out.Snapshot.Revision != rev || out.Snapshot.Keys != keys || len(out.Passed) != 1 || !strings.Contains(out.Passed[0], "etcd on cp-1 is Preparing") {
		t.Fatalf("outcome %+v %+v", out, out.Snapshot)
	}
	if w := SnapshotWords(out); !strings.Contains(w, "etcd snapshot of cp-2 saved to "+path) || !strings.Contains(w, "keep it private") {
		t.Errorf("words %q", w)
	}

	// Typed addresses: a node with an etcd service is a control plane.
	typed, err := ClusterAt(nil, worker.Addr(), healthy.Addr())
	if err != nil {
		t.Fatal(err)
	}
	if out, err := TakeSnapshot(t.Context(), SnapshotJob{Members: typed.Members, Talosconfig: tc, DryRun: true}); err != nil || out.From.Endpoint.String() != healthy.Addr() {
		t.Fatalf("typed: %+v, %v", out, err)
	}
	onlyWorker, _ := ClusterAt(nil, worker.Addr())
	if _, err := TakeSnapshot(t.Context(), SnapshotJob{Members: onlyWorker.Members, Talosconfig: tc, DryRun: true}); !errors.Is(err, node.ErrNotControlPlane) {
		t.Fatalf("a worker: %v", err)
	}
	if _, err := TakeSnapshot(t.Context(), SnapshotJob{Members: members[:2], Talosconfig: tc, DryRun: true}); !errors.Is(err, ErrNoEtcdData) || !errors.Is(err, node.ErrRefused) {
		t.Fatalf("etcd waiting everywhere: %v", err)
	}
}

func TestSnapshotPath(t *testing.T) {
	at := time.Date(2026, 3, 4, 5, 6, 7, 0, time.FixedZone("x", 3600))
	if got := SnapshotPath("talos", "home lab/1", at); got != filepath.Join("talos", "etcd-home-lab-1-20260304-040607.db") {
		t.Fatalf("path %q", got)
	}
	if got := SnapshotPath("", "..", at); got != filepath.Join(".", "etcd-cluster-20260304-040607.db") {
		t.Fatalf("path %q", got)
	}
	if SnapshotDir("", filepath.Join("gitops", "talosflash.yaml")) != "gitops" || SnapshotDir("b", "x/y") != "b" || SnapshotDir("", "") != "." {
		t.Fatal("SnapshotDir")
	}
}

// The rolling upgrade saves etcd before the first control plane is
// touched: the snapshot is taken (its event first), a dry run says where
// and sends nothing, a snapshot that cannot be taken (its file exists)
// stops the rollout before anything is sent, and --no-snapshot goes on
// without one, saying so.
func TestRolloutSnapshotsBeforeTheFirstControlPlane(t *testing.T) {
	n, _, access, tc, _ := oneControlPlane(t, true, func(cfg []byte) []byte { return cfg })
	m := testMember(t, "cp-1", node.RoleControlPlane, "controlplane", n.Addr())
	dir := t.TempDir()
	path := filepath.Join(dir, "etcd.db")
	job := RolloutJob{Nodes: []*Member{m}, To: "v1.14.6", Talosconfig: tc, Factory: upgradeFactory(t), Kube: access, Snapshot: path,
		Wait: node.WaitOptions{Timeout: 20 * time.Second, Every: 10 * time.Millisecond}, Drain: kube.DrainOptions{Timeout: 10 * time.Second},
		Follow: FollowOptions{Wait: 20 * time.Second, WatchOptions: WatchOptions{Interval: 20 * time.Millisecond}}}
	var steps, said []string
	job.Event = func(ev RolloutEvent) { steps, said = append(steps, ev.Step), append(said, ev.Text) }

	dry := job
	dry.DryRun = true
	if _, err := Rollout(t.Context(), dry); err != nil {
		t.Fatal(err)
	}
	if n.EtcdSnapshots() != 0 || len(n.Pulled()) != 0 || !slices.ContainsFunc(said, func(s string) bool {
		return strings.Contains(s, "would save an etcd snapshot of cp-1 to "+path+" before cp-1 is touched")
	}) {
		t.Fatalf("dry run: %d snapshots; said %q", n.EtcdSnapshots(), said)
	}

	// Its file exists: refused, nothing sent.
	if err := os.WriteFile(path, []byte("an older snapshot"), 0o600); err != nil {
		t.Fatal(err)
	}
	steps, said = nil, nil
	res, err := Rollout(t.Context(), job)
	if !errors.Is(err, node.ErrSnapshotExists) || !strings.Contains(err.Error(), "--no-snapshot") || len(n.Pulled()) != 0 || res.Nodes[0].Step != StepUntouched {
		t.Fatalf("snapshot refused: %v; pulls %v", err, n.Pulled())
	}
	if b, _ := os.ReadFile(path); string(b) != "an older snapshot" {
		t.Fatal("the older snapshot was replaced")
	}

	job.Snapshot = filepath.Join(dir, "etcd-2.db")
	steps, said = nil, nil
	res, err = Rollout(t.Context(), job)
	if err != nil {
		t.Fatalf("rollout: %v (%+v)", err, res.Nodes[0])
	}
	if res.Snapshot == nil || res.Snapshot.Snapshot == nil || res.Snapshot.Snapshot.Path != job.Snapshot || n.EtcdSnapshots() != 1 {
		t.Fatalf("snapshot %+v", res.Snapshot)
	}
	if i, j := slices.Index(steps, StepSnapshot), slices.Index(steps, StepGate); i < 0 || j < i {
		t.Fatalf("the snapshot is not first: %q", steps)
	}
	if st, err := os.Stat(job.Snapshot); err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("snapshot file: %v", err)
	}

	// --no-snapshot: said, and the rollout goes on (already upgraded now).
	job.NoSnapshot, job.Snapshot = true, ""
	said = nil
	if _, err := Rollout(t.Context(), job); err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(said, func(s string) bool { return strings.Contains(s, "no etcd snapshot is taken (--no-snapshot)") }) || n.EtcdSnapshots() != 1 {
		t.Fatalf("--no-snapshot: %q", said)
	}
}

// A node whose new installation fails to boot comes back, by Talos'
// revert, on its previous version and schematic: the rollout says it
// rolled back, uncordons it and stops (issue 41).
func TestRolloutTellsARolledBackNode(t *testing.T) {
	n, api, access, tc, _ := oneControlPlane(t, true, func(cfg []byte) []byte { return cfg })
	n.FailUpgradedBoot(`service "etcd": failed to start: the new kernel lacks a module`)
	m := testMember(t, "cp-1", node.RoleControlPlane, "controlplane", n.Addr())
	var said []string
	res, err := Rollout(t.Context(), RolloutJob{Nodes: []*Member{m}, To: "v1.14.6", Talosconfig: tc, Factory: upgradeFactory(t), Kube: access,
		Snapshot: filepath.Join(t.TempDir(), "etcd.db"),
		Wait:     node.WaitOptions{Timeout: 30 * time.Second, Every: 10 * time.Millisecond}, Drain: kube.DrainOptions{Timeout: 10 * time.Second},
		Follow: FollowOptions{Wait: 20 * time.Second, WatchOptions: WatchOptions{Interval: 20 * time.Millisecond}},
		Event:  func(ev RolloutEvent) { said = append(said, ev.Hostname+" "+ev.Text) }})
	if !errors.Is(err, ErrRolledBack) || !errors.Is(err, node.ErrUpgradeFailed) || !errors.Is(err, ErrRolloutStopped) || !errors.Is(err, node.ErrRefused) {
		t.Fatalf("rollout: %v", err)
	}
	nr := res.Nodes[0]
	const want = "cp-1 rolled back to v1.14.5: its upgrade failed (v1.14.6 did not boot"
	if nr.Step != StepRolledBack || nr.Cordon || !strings.HasSuffix(nr.State, "uncordoned") || !strings.Contains(err.Error(), want) ||
		!slices.ContainsFunc(said, func(s string) bool { return strings.HasPrefix(s, want) }) {
		t.Fatalf("state %q, step %s; said %q", nr.State, nr.Step, said)
	}
	id, _ := factory.BuiltinProfiles()[0].SchematicID()
	if n.Reverts() != 1 || n.RunningVersion() != "v1.14.5" || n.RunningSchematicID() != id || api.Unschedulable("cp-1") {
		t.Fatalf("node: %d reverts, %s, %s, cordoned %v", n.Reverts(), n.RunningVersion(), n.RunningSchematicID(), api.Unschedulable("cp-1"))
	}
}

// A control plane whose etcd runs but is not healthy gives no snapshot:
// the rollout does not start, nothing sent, and its dry run says it would
// fail there (and still plans every node), with the same error.
func TestRolloutWithoutAHealthyEtcdDoesNotStart(t *testing.T) {
	pki, err := nodetest.NewPKI()
	if err != nil {
		t.Fatal(err)
	}
	n := nodetest.StartNode(t, nodetest.NodeOptions{PKI: pki, Schematic: factory.BuiltinProfiles()[0].Schematic(), Bootstrapped: true, Hostname: "cp-1", UnhealthyPolls: 1 << 20})
	tc := rolloutTalosconfig(t, pki)
	for _, dry := range []bool{true, false} {
		var said []string
		res, err := Rollout(t.Context(), RolloutJob{Nodes: []*Member{testMember(t, "cp-1", node.RoleControlPlane, "controlplane", n.Addr())}, To: "v1.14.6",
			Talosconfig: tc, Factory: upgradeFactory(t), Kube: &kube.Access{}, DryRun: dry, Snapshot: filepath.Join(t.TempDir(), "etcd.db"),
			Wait:  node.WaitOptions{Timeout: 5 * time.Second, Every: 10 * time.Millisecond},
			Event: func(ev RolloutEvent) { said = append(said, ev.Text) }})
		if !errors.Is(err, ErrNoSnapshotSource) || !errors.Is(err, node.ErrRefused) || !strings.Contains(err.Error(), "etcd on cp-1 is Running, unhealthy") {
			t.Fatalf("dry run %v: %v", dry, err)
		}
		wantStep := StepUntouched
		if dry {
			wantStep = StepPlan // planned all the same
		}
		if res.Nodes[0].Step != wantStep || len(n.Pulled()) != 0 || n.EtcdSnapshots() != 0 ||
			!slices.ContainsFunc(said, func(s string) bool { return strings.HasPrefix(s, "no etcd snapshot can be taken") }) {
			t.Fatalf("dry run %v: step %s, pulls %v, said %q", dry, res.Nodes[0].Step, n.Pulled(), said)
		}
	}
}
