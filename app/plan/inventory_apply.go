package plan

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/talosflash/talosflash/node"
)

// NodeApplyJob is one inventory node's config for apply --inventory: wait
// for the node at its address, check it is that node (the hostname its card
// gave it, the image of its role), then the apply sequence (CheckApply and
// Send, as Apply) with the node's config.
type NodeApplyJob struct {
	Node *Member
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
	Node     *Member
	Endpoint string
	// Configured: the node already had a config and was skipped.
	Configured bool
	// Outcome is the apply's (nil when skipped or it failed before the check).
	*ApplyOutcome
}

// defaultNodeWait is NodeApplyJob.Wait's default.
const defaultNodeWait = 5 * time.Minute

// ErrNotThere: nothing answered at the node's address in time
// (NotThereError).
var ErrNotThere = errors.New("no Talos node answered at the node's address")

// NotThereError is a node waited for at its address in vain: errors.Is
// ErrNotThere and node.ErrNetwork (exit 3 in the CLI).
type NotThereError struct {
	Hostname, Endpoint string
	Wait               time.Duration
	Last               error // the last probe's failure
}

func (e *NotThereError) Error() string {
	if e.Wait == 0 {
		return fmt.Sprintf("no Talos node answers at %s's address %s (%v): is the Pi on, booted from its card and on the network?", e.Hostname, e.Endpoint, e.Last)
	}
	return fmt.Sprintf("no Talos node answered at %s's address %s within %s (last: %v): is the Pi on, booted from its card and on the network?",
		e.Hostname, e.Endpoint, Minutes(e.Wait), e.Last)
}

func (e *NotThereError) Is(target error) bool {
	return target == ErrNotThere || target == node.ErrNetwork
}

// IdentityError is a node at an inventory address that is not the node the
// inventory names there: its hostname (from its card) or the image it
// booted differ, as when two cards were swapped. Nothing is sent; --force
// does not override it (it is the wrong machine, not a doubtful config).
type IdentityError struct {
	Want          *Member
	Addr          string
	Hostname      string // what the node says (its FQDN when it reports a domain)
	BootedProfile string // the profile its image matches ("" unknown)
	hostOK        bool   // the reported name is the inventory's (compared as Talos splits it)
}

func (e *IdentityError) Error() string {
	if e.WrongImage() {
		return fmt.Sprintf("the node at %s is %s, but it booted the %s image (the inventory says %s). Nothing was sent; %s",
			e.Addr, e.Want.Hostname, e.BootedProfile, e.Want.ProfileName(), e.Fix())
	}
	var said []string
	if e.OtherImage() {
		said = append(said, "booted the "+e.BootedProfile+" image (the inventory says "+e.Want.ProfileName()+")")
	}

	if e.OtherHost() {
		said = append(said, fmt.Sprintf("says it is %q", e.Hostname))
	}

	return fmt.Sprintf("the node at %s (%s's address) %s: it is not %s — its card was flashed for another node (cards swapped?). Nothing was sent; put each card in its own Pi (`talosflash card DEVICE` says which node a card is for)",
		e.Addr, e.Want.Hostname, strings.Join(said, " and "), e.Want.Hostname)
}

// Is makes it a blocked config (exit 7 in the CLI): nothing was sent.
func (e *IdentityError) Is(target error) bool { return target == node.ErrInvalidConfig }

// Endpoint is host:port of the member (its inventory address at Port,
// when set: the member's own endpoint otherwise).
func (j *NodeApplyJob) Endpoint() string {
	if j.Port != 0 && j.Node.Entry != nil {
		return node.EndpointAt(j.Node.Entry.Address.Addr(), j.Port).String()
	}

	return j.Node.Endpoint.String()
}

// ApplyNode waits for the node, checks it is the inventory's node and
// applies its config (CheckApply + Send, as Apply). A node that already
// has a config is skipped (Configured), not an error.
func ApplyNode(ctx context.Context, j NodeApplyJob, config []byte) (*NodeApplyOutcome, error) {
	out := &NodeApplyOutcome{Node: j.Node, Endpoint: j.Endpoint()}

	if _, err := j.WaitFor(ctx); err != nil {
		return out, err
	}

	job := j.Apply
	job.Endpoint, job.Name, job.ConfigPath, job.Config = out.Endpoint, j.Node.Config, j.Node.Config, config
	job.Check.Declared = j.Node.ProfileName() // only a fallback when the node does not say
	job.Expect = j.Node                       // CheckApply refuses another node at the address

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
func checkIdentity(want *Member, rv *ApplyReview) error {
	if id := Identify(want, rv.Node, rv.Match); id != nil {
		return id
	}

	return nil
}

// Identify is the one identity rule of an inventory node: what answered
// at its address (n, which booted m) is want when its hostname, compared
// as Talos splits it (node.Node.IsHost), and the profile it booted (when
// known) are the inventory's. nil: it is; else why not. CheckApply's gate
// (ApplyJob.Expect) and the app's inventory rows both ask it.
func Identify(want *Member, n *node.Node, m Match) *IdentityError {
	profileOK := m.Profile == "" || strings.EqualFold(m.Profile, want.ProfileName())
	hostOK := n.IsHost(want.Hostname)

	if profileOK && hostOK {
		return nil
	}

	return &IdentityError{Want: want, Addr: n.Addr, Hostname: n.FQDN(), BootedProfile: m.Profile, hostOK: hostOK}
}

// OtherImage: the node booted another profile's image than the inventory's.
func (e *IdentityError) OtherImage() bool {
	return e.BootedProfile != "" && !strings.EqualFold(e.BootedProfile, e.Want.ProfileName())
}

// OtherHost: the node says another name than the inventory's.
func (e *IdentityError) OtherHost() bool { return !e.hostOK }

// WaitFor probes the node's address until something answers (what
// answered) or Wait runs out (ErrNotThere): ApplyNode's first step, and
// the app's inventory rows, which show each node once it answers.
func (j *NodeApplyJob) WaitFor(ctx context.Context) (*node.Node, error) {
	endpoint := j.Endpoint()
	wait, every := j.Wait, j.Every
	if wait <= 0 {
		wait = defaultNodeWait
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
		// Each probe gets what is left of the wait, 5 s at most, never
		// less than the wait itself or a second (the last one).
		callTimeout := max(min(5*time.Second, time.Until(deadline)), min(wait, time.Second))

		pctx, cancel := context.WithTimeout(ctx, callTimeout)
		n, err := probe(pctx, endpoint)
		cancel()

		if err == nil {
			return n, nil
		}

		if ctx.Err() != nil {
			return nil, interrupted(ctx, endpoint, "while waiting for "+j.Node.Hostname+" to answer; nothing was sent")
		}

		if time.Now().After(deadline) {
			return nil, &NotThereError{Hostname: j.Node.Hostname, Endpoint: endpoint, Wait: wait, Last: err}
		}

		if j.Progress != nil && time.Since(lastSaid) >= 10*time.Second {
			lastSaid = time.Now()
			j.Progress(fmt.Sprintf("%s · waiting at %s … (%s of %s)", j.Node.Hostname, j.Node.Endpoint.Host, Minutes(time.Since(start)), Minutes(wait)))
		}

		t := time.NewTimer(min(every, time.Until(deadline)+time.Millisecond))
		select {
		case <-ctx.Done():
			t.Stop()
		case <-t.C:
		}
	}
}
