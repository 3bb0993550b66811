package node

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/cosi-project/runtime/pkg/safe"
	"github.com/siderolabs/talos/pkg/machinery/api/machine"
	"github.com/siderolabs/talos/pkg/machinery/resources/runtime"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Errors of Bootstrap; both are node refusals (errors.Is(err, ErrRefused)).
var (
	// ErrAlreadyBootstrapped: etcd already runs or has data. Bootstrapping
	// twice would split the cluster, so talosflash never retries it.
	ErrAlreadyBootstrapped error = refusal("etcd is already bootstrapped on this node")
	// ErrNotControlPlane: bootstrap is only for a control plane node.
	ErrNotControlPlane error = refusal("not a control plane node")
)

// Defaults of the waits (pkg/cluster/bootstrap.go in Talos waits up to 10
// minutes for the API and again for the bootstrap call, 2 s per attempt).
const (
	DefaultWaitTimeout = 10 * time.Minute
	DefaultCallTimeout = 5 * time.Second
	DefaultPollEvery   = 2 * time.Second
)

// WaitOptions bound waiting for a node that reboots or boots with its config.
type WaitOptions struct {
	Timeout     time.Duration // the whole wait; default DefaultWaitTimeout
	CallTimeout time.Duration // each call; default DefaultCallTimeout
	Every       time.Duration // between attempts; default DefaultPollEvery
	// Progress gets one line each time what the node reports changes.
	Progress func(string)
}

func (o WaitOptions) withDefaults() WaitOptions {
	if o.Timeout <= 0 {
		o.Timeout = DefaultWaitTimeout
	}
	if o.CallTimeout <= 0 {
		o.CallTimeout = DefaultCallTimeout
	}
	if o.Every <= 0 {
		o.Every = DefaultPollEvery
	}
	if o.Progress == nil {
		o.Progress = func(string) {}
	}
	return o
}

// BootstrapResult is what Bootstrap did.
type BootstrapResult struct {
	Endpoint     string
	TalosVersion string
	Attempts     int  // Bootstrap calls sent
	Accepted     bool // the node accepted a Bootstrap call (etcd is starting)
	EtcdHealthy  bool // etcd reported running and healthy afterwards
	unanswered   bool // a call was sent and not answered: it may have bootstrapped
}

// Bootstrap waits for a control plane node to come back with its config
// (its API answering with the talosconfig's certificate, stage booting or
// running), refuses if etcd already runs, then sends MachineService.Bootstrap
// once, retrying only the answers that mean "not yet" (FailedPrecondition,
// Unavailable, deadlines), as Talos' own pkg/cluster bootstrapper does, and
// waits for etcd to report healthy.
func Bootstrap(ctx context.Context, endpoint string, tc *Talosconfig, opts WaitOptions) (*BootstrapResult, error) {
	opts = opts.withDefaults()
	if tc == nil {
		return nil, fmt.Errorf("bootstrap: %w: none given", ErrTalosconfig)
	}
	s, err := dialSecure(ctx, endpoint, tc)
	if err != nil {
		return nil, err
	}
	defer s.Close()
	s.timeout = opts.CallTimeout
	parent := ctx
	ctx, cancel := context.WithTimeout(ctx, opts.Timeout)
	defer cancel()

	res := &BootstrapResult{Endpoint: s.endpoint}
	// A Ctrl-C at any step says what was sent and where the node is.
	stopped := func(err error) error {
		if ie := interruption(parent, "bootstrap", s.endpoint, res.State); ie != nil {
			return ie
		}
		return err
	}
	opts.Progress(fmt.Sprintf("waiting for the Talos API on %s (with %s)", s.endpoint, tc))
	if res.TalosVersion, err = s.waitReady(ctx, opts, false); err != nil {
		return res, stopped(err)
	}
	etcd, err := s.service(ctx, opts, "etcd")
	if err != nil {
		return res, stopped(fmt.Errorf("bootstrap: list services: %w", err))
	}
	if etcd != nil && etcd.GetState() == "Running" {
		return res, fmt.Errorf("%w (etcd service %s, %s); nothing was sent", ErrAlreadyBootstrapped, etcd.GetState(), healthWord(etcd))
	}

	opts.Progress("bootstrapping etcd")
	if err := s.sendBootstrap(ctx, opts, bootstrapping, res); err != nil {
		return res, stopped(err)
	}
	opts.Progress("bootstrap accepted; waiting for etcd to be healthy")
	if err := s.waitEtcdHealthy(ctx, opts, nil); err != nil {
		return res, stopped(fmt.Errorf("bootstrapped, but etcd did not become healthy: %w", err))
	}
	res.EtcdHealthy = true
	opts.Progress("etcd is running and healthy")
	return res, nil
}

// waitEtcdHealthy polls the etcd service until it runs and is healthy;
// failed, when given, turns a Failed etcd into the error that ends the wait.
func (s *session) waitEtcdHealthy(ctx context.Context, opts WaitOptions, failed func(*machine.ServiceInfo) error) error {
	return poll(ctx, opts, func(ctx context.Context) (bool, string, error) {
		etcd, err := s.service(ctx, opts, "etcd")
		if err != nil {
			return false, "services not readable yet", nil
		}
		if etcd == nil {
			return false, "etcd service not registered yet", nil
		}
		if failed != nil && etcd.GetState() == "Failed" {
			return false, "", failed(etcd)
		}
		return etcd.GetState() == "Running" && etcd.GetHealth().GetHealthy(), "etcd " + etcd.GetState() + ", " + healthWord(etcd), nil
	})
}

// bootstrapCall is what one MachineService.Bootstrap is for: a new
// cluster's etcd, or a recovery from a snapshot, and its words.
type bootstrapCall struct {
	req     *machine.BootstrapRequest
	op      string // "bootstrap", "recover": errors begin with it
	taken   string // an unanswered earlier call probably did it
	already string // the fix when the node has etcd data already ("" none)
}

var bootstrapping = bootstrapCall{req: &machine.BootstrapRequest{}, op: "bootstrap", taken: "bootstrapped"}

func recovery(skipHash bool) bootstrapCall {
	return bootstrapCall{req: &machine.BootstrapRequest{RecoverEtcd: true, RecoverSkipHashCheck: skipHash}, op: "recover", taken: "recovered",
		already: ": a recovery is for a control plane whose etcd has no data yet"}
}

// sendBootstrap sends the call until the node accepts it, retrying only
// the answers that mean "not yet" (FailedPrecondition, Unavailable,
// deadlines), as Talos' own pkg/cluster bootstrapper does; an
// AlreadyExists after an unanswered earlier call is taken as that call's
// success. res counts the attempts and what may have reached the node.
func (s *session) sendBootstrap(ctx context.Context, opts WaitOptions, call bootstrapCall, res *BootstrapResult) error {
	ambiguous := false // an earlier call may have reached the node
	last := ""
	for {
		if ctx.Err() != nil {
			return fmt.Errorf("%s: gave up after %s: %w", call.op, opts.Timeout, ctx.Err())
		}
		res.Attempts++
		cctx, ccancel := context.WithTimeout(ctx, opts.CallTimeout)
		err := s.c.Bootstrap(cctx, call.req)
		ccancel()
		if err == nil {
			res.Accepted, res.unanswered = true, false
			return nil
		}
		code := status.Code(err)
		msg := sanitize(status.Convert(err).Message())
		switch {
		case code == codes.AlreadyExists && ambiguous:
			opts.Progress("the node reports etcd data after an unanswered earlier attempt: taking it as " + call.taken)
			res.Accepted, res.unanswered = true, false
			return nil
		case code == codes.AlreadyExists:
			return fmt.Errorf("%w (the node says: %s)%s", ErrAlreadyBootstrapped, msg, call.already)
		case code == codes.Unimplemented && strings.Contains(msg, "control plane"):
			fix := ""
			if call.op == "bootstrap" {
				fix = "; bootstrap the control plane node instead"
			}
			return fmt.Errorf("%w (the node says: %s)%s", ErrNotControlPlane, msg, fix)
		case code == codes.FailedPrecondition || code == codes.Unavailable || code == codes.DeadlineExceeded || code == codes.Canceled:
			ambiguous = ambiguous || code != codes.FailedPrecondition
			res.unanswered = ambiguous
			if ctx.Err() != nil {
				return fmt.Errorf("%s: gave up after %s: %w", call.op, opts.Timeout, s.err(ctx, "bootstrap", err))
			}
			if line := "node not ready for bootstrap yet: " + msg; line != last {
				opts.Progress(line)
				last = line
			}
			if err := sleep(ctx, opts.Every); err != nil {
				return fmt.Errorf("%s: gave up after %s: %w", call.op, opts.Timeout, err)
			}
		default:
			return fmt.Errorf("%s: %w", call.op, s.err(ctx, "bootstrap", err))
		}
	}
}

func healthWord(si *machine.ServiceInfo) string {
	h := si.GetHealth()
	switch {
	case h == nil || h.GetUnknown():
		return "health unknown"
	case h.GetHealthy():
		return "healthy"
	case h.GetLastMessage() != "":
		return "unhealthy (" + sanitize(h.GetLastMessage()) + ")"
	default:
		return "unhealthy"
	}
}

// waitReady polls until the API answers Version with the talosconfig's
// credentials and the machine stage is booting or running (running and
// ready when wantReady). It returns the Talos version.
func (s *session) waitReady(ctx context.Context, opts WaitOptions, wantReady bool) (string, error) {
	var version string
	err := poll(ctx, opts, func(ctx context.Context) (bool, string, error) {
		cctx, cancel := context.WithTimeout(ctx, opts.CallTimeout)
		defer cancel()
		v, err := s.c.Version(cctx)
		if err != nil {
			e := s.err(cctx, "request", err)
			if errors.Is(e, ErrNetwork) || status.Code(err) == codes.Unavailable {
				return false, "API not answering: " + e.Error(), nil
			}
			return false, "", e
		}
		if len(v.GetMessages()) > 0 {
			version = v.GetMessages()[0].GetVersion().GetTag()
		}
		ms, err := safe.StateGetByID[*runtime.MachineStatus](cctx, s.c.COSI, runtime.MachineStatusID)
		if err != nil {
			return false, "machine status not readable yet", nil
		}
		stage, ready := ms.TypedSpec().Stage, ms.TypedSpec().Status.Ready
		line := fmt.Sprintf("%s: Talos %s, stage %s", s.endpoint, version, stage)
		if stage == runtime.MachineStageRunning {
			line += fmt.Sprintf(", ready %v", ready)
		}
		switch stage {
		case runtime.MachineStageRunning:
			return !wantReady || ready, line, nil
		case runtime.MachineStageBooting:
			return !wantReady, line, nil
		}
		return false, line, nil
	})
	return version, err
}

// service returns one service's info (nil if the node has no such service).
func (s *session) service(ctx context.Context, opts WaitOptions, id string) (*machine.ServiceInfo, error) {
	list, err := s.services(ctx, opts)
	if err != nil {
		return nil, err
	}
	for _, si := range list {
		if si.GetId() == id {
			return si, nil
		}
	}
	return nil, nil
}

func (s *session) services(ctx context.Context, opts WaitOptions) ([]*machine.ServiceInfo, error) {
	cctx, cancel := context.WithTimeout(ctx, opts.CallTimeout)
	defer cancel()
	resp, err := s.c.ServiceList(cctx)
	if err != nil {
		return nil, s.err(cctx, "service list", err)
	}
	var out []*machine.ServiceInfo
	for _, m := range resp.GetMessages() {
		out = append(out, m.GetServices()...)
	}
	return out, nil
}

// poll calls check every opts.Every until it reports done, fails, or ctx
// ends; a changed status line goes to opts.Progress.
func poll(ctx context.Context, opts WaitOptions, check func(context.Context) (bool, string, error)) error {
	last := ""
	for {
		done, line, err := check(ctx)
		if err != nil {
			return err
		}
		if line != "" && line != last {
			opts.Progress(line)
			last = line
		}
		if done {
			return nil
		}
		if err := sleep(ctx, opts.Every); err != nil {
			if last != "" {
				return fmt.Errorf("%w (last seen: %s)", err, last)
			}
			return err
		}
	}
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
