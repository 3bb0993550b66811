package nodetest

import (
	"context"
	"crypto/rand"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/cosi-project/runtime/pkg/safe"
	"github.com/cosi-project/runtime/pkg/state"
	"github.com/siderolabs/talos/pkg/machinery/api/common"
	"github.com/siderolabs/talos/pkg/machinery/api/machine"
	"github.com/siderolabs/talos/pkg/machinery/resources/runtime"
	"github.com/siderolabs/talos/pkg/machinery/resources/v1alpha1"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// One boot of a configured node, as machined lives it (Talos v1.14.0-rc.1):
//
//   - the boot sequence (internal/app/machined/pkg/runtime/v1alpha1/
//     v1alpha1_sequencer.go Boot, metal mode: 9 phases) publishes a
//     SequenceEvent, Phase and Task events (v1alpha1_controller.go run,
//     runPhase, runTask) and logs "[talos] phase ... (n/9): ..." lines;
//     its last task, startAllServices (v1alpha1_sequencer_tasks.go
//     StartAllServices), waits for every service to be up or finished,
//     logs "waiting for N services" and then, every 15 s, the services it
//     still waits for (pkg/conditions/all.go String: the unmet ones, by
//     ID, "service \"ext-newt\" to be up/finished"); when the last comes
//     up, the task, the phase and the sequence stop and MachineStatus'
//     stage becomes running (controllers/runtime/machine_status.go, from
//     the sequence events). If constants.BootTimeout passes first, the task
//     fails with "context deadline exceeded", the sequence fails (a NOOP
//     SequenceEvent with a FATAL error, v1alpha1_controller.go Run), the
//     bootloader is reverted and the node reboots (machined/main.go handle);
//   - each service's runner (system/service_runner.go UpdateState) keeps
//     its events, logs "[talos] service[<id>](<State>): <message>" and
//     publishes a ServiceStateEvent; controllers/v1alpha1/service.go keeps
//     a Service resource only for a Running service;
//   - an extension service waiting for its ExtensionServiceConfig starts
//     as soon as the document arrives, without a restart: the runner that
//     waits for it sees the config (controllers/runtime/extension_service.go
//     handleRestart: "the service runner is already waiting for the config
//     ... will be started automatically"), so StartAllServices completes
//     and the stage becomes running in place, no reboot;
//   - MachineStatusPublisherController publishes a MachineStatusEvent at
//     every change of MachineStatus (controllers/runtime/machine_status_publisher.go).
//
// Everything goes to machined's log, which is also the kernel log
// (v1alpha1_controller.go setupLogging: go-kmsg with the "[talos]" prefix
// and no timestamps).

// bootRun is what one boot has lived.
type bootRun struct {
	journal  *journal
	services map[string]*svcRecord
	logs     []logLine     // machined's log, oldest first
	logMore  chan struct{} // closed and replaced at every line
	waitLine string        // "waiting for N services"
	synced   bool          // its services were started (the first sync)
	done     bool          // the boot sequence finished
	doneAt   time.Duration
	failed   bool // BootTimeout passed: the sequence failed, rebooting
	stopping bool // a reboot sequence runs
	ms       *msState
	// failing is the cause this boot of a new installation fails with
	// (revert.go); fallbackDone: DropUpgradeFallbackController ran.
	failing      string
	fallbackDone bool
}

// msState is the MachineStatus last published.
type msState struct {
	stage runtime.MachineStage
	ready bool
	unmet []runtime.UnmetCondition
}

func (a *msState) equal(b *msState) bool {
	return a != nil && b != nil && a.stage == b.stage && a.ready == b.ready && slices.Equal(a.unmet, b.unmet)
}

// svcRecord is one service's runner state and event history.
type svcRecord struct {
	state   string // events.ServiceState name: Starting, Waiting, Preparing, Running, ...
	health  svcHealth
	events  []svcEvent
	said    svcHealth // the health its last health event reported
	up      bool      // StartAllServices' "up" (running and, when health-checked, healthy)
	upAt    time.Duration
	counted bool // StartAllServices waits for it
}

type svcHealth struct {
	healthy, unknown bool
	msg              string
}

type svcEvent struct {
	msg, state string
	at         time.Duration
	health     svcHealth
}

type logLine struct {
	at   time.Duration
	text string
}

// bootPhases are the boot sequence's phases on metal and their tasks
// (v1alpha1_sequencer.go Boot; task names from v1alpha1_sequencer_tasks.go).
var bootPhases = []struct {
	name  string
	tasks []string
}{
	{"memorySizeCheck", []string{"memorySizeCheck"}},
	{"diskSizeCheck", []string{"diskSizeCheck"}},
	{"env", []string{"setUserEnvVars", "waitForCARoots"}},
	{"dbus", []string{"startDBus"}},
	{"ephemeral", []string{"mountEphemeralPartition"}},
	{"promotableVolumes", []string{"mountPromotableSystemPartitions"}},
	{"userDisks", []string{"mountUserDisks"}},
	{"userSetup", []string{"writeUserFiles"}},
	{"startEverything", []string{"startAllServices"}},
}

// startAllServicesTick is how often StartAllServices logs what it waits for.
const startAllServicesTick = 15 * time.Second

// svcWant is a service's state as the node's facts make it.
type svcWant struct {
	id      string
	state   string // Waiting, Preparing, Running
	health  svcHealth
	counted bool // StartAllServices waits for it (see bootComplete)
	kind    string
	msg     string // a Failed service's last event
}

// Service kinds: how a runner reports its start (the runners of
// internal/app/machined/pkg/system/runner).
const (
	kindProcess   = "process"   // containerd, cri, udevd: process runner
	kindContainer = "container" // apid, trustd, etcd, kubelet, ext-*: containerd runner
	kindGoroutine = "goroutine" // machined
)

// wantServicesLocked derives every service's state from the node: the
// system services, kubelet (unhealthy while warming), etcd on a control
// plane (Preparing until the bootstrap), the extension services (waiting
// for their config, or running). Which ones StartAllServices' completion
// counts: every one of a node living its cluster; the extension services
// only otherwise (a node without a cluster keeps the stage its options
// give while etcd or kubelet warm up, as before this model).
func (n *Node) wantServicesLocked() []svcWant {
	living := n.living()
	warming := n.opts.UnhealthyPolls > 0 && n.polls <= n.opts.UnhealthyPolls
	healthy := svcHealth{healthy: true}
	unhealthy := svcHealth{msg: "starting"}
	unknown := svcHealth{unknown: true}
	out := []svcWant{
		{id: "apid", state: "Running", health: healthy, counted: living, kind: kindContainer},
		{id: "containerd", state: "Running", health: healthy, counted: living, kind: kindProcess},
		{id: "cri", state: "Running", health: healthy, counted: living, kind: kindProcess},
		{id: "machined", state: "Running", health: healthy, counted: living, kind: kindGoroutine},
		{id: "udevd", state: "Running", health: healthy, counted: living, kind: kindProcess},
	}
	k := svcWant{id: "kubelet", state: "Running", health: healthy, counted: living, kind: kindContainer}
	if warming {
		k.health = unhealthy
	}
	out = append(out, k)
	if !n.opts.Worker {
		e := svcWant{id: "etcd", state: "Running", health: healthy, counted: living, kind: kindContainer}
		switch {
		case n.etcdFailure != "":
			// A recovery whose snapshot could not be restored: the
			// service's pre-start step failed (etcd.go).
			e.state, e.health, e.msg = "Failed", unknown, n.etcdFailure
		case !n.bootstrapped:
			e.state, e.health = "Preparing", unknown
		case warming:
			e.health = unhealthy
		}
		out = append(out, e, svcWant{id: "trustd", state: "Running", health: healthy, counted: living, kind: kindContainer})
	}
	for _, name := range n.waitingExt {
		out = append(out, svcWant{id: "ext-" + name, state: "Waiting", health: unknown, counted: true, kind: kindContainer})
	}
	for _, name := range n.runningExt {
		out = append(out, svcWant{id: "ext-" + name, state: "Running", health: unknown, counted: true, kind: kindContainer})
	}
	slices.SortFunc(out, func(a, b svcWant) int { return strings.Compare(a.id, b.id) })
	return out
}

// isUp is service_runner.go inStateLocked(StateEventUp): running and, when
// the service has a health check, healthy.
func isUp(state string, h svcHealth) bool {
	return state == "Running" && (h.unknown || h.healthy)
}

// pid is the process ID a service's runner reports (made up, stable).
func pid(id string) int {
	p := 1000
	for _, c := range id {
		p = (p*31 + int(c)) % 9000
	}
	return 1000 + p
}

// startedMessage is what a runner says once the service runs.
func startedMessage(w svcWant) string {
	switch w.kind {
	case kindGoroutine:
		return "Service started as goroutine"
	case kindProcess:
		return fmt.Sprintf("Started task %s (PID %d) for container %s", w.id, pid(w.id), w.id)
	}
	return fmt.Sprintf("Started task %s (PID %d) for container %s", w.id, pid(w.id), w.id)
}

// waitMessages are the "Waiting for ..." events of a service whose
// condition is not met at boot: first with its dependencies, then (once
// they are up) the condition alone (service_runner.go waitFor).
func waitMessages(id string) []string {
	switch {
	case strings.HasPrefix(id, "ext-"):
		// system/services/extension.go: depends on containerd (and cri
		// when it mounts /var); the condition is the config's status
		// (resources/runtime/condition.go ExtensionServiceConfigStatusCondition).
		return []string{`Waiting for service "containerd" to be "up", extension service config`, "Waiting for extension service config"}
	case id == "etcd":
		return []string{`Waiting for service "cri" to be "up", time sync, network, etcd spec`}
	}
	return nil
}

// newBootRun starts a boot's record; the caller publishes its start.
func newBootRun() *bootRun {
	return &bootRun{journal: newJournal(), services: map[string]*svcRecord{}, logMore: make(chan struct{})}
}

// logLocked adds a machined log line (caller holds n.mu).
func (b *bootRun) logLocked(at time.Duration, format string, args ...any) {
	b.logs = append(b.logs, logLine{at: at, text: "[talos] " + fmt.Sprintf(format, args...)})
	close(b.logMore)
	b.logMore = make(chan struct{})
}

// beginBootLocked publishes and logs the boot sequence up to
// startAllServices' start (caller holds n.mu; the journal is new).
func (n *Node) beginBootLocked(b *bootRun, at time.Duration) {
	j := b.journal
	j.publish(at, "", &machine.SequenceEvent{Sequence: "boot", Action: machine.SequenceEvent_START})
	b.logLocked(at, "boot sequence: %d phase(s)", len(bootPhases))
	for i, p := range bootPhases {
		progress := fmt.Sprintf("%d/%d", i+1, len(bootPhases))
		j.publish(at, "", &machine.PhaseEvent{Phase: p.name, Action: machine.PhaseEvent_START})
		b.logLocked(at, "phase %s (%s): %d tasks(s)", p.name, progress, len(p.tasks))
		for ti, task := range p.tasks {
			tp := fmt.Sprintf("%d/%d", ti+1, len(p.tasks))
			j.publish(at, "", &machine.TaskEvent{Task: task, Action: machine.TaskEvent_START})
			b.logLocked(at, "task %s (%s): starting", task, tp)
			if task == "startAllServices" {
				continue // runs until every service is up (syncLocked)
			}
			j.publish(at, "", &machine.TaskEvent{Task: task, Action: machine.TaskEvent_STOP})
			b.logLocked(at, "task %s (%s): done, %s", task, tp, time.Duration(0))
		}
		if p.name != "startEverything" {
			j.publish(at, "", &machine.PhaseEvent{Phase: p.name, Action: machine.PhaseEvent_STOP})
			b.logLocked(at, "phase %s (%s): done, %s", p.name, progress, time.Duration(0))
		}
	}
}

// servicesLocked moves every service's record to what the node's facts
// make it, recording each runner event (caller holds n.mu). It returns
// the ServiceStateEvents to publish.
func (n *Node) servicesLocked(b *bootRun, at time.Duration) []*machine.ServiceStateEvent {
	var out []*machine.ServiceStateEvent
	base := n.bootedAtLocked()
	push := func(id string, r *svcRecord, state, msg string, when time.Duration, h svcHealth) {
		r.state, r.health = state, h
		r.events = append(r.events, svcEvent{msg: msg, state: state, at: when, health: h})
		if len(r.events) > 64 { // events.ServiceEvents keeps the last 64
			r.events = r.events[len(r.events)-64:]
		}
		b.logLocked(when, "service[%s](%s): %s", id, state, msg)
		out = append(out, &machine.ServiceStateEvent{Service: id, Message: msg,
			Action: machine.ServiceStateEvent_Action(machine.ServiceStateEvent_Action_value[strings.ToUpper(state)]),
			Health: &machine.ServiceHealth{Unknown: h.unknown, Healthy: h.healthy, LastMessage: h.msg, LastChange: timestamppb.New(base.Add(when))}})
	}
	unknown := svcHealth{unknown: true}
	wants := n.wantServicesLocked()
	ids := make([]string, 0, len(wants))
	for _, w := range wants {
		ids = append(ids, w.id)
		r := b.services[w.id]
		if r == nil {
			r = &svcRecord{}
			b.services[w.id] = r
			push(w.id, r, "Starting", "Starting service", at, unknown)
		}
		r.counted = w.counted
		switch {
		case w.state == "Waiting" && r.state != "Waiting":
			// A service that ran and lost its config is restarted and
			// waits again (handleRestart: Stop, then Start).
			if r.state == "Running" {
				push(w.id, r, "Finished", "Service finished successfully", at, unknown)
				push(w.id, r, "Starting", "Starting service", at, unknown)
			}
			for _, m := range waitMessages(w.id) {
				push(w.id, r, "Waiting", m, at, w.health)
			}
		case w.state == "Preparing" && r.state != "Preparing":
			for _, m := range waitMessages(w.id) {
				push(w.id, r, "Waiting", m, at, unknown)
			}
			push(w.id, r, "Preparing", "Running pre state", at, w.health)
		case w.state == "Failed" && (r.state != "Failed" || r.events[len(r.events)-1].msg != w.msg):
			if r.state != "Preparing" {
				push(w.id, r, "Preparing", "Running pre state", at, unknown)
			}
			push(w.id, r, "Failed", w.msg, at, unknown)
		case w.state == "Running" && r.state != "Running":
			if r.state != "Preparing" {
				push(w.id, r, "Preparing", "Running pre state", at, unknown)
			}
			push(w.id, r, "Preparing", "Creating service runner", at, unknown)
			push(w.id, r, "Running", startedMessage(w), at, w.health)
			r.said = svcHealth{unknown: true}
		}
		// A health-checked service reports each change of its health
		// while it runs (service_runner.go healthUpdate).
		if r.state == "Running" && !w.health.unknown && r.said != w.health {
			msg := "Health check successful"
			if !w.health.healthy {
				msg = "Health check failed: " + w.health.msg
			}
			push(w.id, r, "Running", msg, at, w.health)
			r.said = w.health
		}
		r.health = w.health
	}
	for id, r := range b.services {
		if !slices.Contains(ids, id) && r.state != "Finished" {
			push(id, r, "Finished", "Service finished successfully", at, unknown)
			r.counted = false
		}
	}
	for _, r := range b.services {
		if up := isUp(r.state, r.health); up != r.up {
			r.up = up
			if up {
				r.upAt = at
			}
		}
	}
	return out
}

// bootCompleteLocked: StartAllServices' condition, every counted service up.
func (b *bootRun) bootCompleteLocked() bool {
	for _, r := range b.services {
		if r.counted && !r.up {
			return false
		}
	}
	return true
}

// finishBootLocked ends startAllServices, its phase and the boot sequence.
func (n *Node) finishBootLocked(b *bootRun, at time.Duration) {
	b.done, b.doneAt = true, at
	j := b.journal
	j.publish(at, "", &machine.TaskEvent{Task: "startAllServices", Action: machine.TaskEvent_STOP})
	b.logLocked(at, "task startAllServices (1/1): done, %s", at)
	j.publish(at, "", &machine.PhaseEvent{Phase: "startEverything", Action: machine.PhaseEvent_STOP})
	b.logLocked(at, "phase startEverything (%d/%d): done, %s", len(bootPhases), len(bootPhases), at)
	j.publish(at, "", &machine.SequenceEvent{Sequence: "boot", Action: machine.SequenceEvent_STOP})
	b.logLocked(at, "boot sequence: done: %s", at)
}

// failBootLocked is StartAllServices failing with cause (BootTimeout:
// "context deadline exceeded"; a failing boot of a new installation):
// the task, the phase and the sequence fail, machined reverts the
// bootloader (revert.go) and reboots.
func (n *Node) failBootLocked(b *bootRun, at time.Duration, cause string) {
	b.failed = true
	j := b.journal
	j.publish(at, "", &machine.TaskEvent{Task: "startAllServices", Action: machine.TaskEvent_STOP})
	b.logLocked(at, "task startAllServices (1/1): failed: %s", cause)
	j.publish(at, "", &machine.PhaseEvent{Phase: "startEverything", Action: machine.PhaseEvent_STOP})
	b.logLocked(at, "phase startEverything (%d/%d): failed", len(bootPhases), len(bootPhases))
	j.publish(at, "", &machine.SequenceEvent{Sequence: "boot", Action: machine.SequenceEvent_STOP})
	b.logLocked(at, "boot sequence: failed")
	err := fmt.Sprintf("error running phase %d in boot sequence: task 1/1: failed, %s", len(bootPhases), cause)
	j.publish(at, "", &machine.SequenceEvent{Sequence: "boot", Action: machine.SequenceEvent_NOOP,
		Error: &common.Error{Code: common.Code_FATAL, Message: "sequence failed: " + err}})
	b.logLocked(at, "%s", err)
	b.logLocked(at, "rebooting in %d seconds", 10)
}

// stageLocked is the MachineStage the node serves: NodeOptions.Stage when
// it fixes one (anything but "" and "booting"), else from the sequences.
func (n *Node) stageLocked() runtime.MachineStage {
	if s := n.opts.Stage; s != "" && s != "booting" {
		st, _ := runtime.MachineStageString(s)
		return st
	}
	b := n.boot
	switch {
	case b == nil:
		return runtime.MachineStageBooting
	case b.failed, b.stopping:
		return runtime.MachineStageRebooting
	case b.done:
		return runtime.MachineStageRunning
	}
	return runtime.MachineStageBooting
}

// sync brings the current boot up to date with the node's facts: service
// transitions (events, log lines, Service resources), the end of the boot
// sequence, MachineStatus and its event. Every change of a fact calls it.
func (n *Node) sync() {
	n.syncMu.Lock()
	defer n.syncMu.Unlock()
	n.mu.Lock()
	at := n.sinceBootLocked()
	b, st := n.boot, n.st
	if b == nil || st == nil || n.closed {
		n.mu.Unlock()
		return
	}
	if !b.synced {
		// The boot's first look: its services started when it began
		// (a node may be made with its Clock already far into the boot).
		b.synced, at = true, 0
	}
	var svcEvents []*machine.ServiceStateEvent
	if !b.failed && !b.stopping {
		svcEvents = n.servicesLocked(b, at)
		if b.waitLine == "" {
			b.waitLine = fmt.Sprintf("waiting for %d services", len(b.services))
			b.logLocked(at, "task startAllServices (1/1): %s", b.waitLine)
		}
	}
	for _, ev := range svcEvents {
		b.journal.publish(at, "", ev)
	}
	if !b.done && !b.failed && !b.stopping && b.failing == "" && b.bootCompleteLocked() {
		n.finishBootLocked(b, at)
		if n.bootTimer != nil {
			n.bootTimer.Stop()
		}
	}
	running := map[string]*svcRecord{}
	for id, r := range b.services {
		if r.state == "Running" {
			running[id] = r
		}
	}
	stage := n.stageLocked()
	n.mu.Unlock()

	ctx := context.Background()
	if err := n.syncServiceResources(ctx, st, running); err != nil {
		n.opts.Logf("service resources: %v", err)
	}
	ms := &msState{stage: stage, ready: true}
	if stage == runtime.MachineStageBooting || stage == runtime.MachineStageRunning {
		// controllers/runtime/machine_status.go: readiness checks only in
		// these two stages.
		if n.living() {
			ms.unmet = n.lifeUnmet()
		} else {
			ms.unmet = slices.Clone(n.opts.Unmet)
		}
		ms.ready = len(ms.unmet) == 0
	}
	if ms.stage == runtime.MachineStageRunning && ms.ready {
		n.mu.Lock()
		n.dropFallbackLocked(b)
		n.mu.Unlock()
	}
	if b.ms.equal(ms) {
		return
	}
	if err := writeMachineStatus(ctx, st, ms); err != nil {
		n.opts.Logf("machine status: %v", err)
		return
	}
	b.ms = ms
	ev := &machine.MachineStatusEvent{Stage: machine.MachineStatusEvent_MachineStage(ms.stage),
		Status: &machine.MachineStatusEvent_MachineStatus{Ready: ms.ready}}
	for _, u := range ms.unmet {
		ev.Status.UnmetConditions = append(ev.Status.UnmetConditions, &machine.MachineStatusEvent_MachineStatus_UnmetCondition{Name: u.Name, Reason: u.Reason})
	}
	b.journal.publish(at, "", ev)
}

func writeMachineStatus(ctx context.Context, st state.State, ms *msState) error {
	_, err := safe.StateUpdateWithConflicts(ctx, st, runtime.NewMachineStatus().Metadata(), func(r *runtime.MachineStatus) error {
		r.TypedSpec().Stage = ms.stage
		r.TypedSpec().Status.Ready = ms.ready
		r.TypedSpec().Status.UnmetConditions = slices.Clone(ms.unmet)
		return nil
	})
	return err
}

// syncServiceResources keeps a Service resource for each running service
// and none for the others (controllers/v1alpha1/service.go).
func (n *Node) syncServiceResources(ctx context.Context, st state.State, running map[string]*svcRecord) error {
	list, err := safe.StateListAll[*v1alpha1.Service](ctx, st)
	if err != nil {
		return err
	}
	for r := range list.All() {
		if running[r.Metadata().ID()] == nil {
			if err := st.Destroy(ctx, r.Metadata()); err != nil && !state.IsNotFoundError(err) {
				return err
			}
		}
	}
	for id, rec := range running {
		spec := v1alpha1.ServiceSpec{Running: true, Healthy: rec.health.healthy, Unknown: rec.health.unknown}
		svc := v1alpha1.NewService(id)
		cur, err := safe.StateGet[*v1alpha1.Service](ctx, st, svc.Metadata())
		switch {
		case state.IsNotFoundError(err):
			*svc.TypedSpec() = spec
			if err := st.Create(ctx, svc); err != nil {
				return err
			}
		case err != nil:
			return err
		case *cur.TypedSpec() != spec:
			if _, err := safe.StateUpdateWithConflicts(ctx, st, svc.Metadata(), func(r *v1alpha1.Service) error { *r.TypedSpec() = spec; return nil }); err != nil {
				return err
			}
		}
	}
	return nil
}

// serviceInfos is ServiceList's answer from the records (caller holds n.mu).
func (n *Node) serviceInfosLocked() []*machine.ServiceInfo {
	b := n.boot
	if b == nil {
		return nil
	}
	base := n.bootedAtLocked()
	ids := make([]string, 0, len(b.services))
	for id := range b.services {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	var out []*machine.ServiceInfo
	for _, id := range ids {
		r := b.services[id]
		info := &machine.ServiceInfo{Id: id, State: r.state, Events: &machine.ServiceEvents{}}
		var last time.Duration
		for _, e := range r.events {
			info.Events.Events = append(info.Events.Events, &machine.ServiceEvent{Msg: e.msg, State: e.state, Ts: timestamppb.New(base.Add(e.at))})
			if e.health != r.health || last == 0 {
				last = e.at
			}
		}
		info.Health = &machine.ServiceHealth{Unknown: r.health.unknown, Healthy: r.health.healthy, LastMessage: r.health.msg, LastChange: timestamppb.New(base.Add(last))}
		out = append(out, info)
	}
	return out
}

// logsLocked is machined's log with StartAllServices' 15-second lines
// merged in, up to the node's time now (caller holds n.mu).
func (n *Node) logsLocked(now time.Duration) []logLine {
	b := n.boot
	if b == nil {
		return nil
	}
	out := slices.Clone(b.logs)
	end := now
	if b.done {
		end = b.doneAt
	}
	if b.waitLine != "" {
		for t := startAllServicesTick; t <= end && !(b.done && t >= b.doneAt); t += startAllServicesTick {
			if w := b.waitingAt(t); w != "" {
				out = append(out, logLine{at: t, text: "[talos] task startAllServices (1/1): " + w})
			}
		}
	}
	// First by time; a tick line after the lines of its instant.
	slices.SortStableFunc(out, func(a, b logLine) int {
		switch {
		case a.at < b.at:
			return -1
		case a.at > b.at:
			return 1
		}
		return 0
	})
	return out
}

// waitingAt is all.go String at time t: the counted services not up yet.
func (b *bootRun) waitingAt(t time.Duration) string {
	var ids []string
	for id, r := range b.services {
		if r.counted && (!r.up || r.upAt > t) {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	parts := make([]string, 0, len(ids))
	for _, id := range ids {
		parts = append(parts, fmt.Sprintf("service %q to be up/finished", id))
	}
	return strings.Join(parts, ", ")
}

// rebootPhases are the phases a reboot (or the legacy upgrade) runs before
// the machine restarts (v1alpha1_sequencer.go Reboot, stopAllPhaselist),
// those talosctl's tracker follows among them: stopAllServices ends its
// wait for the actor's events (cmd/talosctl/pkg/talos/action/node.go).
var rebootPhases = []struct{ phase, task string }{
	{"cleanup", "stopAllPods"},
	{"dbus", "stopDBus"},
	{"stopServices", "stopServicesForUpgrade"},
	{"stopEverything", "stopAllServices"},
	{"reboot", "reboot"},
}

// stopSequence runs seq's stop phases on the current boot, each event with
// the actor ID; the stage is rebooting from its start. It reports whether
// the node closed meanwhile.
func (n *Node) stopSequence(actor, seq string) (closed bool) {
	n.mu.Lock()
	b := n.boot
	if n.closed || b == nil {
		n.mu.Unlock()
		return n.closed
	}
	at := n.sinceBootLocked()
	b.stopping = true
	b.journal.publish(at, actor, &machine.SequenceEvent{Sequence: seq, Action: machine.SequenceEvent_START})
	b.logLocked(at, "%s sequence: %d phase(s)", seq, len(rebootPhases))
	n.mu.Unlock()
	n.sync() // MachineStatus: rebooting
	n.mu.Lock()
	defer n.mu.Unlock()
	for i, p := range rebootPhases {
		progress := fmt.Sprintf("%d/%d", i+1, len(rebootPhases))
		b.journal.publish(at, actor, &machine.PhaseEvent{Phase: p.phase, Action: machine.PhaseEvent_START})
		b.logLocked(at, "phase %s (%s): 1 tasks(s)", p.phase, progress)
		b.journal.publish(at, actor, &machine.TaskEvent{Task: p.task, Action: machine.TaskEvent_START})
		b.logLocked(at, "task %s (1/1): starting", p.task)
		if p.task == "stopAllServices" {
			ids := make([]string, 0, len(b.services))
			for id := range b.services {
				ids = append(ids, id)
			}
			slices.Sort(ids)
			for _, id := range ids {
				for _, st := range []struct{ state, msg string }{{"Stopping", "Stopping service"}, {"Finished", "Service finished successfully"}} {
					b.journal.publish(at, actor, &machine.ServiceStateEvent{Service: id, Message: st.msg,
						Action: machine.ServiceStateEvent_Action(machine.ServiceStateEvent_Action_value[strings.ToUpper(st.state)]),
						Health: &machine.ServiceHealth{Unknown: true}})
					b.logLocked(at, "service[%s](%s): %s", id, st.state, st.msg)
				}
			}
		}
		if p.task == "reboot" {
			break // the machine restarts inside this task
		}
		b.journal.publish(at, actor, &machine.TaskEvent{Task: p.task, Action: machine.TaskEvent_STOP})
		b.logLocked(at, "task %s (1/1): done, %s", p.task, time.Duration(0))
		b.journal.publish(at, actor, &machine.PhaseEvent{Phase: p.phase, Action: machine.PhaseEvent_STOP})
		b.logLocked(at, "phase %s (%s): done, %s", p.phase, progress, time.Duration(0))
	}
	return n.closed
}

// newActorID is a reboot's or upgrade's actor ID (a UUID, as
// v1alpha1_server.go Reboot makes with uuid.New).
func newActorID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}
