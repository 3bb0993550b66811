package plan

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/talosflash/talosflash/node"
)

// ApplyAllJob is every inventory node's own config, one node after the
// other: `apply --inventory` and the app's "Apply all". Each node is
// waited for at its address, checked to be that node and sent its config
// (ApplyNode); with a talosconfig, the nodes this run configured are then
// followed until they run (Follow); last, the first control plane is
// bootstrapped (Bootstrap), or its bootstrap is said to be the next step.
type ApplyAllJob struct {
	// Cluster is the inventory's cluster; Nodes are the members to apply,
	// in order (nil: every member). Each must have a config: a member
	// without one refuses the whole run before anything is waited for or
	// sent (MayApply, NoConfigError).
	Cluster *Cluster
	Nodes   []*Member
	// Node is each node's job: Port, Wait, Every and Apply, the template
	// (Mode, DryRun, Force, Timeout, Check, Probe, ApplyConfig). Node,
	// Progress and Apply.Event are set per node.
	Node NodeApplyJob
	// Talosconfig, when set, follows the nodes configured (not with
	// DryRun) and is what Bootstrap connects with.
	Talosconfig *node.Talosconfig
	// FollowEvery is the time between reads of a followed node (0: 5 s).
	FollowEvery time.Duration
	// Bootstrap bootstraps etcd on ControlPlane after the configs (needs
	// Talosconfig), then follows the control planes configured until they
	// run. Without it the bootstrap is the next step (AllBootstrapNext).
	Bootstrap bool
	// Event gets what happens, in order, as it happens (may be nil).
	Event func(AllEvent)
}

// AllEventKind says what an AllEvent carries.
type AllEventKind string

const (
	AllNode      AllEventKind = "node"      // Node's turn begins (its config is read)
	AllWaiting   AllEventKind = "waiting"   // Text: Node is still waited for at its address
	AllApply     AllEventKind = "apply"     // Apply: an event of Node's apply
	AllResult    AllEventKind = "result"    // Result, Err: Node's outcome
	AllFollow    AllEventKind = "follow"    // following begins: Followed, AfterBootstrap, Wait
	AllStatus    AllEventKind = "status"    // Status: a followed node changed
	AllFollowed  AllEventKind = "followed"  // Follow: how following one node ended (AfterBootstrap)
	AllNextStep  AllEventKind = "next"      // Result: the control plane, whose bootstrap is the next step (no Bootstrap)
	AllBootstrap AllEventKind = "bootstrap" // Result: the control plane, whose bootstrap starts
	// AllBootstrapWait: Text, the bootstrap's progress (waiting for the
	// node, for etcd).
	AllBootstrapWait AllEventKind = "bootstrap-wait"
	// AllBootstrapped: Bootstrap, its result; Already: etcd was
	// bootstrapped before (a control plane configured before this run).
	AllBootstrapped AllEventKind = "bootstrapped"
	// AllNotes: Notes, what the configs hold that talosflash did not check
	// (or warns about), once per run after every node's turn (or the
	// run's end), not in each node's AllApply events.
	AllNotes AllEventKind = "notes"
)

// ConfigNotes are one config file's notes (ApplyEvent.Config), said once
// for the nodes checked with it in a run.
type ConfigNotes struct {
	Config    string       // the file, as the inventory names it
	Hostnames []string     // the nodes it was checked for, in order
	Notes     []ApplyEvent // EventNote, each once
}

// AllEvent is one thing that happened in an ApplyAllJob.
type AllEvent struct {
	Kind           AllEventKind
	Node           *Member
	Text           string
	Apply          ApplyEvent
	Result         *NodeApplyOutcome
	Err            error
	Followed       []*Member
	AfterBootstrap bool
	Wait           time.Duration
	Status         NodeStatus
	Follow         FollowResult
	Bootstrap      *node.BootstrapResult
	Already        bool
	Notes          []ConfigNotes // AllNotes
}

// ApplyAllOutcome is a finished ApplyAllJob.
type ApplyAllOutcome struct {
	Nodes        []*NodeApplyOutcome // every node that had its turn, in order
	Applied      []*Member           // configured by this run (not DryRun)
	Bootstrapped bool                // the bootstrap ran and etcd is healthy (or was already)
}

// FollowError is a followed node that did not get to run: stuck on a
// diagnosis of severity error (errors.Is node.ErrInvalidConfig: it will
// not get better by itself, exit 7 in the CLI), or still on its way when
// the wait ran out (errors.Is node.ErrNetwork, exit 3).
type FollowError struct{ Result FollowResult }

func (e *FollowError) Error() string { return e.Result.Message }

func (e *FollowError) Is(target error) bool {
	switch e.Result.Outcome {
	case FollowStuck:
		return target == node.ErrInvalidConfig
	case FollowTimeout:
		return target == node.ErrNetwork
	}
	return false
}

// NoConfigError is an apply of every node refused before anything was
// waited for or sent: these members have no config in the inventory
// (errors.Is node.ErrInvalidConfig: exit 7). One behaviour for the CLI and
// the app (docs/INVENTORY.md): a run that skipped such a node would leave
// the cluster half applied, one that stopped at it would have configured
// the nodes before it.
type NoConfigError struct{ Refusals []*Refusal }

func (e *NoConfigError) Error() string {
	var parts []string
	for _, r := range e.Refusals {
		parts = append(parts, r.Member.Name()+" ("+r.Fix+")")
	}
	return "no config for " + strings.Join(parts, ", ") + ": nothing was sent to any node"
}

func (e *NoConfigError) Is(target error) bool { return target == node.ErrInvalidConfig }

// CheckApplyAll is ApplyAll's decision before anything is waited for or
// sent, for a front end to show first (the app's Apply all): the members
// it applies, or why it would refuse.
func (job *ApplyAllJob) CheckApplyAll() ([]*Member, error) {
	members := job.Nodes
	if members == nil && job.Cluster != nil {
		members = job.Cluster.Members
	}
	var missing []*Refusal
	for _, m := range members {
		if r := job.cluster().MayApply(m); r != nil && r.Code == RefusalNoConfig {
			missing = append(missing, r)
		}
	}
	if len(missing) > 0 {
		return nil, &NoConfigError{Refusals: missing}
	}
	return members, nil
}

func (job *ApplyAllJob) cluster() *Cluster {
	if job.Cluster != nil {
		return job.Cluster
	}
	return &Cluster{Members: job.Nodes}
}

// ApplyAll runs the job: each node in turn, every node having its turn
// whatever the others did (a config that cannot be read, or Ctrl-C, ends
// it there); then the follow and the bootstrap. The error is the first
// one (a node's, then the follow's, then the bootstrap's); the outcome is
// returned with it.
func ApplyAll(ctx context.Context, job ApplyAllJob) (*ApplyAllOutcome, error) {
	out := &ApplyAllOutcome{}
	if err := CheckMode(job.Node.Apply.Mode); err != nil {
		return out, err // before waiting for anyone
	}
	members, err := job.CheckApplyAll()
	if err != nil {
		return out, err
	}
	first := job.cluster().FirstControlPlane()
	var (
		firstErr error
		cp       *NodeApplyOutcome
	)
	keep := func(err error) {
		if err != nil && firstErr == nil {
			firstErr = err
		}
	}
	dryRun := job.Node.Apply.DryRun
	notes := &configNotes{}
	defer notes.flush(&job) // also when the loop ends early: said once either way
	for _, n := range members {
		if r := job.cluster().MayApply(n); r != nil && r.Code == RefusalConfigured {
			// Seen configured (it took its config in this session): skipped,
			// as a node that asks for a client certificate is.
			res := &NodeApplyOutcome{Node: n, Endpoint: n.Endpoint.String(), Configured: true}
			out.Nodes = append(out.Nodes, res)
			job.emit(AllEvent{Kind: AllResult, Node: n, Result: res})
			continue
		}
		if n.State == StateAbsent {
			// Seen not answering at its address (the app looks for every
			// node from its start): not waited for again in this run.
			res := &NodeApplyOutcome{Node: n, Endpoint: n.Endpoint.String()}
			err := &NotThereError{Hostname: n.Name(), Endpoint: res.Endpoint, Last: errors.New("it has not answered since it was first looked for")}
			out.Nodes = append(out.Nodes, res)
			job.emit(AllEvent{Kind: AllResult, Node: n, Result: res, Err: err})
			keep(err)
			continue
		}
		data, err := node.ReadConfigFile(n.Config)
		if err != nil {
			return out, err
		}
		job.emit(AllEvent{Kind: AllNode, Node: n})
		j := job.Node
		j.Node = n
		j.Progress = func(s string) { job.emit(AllEvent{Kind: AllWaiting, Node: n, Text: s}) }
		j.Apply.Event = func(ev ApplyEvent) {
			if ev.Kind == EventNote && ev.Config {
				notes.add(n, ev)
				return
			}
			job.emit(AllEvent{Kind: AllApply, Node: n, Apply: ev})
		}
		res, err := ApplyNode(ctx, j, data)
		if errors.Is(err, context.Canceled) {
			return out, err
		}
		out.Nodes = append(out.Nodes, res)
		job.emit(AllEvent{Kind: AllResult, Node: n, Result: res, Err: err})
		keep(err)
		if err == nil && n == first {
			cp = res
		}
		if err == nil && !res.Configured && !dryRun {
			out.Applied = append(out.Applied, n)
		}
	}
	notes.flush(&job)
	if job.Talosconfig != nil && !dryRun {
		keep(job.follow(ctx, out.Applied, false))
	}
	if cp == nil || dryRun {
		return out, firstErr
	}
	if !job.Bootstrap {
		job.emit(AllEvent{Kind: AllNextStep, Node: cp.Node, Result: cp})
		return out, firstErr
	}
	job.emit(AllEvent{Kind: AllBootstrap, Node: cp.Node, Result: cp})
	res, err := Bootstrap(ctx, BootstrapJob{Node: cp.Node, Talosconfig: job.Talosconfig, Configured: cp.Configured,
		Wait: node.WaitOptions{
			Timeout:  max(job.Node.Wait, node.DefaultWaitTimeout),
			Progress: func(s string) { job.emit(AllEvent{Kind: AllBootstrapWait, Node: cp.Node, Text: s}) },
		}})
	if err != nil {
		keep(fmt.Errorf("bootstrap %s: %w", cp.Node.Hostname, err))
		return out, firstErr
	}
	out.Bootstrapped = true
	job.cluster().ObserveBootstrapped(cp.Node)
	job.emit(AllEvent{Kind: AllBootstrapped, Node: cp.Node, Result: cp, Bootstrap: res.BootstrapResult, Already: res.Already})
	var cps []*Member
	for _, n := range out.Applied {
		if n.Role.IsControlPlane() {
			cps = append(cps, n)
		}
	}
	keep(job.follow(ctx, cps, true))
	return out, firstErr
}

// follow reads the nodes through status' Watch until each runs its config,
// is stuck, or the wait runs out (Follow): the first stuck node's error,
// else the first late one's.
func (job *ApplyAllJob) follow(ctx context.Context, nodes []*Member, bootstrapped bool) error {
	if len(nodes) == 0 {
		return nil
	}
	targets := nodes
	wait := job.Node.Wait
	if wait <= 0 {
		wait = defaultNodeWait
	}
	job.emit(AllEvent{Kind: AllFollow, Followed: nodes, AfterBootstrap: bootstrapped, Wait: wait})
	every := job.FollowEvery
	if every <= 0 {
		every = 5 * time.Second
	}
	results, err := Follow(ctx, targets, FollowOptions{
		WatchOptions: WatchOptions{Check: StatusCheck{Profiles: job.Node.Apply.Check.Profiles}, Interval: every,
			CallTimeout: job.Node.Apply.Timeout, Talosconfig: job.Talosconfig},
		Wait: wait, Bootstrapped: bootstrapped,
	}, func(ns NodeStatus) { job.emit(AllEvent{Kind: AllStatus, Status: ns, AfterBootstrap: bootstrapped}) })
	if err != nil {
		return err // interrupted, or a node's address that cannot be dialled
	}
	var stuck, late error
	for _, r := range results {
		job.emit(AllEvent{Kind: AllFollowed, Follow: r, AfterBootstrap: bootstrapped})
		switch r.Outcome {
		case FollowStuck:
			if stuck == nil {
				stuck = &FollowError{Result: r}
			}
		case FollowTimeout:
			if late == nil {
				late = &FollowError{Result: r}
			}
		}
	}
	if stuck != nil {
		return stuck
	}
	return late
}

// configNotes gathers a run's config notes per file, each note and each
// node once.
type configNotes struct {
	groups []ConfigNotes
	done   bool
}

func (c *configNotes) add(n *Member, ev ApplyEvent) {
	i := slices.IndexFunc(c.groups, func(g ConfigNotes) bool { return g.Config == n.Config })
	if i < 0 {
		c.groups = append(c.groups, ConfigNotes{Config: n.Config})
		i = len(c.groups) - 1
	}
	g := &c.groups[i]
	if !slices.Contains(g.Hostnames, n.Hostname) {
		g.Hostnames = append(g.Hostnames, n.Hostname)
	}
	if !slices.ContainsFunc(g.Notes, func(e ApplyEvent) bool { return e.Severity == ev.Severity && e.Text == ev.Text }) {
		g.Notes = append(g.Notes, ev)
	}
}

// flush says the notes (AllNotes), once.
func (c *configNotes) flush(job *ApplyAllJob) {
	if c.done || len(c.groups) == 0 {
		return
	}
	c.done = true
	job.emit(AllEvent{Kind: AllNotes, Notes: c.groups})
}

func (job *ApplyAllJob) emit(ev AllEvent) {
	if job.Event != nil {
		job.Event(ev)
	}
}

// BootstrapJob is etcd's bootstrap on one control plane: `talosflash
// bootstrap`, apply --inventory --bootstrap and the app's "Bootstrap
// etcd…". node.Bootstrap waits for the node to run with its config, sends
// the bootstrap once (a node whose etcd runs or has data is refused) and
// waits for etcd to be healthy.
type BootstrapJob struct {
	Node        *Member // the control plane
	Talosconfig *node.Talosconfig
	Wait        node.WaitOptions
	// Configured: the node had its config before this run (apply
	// --inventory skipped it): etcd found bootstrapped is then no error
	// (BootstrapOutcome.Already), only nothing to do.
	Configured bool
}

// BootstrapOutcome is a bootstrap that needs nothing more.
type BootstrapOutcome struct {
	*node.BootstrapResult
	Already bool // etcd was bootstrapped before (Configured)
}

// Bootstrap runs the job. With an error the result (what was sent) comes
// along when there is one.
func Bootstrap(ctx context.Context, job BootstrapJob) (*BootstrapOutcome, error) {
	res, err := node.Bootstrap(ctx, job.Node.Endpoint.String(), job.Talosconfig, job.Wait)
	if errors.Is(err, node.ErrAlreadyBootstrapped) && job.Configured {
		return &BootstrapOutcome{BootstrapResult: res, Already: true}, nil
	}
	return &BootstrapOutcome{BootstrapResult: res}, err
}
