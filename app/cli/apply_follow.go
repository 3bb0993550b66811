package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/talosflash/talosflash/app/contract"
	"github.com/talosflash/talosflash/app/plan"
	"github.com/talosflash/talosflash/factory"
	"github.com/talosflash/talosflash/imaging/devices"
	"github.com/talosflash/talosflash/inventory"
	"github.com/talosflash/talosflash/node"
)

func init() {
	h := commandHelp["apply"]
	h.about += "\n\nWith --talosconfig (or $TALOSCONFIG): after the configs, follow each node\n" +
		"(as `status` reads it) until it runs its config, or until it is diagnosed\n" +
		"stuck (e.g. an extension service waiting for its ExtensionServiceConfig,\n" +
		"with the time left before Talos reboots it), bounded by --wait; a control\n" +
		"plane is followed until etcd waits for the bootstrap. Exit 7 when a node\n" +
		"is stuck, 3 when --wait runs out. With --bootstrap the control plane is\n" +
		"followed again after it, then `talosflash kubeconfig` is the next step."
	h.example += "\ntalosflash apply --inventory talosflash.yaml --talosconfig talos/talosconfig --bootstrap"
	commandHelp["apply"] = h
	placeholders["interval"] = "DURATION"
}

// followFlags are apply --inventory's flags for following the nodes.
type followFlags struct{ every time.Duration }

func (f *followFlags) register(fs *flag.FlagSet) {
	fs.DurationVar(&f.every, "interval", 5*time.Second, "with --inventory --talosconfig: time between reads of each node while following it")
}

// followStep follows the nodes just configured (bootstrapped: after the
// bootstrap, only the control planes, until they run). The error is the
// first stuck node's (exit 7), else a timeout (exit 3).
func followStep(ctx context.Context, env Env, f *applyFlags, inf *applyInventoryFlags, tc *node.Talosconfig,
	profiles []factory.Profile, nodes []inventory.Node, bootstrapped bool) error {
	if len(nodes) == 0 {
		return nil
	}
	var targets []plan.StatusTarget
	for _, n := range nodes {
		j := plan.NodeApplyJob{Node: n, Port: inf.port}
		targets = append(targets, plan.StatusTarget{Hostname: n.Hostname, Role: n.Role, Profile: n.Profile, Endpoint: j.Endpoint()})
	}
	what := "following each node until it runs its config"
	if bootstrapped {
		what = "following the control plane until it runs after the bootstrap"
	}
	fmt.Fprintf(env.Stderr, "%s (at most %s; Ctrl-C stops following, not the nodes)\n", what, plan.Minutes(inf.wait))
	out := contract.NewWriter(env.Stdout)
	emit := func(ns plan.NodeStatus) {
		now := time.Now()
		fmt.Fprintln(env.Stderr, followLine(ns, now))
		if f.jsonOut {
			_ = out.Answer(contract.TypeNodeStatus, nodeStatusJSON(ns, now)) // write errors are dropped (Writer)
		}
	}
	results, err := plan.Follow(ctx, targets, plan.FollowOptions{
		WatchOptions: plan.WatchOptions{Check: plan.StatusCheck{Profiles: profiles}, Interval: inf.follow.every,
			CallTimeout: f.timeout, Talosconfig: tc},
		Wait: inf.wait, Bootstrapped: bootstrapped,
	}, emit)
	if err != nil {
		return err // interrupted, or a node's address that cannot be dialled
	}
	var stuck, late error
	for _, r := range results {
		line := fmt.Sprintf("%s: %s", r.Status.Target.Name(), r.Message)
		if f.jsonOut {
			fmt.Fprintln(env.Stderr, line)
			_ = out.Answer(contract.TypeFollow, followJSON(r, bootstrapped))
		} else {
			fmt.Fprintln(env.Stdout, line)
		}
		switch r.Outcome {
		case plan.FollowStuck:
			if stuck == nil {
				stuck = withCode(contract.ExitConfig, errors.New(r.Message))
			}
		case plan.FollowTimeout:
			if late == nil {
				late = withCode(contract.ExitNetwork, errors.New(r.Message))
			}
		}
	}
	if stuck != nil {
		return stuck
	}
	return late
}

// followLine is one change of a followed node, for stderr.
func followLine(ns plan.NodeStatus, now time.Time) string {
	head := now.Format("15:04:05") + " " + ns.Target.Name() + ": "
	st := ns.Status
	if st == nil {
		return head + "not answering (leaving maintenance mode, or rebooting)"
	}
	s := head + st.Stage
	if st.Ready {
		s += ", ready"
	} else {
		s += ", not ready"
	}
	for _, d := range ns.Diagnoses {
		if d.Severity != "info" {
			return s + ": " + d.Message
		}
	}
	if len(st.Unmet) > 0 {
		var parts []string
		for _, u := range st.Unmet {
			parts = append(parts, u.Name+": "+u.Reason)
		}
		s += " (" + strings.Join(parts, "; ") + ")"
	}
	return s
}

// followJSONLine is one `follow` line (docs/JSON.md).
type followJSONLine struct {
	Hostname     string          `json:"hostname"`
	Endpoint     string          `json:"endpoint"`
	Role         string          `json:"role,omitempty"`
	Outcome      string          `json:"outcome"`
	Message      string          `json:"message"`
	Stage        string          `json:"stage,omitempty"`
	Ready        bool            `json:"ready"`
	Bootstrapped bool            `json:"after_bootstrap"`
	Diagnoses    []diagnosisJSON `json:"diagnoses"`
}

func followJSON(r plan.FollowResult, bootstrapped bool) followJSONLine {
	ns := r.Status
	j := followJSONLine{Hostname: ns.Target.Hostname, Endpoint: ns.Target.Endpoint, Role: ns.Target.Role, Outcome: r.Outcome,
		Message: r.Message, Bootstrapped: bootstrapped, Diagnoses: []diagnosisJSON{}}
	if ns.Status != nil {
		j.Stage, j.Ready = ns.Status.Stage, ns.Status.Ready
	}
	for _, d := range ns.Diagnoses {
		j.Diagnoses = append(j.Diagnoses, diagnosisJSON{Severity: d.Severity, Code: d.Code, Message: d.Message, Fix: d.Fix,
			RebootInSeconds: int64(d.RebootIn.Seconds())})
	}
	return j
}

// kubeconfigNext is the step after the bootstrap.
func kubeconfigNext(w io.Writer, inf *applyInventoryFlags) {
	tc := inf.tc.path
	if tc == "" {
		tc = "talos/talosconfig"
	}
	fmt.Fprintf(w, "next: talosflash kubeconfig --inventory %s --talosconfig %s (merges the cluster's admin kubeconfig into your kubeconfig), then `talosflash status --inventory %s --talosconfig %s` shows the Kubernetes nodes\n",
		devices.ShellJoin([]string{inf.inventory}), devices.ShellJoin([]string{tc}), devices.ShellJoin([]string{inf.inventory}), devices.ShellJoin([]string{tc}))
}
