package plan

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"
	"time"

	"github.com/siderolabs/talos/pkg/machinery/constants"

	"github.com/talosflash/talosflash/factory"
	"github.com/talosflash/talosflash/node"
)

// Diagnosis is one thing wrong with a node, in the user's words, with what
// the node said and the fix.
type Diagnosis struct {
	Severity string // "error" (stuck, will not get better by itself), "warning", "info"
	Code     string // stable: extension-config-missing, service-failed, ...
	Message  string
	Fix      string
	// RebootIn is the time left until BootTimeout reboots the node (0: none foreseen).
	RebootIn time.Duration
}

// Stage-start sources (NodeStatus.StageSinceSource).
const (
	SinceObserved = "observed" // status --watch saw the stage change
	SinceServices = "services" // the oldest event of the services the boot waits on (the node's clock)
	SinceBoot     = "boot"     // the node's uptime (/proc/uptime)
)

// NodeStatus is one node's status and what talosflash makes of it.
type NodeStatus struct {
	Target *Member
	Status *node.Status // nil when the node did not answer
	Err    error        // why it did not answer
	// Match is the profile the booted schematic is (MatchBooted); ImageOK
	// is false when the inventory names another profile for the node.
	Match   Match
	ImageOK *bool
	// StageSince is when the current stage began as far as known (zero: unknown).
	StageSince       time.Time
	StageSinceSource string
	Reboots          int // boot ID changes seen (status --watch)
	Diagnoses        []Diagnosis

	lastBoot string // the boot ID last seen, kept across unreachable reads
}

// StageFor is how long the node has been in its stage at now (0: unknown).
func (ns NodeStatus) StageFor(now time.Time) time.Duration {
	if ns.StageSince.IsZero() {
		return 0
	}
	return max(now.Sub(ns.StageSince), 0)
}

// Healthy: running, ready, no diagnosis of severity error.
func (ns NodeStatus) Healthy() bool {
	if ns.Status == nil || ns.Status.Stage != "running" || !ns.Status.Ready {
		return false
	}
	for _, d := range ns.Diagnoses {
		if d.Severity == "error" {
			return false
		}
	}
	return true
}

// ImageText says what the node booted against its role, in the words
// both front ends show: "profile worker (schematic ee21…, v1.14.5), as its
// role's", or "…, NOT its role's controlplane" ("" when it did not answer).
func (ns NodeStatus) ImageText() string {
	if ns.Status == nil {
		return ""
	}
	img := ns.Status.Booted.String()
	if ns.Match.Profile != "" {
		img = "profile " + ns.Match.Profile + " (" + img + ")"
	}
	switch {
	case ns.ImageOK == nil:
	case *ns.ImageOK:
		img += ", as its role's"
	default:
		img += ", NOT its role's " + ns.Target.ProfileName()
	}
	return img
}

// ServiceTexts are the node's services as both front ends list them: its
// ID and state, its health when known, and, when it is not running, its
// last event ("ext-newt Waiting (Waiting for extension service config)").
func (ns NodeStatus) ServiceTexts() []string {
	if ns.Status == nil {
		return nil
	}
	var out []string
	for _, s := range ns.Status.Services {
		svc := s.ID + " " + s.State
		if s.Health != "" && s.Health != "unknown" {
			svc += " " + s.Health
		}
		if s.State != "Running" && s.LastEvent != "" {
			svc += " (" + s.LastEvent + ")"
		}
		out = append(out, svc)
	}
	return out
}

// Key is what a --watch compares between reads: a change prints a line.
// Times are left out (they change at every read); minutes left are not.
func (ns NodeStatus) Key() string {
	var b strings.Builder
	if ns.Status == nil {
		fmt.Fprintf(&b, "unreachable|%d", ns.Reboots)
		return b.String()
	}
	st := ns.Status
	fmt.Fprintf(&b, "%s|%v|%s|%d|%v|", st.Stage, st.Ready, st.BootID, ns.Reboots, st.Unmet)
	for _, s := range st.Services {
		fmt.Fprintf(&b, "%s=%s/%s;", s.ID, s.State, s.Health)
	}
	for _, m := range st.EtcdMembers {
		fmt.Fprintf(&b, "m:%s;", m.Hostname)
	}
	for _, d := range ns.Diagnoses {
		b.WriteString("d:" + d.Code + ";")
	}
	return b.String()
}

// StatusCheck is what Diagnose needs beside the node's answer.
type StatusCheck struct {
	Profiles []factory.Profile // to recognise the booted schematic (MatchBooted)
	// BootTimeout is Talos' constants.BootTimeout (70 min; the node does
	// not report it) unless set.
	BootTimeout time.Duration
	// Talosconfig is the talosconfig's path the talosctl commands of the
	// fixes name ("": none, talosctl's default); Watch sets it from its own.
	Talosconfig string
}

func (c StatusCheck) bootTimeout() time.Duration {
	if c.BootTimeout > 0 {
		return c.BootTimeout
	}
	return constants.BootTimeout
}

// Diagnose builds a node's NodeStatus from its answer at now. prev is the
// previous read of the same node (nil the first time): it carries the
// reboot count and the observed stage start.
func (c StatusCheck) Diagnose(now time.Time, t *Member, st *node.Status, readErr error, prev *NodeStatus) NodeStatus {
	ns := NodeStatus{Target: t, Status: st, Err: readErr}
	if prev != nil {
		ns.Reboots = prev.Reboots
	}
	ns.lastBoot = lastBootID(prev)
	if st != nil && st.BootID != "" {
		ns.lastBoot = st.BootID
	}
	if st == nil {
		ns.Diagnoses = append(ns.Diagnoses, Diagnosis{Severity: "error", Code: "unreachable",
			Message: fmt.Sprintf("%s does not answer: %v", t.Name(), readErr),
			Fix:     "if it is rebooting, wait; else check its power, cable and address"})
		if prev != nil && prev.Status != nil {
			ns.StageSince, ns.StageSinceSource = now, SinceObserved
		} else if prev != nil {
			ns.StageSince, ns.StageSinceSource = prev.StageSince, prev.StageSinceSource
		}
		return ns
	}
	// Reboots: a new boot ID against the last one seen (an unreachable read in between keeps it).
	if last := lastBootID(prev); last != "" && st.BootID != "" && st.BootID != last {
		ns.Reboots++
	}

	ns.Match = NodeCheck{Profiles: c.Profiles, Node: &node.Node{Booted: st.Booted}}.MatchBooted()
	if t.Profile != nil && st.Booted != nil && st.Booted.SchematicID != "" {
		// Its role's image: by name when the profiles know the schematic,
		// else by the member's own profile's ID.
		ok := strings.EqualFold(ns.Match.Profile, t.Profile.Name) || st.Booted.SchematicID == t.SchematicID()
		ns.ImageOK = &ok
	}
	ns.StageSince, ns.StageSinceSource = stageSince(now, st, prev)

	name := t.Name()
	waiting := waitingExtensions(st)
	for _, s := range waiting {
		ext := strings.TrimPrefix(s.ID, "ext-")
		d := Diagnosis{Severity: "error", Code: "extension-config-missing",
			Message: fmt.Sprintf("%s waits for an ExtensionServiceConfig named %s", s.ID, ext)}
		// The node has a config, so the document goes in by patch (apply
		// refuses a configured node); the service waiting for it starts by
		// itself once it arrives (Talos' extension_service.go handleRestart).
		fix := fmt.Sprintf("write an ExtensionServiceConfig document named %s (apiVersion: v1alpha1, kind: ExtensionServiceConfig, name: %s, environment: the variables the extension needs) to %s.yaml, then send it to the running node: %s; %s then starts, no reboot",
			ext, ext, ext, patchCommand(t, c.Talosconfig, ext), s.ID)
		if ns.ImageOK != nil && !*ns.ImageOK {
			fix += fmt.Sprintf(", or flash %s with the %s image (it booted the %s image)", name, t.Profile.Name, matchName(ns.Match, st))
		}
		d.Fix = fix
		ns.Diagnoses = append(ns.Diagnoses, d)
	}
	for _, s := range st.Services {
		if s.State == "Failed" {
			ns.Diagnoses = append(ns.Diagnoses, Diagnosis{Severity: "error", Code: "service-failed",
				Message: fmt.Sprintf("service %s failed: %s", s.ID, orNone(s.LastEvent)),
				Fix:     "read its log: " + node.Talosctl(c.Talosconfig, st.Endpoint, "logs", s.ID)})
		}
	}
	if t.Role.IsControlPlane() || st.Service("etcd") != nil {
		ns.Diagnoses = append(ns.Diagnoses, etcdDiagnoses(name, st)...)
	}
	if ns.ImageOK != nil && !*ns.ImageOK && len(waiting) == 0 {
		ns.Diagnoses = append(ns.Diagnoses, Diagnosis{Severity: "warning", Code: "image-mismatch",
			Message: fmt.Sprintf("%s booted the %s image, not its role's %s image", name, matchName(ns.Match, st), t.Profile.Name),
			Fix:     fmt.Sprintf("flash %s with the %s image, or change its profile in the inventory", name, t.Profile.Name)})
	}

	if st.Stage == "booting" {
		// StartAllServices waits for every service with constants.BootTimeout
		// (v1alpha1_sequencer_tasks.go), then the boot fails and Talos reboots.
		timeout := c.bootTimeout()
		for i := range ns.Diagnoses {
			if ns.Diagnoses[i].Code != "extension-config-missing" {
				continue
			}
			d := &ns.Diagnoses[i]
			if el := ns.StageFor(now); el > 0 {
				d.RebootIn = max(timeout-el, 0)
				d.Message = fmt.Sprintf("%s has been booting for %s: %s; Talos reboots it at BootTimeout (%s), in about %s",
					name, Minutes(el), d.Message, Minutes(timeout), Minutes(d.RebootIn))
			} else {
				d.Message = fmt.Sprintf("%s is booting: %s; Talos reboots it at BootTimeout (%s) after boot", name, d.Message, Minutes(timeout))
			}
		}
	}
	if !st.Ready && len(st.Unmet) > 0 && len(ns.Diagnoses) == 0 {
		var parts []string
		for _, u := range st.Unmet {
			parts = append(parts, u.Name+": "+u.Reason)
		}
		ns.Diagnoses = append(ns.Diagnoses, Diagnosis{Severity: "info", Code: "not-ready",
			Message: fmt.Sprintf("%s is %s, not ready: %s", name, st.Stage, strings.Join(parts, "; "))})
	}
	return ns
}

// lastBootID is the last boot ID seen before this read: kept across reads
// that did not answer or answered without one (a node coming up again),
// so the next boot ID is compared with the last real one.
func lastBootID(prev *NodeStatus) string {
	if prev == nil {
		return ""
	}
	return prev.lastBoot
}

// stageSince: a stage change seen by --watch is the best source; else, for
// booting, the oldest event of the services the boot still waits on
// (ServiceInfo events carry the node's timestamps), when plausible (a Pi
// without network time may have a clock in 1970); else the boot time from
// /proc/uptime.
func stageSince(now time.Time, st *node.Status, prev *NodeStatus) (time.Time, string) {
	if prev != nil && prev.Status != nil {
		if prev.Status.Stage == st.Stage && prev.Status.BootID == st.BootID {
			return prev.StageSince, prev.StageSinceSource
		}
		return now, SinceObserved
	}
	if st.Stage == "booting" {
		var oldest time.Time
		for _, s := range st.Services {
			if s.State != "Running" && s.State != "Finished" && !s.Since.IsZero() && (oldest.IsZero() || s.Since.Before(oldest)) {
				oldest = s.Since
			}
		}
		if !oldest.IsZero() && !oldest.After(now.Add(time.Minute)) && now.Sub(oldest) < 24*time.Hour &&
			(st.Uptime == 0 || now.Sub(oldest) <= st.Uptime+time.Minute) {
			return oldest, SinceServices
		}
	}
	if st.Uptime > 0 && st.Stage == "booting" {
		return st.ReadAt.Add(-st.Uptime), SinceBoot
	}
	return time.Time{}, ""
}

func waitingExtensions(st *node.Status) []node.ServiceStatus {
	var out []node.ServiceStatus
	for _, s := range st.Services {
		if strings.HasPrefix(s.ID, "ext-") && s.State == "Waiting" && strings.Contains(s.LastEvent, "extension service config") {
			out = append(out, s)
		}
	}
	return out
}

func etcdDiagnoses(name string, st *node.Status) []Diagnosis {
	etcd := st.Service("etcd")
	switch {
	case etcd == nil:
		return []Diagnosis{{Severity: "warning", Code: "etcd-missing", Message: fmt.Sprintf("%s lists no etcd service", name)}}
	case etcd.State != "Running":
		return []Diagnosis{{Severity: "warning", Code: "etcd-not-running",
			Message: fmt.Sprintf("etcd on %s is %s: %s", name, etcd.State, orNone(etcd.LastEvent)),
			Fix:     fmt.Sprintf("if this is the cluster's first control plane and it was never bootstrapped: talosflash bootstrap --node %s --talosconfig FILE", hostOnly(st.Endpoint))}}
	case etcd.Health == "unhealthy":
		return []Diagnosis{{Severity: "error", Code: "etcd-unhealthy",
			Message: fmt.Sprintf("etcd on %s is unhealthy: %s", name, orNone(etcd.HealthMessage))}}
	case st.EtcdError != "":
		return []Diagnosis{{Severity: "warning", Code: "etcd-members-unknown",
			Message: fmt.Sprintf("etcd on %s runs, but its member list is not readable: %s", name, st.EtcdError)}}
	}
	return nil
}

func matchName(m Match, st *node.Status) string {
	if m.Profile != "" {
		return m.Profile
	}
	if st.Booted != nil && st.Booted.SchematicID != "" {
		return "schematic " + factory.ShortID(st.Booted.SchematicID)
	}
	return "unknown"
}

func orNone(s string) string {
	if s == "" {
		return "(no message)"
	}
	return s
}

// hostOnly is an endpoint without its port.
func hostOnly(endpoint string) string {
	if h, _, err := net.SplitHostPort(endpoint); err == nil {
		return h
	}
	return endpoint
}

// Minutes renders a duration for people: "12 min", "45 s", "1 h 10 min".
func Minutes(d time.Duration) string {
	switch {
	case d < time.Second:
		return fmt.Sprintf("%d ms", d.Milliseconds())
	case d < time.Minute:
		return fmt.Sprintf("%d s", int(d.Seconds()))
	case d < 2*time.Hour:
		return fmt.Sprintf("%d min", int(d.Round(time.Minute).Minutes()))
	}
	return fmt.Sprintf("%d h %d min", int(d.Hours()), int(d.Minutes())%60)
}

// WatchOptions bound `status` and `status --watch`.
type WatchOptions struct {
	Check StatusCheck
	// Watch keeps reading every Interval until ctx ends or For passes.
	Watch    bool
	Interval time.Duration // default 5 s
	For      time.Duration // 0: until ctx ends
	// CallTimeout bounds each read of a node (default node.DefaultCallTimeout).
	CallTimeout time.Duration
	Now         func() time.Time // default time.Now
	// Open connects to a node (default node.OpenStatus with the talosconfig).
	Talosconfig *node.Talosconfig
	// Until, if set, ends the reads of a node once it returns true for its
	// status (Follow); Watch returns when every node is done.
	Until func(NodeStatus) bool
	// Round, if set, is called after each round of reads (status reads
	// the Kubernetes view there).
	Round func(ctx context.Context)
}

// Watch reads every target once (and, with Watch, again every Interval)
// and calls emit with each node's NodeStatus: always on the first read, then
// only when its Key changes. It returns the last status of every node, in
// the targets' order.
func Watch(ctx context.Context, targets []*Member, opts WatchOptions, emit func(NodeStatus)) ([]NodeStatus, error) {
	if opts.Interval <= 0 {
		opts.Interval = 5 * time.Second
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	check := opts.Check
	if check.Talosconfig == "" && opts.Talosconfig != nil {
		check.Talosconfig = opts.Talosconfig.Path
	}
	readers := make([]*node.StatusReader, len(targets))
	for i, t := range targets {
		r, err := node.OpenStatus(ctx, t.Endpoint.String(), opts.Talosconfig, t.Role.IsControlPlane() || !t.Role.Known())
		if err != nil {
			for _, o := range readers[:i] {
				o.Close()
			}
			return nil, fmt.Errorf("%s: %w", t.Name(), err)
		}
		readers[i] = r
	}
	defer func() {
		for _, r := range readers {
			r.Close()
		}
	}()
	if opts.For > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, opts.For)
		defer cancel()
	}
	last := make([]*NodeStatus, len(targets))
	keys := make([]string, len(targets))
	done := make([]bool, len(targets))
	for {
		for i, t := range targets {
			if done[i] {
				continue
			}
			st, err := readers[i].Read(ctx, opts.CallTimeout)
			if ended(ctx) { // a read the end cut is not the node's answer
				return collect(last), watchEnd(ctx, opts)
			}
			ns := check.Diagnose(opts.Now(), t, st, err, last[i])
			if k := ns.Key(); last[i] == nil || k != keys[i] {
				emit(ns)
				keys[i] = k
			}
			last[i] = &ns
			done[i] = opts.Until != nil && opts.Until(ns)
		}
		if opts.Round != nil {
			opts.Round(ctx)
		}
		if !opts.Watch || !slices.Contains(done, false) {
			return collect(last), nil
		}
		t := time.NewTimer(opts.Interval)
		select {
		case <-ctx.Done():
			t.Stop()
			return collect(last), watchEnd(ctx, opts)
		case <-t.C:
		}
	}
}

// ended reports whether ctx is over, its deadline counted by the clock:
// gRPC fails a call whose deadline has passed before ctx's own timer has
// fired, so ctx.Err() can still be nil just after a read the deadline cut
// (CI once printed such a read as "no answer from the node").
func ended(ctx context.Context) bool {
	if ctx.Err() != nil {
		return true
	}
	dl, ok := ctx.Deadline()
	return ok && !time.Now().Before(dl)
}

// watchEnd is the error of a watch that ended: --for running out is the
// end asked for, not an error.
func watchEnd(ctx context.Context, opts WatchOptions) error {
	err := ctx.Err()
	if err == nil { // over by the clock, its timer not yet fired
		err = context.DeadlineExceeded
	}
	if opts.For > 0 && errors.Is(err, context.DeadlineExceeded) {
		return nil
	}
	return err
}

func collect(last []*NodeStatus) []NodeStatus {
	out := make([]NodeStatus, 0, len(last))
	for _, l := range last {
		if l != nil {
			out = append(out, *l)
		}
	}
	return out
}

// patchCommand is the talosflash patch that gives m the document in FILE.
func patchCommand(m *Member, talosconfig, doc string) string {
	tc := talosconfig
	if tc == "" {
		tc = "talosconfig"
	}
	target := "--node " + m.Endpoint.Host
	if m.Entry != nil && m.Inventory != "" {
		target = "--inventory " + m.Inventory + " --hostname " + m.Hostname
	}
	return fmt.Sprintf("talosflash patch %s --talosconfig %s --patch @%s.yaml", target, tc, doc)
}
