package cli

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/talosflash/talosflash/app/contract"
	"github.com/talosflash/talosflash/app/plan"
	"github.com/talosflash/talosflash/node"
)

func init() {
	commandHelp["status"] = help{
		synopsis: "talosflash status (--inventory FILE [--hostname NAME ...] | --node IP ...) --talosconfig FILE [--watch] [flags]",
		about: "Ask each configured node how it is (over its API, with the talosconfig's\n" +
			"client certificate): stage and readiness with the unmet conditions, its\n" +
			"services, Talos version, the image it booted against its role's, time in\n" +
			"the stage, and for control planes etcd. A node stuck in booting is\n" +
			"diagnosed, e.g. an extension service waiting for its ExtensionServiceConfig\n" +
			"with the time left before Talos reboots it (BootTimeout, 70 min).\n" +
			"--watch reads again every --interval and prints a node when it changes\n" +
			"(reboots are seen as a new boot ID), until Ctrl-C or --for.\n" +
			"Exit 3 when a node does not answer, 7 when one is diagnosed with an ERROR\n" +
			"(the last read, with --watch).",
		example: "talosflash status --inventory talosflash.yaml --talosconfig talos/talosconfig\n" +
			"talosflash status --node 192.168.1.51 --talosconfig talosconfig --watch\n" +
			"talosflash status --inventory talosflash.yaml --talosconfig talosconfig --watch --json",
		order: []string{"inventory", "hostname", "node", "talosconfig", "context", "watch", "interval", "for", "json"},
	}
	placeholders["interval"] = "DURATION"
	placeholders["for"] = "DURATION"
}

type statusFlags struct {
	inventory, profiles string
	hostnames, nodes    deviceList
	port                int
	tc                  talosconfigFlags
	watch, jsonOut      bool
	interval, dur       time.Duration
	callTimeout         time.Duration
	kube                kubeFlags // the Kubernetes view (status_kube.go)

}

func runStatus(ctx context.Context, args []string, env Env) error {
	var f statusFlags
	fs := newFlagSet("status", env)
	fs.StringVar(&f.inventory, "inventory", "", "cluster inventory (talosflash.yaml): every node (or each --hostname) at its address")
	fs.Var(&f.hostnames, "hostname", "with --inventory: only this node (repeatable)")
	fs.Var(&f.nodes, "node", "node address (IP or IP:port), repeatable; instead of --inventory")
	fs.Var(&f.nodes, "n", "shorthand for --node")
	fs.StringVar(&f.profiles, "profiles", "", "custom profiles YAML (to recognise the booted images)")
	fs.IntVar(&f.port, "port", node.DefaultPort, "with --inventory: the nodes' Talos API port")
	f.tc.register(fs)
	fs.BoolVar(&f.watch, "watch", false, "keep reading; print a node again when it changes")
	fs.DurationVar(&f.interval, "interval", 5*time.Second, "with --watch: time between reads")
	fs.DurationVar(&f.dur, "for", 0, "with --watch: stop after this long (default: until interrupted)")
	fs.DurationVar(&f.callTimeout, "timeout", node.DefaultCallTimeout, "bound of each read of a node")
	fs.BoolVar(&f.jsonOut, "json", false, "one JSON line per node (per change with --watch) on stdout")
	f.kube.register(fs)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	switch {
	case f.inventory == "" && len(f.nodes) == 0:
		return usageErrorf("status: give --inventory FILE or --node IP")
	case f.inventory != "" && len(f.nodes) > 0:
		return usageErrorf("status: --inventory gives the nodes' addresses: drop --node")
	case len(f.hostnames) > 0 && f.inventory == "":
		return usageErrorf("status: --hostname needs --inventory FILE")
	case f.interval <= 0:
		return usageErrorf("status: --interval %s: want a positive duration", f.interval)
	case f.port <= 0 || f.port > 65535:
		return usageErrorf("status: --port %d: want 1-65535", f.port)
	}
	tc, err := f.tc.load("status")
	if err != nil {
		return err
	}
	c, targets, err := statusTargets(&f)
	if err != nil {
		return err
	}
	p := newStatusPrinter(f.jsonOut, f.watch, env)
	round, err := startKubeView(&f, c, targets, p)
	if err != nil {
		return err
	}
	last, err := plan.Watch(ctx, targets, plan.WatchOptions{
		Check: plan.StatusCheck{Profiles: c.Profiles}, Watch: f.watch, Interval: f.interval, For: f.dur,
		CallTimeout: f.callTimeout, Talosconfig: tc, Round: round,
	}, p.NodeStatus)
	if err != nil {
		return err
	}
	return statusExit(last)
}

// statusExit is status' verdict on the last reads: a node that does not
// answer is exit 3; one diagnosed with an ERROR (stuck waiting for an
// extension's config, a failed service, etcd unhealthy) fails the checks,
// exit 7, so a script does not take a printed ERROR for a success.
func statusExit(last []plan.NodeStatus) error {
	for _, ns := range last {
		if ns.Status == nil {
			return withCode(contract.ExitNetwork, fmt.Errorf("%s does not answer: %v", ns.Target.Name(), ns.Err))
		}
	}
	for _, ns := range last {
		for _, d := range ns.Diagnoses {
			if d.Severity == "error" {
				return withCode(contract.ExitConfig, fmt.Errorf("%s: %s", ns.Target.Name(), d.Message))
			}
		}
	}
	return nil
}

// statusTargets are the cluster and the members to ask: the inventory's
// (or those named), else the --node addresses; the cluster's profiles
// recognise their images (--profiles, else the inventory's).
func statusTargets(f *statusFlags) (*plan.Cluster, []*plan.Member, error) {
	_, c, err := loadCluster(plan.Defaults{Inventory: f.inventory, ProfilesFile: f.profiles}, f.port, f.nodes...)
	if err != nil {
		return nil, nil, err
	}
	targets, err := c.Select(f.hostnames)
	if err != nil {
		return nil, nil, err
	}
	return c, targets, nil
}

// statusPrinter shows status' job (plan.Watch): each node's status and
// the Kubernetes view, as text or JSON lines on stdout.
type statusPrinter interface {
	NodeStatus(ns plan.NodeStatus)
	Kube(v plan.KubeView)
}

func newStatusPrinter(jsonOut, watch bool, env Env) statusPrinter {
	if jsonOut {
		return statusJSON{out: contract.NewWriter(env.Stdout)}
	}
	return statusText{w: env.Stdout, watch: watch}
}

// statusText prints each read for people (times with --watch).
type statusText struct {
	w     io.Writer
	watch bool
}

func (p statusText) NodeStatus(ns plan.NodeStatus) { renderNodeStatus(p.w, ns, time.Now(), p.watch) }
func (p statusText) Kube(v plan.KubeView)          { renderKube(p.w, v, time.Now(), p.watch) }

// statusJSON prints node_status and kubernetes lines (docs/JSON.md);
// write errors are dropped (contract.Writer).
type statusJSON struct{ out *contract.Writer }

func (p statusJSON) NodeStatus(ns plan.NodeStatus) {
	_ = p.out.Answer(contract.TypeNodeStatus, nodeStatusJSON(ns, time.Now()))
}

func (p statusJSON) Kube(v plan.KubeView) {
	_ = p.out.Answer(contract.TypeKubernetes, kubernetesJSON(v, time.Now()))
}

// renderNodeStatus is the text printer: a headline, the image, services,
// etcd, then each diagnosis with its fix.
func renderNodeStatus(w io.Writer, ns plan.NodeStatus, now time.Time, watch bool) {
	name := ns.Target.Name()
	prefix := ""
	if watch {
		prefix = now.Format("15:04:05") + " "
	}
	st := ns.Status
	if st == nil {
		fmt.Fprintf(w, "%s%s (%s): not answering\n", prefix, name, ns.Target.Endpoint)
	} else {
		head := []string{st.Stage}
		if st.Ready {
			head = append(head, "ready")
		} else {
			head = append(head, "not ready")
		}
		if d := ns.StageFor(now); d > 0 {
			head = append(head, "in "+st.Stage+" for "+plan.Minutes(d)+" ("+sinceWord(ns.StageSinceSource)+")")
		}
		fmt.Fprintf(w, "%s%s (%s): %s · Talos %s", prefix, name, st.Endpoint, strings.Join(head, ", "), dash(st.TalosVersion))
		if st.Uptime > 0 {
			fmt.Fprintf(w, " · up %s", plan.Minutes(st.Uptime))
		}
		if st.BootID != "" {
			fmt.Fprintf(w, " · boot %s", shortBoot(st.BootID))
		}
		if ns.Reboots > 0 {
			fmt.Fprintf(w, " · %d reboot(s) seen", ns.Reboots)
		}
		fmt.Fprintln(w)
		for _, u := range st.Unmet {
			fmt.Fprintf(w, "  unmet: %s: %s\n", u.Name, u.Reason)
		}
		fmt.Fprintf(w, "  image: %s\n", ns.ImageText())
		fmt.Fprintf(w, "  services: %s\n", strings.Join(ns.ServiceTexts(), ", "))
		if st.EtcdMembers != nil {
			var ms []string
			for _, m := range st.EtcdMembers {
				s := m.Hostname + " " + m.ID
				if m.Learner {
					s += " (learner)"
				}
				ms = append(ms, s)
			}
			fmt.Fprintf(w, "  etcd members: %s\n", strings.Join(ms, ", "))
		}
		for _, p := range st.Problems {
			fmt.Fprintf(w, "  not read: %s\n", p)
		}
	}
	for _, d := range ns.Diagnoses {
		fmt.Fprintf(w, "  %s: %s\n", strings.ToUpper(d.Severity), d.Message)
		if d.Fix != "" {
			fmt.Fprintf(w, "    fix: %s\n", d.Fix)
		}
	}
}

func sinceWord(src string) string {
	switch src {
	case plan.SinceObserved:
		return "seen changing"
	case plan.SinceServices:
		return "since its services started, node clock"
	case plan.SinceBoot:
		return "since boot"
	}
	return src
}

func shortBoot(id string) string {
	if len(id) > 8 {
		return id[:8] + "…"
	}
	return id
}

// nodeStatusLine is one `node_status` line (docs/JSON.md).
type nodeStatusLine struct {
	Hostname         string            `json:"hostname,omitempty"`
	Endpoint         string            `json:"endpoint"`
	Role             string            `json:"role,omitempty"`
	Profile          string            `json:"profile,omitempty"`
	Time             string            `json:"time"`
	Reachable        bool              `json:"reachable"`
	Error            string            `json:"error,omitempty"`
	TalosVersion     string            `json:"talos_version,omitempty"`
	Stage            string            `json:"stage,omitempty"`
	Ready            bool              `json:"ready"`
	UnmetConditions  []conditionJSON   `json:"unmet_conditions"`
	Services         []serviceJSON     `json:"services"`
	Booted           *bootedStatusJSON `json:"booted"`
	MatchesProfile   string            `json:"matches_profile,omitempty"`
	ImageOK          *bool             `json:"image_ok"`
	BootID           string            `json:"boot_id,omitempty"`
	UptimeSeconds    int64             `json:"uptime_seconds,omitempty"`
	StageSince       string            `json:"stage_since,omitempty"`
	StageSinceSource string            `json:"stage_since_source,omitempty"`
	StageSeconds     int64             `json:"stage_seconds,omitempty"`
	Reboots          int               `json:"reboots"`
	Etcd             *etcdJSON         `json:"etcd,omitempty"`
	Problems         []string          `json:"problems,omitempty"`
	Diagnoses        []diagnosisJSON   `json:"diagnoses"`
	Healthy          bool              `json:"healthy"`
}

type conditionJSON struct {
	Name   string `json:"name"`
	Reason string `json:"reason"`
}

type serviceJSON struct {
	ID            string `json:"id"`
	State         string `json:"state"`
	Health        string `json:"health"`
	HealthMessage string `json:"health_message,omitempty"`
	LastEvent     string `json:"last_event,omitempty"`
}

type bootedStatusJSON struct {
	SchematicID string   `json:"schematic_id,omitempty"`
	Extensions  []string `json:"extensions"`
}

type etcdJSON struct {
	Members []etcdMemberJSON `json:"members"`
	Error   string           `json:"error,omitempty"`
}

type etcdMemberJSON struct {
	ID       string   `json:"id"`
	Hostname string   `json:"hostname"`
	PeerURLs []string `json:"peer_urls"`
	Learner  bool     `json:"learner"`
}

type diagnosisJSON struct {
	Severity        string `json:"severity"`
	Code            string `json:"code"`
	Message         string `json:"message"`
	Fix             string `json:"fix,omitempty"`
	RebootInSeconds int64  `json:"reboot_in_seconds,omitempty"`
}

func nodeStatusJSON(ns plan.NodeStatus, now time.Time) nodeStatusLine {
	j := nodeStatusLine{Hostname: ns.Target.Hostname, Endpoint: ns.Target.Endpoint.String(), Role: ns.Target.Role.String(), Profile: ns.Target.ProfileName(),
		Time: now.UTC().Format(time.RFC3339), UnmetConditions: []conditionJSON{}, Services: []serviceJSON{},
		Reboots: ns.Reboots, ImageOK: ns.ImageOK, MatchesProfile: ns.Match.Profile, Diagnoses: []diagnosisJSON{}, Healthy: ns.Healthy()}
	if !ns.StageSince.IsZero() {
		j.StageSince, j.StageSinceSource = ns.StageSince.UTC().Format(time.RFC3339), ns.StageSinceSource
		j.StageSeconds = int64(ns.StageFor(now).Seconds())
	}
	for _, d := range ns.Diagnoses {
		j.Diagnoses = append(j.Diagnoses, diagnosisJSON{Severity: d.Severity, Code: d.Code, Message: d.Message, Fix: d.Fix,
			RebootInSeconds: int64(d.RebootIn.Seconds())})
	}
	st := ns.Status
	if st == nil {
		j.Error = oneLine(fmt.Sprint(ns.Err))
		return j
	}
	j.Reachable, j.Endpoint = true, st.Endpoint
	j.TalosVersion, j.Stage, j.Ready, j.BootID = st.TalosVersion, st.Stage, st.Ready, st.BootID
	j.UptimeSeconds, j.Problems = int64(st.Uptime.Seconds()), st.Problems
	for _, u := range st.Unmet {
		j.UnmetConditions = append(j.UnmetConditions, conditionJSON{u.Name, u.Reason})
	}
	for _, s := range st.Services {
		j.Services = append(j.Services, serviceJSON{ID: s.ID, State: s.State, Health: s.Health, HealthMessage: s.HealthMessage, LastEvent: s.LastEvent})
	}
	if b := st.Booted; b != nil {
		j.Booted = &bootedStatusJSON{SchematicID: b.SchematicID, Extensions: append([]string{}, b.Extensions...)}
	}
	if st.EtcdMembers != nil || st.EtcdError != "" {
		j.Etcd = &etcdJSON{Members: []etcdMemberJSON{}, Error: st.EtcdError}
		for _, m := range st.EtcdMembers {
			j.Etcd.Members = append(j.Etcd.Members, etcdMemberJSON{ID: m.ID, Hostname: m.Hostname, PeerURLs: append([]string{}, m.PeerURLs...), Learner: m.Learner})
		}
	}
	return j
}
