package plan

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/talosflash/talosflash/inventory"
	"github.com/talosflash/talosflash/node"
)

// NodeApplyJob is one inventory node's config for apply --inventory: wait
// for the node at its address, check it is that node (the hostname its card
// gave it, the image of its role), then the apply sequence (CheckApply and
// Send, as Apply) with the node's config.
type NodeApplyJob struct {
	Node inventory.Node
	Port int // the Talos API port; 0: node.DefaultPort
	// Apply is the template: Mode, DryRun, Force, Timeout, Check, Event,
	// Probe, ApplyConfig. Endpoint, Name, Config and Check.Declared are set
	// from the node.
	Apply ApplyJob
	// Wait bounds how long the node may take to answer at its address;
	// Every is the pause between attempts (defaults 5m and 2s).
	Wait, Every time.Duration
	// Progress gets a line now and then while waiting (may be nil).
	Progress func(string)
}

// NodeApplyOutcome is one node's result.
type NodeApplyOutcome struct {
	Node     inventory.Node
	Endpoint string
	// Configured: the node already had a config and was skipped.
	Configured bool
	// Outcome is the apply's (nil when skipped or it failed before the check).
	*ApplyOutcome
}

// ErrNotThere: nothing answered at the node's address in time.
var ErrNotThere = errors.New("no Talos node answered at the node's address")

// IdentityError is a node at an inventory address that is not the node the
// inventory names there: its hostname (from its card) or the image it
// booted differ, as when two cards were swapped. Nothing is sent; --force
// does not override it (it is the wrong machine, not a doubtful config).
type IdentityError struct {
	Want          inventory.Node
	Addr          string
	Hostname      string // what the node says (its FQDN when it reports a domain)
	BootedProfile string // the profile its image matches ("" unknown)
	hostOK        bool   // the reported name is the inventory's (compared as Talos splits it)
}

func (e *IdentityError) Error() string {
	if e.WrongImage() {
		return fmt.Sprintf("the node at %s is %s, but it booted the %s image (the inventory says %s). Nothing was sent; %s",
			e.Addr, e.Want.Hostname, e.BootedProfile, e.Want.Profile, e.Fix())
	}
	var said []string
	if e.BootedProfile != "" && e.BootedProfile != e.Want.Profile {
		said = append(said, "booted the "+e.BootedProfile+" image (the inventory says "+e.Want.Profile+")")
	}

	if !e.hostOK {
		said = append(said, fmt.Sprintf("says it is %q", e.Hostname))
	}

	return fmt.Sprintf("the node at %s (%s's address) %s: it is not %s — its card was flashed for another node (cards swapped?). Nothing was sent; put each card in its own Pi (`talosflash card DEVICE` says which node a card is for)",
		e.Addr, e.Want.Hostname, strings.Join(said, " and "), e.Want.Hostname)
}

// Is makes it a blocked config (exit 7 in the CLI): nothing was sent.
func (e *IdentityError) Is(target error) bool { return target == node.ErrInvalidConfig }

// Endpoint is host:port of n.
func (j *NodeApplyJob) Endpoint() string {
	port := j.Port
	if port == 0 {
		port = node.DefaultPort
	}

	return net.JoinHostPort(j.Node.Address.Addr().String(), strconv.Itoa(port))
}

// ApplyNode waits for the node, checks it is the inventory's node and
// applies its config (CheckApply + Send, as Apply). A node that already
// has a config is skipped (Configured), not an error.
func ApplyNode(ctx context.Context, j NodeApplyJob, config []byte) (*NodeApplyOutcome, error) {
	out := &NodeApplyOutcome{Node: j.Node, Endpoint: j.Endpoint()}

	if err := j.wait(ctx, out.Endpoint); err != nil {
		return out, err
	}

	job := j.Apply
	job.Endpoint, job.Name, job.Config = out.Endpoint, j.Node.Config, config
	job.Check.Declared = j.Node.Profile // only a fallback when the node does not say
	want := j.Node
	job.Expect = &want // CheckApply refuses another node at the address

	rv, err := CheckApply(ctx, job)
	if errors.Is(err, ErrConfigured) {
		out.Configured = true
		return out, nil
	}

	out.ApplyOutcome = outcomeOf(rv)
	if err != nil {
		return out, err
	}

	res, err := rv.Send(ctx, job.Force)
	out.ApplyOutcome = res

	return out, err
}

// checkIdentity: the node at the address is the inventory's node.
func checkIdentity(want inventory.Node, rv *ApplyReview) error {
	n := rv.Node
	profileOK := rv.Match.Profile == "" || strings.EqualFold(rv.Match.Profile, want.Profile)
	hostOK := n.IsHost(want.Hostname)

	if profileOK && hostOK {
		return nil
	}

	return &IdentityError{Want: want, Addr: n.Addr, Hostname: n.FQDN(), BootedProfile: rv.Match.Profile, hostOK: hostOK}
}

// wait probes the endpoint until something answers or Wait runs out.
func (j *NodeApplyJob) wait(ctx context.Context, endpoint string) error {
	wait, every := j.Wait, j.Every
	if wait <= 0 {
		wait = 5 * time.Minute
	}

	if every <= 0 {
		every = 2 * time.Second
	}

	probe := j.Apply.Probe
	if probe == nil {
		probe = node.Probe
	}

	start := time.Now()
	deadline := start.Add(wait)
	lastSaid := time.Time{}

	for {
		callTimeout := min(5*time.Second, time.Until(deadline))
		if callTimeout <= 0 {
			callTimeout = time.Second
		}

		pctx, cancel := context.WithTimeout(ctx, callTimeout)
		_, err := probe(pctx, endpoint)
		cancel()

		if err == nil {
			return nil
		}

		if ctx.Err() != nil {
			return interrupted(ctx, endpoint, "while waiting for "+j.Node.Hostname+" to answer; nothing was sent")
		}

		if time.Now().After(deadline) {
			return fmt.Errorf("%w: %s at %s, for %s (%v): is the Pi on, booted from its card and on the network?",
				errors.Join(ErrNotThere, node.ErrNetwork), j.Node.Hostname, endpoint, wait.Round(time.Second), err)
		}

		if j.Progress != nil && time.Since(lastSaid) >= 10*time.Second {
			lastSaid = time.Now()
			j.Progress(fmt.Sprintf("%s · waiting at %s … (%s of %s)", j.Node.Hostname, j.Node.Address.Addr(), time.Since(start).Round(time.Second), wait.Round(time.Second)))
		}

		t := time.NewTimer(min(every, time.Until(deadline)+time.Millisecond))
		select {
		case <-ctx.Done():
			t.Stop()
		case <-t.C:
		}
	}
}
