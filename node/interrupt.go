package node

import (
	"context"
	"fmt"
)

// InterruptedError is ctx's cancellation (Ctrl-C) during an upgrade, a
// bootstrap or an apply (app/plan's job): State says exactly what was sent
// and what state the node is in. errors.Is(err, context.Canceled) holds.
type InterruptedError struct {
	Op       string // "upgrade", "bootstrap", "apply"
	Endpoint string
	State    string
	Err      error // ctx's error
}

func (e *InterruptedError) Error() string {
	return fmt.Sprintf("%s %s interrupted: %s", e.Op, e.Endpoint, e.State)
}

func (e *InterruptedError) Unwrap() error { return e.Err }

// Upgrade phases (UpgradeResult.Phase): how far an upgrade got.
const (
	PhaseNothingSent     = "nothing-sent"
	PhasePullSent        = "pull-sent"        // ImageService.Pull sent: the node may be pulling the installer
	PhasePulled          = "installer-pulled" // the installer image is on the node
	PhaseInstallerSent   = "installer-sent"   // LifecycleService.Upgrade (or MachineService.Upgrade) sent: the installer may be running
	PhaseInstallFailed   = "installer-failed" // the installer ran and failed: nothing installed, not rebooted
	PhaseInstalled       = "installer-run"    // the installer ran (exit 0): the new version is installed, not booted
	PhaseRebootRequested = "reboot-requested" // the reboot was asked for (or MachineService.Upgrade accepted)
	PhaseRebooted        = "rebooted"         // a new boot ID: waiting for the node to be ready and healthy
	PhaseHealthy         = "healthy"
)

// State says what was sent to the node and the state it is in.
func (r *UpgradeResult) State() string {
	legacy := r.API == "MachineService.Upgrade"
	unanswered := ""
	if r.unanswered != "" {
		unanswered = "the " + r.unanswered + " request was sent and not answered (it may have reached the node); "
	}
	switch r.Phase {
	case PhaseNothingSent, "":
		return fmt.Sprintf("%snothing was sent to the node: it still runs %s", unanswered, r.From)
	case PhasePullSent:
		return fmt.Sprintf("the installer pull (ImageService.Pull of %s) was sent and the node may still be pulling it; the installer is not installed and the node was not rebooted: it still runs %s", r.Image, r.From)
	case PhasePulled:
		return fmt.Sprintf("%sthe installer %s was pulled; it is not installed and the node was not rebooted: it still runs %s", unanswered, r.Image, r.From)
	case PhaseInstallerSent:
		if legacy {
			return fmt.Sprintf("MachineService.Upgrade with %s was sent and not answered: the node may be installing %s and then reboots by itself; check it (%s) before anything else", r.Image, r.To, Talosctl("", r.Endpoint, "version"))
		}
		return fmt.Sprintf("LifecycleService.Upgrade with %s was sent: the installer may still be running on the node (it does not reboot it); the node was not rebooted and runs %s until its next reboot", r.Image, r.From)
	case PhaseInstallFailed:
		return fmt.Sprintf("the installer %s ran and failed: %s is not installed and the node was not rebooted: it still runs %s", r.Image, r.To, r.From)
	case PhaseInstalled:
		return fmt.Sprintf("%sthe installer ran (exit 0): %s is installed; the node was not rebooted: it runs %s until its next reboot, which boots %s (%s, or run the upgrade again)", unanswered, r.To, r.From, r.To, Talosctl("", r.Endpoint, "reboot"))
	case PhaseRebootRequested:
		if legacy {
			return fmt.Sprintf("MachineService.Upgrade with %s was accepted: the node installs %s and reboots by itself; not waited for it to come back (run the upgrade again: a node already on %s is left alone)", r.Image, r.To, r.To)
		}
		return fmt.Sprintf("the installer ran and the reboot was requested: the node is rebooting into %s; not waited for it to come back (run the upgrade again: a node already on %s is left alone)", r.To, r.To)
	case PhaseRebooted:
		return fmt.Sprintf("the node rebooted (new boot ID); not waited for it to be ready, running %s with healthy services (%s)", r.To, Talosctl("", r.Endpoint, "health"))
	case PhaseHealthy:
		return fmt.Sprintf("the node runs %s with healthy services", r.To)
	}
	return r.Phase
}

// State says what a bootstrap sent and the state the node is in.
func (r *BootstrapResult) State() string {
	switch {
	case r.Accepted:
		return "the bootstrap was accepted: etcd is starting; not waited for it to be healthy (" + Talosctl("", r.Endpoint, "service", "etcd") + ")"
	case r.unanswered:
		return fmt.Sprintf("%d Bootstrap request(s) sent, one not answered: etcd may have been bootstrapped; do not bootstrap again blindly: run talosflash bootstrap again (it refuses when etcd runs) or check %s", r.Attempts, Talosctl("", r.Endpoint, "service", "etcd"))
	case r.Attempts > 0:
		return fmt.Sprintf("%d Bootstrap request(s) sent, each refused as not ready yet: the node was not bootstrapped", r.Attempts)
	}
	return "nothing was sent: the node was not bootstrapped"
}

// interruption returns an *InterruptedError if ctx was cancelled, else nil.
func interruption(ctx context.Context, op, endpoint string, state func() string) error {
	if ctx.Err() == nil {
		return nil
	}
	return &InterruptedError{Op: op, Endpoint: endpoint, State: state(), Err: ctx.Err()}
}
