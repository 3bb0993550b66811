package plan

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/talosflash/talosflash/node"
)

// Follow outcomes (FollowResult.Outcome): how following a node after its
// config ended.
const (
	// FollowUp: running and ready.
	FollowUp = "up"
	// FollowRunning: running; what is left is its Kubernetes node
	// (MachineStatus nodeReady: not registered yet, or NotReady, e.g. no
	// CNI yet), which the Kubernetes view explains.
	FollowRunning = "running"
	// FollowAwaitingBootstrap: a control plane runs its config and etcd
	// waits for the cluster's bootstrap (or, on another control plane, to
	// join once it is bootstrapped).
	FollowAwaitingBootstrap = "awaiting-bootstrap"
	// FollowStuck: a diagnosis of severity error (the incident: an
	// extension service waiting for its ExtensionServiceConfig; a failed
	// service; etcd unhealthy). It will not get better by itself.
	FollowStuck = "stuck"
	// FollowTimeout: the wait ran out first; the last status says where
	// the node was.
	FollowTimeout = "timeout"
)

// FollowResult is one node's follow.
type FollowResult struct {
	Status  NodeStatus // the last read
	Outcome string
	Message string // in the user's words
}

// FollowOptions bound Follow.
type FollowOptions struct {
	WatchOptions
	// Wait bounds the whole follow (default 10 min).
	Wait time.Duration
	// Bootstrapped: the cluster is bootstrapped, so a control plane whose
	// etcd waits is not done (it is joining).
	Bootstrapped bool
}

// FollowDone says whether following a node ends at ns, with the outcome.
// An unreachable node is never done: after its config it is away while it
// leaves maintenance or reboots.
func FollowDone(ns NodeStatus, bootstrapped bool) (string, bool) {
	st := ns.Status
	if st == nil {
		return "", false
	}
	for _, d := range ns.Diagnoses {
		if d.Severity == "error" && d.Code != "unreachable" {
			return FollowStuck, true
		}
	}
	if ns.Healthy() {
		return FollowUp, true
	}
	etcd := st.Service("etcd")
	if !bootstrapped && etcd != nil && etcd.State != "Running" {
		return FollowAwaitingBootstrap, true
	}
	if st.Stage == "running" && len(st.Unmet) > 0 && onlyKubernetes(st.Unmet) {
		return FollowRunning, true
	}
	return "", false
}

func onlyKubernetes(unmet []node.Condition) bool {
	for _, u := range unmet {
		if u.Name != "nodeReady" {
			return false
		}
	}
	return true
}

// Follow reads each target every Interval until FollowDone says it is
// done or Wait runs out, calling emit as Watch does (first read, then each
// change). The results are in the targets' order; a ctx cancel returns the
// results so far with its error.
func Follow(ctx context.Context, targets []*Member, opts FollowOptions, emit func(NodeStatus)) ([]FollowResult, error) {
	wait := opts.Wait
	if wait <= 0 {
		wait = 10 * time.Minute
	}
	w := opts.WatchOptions
	w.Watch, w.For = true, wait
	w.Until = func(ns NodeStatus) bool { _, done := FollowDone(ns, opts.Bootstrapped); return done }
	last, err := Watch(ctx, targets, w, emit)
	byMember := map[*Member]NodeStatus{}
	for _, ns := range last {
		byMember[ns.Target] = ns
	}
	out := make([]FollowResult, 0, len(targets))
	for _, t := range targets {
		ns, ok := byMember[t]
		if !ok {
			ns = NodeStatus{Target: t}
		}
		out = append(out, followResult(ns, opts.Bootstrapped, wait))
	}
	return out, err
}

func followResult(ns NodeStatus, bootstrapped bool, wait time.Duration) FollowResult {
	name := ns.Target.Name()
	r := FollowResult{Status: ns}
	outcome, done := FollowDone(ns, bootstrapped)
	if !done {
		outcome = FollowTimeout
	}
	r.Outcome = outcome
	st := ns.Status
	switch outcome {
	case FollowUp:
		r.Message = fmt.Sprintf("%s is running and ready", name)
	case FollowRunning:
		r.Message = fmt.Sprintf("%s is running; its Kubernetes node is not Ready yet (%s)", name, unmetReasons(st.Unmet))
	case FollowAwaitingBootstrap:
		r.Message = fmt.Sprintf("%s runs its config; etcd waits for the cluster's bootstrap", name)
	case FollowStuck:
		for _, d := range ns.Diagnoses {
			if d.Severity == "error" && d.Code != "unreachable" {
				r.Message = d.Message
				if d.Fix != "" {
					r.Message += ". Fix: " + d.Fix
				}
				break
			}
		}
	default:
		where := "did not answer"
		if st != nil {
			where = "still " + st.Stage
			if len(st.Unmet) > 0 {
				where += " (" + unmetReasons(st.Unmet) + ")"
			}
		} else if ns.Err != nil {
			where += ": " + ns.Err.Error()
		}
		r.Message = fmt.Sprintf("%s %s after %s", name, where, Minutes(wait))
	}
	return r
}

func unmetReasons(unmet []node.Condition) string {
	var parts []string
	for _, u := range unmet {
		parts = append(parts, u.Name+": "+u.Reason)
	}
	return strings.Join(parts, "; ")
}
