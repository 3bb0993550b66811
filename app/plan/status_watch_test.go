package plan

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/talosflash/talosflash/factory"
	"github.com/talosflash/talosflash/node"
	"github.com/talosflash/talosflash/node/nodetest"
)

// lateTimer is a context whose deadline has passed while its timer has not
// fired yet: Err is nil and Done open (until its parent's end, so a watch
// that misses it fails rather than hangs). gRPC fails every call on it at
// once with DeadlineExceeded, as it does in the moment between a deadline
// and its timer on a loaded machine.
type lateTimer struct{ context.Context }

func (lateTimer) Deadline() (time.Time, bool) { return time.Now().Add(-time.Millisecond), true }

// A read cut by the watch's own end is not the node's answer: it is never
// emitted nor returned as "no answer from the node". CI once printed one as
// the last line of status --watch --for, and exited 0 on it.
func TestWatchEndsWithoutAReadItsDeadlineCut(t *testing.T) {
	pki, err := nodetest.NewPKI()
	if err != nil {
		t.Fatal(err)
	}
	n := nodetest.StartNode(t, nodetest.NodeOptions{PKI: pki, Schematic: factory.BuiltinProfiles()[1].Schematic(), Worker: true, Hostname: "worker-1"})
	m := testMember(t, "worker-1", node.RoleWorker, "worker", n.Addr())
	tc := rolloutTalosconfig(t, pki)

	// The same node read on a live context answers: the test's premise.
	live, err := Watch(t.Context(), []*Member{m}, WatchOptions{Talosconfig: tc}, func(NodeStatus) {})
	if err != nil || len(live) != 1 || live[0].Status == nil {
		t.Fatalf("a live read: %v %+v", err, live)
	}

	for _, c := range []struct {
		name string
		opts WatchOptions
		want error
	}{
		{"one read", WatchOptions{Talosconfig: tc}, context.DeadlineExceeded},
		{"a watch with --for", WatchOptions{Talosconfig: tc, Watch: true, Interval: time.Millisecond, For: time.Hour}, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
			defer cancel()
			var emitted []NodeStatus
			last, err := Watch(lateTimer{ctx}, []*Member{m}, c.opts, func(ns NodeStatus) { emitted = append(emitted, ns) })
			if !errors.Is(err, c.want) || (c.want == nil && err != nil) {
				t.Errorf("err %v, want %v", err, c.want)
			}
			if len(emitted) != 0 || len(last) != 0 {
				t.Errorf("a cut read reported as the node's: emitted %+v, last %+v", emitted, last)
			}
		})
	}
}
