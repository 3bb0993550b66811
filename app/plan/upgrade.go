package plan

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/talosflash/talosflash/node"
)

// UpgradeJob is `upgrade --node`: the nodes typed, each upgraded in turn
// to the installer of the schematic it booted (node.Upgrade), the first
// failure stopping the rest; with Options.DryRun every node is planned
// (node.PlanUpgrade, the real run's first step) and nothing is sent, even
// after one fails to plan.
type UpgradeJob struct {
	Nodes       []*Member
	Talosconfig *node.Talosconfig
	// Options: To, Factory, DryRun, Wait, OnPlan.
	Options node.UpgradeOptions
	// Result gets each node's result as it ends (a dry run's too).
	Result func(r *node.UpgradeResult, err error)
}

// UpgradeOutcome is every node's result, in order.
type UpgradeOutcome struct {
	Results []*node.UpgradeResult
	// Interrupted is what was and was not sent at the node a cancel
	// stopped ("" none).
	Interrupted string
}

// UpgradeNodes runs the job. The error is the first node's that failed
// (a dry run's says how many more would fail), with the nodes not reached.
func UpgradeNodes(ctx context.Context, job UpgradeJob) (*UpgradeOutcome, error) {
	out := &UpgradeOutcome{}
	report := func(r *node.UpgradeResult, err error) {
		if r == nil {
			return
		}
		out.Results = append(out.Results, r)
		if job.Result != nil {
			job.Result(r, err)
		}
	}
	if job.Options.DryRun {
		var errs []error
		for _, m := range job.Nodes {
			r, err := node.PlanUpgrade(ctx, m.Endpoint.String(), job.Talosconfig, job.Options)
			report(r, err)
			if err != nil {
				errs = append(errs, err)
			}
		}
		switch len(errs) {
		case 0:
			return out, nil
		case 1:
			return out, errs[0]
		}
		var more []string
		for _, e := range errs[1:] {
			more = append(more, e.Error())
		}
		return out, fmt.Errorf("%w (and %d more: %s)", errs[0], len(errs)-1, strings.Join(more, "; "))
	}
	for i, m := range job.Nodes {
		r, err := node.Upgrade(ctx, m.Endpoint.String(), job.Talosconfig, job.Options)
		report(r, err)
		if err == nil {
			continue
		}
		var ie *node.InterruptedError
		if errors.As(err, &ie) && r != nil {
			out.Interrupted = ie.State
		}
		if rest := job.Nodes[i+1:]; len(rest) > 0 || r == nil {
			if r == nil {
				rest = job.Nodes[i:]
			}
			var names []string
			for _, n := range rest {
				names = append(names, n.Endpoint.String())
			}
			err = fmt.Errorf("%w; not upgraded: %s", err, strings.Join(names, ", "))
		}
		return out, err
	}
	return out, nil
}
