package plan

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"github.com/talosflash/talosflash/node"
)

// The cluster's etcd, saved and brought back.
//
// A snapshot (TakeSnapshot: `talosflash etcd snapshot`, and the rolling
// upgrade's first step) comes from the first control plane of the cluster
// whose etcd runs healthy (status' reads), taken as talosctl etcd
// snapshot takes it (node.SaveEtcdSnapshot). It holds every object of the
// cluster, Secrets included: written 0600, never printed, logged or
// cached. The recovery (Recover: `talosflash bootstrap --recover-from`)
// is talosctl bootstrap --recover-from's on a control plane whose etcd
// waits for its bootstrap (node.RecoverEtcd): the way back after the
// control plane's card is flashed again and its config applied
// (docs/RECOVERY.md).

// SnapshotJob is one etcd snapshot.
type SnapshotJob struct {
	// Members are the nodes it may come from, in order: the control
	// planes among them and the members of unknown role (a typed address:
	// a node with an etcd service is a control plane).
	Members     []*Member
	Talosconfig *node.Talosconfig
	Path        string
	// DryRun chooses the control plane (status' reads) and sends nothing.
	DryRun bool
	// CallTimeout bounds each read; Timeout the transfer.
	CallTimeout, Timeout time.Duration
	Progress             func(string)
}

// SnapshotOutcome is a snapshot taken (or, DryRun, planned).
type SnapshotOutcome struct {
	From     *Member
	Path     string
	Snapshot *node.EtcdSnapshot // nil: a dry run
	// Passed are the control planes passed over, each with why.
	Passed []string
	// Skipped says why none is taken, when none is ("" one is): the
	// rolling upgrade's --no-snapshot, or ErrNoEtcdData.
	Skipped string
}

// Errors of TakeSnapshot; both are refusals (errors.Is(err,
// node.ErrRefused), exit 8).
var (
	// ErrNoSnapshotSource: etcd runs, but on no control plane healthy.
	ErrNoSnapshotSource error = gateRefusal("no control plane runs a healthy etcd to take a snapshot from")
	// ErrNoEtcdData: etcd runs on no control plane yet (each waits for the
	// cluster's bootstrap): there is nothing to save. An upgrade goes on
	// without a snapshot.
	ErrNoEtcdData error = gateRefusal("etcd runs on no control plane yet: it holds nothing to save")
)

// TakeSnapshot saves the cluster's etcd into job.Path from the first
// healthy control plane (see the top of this file). Among typed
// addresses a node without an etcd service is not a control plane: only
// workers is node.ErrNotControlPlane; control planes whose etcd waits for
// the bootstrap, ErrNoEtcdData.
func TakeSnapshot(ctx context.Context, job SnapshotJob) (*SnapshotOutcome, error) {
	if job.Progress == nil {
		job.Progress = func(string) {}
	}
	var candidates []*Member
	for _, m := range job.Members {
		if m.Role.IsControlPlane() || !m.Role.Known() {
			candidates = append(candidates, m)
		}
	}
	if len(candidates) == 0 {
		return nil, fmt.Errorf("%w: no control plane among the nodes: etcd runs on control planes", node.ErrNotControlPlane)
	}
	from, passed, err := snapshotSource(ctx, job, candidates)
	out := &SnapshotOutcome{From: from, Path: job.Path, Passed: passed}
	if err != nil {
		return out, err
	}
	if job.DryRun {
		return out, nil
	}
	if job.Path == "" {
		return out, errors.New("etcd snapshot: no file named to save it to")
	}
	job.Progress(fmt.Sprintf("taking an etcd snapshot of %s into %s", from.Name(), job.Path))
	out.Snapshot, err = node.SaveEtcdSnapshot(ctx, from.Endpoint.String(), job.Talosconfig, job.Path,
		node.SnapshotOptions{Timeout: job.Timeout, CallTimeout: job.CallTimeout, Progress: job.Progress})
	return out, err
}

// snapshotSource reads the candidates once and picks the first whose etcd
// runs healthy.
func snapshotSource(ctx context.Context, job SnapshotJob, candidates []*Member) (*Member, []string, error) {
	cctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	w := WatchOptions{Talosconfig: job.Talosconfig, CallTimeout: job.CallTimeout}
	if w.CallTimeout <= 0 {
		w.CallTimeout = node.DefaultCallTimeout
	}
	list, err := Watch(cctx, candidates, w, func(NodeStatus) {})
	if err != nil {
		if ctx.Err() != nil {
			return nil, nil, ctx.Err()
		}
		return nil, nil, fmt.Errorf("etcd snapshot: %w", err)
	}
	var (
		passed            []string
		controls, running int
		unreachable       error
	)
	for _, ns := range list {
		m := ns.Target
		if ns.Status == nil {
			passed = append(passed, fmt.Sprintf("%s does not answer (%v)", m.Name(), ns.Err))
			if unreachable == nil {
				unreachable = ns.Err
			}
			continue
		}
		etcd := ns.Status.Service("etcd")
		if etcd == nil && !m.Role.IsControlPlane() {
			continue // a typed address that is a worker
		}
		controls++
		if etcd != nil && etcd.State == "Running" {
			running++
		}
		switch {
		case etcd == nil:
			passed = append(passed, m.Name()+" runs no etcd service")
		case etcd.State != "Running" || etcd.Health != "healthy":
			passed = append(passed, fmt.Sprintf("etcd on %s is %s, %s", m.Name(), etcd.State, etcd.Health))
		default:
			return m, passed, nil
		}
	}
	switch {
	case controls == 0 && unreachable == nil:
		return nil, passed, fmt.Errorf("%w: none of %s runs etcd: take the snapshot from a control plane", node.ErrNotControlPlane, names(candidates))
	case unreachable != nil:
		return nil, passed, fmt.Errorf("etcd snapshot: %s; nothing was saved: %w", strings.Join(passed, "; "), unreachable)
	case running == 0:
		return nil, passed, fmt.Errorf("%w (%s)", ErrNoEtcdData, strings.Join(passed, "; "))
	}
	return nil, passed, fmt.Errorf("%w: %s", ErrNoSnapshotSource, strings.Join(passed, "; "))
}

func names(ms []*Member) string {
	var out []string
	for _, m := range ms {
		out = append(out, m.Name())
	}
	return strings.Join(out, ", ")
}

// SnapshotPath is where the rolling upgrade saves its snapshot: in dir
// (the inventory's folder, or --snapshot-dir), named after the cluster
// and the time (UTC), never an existing name.
func SnapshotPath(dir, cluster string, now time.Time) string {
	if dir == "" {
		dir = "."
	}
	name := strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '-', r == '_', r == '.':
			return r
		}
		return '-'
	}, cluster)
	if strings.Trim(name, ".-") == "" {
		name = "cluster"
	}
	return filepath.Join(dir, fmt.Sprintf("etcd-%s-%s.db", name, now.UTC().Format("20060102-150405")))
}

// SnapshotDir is the folder the rolling upgrade's snapshot goes to: dir
// when given, else the inventory's folder, else the current one.
func SnapshotDir(dir, inventoryPath string) string {
	switch {
	case dir != "":
		return dir
	case inventoryPath != "":
		return filepath.Dir(inventoryPath)
	}
	return "."
}

// SnapshotWords says a snapshot saved, in a line (never its content).
func SnapshotWords(o *SnapshotOutcome) string {
	s := o.Snapshot
	return fmt.Sprintf("etcd snapshot of %s saved to %s: %s, in %s; it holds every Secret of the cluster: keep it private (the way back: talosflash bootstrap --recover-from %s)",
		o.From.Name(), s.Path, s.Words(), s.Took.Round(time.Millisecond), s.Path)
}

// RecoverJob is etcd's recovery on one control plane from a snapshot
// file: talosflash bootstrap --recover-from.
type RecoverJob struct {
	Node        *Member // a control plane whose etcd waits for its bootstrap
	Talosconfig *node.Talosconfig
	Snapshot    string // the file
	// SkipHashCheck: a copy of a member's data directory without the
	// SHA-256 trailer (talosctl's --recover-skip-hash-check).
	SkipHashCheck bool
	Wait          node.WaitOptions
}

// Recover runs the job (node.RecoverEtcd): a member known to be a worker
// is refused before anything is read or sent.
func Recover(ctx context.Context, job RecoverJob) (*node.RecoverResult, error) {
	if job.Node.Role.Known() && !job.Node.Role.IsControlPlane() {
		return nil, fmt.Errorf("%w: %s is a %s: etcd is recovered on a control plane; nothing was sent", node.ErrNotControlPlane, job.Node.Name(), job.Node.Role)
	}
	res, err := node.RecoverEtcd(ctx, job.Node.Endpoint.String(), job.Talosconfig, job.Snapshot,
		node.RecoverOptions{Wait: job.Wait, SkipHashCheck: job.SkipHashCheck})
	if err == nil {
		job.Node.State, job.Node.EtcdRunning = StateRunning, true
	}
	return res, err
}

// errSnapshotFirst: the rolling upgrade refuses to start without its
// snapshot (the exit code is its cause's).
var errSnapshotFirst = errors.New("the rolling upgrade takes an etcd snapshot before the first control plane moves, and none could be taken")
