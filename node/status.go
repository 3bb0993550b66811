package node

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/cosi-project/runtime/pkg/safe"
	"github.com/siderolabs/talos/pkg/machinery/api/machine"
	"github.com/siderolabs/talos/pkg/machinery/resources/runtime"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// What a configured node reports about itself, read over mTLS with the
// talosconfig's client certificate (the same connection `bootstrap` makes).
// Sources, siderolabs/talos v1.14.0-rc.1:
//   - stage and readiness: COSI MachineStatuses.runtime.talos.dev, ID
//     "machine" (pkg/machinery/resources/runtime/machine_status.go), written by
//     internal/app/machined/pkg/controllers/runtime/machine_status.go. Its
//     unmet conditions are time, network, services, staticPods, nodeReady;
//     "services" only names required services (apid, machined, kubelet,
//     etcd, trustd) and services that run unhealthy: a service still waiting
//     (an extension service without its config) has no Service resource
//     (controllers/v1alpha1/service.go keeps only running ones), so it is
//     never an unmet condition. Only ServiceList shows it.
//   - services: MachineService.ServiceList (ServiceInfo: id, state, events,
//     health; internal/app/machined/pkg/system/service_runner.go AsProto).
//     States are events.ServiceState names (system/events/events.go):
//     Initialized, Starting, Preparing, Waiting, Running, Stopping, Finished,
//     Failed, Skipped. A service waiting on its conditions is "Waiting" with
//     the event "Waiting for <conditions>" (service_runner.go waitFor); an
//     extension service with `depends: - configuration: true` waits on
//     "extension service config" (pkg/machinery/resources/runtime/condition.go
//     ExtensionServiceConfigStatusCondition, system/services/extension.go).
//   - boot ID and uptime: MachineService.Read of /proc/sys/kernel/random/boot_id
//     and /proc/uptime (os:admin only: system/services/machined.go rules).
//     Talos 1.14 also has a BootIDs.runtime.talos.dev resource, which
//     machinery v1.13 cannot decode; Read works on every version.
//   - etcd: MachineService.EtcdMemberList (os:reader allowed) and the etcd
//     service's health.

// ServiceStatus is one service of ServiceList.
type ServiceStatus struct {
	ID    string
	State string // "Running", "Waiting", "Failed", ...
	// Health: "healthy", "unhealthy" or "unknown" (no health check, e.g. extension services).
	Health        string
	HealthMessage string `json:",omitempty"`
	// LastEvent is the newest event's message, e.g. "Waiting for extension service config".
	LastEvent string `json:",omitempty"`
	// Since is the time of the service's oldest kept event (the node's clock;
	// zero when it has none), LastEventAt the newest one's.
	Since, LastEventAt time.Time
}

// Condition is an unmet readiness condition of MachineStatus.
type Condition struct{ Name, Reason string }

// EtcdMember is one member of EtcdMemberList.
type EtcdMember struct {
	ID       string // hex, as talosctl etcd members prints it
	Hostname string
	PeerURLs []string
	Learner  bool
}

// Status is what one configured node says about itself. Fields the node
// did not answer stay zero, and Problems say why.
type Status struct {
	Endpoint     string
	TalosVersion string
	Stage        string // MachineStage: booting, running, rebooting, maintenance, ...
	Ready        bool
	Unmet        []Condition
	Services     []ServiceStatus
	Booted       *Booted
	BootID       string
	// Nodename is the Kubernetes node name the node registers with (its
	// Nodenames resource, nodename.go; "" when it has none): the name to
	// cordon and drain, not necessarily the inventory's hostname.
	Nodename string        `json:",omitempty"`
	Uptime   time.Duration // 0 when not readable (not os:admin)
	// EtcdMembers is nil when not asked (a worker) or not answered (EtcdError says why).
	EtcdMembers []EtcdMember
	EtcdError   string
	ReadAt      time.Time // this machine's clock when the reads began
	Problems    []string  // reads that failed, in the node's words
}

// Service returns the service with that ID, or nil.
func (s *Status) Service(id string) *ServiceStatus {
	for i := range s.Services {
		if s.Services[i].ID == id {
			return &s.Services[i]
		}
	}
	return nil
}

// StatusReader keeps one authenticated connection to a node for repeated
// reads (status --watch): gRPC reconnects by itself after a reboot.
type StatusReader struct {
	s    *session
	etcd bool
}

// OpenStatus connects to endpoint with the talosconfig. withEtcd also reads
// the etcd member list (control planes).
func OpenStatus(ctx context.Context, endpoint string, tc *Talosconfig, withEtcd bool) (*StatusReader, error) {
	if tc == nil {
		return nil, fmt.Errorf("status: %w: none given", ErrTalosconfig)
	}
	s, err := dialSecure(ctx, endpoint, tc)
	if err != nil {
		return nil, err
	}
	s.timeout = DefaultCallTimeout
	return &StatusReader{s: s, etcd: withEtcd}, nil
}

// Endpoint is the normalized address read.
func (r *StatusReader) Endpoint() string { return r.s.endpoint }

// Close drops the connection.
func (r *StatusReader) Close() { r.s.Close() }

// Read asks the node once, each call bounded by callTimeout (0: the
// default). The error is for a node that does not answer at all (Version
// fails); a node that answers some reads gives a Status with Problems.
func (r *StatusReader) Read(ctx context.Context, callTimeout time.Duration) (*Status, error) {
	if callTimeout <= 0 {
		callTimeout = DefaultCallTimeout
	}
	r.s.timeout = callTimeout
	st := &Status{Endpoint: r.s.endpoint, ReadAt: time.Now()}
	call := func(f func(ctx context.Context) error) error {
		cctx, cancel := context.WithTimeout(ctx, callTimeout)
		defer cancel()
		return f(cctx)
	}
	problem := func(what string, err error) {
		st.Problems = append(st.Problems, what+": "+sanitize(r.s.err(ctx, what, err).Error()))
	}

	if err := call(func(ctx context.Context) error {
		v, err := r.s.c.Version(ctx)
		if err != nil {
			return r.s.err(ctx, "version", err)
		}
		if m := v.GetMessages(); len(m) > 0 {
			st.TalosVersion, _ = cleanVersion(m[0].GetVersion().GetTag())
		}
		return nil
	}); err != nil {
		return nil, err
	}
	if err := call(func(ctx context.Context) error {
		ms, err := safe.StateGetByID[*runtime.MachineStatus](ctx, r.s.c.COSI, runtime.MachineStatusID)
		if err != nil {
			return err
		}
		spec := ms.TypedSpec()
		st.Stage, st.Ready = sanitize(spec.Stage.String()), spec.Status.Ready
		for _, c := range spec.Status.UnmetConditions {
			st.Unmet = append(st.Unmet, Condition{Name: sanitize(c.Name), Reason: sanitize(c.Reason)})
		}
		return nil
	}); err != nil {
		problem("machine status", err)
	}
	if err := call(func(ctx context.Context) error {
		resp, err := r.s.c.ServiceList(ctx)
		if err != nil {
			return err
		}
		for _, m := range resp.GetMessages() {
			for _, si := range m.GetServices() {
				st.Services = append(st.Services, serviceStatus(si))
			}
		}
		slices.SortFunc(st.Services, func(a, b ServiceStatus) int { return strings.Compare(a.ID, b.ID) })
		return nil
	}); err != nil {
		problem("service list", err)
	}
	if err := call(func(ctx context.Context) (err error) {
		st.Booted, err = readBooted(ctx, r.s.c)
		return err
	}); err != nil {
		problem("extension statuses", err)
	}
	if err := call(func(ctx context.Context) (err error) {
		st.Nodename, _, err = readNodename(ctx, r.s.c)
		return err
	}); err != nil {
		problem("node name", err)
	}
	if err := call(func(ctx context.Context) error {
		id, err := r.s.readSmall(ctx, bootIDPath, 4096)
		// A boot ID is no secret (a random UUID per boot), but sanitize
		// would take it for one: keep it when it has the UUID form.
		if id = strings.TrimSpace(id); bootIDRe.MatchString(id) {
			st.BootID = id
		} else if id != "" {
			st.BootID = printable(id, 64)
		}
		return err
	}); err != nil {
		problem("boot id", err)
	}
	if err := call(func(ctx context.Context) error {
		up, err := r.s.readSmall(ctx, "/proc/uptime", 4096)
		if err != nil {
			return err
		}
		st.Uptime = parseUptime(up)
		return nil
	}); err != nil {
		problem("uptime", err)
	}
	if r.etcd {
		if err := call(func(ctx context.Context) error {
			resp, err := r.s.c.EtcdMemberList(ctx, &machine.EtcdMemberListRequest{})
			if err != nil {
				return err
			}
			st.EtcdMembers = []EtcdMember{}
			for _, m := range resp.GetMessages() {
				for _, em := range m.GetMembers() {
					urls := make([]string, 0, len(em.GetPeerUrls()))
					for _, u := range em.GetPeerUrls() {
						urls = append(urls, sanitize(u))
					}
					st.EtcdMembers = append(st.EtcdMembers, EtcdMember{ID: strconv.FormatUint(em.GetId(), 16),
						Hostname: sanitize(em.GetHostname()), PeerURLs: urls, Learner: em.GetIsLearner()})
				}
			}
			return nil
		}); err != nil && status.Code(err) != codes.Unimplemented { // Unimplemented: not a control plane
			st.EtcdError = sanitize(r.s.err(ctx, "etcd member list", err).Error())
		}
	}
	return st, nil
}

var bootIDRe = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$`)

// parseUptime reads the first field of /proc/uptime (seconds since boot).
func parseUptime(s string) time.Duration {
	f, _, _ := strings.Cut(strings.TrimSpace(s), " ")
	secs, err := strconv.ParseFloat(f, 64)
	if err != nil || secs < 0 || secs > 100*365*24*3600 {
		return 0
	}
	return time.Duration(secs * float64(time.Second))
}

func serviceStatus(si *machine.ServiceInfo) ServiceStatus {
	s := ServiceStatus{ID: sanitize(si.GetId()), State: sanitize(si.GetState()), Health: "unknown"}
	if h := si.GetHealth(); h != nil && !h.GetUnknown() {
		s.Health = "unhealthy"
		if h.GetHealthy() {
			s.Health = "healthy"
		}
		s.HealthMessage = sanitize(h.GetLastMessage())
	}
	if evs := si.GetEvents().GetEvents(); len(evs) > 0 {
		// Oldest first (events.ServiceEvents.Get), at most 64 kept.
		if ts := evs[0].GetTs(); ts != nil {
			s.Since = ts.AsTime()
		}
		last := evs[len(evs)-1]
		s.LastEvent = sanitize(last.GetMsg())
		if ts := last.GetTs(); ts != nil {
			s.LastEventAt = ts.AsTime()
		}
	}
	return s
}
