package plan

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/talosflash/talosflash/factory"
	"github.com/talosflash/talosflash/kube"
	"github.com/talosflash/talosflash/node"
)

// A rolling upgrade of the cluster, one node at a time.
//
// Order: the control planes first, then the workers, each group in the
// inventory's order: Talos upgrades a cluster's Kubernetes the same way
// (pkg/cluster/kubernetes/talos_managed.go Upgrade: the control plane's
// components node by node, then the kubelets), as the Kubernetes version
// skew policy wants (kubelets never newer than the API server), and
// Omni's and tuppr's rolling upgrades go control planes first too.
//
// Each node: it must be the inventory's node (the hostname it reports)
// and its role's installer must not bring an extension whose
// ExtensionServiceConfig its config lacks (node.Upgrade refuses both,
// nothing sent); the gate (a control plane only when etcd is healthy with
// every member: Talos' own check before an upgrade,
// internal/pkg/etcd/etcd.go ValidateForUpgrade: not 2 members, every
// member started, each healthy), its role's installer pulled and run
// (node.Upgrade: LifecycleService as talosctl v1.14), then cordon and
// drain through the Kubernetes API (talosctl v1.14 drains there, after
// the installer ran: cmd/talosctl/cmd/talos/upgrade.go), the reboot,
// the wait until it runs the new version with its role's schematic,
// ready with its Kubernetes node Ready (Follow), then uncordon. The
// first failure stops the rollout: the nodes after it are not touched.
//
// Before the first control plane is touched, etcd is saved (TakeSnapshot,
// etcd.go: from the first healthy control plane, into RolloutJob.Snapshot)
// and without it the rollout does not start (NoSnapshot: --no-snapshot,
// said). A node whose upgrade fails after its reboot and that comes back
// on the version it ran is a node Talos rolled back (a boot of the new
// installation failed: internal/app/machined/main.go handle, revert.go,
// META tag Upgrade): it is said so, uncordoned, and the rollout stops.

// RolloutJob is a rolling upgrade.
type RolloutJob struct {
	Nodes       []*Member // in the inventory's order; Rollout orders them
	To          string
	Talosconfig *node.Talosconfig
	Factory     *factory.Client
	// Kube reaches the cluster's API for the drain (required unless DryRun).
	Kube *kube.Access
	// CNI is what the control plane's config says of the CNI (Cluster.CNI;
	// nil: not known), for what a node not Ready waits for.
	CNI    *node.CNI
	DryRun bool
	Wait   node.WaitOptions
	Drain  kube.DrainOptions
	// Follow bounds the wait for each node after its reboot (its Interval,
	// Wait; Talosconfig and Until are set here).
	Follow FollowOptions
	// Snapshot is the file etcd is saved to before the first control
	// plane is touched (SnapshotPath); NoSnapshot goes on without one.
	Snapshot   string
	NoSnapshot bool
	// Event gets what happens, in order (may be nil).
	Event func(RolloutEvent)
}

// Rollout step names (RolloutEvent.Step and NodeRollout.Step).
const (
	StepSnapshot  = "snapshot"  // etcd saved before the first control plane moves (RolloutEvent only)
	StepPlan      = "plan"      // the node's installer checked on the factory's registry
	StepGate      = "gate"      // etcd healthy with every member (control planes)
	StepInstall   = "install"   // the installer pulled and run
	StepCordon    = "cordon"    // the Kubernetes node marked unschedulable
	StepDrain     = "drain"     // its pods evicted
	StepReboot    = "reboot"    // rebooted into the new version, back and healthy
	StepReady     = "ready"     // running, ready, Kubernetes Ready, new version, role's schematic
	StepUncordon  = "uncordon"  // schedulable again
	StepUpgraded  = "upgraded"  // done
	StepUntouched = "untouched" // not reached: nothing sent
	// StepRolledBack: it rebooted into the new version, which failed to
	// boot, and Talos brought it back on its previous one.
	StepRolledBack = "rolled-back"
)

// RolloutEvent is one thing that happened.
type RolloutEvent struct {
	Hostname string
	Step     string
	Text     string
	Node     *NodeRollout // the node's state, on a node's last event
	// Snapshot is etcd's snapshot (StepSnapshot: taken, planned by a dry
	// run; nil with NoSnapshot).
	Snapshot *SnapshotOutcome
}

// NodeRollout is one node's part of the rollout.
type NodeRollout struct {
	*Member
	Step    string              // the furthest step reached (StepUntouched: none)
	Upgrade *node.UpgradeResult // the plan and what was sent (nil: not reached)
	Drained *kube.DrainResult
	Cordon  bool   // left cordoned (a failure after the drain)
	State   string // in the user's words: what it runs, what was sent
	Err     error
}

// RolloutResult is every node's state, in the rollout's order.
type RolloutResult struct {
	Nodes  []*NodeRollout
	Failed *NodeRollout // the node it stopped at (nil: none)
	// Snapshot is etcd's snapshot taken first (nil: none, or no control plane).
	Snapshot *SnapshotOutcome
}

// RolloutOrder is the order of the upgrade: control planes, then workers,
// each in the given order.
func RolloutOrder(nodes []*Member) []*Member {
	out := slices.Clone(nodes)
	slices.SortStableFunc(out, func(a, b *Member) int {
		rank := func(r node.Role) int {
			if r.IsControlPlane() {
				return 0
			}
			return 1
		}
		return rank(a.Role) - rank(b.Role)
	})
	return out
}

// ErrRolloutStopped: a node failed and the rollout stopped there; the
// result says every node's state. errors.Is(err, node.ErrRefused) too.
var ErrRolloutStopped = errors.New("the rolling upgrade stopped")

// RolloutError is the rollout's stop at one node.
type RolloutError struct {
	Hostname string
	Step     string
	Err      error
}

func (e *RolloutError) Error() string {
	return fmt.Sprintf("the rolling upgrade stopped at %s (%s): %v", e.Hostname, e.Step, e.Err)
}
func (e *RolloutError) Unwrap() []error { return []error{e.Err, ErrRolloutStopped} }

// Rollout upgrades the nodes one at a time (see the top of this file);
// with DryRun it plans each node (its installer checked on the factory's
// registry, as the real run's first step) and sends nothing.
func Rollout(ctx context.Context, job RolloutJob) (*RolloutResult, error) {
	res := &RolloutResult{}
	for _, n := range RolloutOrder(job.Nodes) {
		res.Nodes = append(res.Nodes, &NodeRollout{Member: n, Step: StepUntouched, State: "untouched: nothing was sent"})
	}
	c := &Cluster{Members: job.Nodes}
	for _, n := range res.Nodes {
		if r := c.MayUpgrade(n.Member); r != nil && r.Code == RefusalNoRole {
			return res, fmt.Errorf("%w: %s (profile %s) has no role: the rolling upgrade takes control planes first, each after etcd's health check: give it role: controlplane or role: worker in the inventory; nothing was sent",
				ErrRolloutRole, n.Hostname, n.ProfileName())
		}
	}
	if !job.DryRun && job.Kube == nil {
		return res, errors.New("upgrade --inventory drains each node through the Kubernetes API: no kubeconfig reaches the cluster (run talosflash kubeconfig first, or pass --kubeconfig)")
	}
	emit := func(ev RolloutEvent) {
		if job.Event != nil {
			job.Event(ev)
		}
	}
	controlPlanes := c.ControlPlanes()
	first := job.snapshotFirst(ctx, controlPlanes, res, emit)
	if first != nil && !job.DryRun {
		return res, first
	}
	for _, nr := range res.Nodes {
		err := job.one(ctx, nr, controlPlanes, emit)
		if err != nil {
			nr.Err = err
		}
		emit(RolloutEvent{Hostname: nr.Hostname, Step: nr.Step, Text: nr.State, Node: nr})
		if err != nil && first == nil {
			res.Failed = nr
			first = &RolloutError{Hostname: nr.Hostname, Step: nr.Step, Err: err}
		}
		// A dry run plans every node: it fails where the real run would,
		// and says so for each.
		if first != nil && (!job.DryRun || ctx.Err() != nil) {
			return res, first
		}
	}
	return res, first
}

// snapshotFirst saves etcd before the first control plane is touched (a
// dry run says where it would, from which node). Its error stops the
// rollout before anything is sent.
func (job RolloutJob) snapshotFirst(ctx context.Context, controlPlanes []*Member, res *RolloutResult, emit func(RolloutEvent)) error {
	if len(controlPlanes) == 0 {
		return nil
	}
	first := controlPlanes[0].Name()
	if job.NoSnapshot {
		res.Snapshot = &SnapshotOutcome{Skipped: "--no-snapshot"}
		emit(RolloutEvent{Hostname: first, Step: StepSnapshot, Snapshot: res.Snapshot,
			Text: "no etcd snapshot is taken (--no-snapshot): if the upgrade breaks etcd, there is no copy to recover the cluster from"})
		return nil
	}
	out, err := TakeSnapshot(ctx, SnapshotJob{Members: controlPlanes, Talosconfig: job.Talosconfig, Path: job.Snapshot, DryRun: job.DryRun,
		CallTimeout: job.Wait.CallTimeout, Progress: func(s string) { emit(RolloutEvent{Hostname: first, Step: StepSnapshot, Text: s}) }})
	res.Snapshot = out
	if errors.Is(err, ErrNoEtcdData) {
		out.Skipped = err.Error()
		emit(RolloutEvent{Hostname: first, Step: StepSnapshot, Snapshot: out, Text: "no etcd snapshot: " + err.Error()})
		return nil
	}
	if err != nil {
		if ctx.Err() != nil {
			return err
		}
		word := "nothing was sent"
		if job.DryRun {
			word = "the real run would stop here; nothing was sent"
		}
		emit(RolloutEvent{Hostname: first, Step: StepSnapshot, Text: fmt.Sprintf("no etcd snapshot can be taken: %v; %s (--no-snapshot to upgrade without one)", err, word)})
		return fmt.Errorf("%w: %w; nothing was sent (--no-snapshot to upgrade without one)", errSnapshotFirst, err)
	}
	text := ""
	if job.DryRun {
		text = fmt.Sprintf("would save an etcd snapshot of %s to %s before %s is touched (as talosctl etcd snapshot: FILE.part 0600, fsync, etcd's checks, rename); nothing was sent",
			out.From.Name(), job.Snapshot, first)
	} else {
		text = SnapshotWords(out)
	}
	emit(RolloutEvent{Hostname: out.From.Name(), Step: StepSnapshot, Text: text, Snapshot: out})
	return nil
}

// one upgrades (or, DryRun, plans) one node.
func (job RolloutJob) one(ctx context.Context, nr *NodeRollout, controlPlanes []*Member, emit func(RolloutEvent)) error {
	say := func(step, format string, args ...any) {
		emit(RolloutEvent{Hostname: nr.Hostname, Step: step, Text: fmt.Sprintf(format, args...)})
	}
	wait := job.Wait
	wait.Progress = func(s string) { say("", "%s", s) }
	// The node is the inventory's (its hostname), and its role's image never
	// brings an extension whose document its config lacks (node.Upgrade).
	opts := node.UpgradeOptions{To: job.To, Factory: job.Factory, DryRun: job.DryRun, Wait: wait, Schematic: nr.Schematic(), Hostname: nr.Hostname}
	if job.DryRun {
		up, err := node.PlanUpgrade(ctx, nr.Endpoint.String(), job.Talosconfig, opts)
		nr.Upgrade = up
		if err != nil {
			nr.Step, nr.State = StepPlan, "would fail: "+err.Error()
			if !strings.Contains(nr.State, "nothing was sent") {
				nr.State += "; nothing was sent"
			}
			return err
		}
		nr.Step = StepPlan
		switch {
		case up.UpToDate:
			nr.State = "already runs " + job.To + " with its role's schematic: nothing to do"
		default:
			gate := ""
			if nr.Role.IsControlPlane() {
				gate = "check etcd is healthy with every member, "
			}
			nr.State = fmt.Sprintf("would %spull and run %s (%s), cordon and drain %s, reboot, wait until it runs %s with schematic %s and is Ready, uncordon; nothing was sent",
				gate, up.Image, up.API, nr.KubeName(), job.To, factory.ShortID(up.SchematicID))
		}
		return nil
	}

	if nr.Role.IsControlPlane() {
		nr.Step = StepGate
		say(StepGate, "checking etcd is healthy with all members")
		n, err := etcdGate(ctx, job, controlPlanes)
		if err != nil {
			nr.State = "not upgraded: " + err.Error() + "; nothing was sent"
			return err
		}
		say(StepGate, "etcd is healthy with its %d member(s)", n)
	}
	// The Kubernetes node to cordon and drain is the name the node
	// registers with (its Nodenames resource, as talosctl upgrade reads
	// it), not the inventory's: they differ with registerWithFQDN.
	if name, ok, err := node.ReadNodename(ctx, nr.Endpoint.String(), job.Talosconfig, job.Wait); err == nil && ok {
		nr.Nodename = name
	}
	nr.Step = StepInstall
	opts.OnPlan = func(r *node.UpgradeResult) {
		say(StepPlan, "Talos %s -> %s with %s (%s)", r.From, r.To, r.Image, r.API)
	}
	opts.BeforeReboot = func(ctx context.Context, _ *node.UpgradeResult) error {
		name := nr.KubeName()
		nr.Step = StepCordon
		say(StepCordon, "cordoning %s", name)
		if err := job.Kube.Cordon(ctx, name); err != nil {
			return err
		}
		nr.Cordon = true
		nr.Step = StepDrain
		d := job.Drain
		d.Progress = func(s string) { say(StepDrain, "%s", s) }
		dr, err := job.Kube.Drain(ctx, name, d)
		nr.Drained = dr
		if err != nil {
			// Not rebooted: it goes on serving, so it takes pods again.
			if uerr := job.Kube.Uncordon(context.WithoutCancel(ctx), name); uerr == nil {
				nr.Cordon = false
			}
			return err
		}
		nr.Step = StepReboot
		return nil
	}
	up, err := node.Upgrade(ctx, nr.Endpoint.String(), job.Talosconfig, opts)
	nr.Upgrade = up
	if errors.Is(err, node.ErrNotHealthy) {
		err = fmt.Errorf("%w; %s", err, job.unhealthy(ctx, nr))
	}
	if err != nil {
		if up == nil || up.Phase == "" {
			nr.Step = StepPlan // refused while planning: nothing was sent
		}
		nr.State = nodeState(nr, up, err)
		if rb := job.rolledBack(ctx, nr, up, err, say); rb != nil {
			return rb
		}
		return err
	}
	if up.UpToDate {
		nr.Step, nr.State = StepUpgraded, "already runs "+job.To+" with its role's schematic: nothing was sent"
		return nil
	}
	nr.Step = StepReady
	say(StepReady, "waiting until it runs %s, ready, with its Kubernetes node Ready", job.To)
	if err := job.ready(ctx, nr, up); err != nil {
		nr.State = nodeState(nr, up, nil) + "; " + err.Error()
		return err
	}
	nr.Step = StepUncordon
	say(StepUncordon, "uncordoning %s", nr.KubeName())
	if err := job.Kube.Uncordon(ctx, nr.KubeName()); err != nil {
		nr.State = fmt.Sprintf("runs %s, ready; still cordoned: %v (kubectl uncordon %s)", job.To, err, nr.KubeName())
		return err
	}
	nr.Cordon = false
	nr.Step = StepUpgraded
	nr.State = fmt.Sprintf("upgraded: runs %s with schematic %s, ready, uncordoned", job.To, factory.ShortID(up.BootedAfter))
	return nil
}

// ErrRolledBack: a node's upgrade failed and it runs its previous version
// again; the rollout stops there. errors.Is(err, node.ErrUpgradeFailed)
// too (exit 8).
var ErrRolledBack = errors.New("rolled back")

// rolledBack tells a failed upgrade as Talos handles it: a node that
// rebooted into the new version and came back on the version it ran,
// with its schematic, is a node Talos rolled back (a boot of the new
// installation failed; see the top of this file). It is uncordoned and
// said so: "worker-1 rolled back to v1.14.4: its upgrade failed (...)".
// nil when it is not known back on its version: nodeState says where it
// is. (An installer that fails installs nothing and reboots nothing:
// nodeState says it still runs its version.)
func (job RolloutJob) rolledBack(ctx context.Context, nr *NodeRollout, up *node.UpgradeResult, cause error, say func(string, string, ...any)) error {
	if up == nil || up.From == "" || !up.RebootRequested || ctx.Err() != nil {
		return nil
	}
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	w := WatchOptions{Talosconfig: job.Talosconfig, CallTimeout: job.Wait.CallTimeout}
	list, err := Watch(cctx, []*Member{nr.Member}, w, func(NodeStatus) {})
	if err != nil || len(list) == 0 || list[0].Status == nil {
		return nil
	}
	st := list[0].Status
	if st.TalosVersion != up.From || st.TalosVersion == up.To {
		return nil
	}
	schematic := ""
	if st.Booted != nil {
		schematic = st.Booted.SchematicID
	}
	if up.Booted != nil && schematic != up.Booted.SchematicID {
		return nil // its version, but not its installation: not a rollback
	}
	text := fmt.Sprintf("rolled back to %s: its upgrade failed (%s did not boot, and Talos booted its previous installation again: the upgrade fallback)", up.From, up.To)
	name := nr.KubeName()
	uncordon := "it was not cordoned"
	if nr.Cordon && job.Kube != nil {
		if err := job.Kube.Uncordon(context.WithoutCancel(ctx), name); err != nil {
			uncordon = fmt.Sprintf("still cordoned: %v (kubectl uncordon %s)", err, name)
		} else {
			nr.Cordon = false
			uncordon = "uncordoned"
		}
	}
	nr.Step = StepRolledBack
	nr.State = fmt.Sprintf("%s; runs %s with schematic %s, %s", text, up.From, factory.ShortID(schematic), uncordon)
	say(StepRolledBack, "%s", text)
	return &rolledBackError{msg: nr.Name() + " " + text, cause: cause}
}

type rolledBackError struct {
	msg   string
	cause error
}

func (e *rolledBackError) Error() string   { return e.msg }
func (e *rolledBackError) Unwrap() []error { return []error{ErrRolledBack, e.cause} }

// nodeState says where a failed node is: what it runs, what was sent,
// whether it is cordoned.
func nodeState(nr *NodeRollout, up *node.UpgradeResult, err error) string {
	if up == nil {
		return "not upgraded, nothing was sent: " + err.Error()
	}
	s := up.State()
	switch {
	case nr.Cordon:
		s += "; its Kubernetes node is cordoned (kubectl uncordon " + nr.KubeName() + " once it is back)"
	case nr.Drained != nil && errors.Is(err, context.Canceled):
		s += "; stopped during its drain, so it was uncordoned again"
	case nr.Drained != nil:
		s += "; the drain failed, so it was uncordoned again"
	}
	return s
}

// ready follows the node after its reboot (status' reads) until it is up:
// running and ready, its Kubernetes node Ready; then checks its version and
// schematic.
func (job RolloutJob) ready(ctx context.Context, nr *NodeRollout, up *node.UpgradeResult) error {
	f := job.Follow
	f.Talosconfig = job.Talosconfig
	f.Bootstrapped = true
	res, err := Follow(ctx, []*Member{nr.Member}, f, func(NodeStatus) {})
	if err != nil {
		return err
	}
	r := res[0]
	if r.Outcome != FollowUp {
		return fmt.Errorf("%w: after the reboot: %s", node.ErrUpgradeFailed, r.Message)
	}
	st := r.Status.Status
	switch {
	case st.TalosVersion != job.To:
		return fmt.Errorf("%w: %s runs %s, not %s", node.ErrUpgradeFailed, nr.Hostname, st.TalosVersion, job.To)
	case st.Booted == nil || st.Booted.SchematicID != up.SchematicID:
		got := "none"
		if st.Booted != nil {
			got = factory.ShortID(st.Booted.SchematicID)
		}
		return fmt.Errorf("%w: %s booted schematic %s, not its role's %s", node.ErrUpgradeFailed, nr.Hostname, got, factory.ShortID(up.SchematicID))
	}
	return nil
}

// etcdGate reads every control plane once (status' reads) and refuses to
// take one down unless etcd is healthy with every member (Talos'
// ValidateForUpgrade, see the top of this file).
func etcdGate(ctx context.Context, job RolloutJob, controlPlanes []*Member) (int, error) {
	members, err := etcdMembers(ctx, job, controlPlanes)
	return len(members), err
}

func etcdMembers(ctx context.Context, job RolloutJob, controlPlanes []*Member) ([]node.EtcdMember, error) {
	w := WatchOptions{Talosconfig: job.Talosconfig, CallTimeout: job.Wait.CallTimeout}
	if w.CallTimeout <= 0 {
		w.CallTimeout = node.DefaultCallTimeout
	}
	cctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	list, err := Watch(cctx, controlPlanes, w, func(NodeStatus) {})
	if err != nil {
		return nil, fmt.Errorf("etcd gate: %w", err)
	}
	var members []node.EtcdMember
	for _, ns := range list {
		name := ns.Target.Name()
		if ns.Status == nil {
			return nil, fmt.Errorf("%w: etcd not checked: %s does not answer", errEtcdGate, name)
		}
		etcd := ns.Status.Service("etcd")
		if etcd == nil || etcd.State != "Running" || etcd.Health != "healthy" {
			state := "absent"
			if etcd != nil {
				state = etcd.State + ", " + etcd.Health
			}
			return nil, fmt.Errorf("%w: etcd on %s is %s", errEtcdGate, name, state)
		}
		if ns.Status.EtcdError != "" {
			return nil, fmt.Errorf("%w: %s's etcd member list: %s", errEtcdGate, name, ns.Status.EtcdError)
		}
		if members == nil {
			members = ns.Status.EtcdMembers
		}
	}
	switch {
	case len(members) == 2:
		return nil, fmt.Errorf("%w: etcd has 2 members: upgrading one loses quorum (Talos refuses it too)", errEtcdGate)
	case len(members) < len(controlPlanes):
		return nil, fmt.Errorf("%w: etcd has %d members for %d control planes", errEtcdGate, len(members), len(controlPlanes))
	}
	for _, m := range members {
		if m.Hostname == "" {
			return nil, fmt.Errorf("%w: etcd member %s is not started", errEtcdGate, m.ID)
		}
		if m.Learner {
			return nil, fmt.Errorf("%w: etcd member %s (%s) is still a learner", errEtcdGate, m.ID, m.Hostname)
		}
	}
	return members, nil
}

var errEtcdGate error = gateRefusal("etcd is not healthy with all its members")

// ErrRolloutRole: an inventory node without a role (a custom profile
// naming none); the rollout cannot order or gate it. errors.Is(err,
// node.ErrInvalidConfig): the inventory fails the check (exit 7).
var ErrRolloutRole error = inventoryRefusal("a node has no role")

type inventoryRefusal string

func (r inventoryRefusal) Error() string        { return string(r) }
func (r inventoryRefusal) Is(target error) bool { return target == node.ErrInvalidConfig }

type gateRefusal string

func (g gateRefusal) Error() string        { return string(g) }
func (g gateRefusal) Is(target error) bool { return target == node.ErrRefused }

// unhealthy says what a node that did not become healthy before its
// upgrade waits for, as status says it: its diagnoses (the unmet
// conditions, the incident) and its Kubernetes node's (no CNI), each with
// its fix.
func (job RolloutJob) unhealthy(ctx context.Context, nr *NodeRollout) string {
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	w := WatchOptions{Talosconfig: job.Talosconfig, CallTimeout: job.Wait.CallTimeout}
	list, err := Watch(cctx, []*Member{nr.Member}, w, func(NodeStatus) {})
	if err != nil || len(list) == 0 {
		return "its status could not be read"
	}
	ns := list[0]
	var parts []string
	if st := ns.Status; st != nil && len(st.Unmet) > 0 {
		parts = append(parts, "it waits for "+unmetReasons(st.Unmet))
	}
	for _, d := range ns.Diagnoses {
		if d.Code == "not-ready" {
			continue // its unmet conditions, said above
		}
		s := d.Message
		if d.Fix != "" {
			s += " (fix: " + d.Fix + ")"
		}
		parts = append(parts, s)
	}
	if job.Kube != nil {
		v := ReadKube(cctx, job.Kube, job.CNI, []*Member{nr.Member})
		for _, kn := range v.Nodes {
			if kn.Hostname == nr.Hostname && kn.Diagnosis != nil {
				s := "its Kubernetes node: " + kn.Diagnosis.Message
				if kn.Diagnosis.Fix != "" {
					s += " (fix: " + kn.Diagnosis.Fix + ")"
				}
				parts = append(parts, s)
			}
		}
	}
	if len(parts) == 0 {
		return "status " + nr.Name() + " says why"
	}
	return strings.Join(parts, "; ")
}
