package nodetest

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/siderolabs/talos/pkg/machinery/api/machine"
	"github.com/siderolabs/talos/pkg/machinery/constants"
	"github.com/siderolabs/talos/pkg/machinery/resources/runtime"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Clock is a configured fake node's time since boot, moved by the test
// (Advance) instead of the wall clock, so that a 70-minute BootTimeout
// passes in a test in no time. The node reports its timestamps as
// time.Now() minus SinceBoot, so a client computing "now - timestamp"
// sees the clock's time. A reboot sets it back to zero.
type Clock struct {
	mu    sync.Mutex
	since time.Duration
	subs  []func()
}

// NewClock is a clock at sinceBoot.
func NewClock(sinceBoot time.Duration) *Clock { return &Clock{since: sinceBoot} }

// SinceBoot is the node's time since its current boot.
func (c *Clock) SinceBoot() time.Duration { c.mu.Lock(); defer c.mu.Unlock(); return c.since }

// Advance moves the clock on; a node whose BootTimeout passes reboots.
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	c.since += d
	subs := append([]func(){}, c.subs...)
	c.mu.Unlock()
	for _, f := range subs {
		f()
	}
}

func (c *Clock) reset() { c.mu.Lock(); c.since = 0; c.mu.Unlock() }

func (c *Clock) subscribe(f func()) { c.mu.Lock(); c.subs = append(c.subs, f); c.mu.Unlock() }

// sinceBoot is the node's uptime: its Clock, else the wall clock since the
// current boot began.
func (n *Node) sinceBoot() time.Duration {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.sinceBootLocked()
}

func (n *Node) sinceBootLocked() time.Duration {
	if n.opts.Clock != nil {
		return n.opts.Clock.SinceBoot()
	}
	return time.Since(n.bootStart)
}

// bootedAtLocked is when the current boot began, as the node's clock says.
func (n *Node) bootedAtLocked() time.Time { return time.Now().Add(-n.sinceBootLocked()) }

// stage validates NodeOptions.Stage.
func (n *Node) stage() (runtime.MachineStage, error) {
	if n.opts.Stage == "" {
		return runtime.MachineStageRunning, nil
	}
	st, err := runtime.MachineStageString(n.opts.Stage)
	if err != nil {
		return 0, fmt.Errorf("NodeOptions.Stage %q: %w", n.opts.Stage, err)
	}
	return st, nil
}

func (n *Node) bootTimeout() time.Duration {
	if n.opts.BootTimeout > 0 {
		return n.opts.BootTimeout
	}
	return constants.BootTimeout
}

// armBootTimeout schedules the BootTimeout of the current boot: if the
// boot sequence has not finished by then, it fails and the node reboots
// (StartAllServices' context, machined/main.go handle). Caller holds no lock.
func (n *Node) armBootTimeout() {
	n.mu.Lock()
	boot, done := n.bootID, n.boot == nil || n.boot.done
	n.mu.Unlock()
	if done {
		return
	}
	fire := func() {
		n.mu.Lock()
		due := n.bootID == boot && !n.closed && !n.timingOut && n.boot != nil && !n.boot.done && !n.boot.stopping
		if due {
			n.timingOut = true
			n.failBootLocked(n.boot, n.sinceBootLocked(), "context deadline exceeded")
		}
		n.mu.Unlock()
		if due {
			n.opts.Logf("boot %d: BootTimeout %s passed with services waiting: rebooting", boot, n.bootTimeout())
			n.sync() // stage rebooting
			go n.reboot("", "")
		}
	}
	if c := n.opts.Clock; c != nil {
		n.clockOnce.Do(func() { c.subscribe(n.bootTimeoutCheck) })
		n.mu.Lock()
		n.timeoutFire = fire
		n.mu.Unlock()
		if c.SinceBoot() >= n.bootTimeout() {
			fire()
		}
		return
	}
	left := n.bootTimeout() - n.sinceBoot()
	t := time.AfterFunc(max(left, 0), fire)
	n.mu.Lock()
	n.bootTimer = t
	n.mu.Unlock()
}

// bootTimeoutCheck fires the current boot's timeout once its Clock passed it.
func (n *Node) bootTimeoutCheck() {
	if n.opts.Clock.SinceBoot() < n.bootTimeout() {
		return
	}
	n.mu.Lock()
	f := n.timeoutFire
	n.mu.Unlock()
	if f != nil {
		f()
	}
}

// newBootLocked resets what a boot starts with (called by reboot with the
// lock held): the clock, the timers, a new record of the boot whose
// sequence starts now.
func (n *Node) newBootLocked() {
	n.bootStart = time.Now()
	n.timingOut = false
	n.timeoutFire = nil
	if n.bootTimer != nil {
		n.bootTimer.Stop()
		n.bootTimer = nil
	}
	if n.opts.Clock != nil {
		n.opts.Clock.reset()
	}
	n.boot = newBootRun()
	n.boot.failing = n.failingCauseLocked()
	n.beginBootLocked(n.boot, 0)
}

// EtcdMemberList answers on a control plane once etcd runs (v1alpha1_server.go
// EtcdMemberList: machinehelper.CheckControlplane, then the etcd client
// with WithRequireLeader).
func (n *Node) EtcdMemberList(context.Context, *machine.EtcdMemberListRequest) (*machine.EtcdMemberListResponse, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	switch {
	case n.opts.Worker:
		return nil, status.Error(codes.Unimplemented, "member list is only available on control plane nodes")
	case !n.bootstrapped:
		return nil, status.Error(codes.Unavailable, "etcdserver: no leader")
	}
	host, _, _ := strings.Cut(n.hostname, ".")
	ip := n.addr[:strings.LastIndex(n.addr, ":")]
	return &machine.EtcdMemberListResponse{Messages: []*machine.EtcdMembers{{
		LegacyMembers: []string{host},
		Members: []*machine.EtcdMember{{Id: 0x2a5c9e01b7d4f3c8, Hostname: host,
			PeerUrls: []string{"https://" + ip + ":2380"}, ClientUrls: []string{"https://" + ip + ":2379"}}},
	}}}, nil
}

// ServiceListCalls counts ServiceList calls (a test waits for a client's read).
func (n *Node) ServiceListCalls() int { n.mu.Lock(); defer n.mu.Unlock(); return n.serviceCalls }

// BootID is the node's current boot ID.
func (n *Node) BootID() string { n.mu.Lock(); defer n.mu.Unlock(); return bootIDString(n.bootID) }

func bootIDString(boot int) string { return fmt.Sprintf("6f1c2a9e-0000-4000-8000-%012d", boot) }
