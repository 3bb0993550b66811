package cli

import (
	"flag"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/talosflash/talosflash/app/plan"
	"github.com/talosflash/talosflash/imaging/devices"
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
	j := followJSONLine{Hostname: ns.Target.Hostname, Endpoint: ns.Target.Endpoint.String(), Role: ns.Target.Role.String(), Outcome: r.Outcome,
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
