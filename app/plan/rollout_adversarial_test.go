package plan

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/talosflash/talosflash/kube"
	"github.com/talosflash/talosflash/node"
)

// Adversarial checks of the rolling upgrade on the fakes: a rollback on a
// node whose Kubernetes name is not its hostname, and a Ctrl-C in each of
// the snapshot, the drain and the reboot.

func fqdnControlPlane(cfg []byte) []byte {
	cfg = bytes.Replace(cfg, []byte("kind: HostnameConfig\nauto: stable"), []byte("kind: HostnameConfig\nhostname: cp-1.lab.example"), 1)
	return bytes.Replace(cfg, []byte("kind: KubeNodeConfig\n"), []byte("kind: KubeNodeConfig\nregisterWithFQDN: true\n"), 1)
}

func advJob(t *testing.T, m *Member, tc *node.Talosconfig, access *kube.Access) RolloutJob {
	return RolloutJob{Nodes: []*Member{m}, To: "v1.14.6", Talosconfig: tc, Factory: upgradeFactory(t), Kube: access,
		Snapshot: filepath.Join(t.TempDir(), "etcd.db"),
		Wait:     node.WaitOptions{Timeout: 30 * time.Second, Every: 10 * time.Millisecond}, Drain: kube.DrainOptions{Timeout: 20 * time.Second},
		Follow: FollowOptions{Wait: 20 * time.Second, WatchOptions: WatchOptions{Interval: 20 * time.Millisecond}}}
}

// A node registered as cp-1.lab.example that Talos rolls back is
// uncordoned by that name, and said rolled back.
func TestRolloutRollbackUncordonsTheKubernetesName(t *testing.T) {
	n, api, access, tc, _ := oneControlPlane(t, true, fqdnControlPlane)
	n.FailUpgradedBoot(`service "kubelet": failed to start: the new kernel lacks a module`)
	m := testMember(t, "cp-1", node.RoleControlPlane, "controlplane", n.Addr())
	res, err := Rollout(t.Context(), advJob(t, m, tc, access))
	if !errors.Is(err, ErrRolledBack) {
		t.Fatalf("rollout: %v (%+v)", err, res.Nodes[0])
	}
	nr := res.Nodes[0]
	if nr.Step != StepRolledBack || nr.Cordon || !strings.HasSuffix(nr.State, "uncordoned") || api.Unschedulable("cp-1.lab.example") ||
		!strings.Contains(err.Error(), "cp-1 rolled back to v1.14.5: its upgrade failed") {
		t.Fatalf("state %q (cordoned %v)", nr.State, api.Unschedulable("cp-1.lab.example"))
	}
}

// cancelOn cancels once an event's text holds mark.
type cancelOn struct {
	mu     sync.Mutex
	mark   string
	step   string // "": any step
	cancel context.CancelFunc
	fired  bool
	said   []string
}

func (c *cancelOn) event(ev RolloutEvent) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.said = append(c.said, ev.Step+": "+ev.Text)
	if !c.fired && strings.Contains(ev.Text, c.mark) && (c.step == "" || ev.Step == c.step) {
		c.fired = true
		c.cancel()
	}
}

// Ctrl-C while the snapshot streams: nothing sent to the node, neither
// the file nor its .part left.
func TestRolloutInterruptedInTheSnapshot(t *testing.T) {
	n, _, access, tc, _ := oneControlPlane(t, true, func(cfg []byte) []byte { return cfg })
	n.StallEtcdSnapshot(4096)
	m := testMember(t, "cp-1", node.RoleControlPlane, "controlplane", n.Addr())
	job := advJob(t, m, tc, access)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	c := &cancelOn{mark: "receiving the etcd snapshot", cancel: cancel}
	job.Event = c.event
	res, err := Rollout(ctx, job)
	if !c.fired || !errors.Is(err, context.Canceled) || res.Nodes[0].Step != StepUntouched {
		t.Fatalf("rollout: %v; said %q", err, c.said)
	}
	if len(n.Pulled())+len(n.Upgrades())+n.RebootRequests() != 0 {
		t.Fatal("something was sent")
	}
	for _, p := range []string{job.Snapshot, job.Snapshot + ".part"} {
		if _, err := os.Lstat(p); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s left", p)
		}
	}
}

// Ctrl-C during the drain (a budget holds a pod): the node is not
// rebooted, it is uncordoned again, and its state says so.
func TestRolloutInterruptedInTheDrain(t *testing.T) {
	n, api, access, tc, _ := oneControlPlane(t, true, func(cfg []byte) []byte { return cfg })
	api.AddDeployment("default", "web", 1, 0)
	api.AddMinAvailableBudget("default", "web", 1)
	m := testMember(t, "cp-1", node.RoleControlPlane, "controlplane", n.Addr())
	job := advJob(t, m, tc, access)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	c := &cancelOn{step: StepDrain, cancel: cancel}
	job.Event = c.event
	res, err := Rollout(ctx, job)
	nr := res.Nodes[0]
	if !c.fired || err == nil || !errors.Is(err, context.Canceled) {
		t.Fatalf("rollout: %v; said %q", err, c.said)
	}
	if n.RebootRequests() != 0 || api.Unschedulable("cp-1") || nr.Cordon || n.RunningVersion() != "v1.14.5" {
		t.Fatalf("reboots %d, cordoned %v/%v, runs %s", n.RebootRequests(), api.Unschedulable("cp-1"), nr.Cordon, n.RunningVersion())
	}
	if !strings.Contains(nr.State, "runs v1.14.5") && !strings.Contains(nr.State, "old version") && !strings.Contains(nr.State, "until its next reboot") {
		t.Errorf("state %q does not say what it runs", nr.State)
	}
	if strings.Contains(nr.State, "the drain failed") || !strings.Contains(nr.State, "stopped during its drain") {
		t.Errorf("state %q: the drain was stopped, not failed", nr.State)
	}
}

// Ctrl-C once the reboot is asked for: the node is left cordoned (it is
// rebooting), and its state says so and how to uncordon it.
func TestRolloutInterruptedInTheReboot(t *testing.T) {
	n, api, access, tc, _ := oneControlPlane(t, true, func(cfg []byte) []byte { return cfg })
	m := testMember(t, "cp-1", node.RoleControlPlane, "controlplane", n.Addr())
	job := advJob(t, m, tc, access)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	c := &cancelOn{mark: "waiting for the reboot", cancel: cancel}
	job.Event = c.event
	res, err := Rollout(ctx, job)
	nr := res.Nodes[0]
	if !c.fired || !errors.Is(err, context.Canceled) {
		t.Fatalf("rollout: %v; said %q", err, c.said)
	}
	if !api.Unschedulable("cp-1") || !nr.Cordon || !strings.Contains(nr.State, "kubectl uncordon cp-1") || !strings.Contains(nr.State, "reboot") {
		t.Fatalf("state %q, cordoned %v", nr.State, api.Unschedulable("cp-1"))
	}
	t.Logf("state: %s\nerr: %v", nr.State, err)
}
