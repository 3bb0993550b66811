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
	"google.golang.org/protobuf/types/known/timestamppb"
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
	if n.opts.Clock != nil {
		return n.opts.Clock.SinceBoot()
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	return time.Since(n.bootStart)
}

// bootedAt is when the current boot began, as the node's clock says.
func (n *Node) bootedAt() time.Time { return time.Now().Add(-n.sinceBoot()) }

// stage is the MachineStage the node serves (default running).
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

// stuck: the boot sequence cannot finish (StartAllServices waits for every
// service to be up, v1alpha1_sequencer_tasks.go), so Talos reboots the node
// when constants.BootTimeout passes.
// Caller holds n.mu.
func (n *Node) stuck() bool { return n.bootStuck }

func (n *Node) bootTimeout() time.Duration {
	if n.opts.BootTimeout > 0 {
		return n.opts.BootTimeout
	}
	return constants.BootTimeout
}

// armBootTimeout schedules the BootTimeout reboot of the current boot (a
// node with waiting extension services). Caller holds no lock.
func (n *Node) armBootTimeout() {
	n.mu.Lock()
	boot, stuck := n.bootID, n.stuck()
	n.mu.Unlock()
	if !stuck {
		return
	}
	fire := func() {
		n.mu.Lock()
		due := n.bootID == boot && !n.closed && !n.timingOut
		if due {
			n.timingOut = true
		}
		n.mu.Unlock()
		if due {
			n.opts.Logf("boot %d: BootTimeout %s passed with services waiting: rebooting", boot, n.bootTimeout())
			go n.reboot()
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

// newBoot resets what a boot starts with (called by reboot with the lock held).
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
}

// extensionServices are the ext-<name> services of the image: waiting for
// their ExtensionServiceConfig (service_runner.go waitFor publishes
// "Waiting for extension service config"; extension services have no
// health check, so health is unknown).
func (n *Node) extensionServices(bootedAt time.Time) []*machine.ServiceInfo {
	var out []*machine.ServiceInfo
	for _, name := range n.waitingExt {
		out = append(out, &machine.ServiceInfo{
			Id: "ext-" + name, State: "Waiting",
			Health: &machine.ServiceHealth{Unknown: true},
			Events: &machine.ServiceEvents{Events: []*machine.ServiceEvent{
				{Msg: "Starting service", State: "Starting", Ts: timestamppb.New(bootedAt)},
				{Msg: `Waiting for service "containerd" to be "up", extension service config`, State: "Waiting", Ts: timestamppb.New(bootedAt)},
				{Msg: "Waiting for extension service config", State: "Waiting", Ts: timestamppb.New(bootedAt.Add(time.Second))},
			}},
		})
	}
	for _, name := range n.runningExt {
		out = append(out, &machine.ServiceInfo{
			Id: "ext-" + name, State: "Running",
			Health: &machine.ServiceHealth{Unknown: true},
			Events: &machine.ServiceEvents{Events: []*machine.ServiceEvent{
				{Msg: "Starting service", State: "Starting", Ts: timestamppb.New(bootedAt)},
				{Msg: "Started task ext-" + name + " (PID 2041) for container ext-" + name, State: "Running", Ts: timestamppb.New(bootedAt.Add(2 * time.Second))},
			}},
		})
	}
	return out
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
	host, _, _ := strings.Cut(n.opts.Hostname, ".")
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
