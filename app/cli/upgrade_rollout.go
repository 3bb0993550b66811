package cli

import (
	"context"
	"flag"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/talosflash/talosflash/app/contract"
	"github.com/talosflash/talosflash/app/plan"
	"github.com/talosflash/talosflash/factory"
	"github.com/talosflash/talosflash/kube"
	"github.com/talosflash/talosflash/node"
)

func init() {
	h := commandHelp["upgrade"] // upgrade.go's (this file's init runs after it)
	h.about = strings.Replace(h.about, "Kubernetes workloads are not drained (talosctl upgrade --drain does).",
		"Kubernetes workloads are drained only with --inventory (below).", 1)
	h.synopsis += "\n       talosflash upgrade --inventory FILE --talosconfig FILE [--to V] [flags]"
	h.about += "\n\nWith --inventory: a rolling upgrade of the cluster, one node at a time, control\n" +
		"planes first, then workers, each with its role's installer: etcd healthy with\n" +
		"every member before a control plane goes down; the installer pulled and run;\n" +
		"the node cordoned and drained through the Kubernetes API (PodDisruptionBudgets\n" +
		"respected, DaemonSet pods left, bounded by --drain-timeout); the reboot; then\n" +
		"wait until it runs the new version with its role's schematic, ready, its\n" +
		"Kubernetes node Ready; uncordon. The first failure stops it, saying every\n" +
		"node's state and what was sent. Before the first control plane moves,\n" +
		"etcd is saved beside the inventory (--snapshot-dir), as talosflash etcd\n" +
		"snapshot does; without it the upgrade does not start (--no-snapshot goes\n" +
		"on without one). A node whose new version fails to boot comes back on\n" +
		"its previous one (Talos' own fallback): said, uncordoned, and the\n" +
		"rollout stops. --dry-run checks each installer on the registry and prints\n" +
		"the plan, and where the snapshot would go; nothing is sent."
	h.example += "\ntalosflash upgrade --inventory talosflash.yaml --talosconfig talos/talosconfig --to v1.14.6 --dry-run"
	h.order = append(h.order, "inventory", "kubeconfig", "drain-timeout")
	h.moreTitle = "With --inventory, also:"
	h.more = func() *flag.FlagSet { var r rolloutFlags; return r.flagSet(Env{}) }
	commandHelp["upgrade"] = h
}

// upgradeHasInventory: upgrade --inventory is the rolling upgrade.
func upgradeHasInventory(args []string) bool {
	for _, a := range args {
		if a == "--" {
			return false
		}
		n := strings.TrimLeft(a, "-")
		if strings.HasPrefix(a, "-") && (n == "inventory" || strings.HasPrefix(n, "inventory=")) {
			return true
		}
	}
	return false
}

// rolloutFlags are upgrade --inventory's flags.
type rolloutFlags struct {
	inv, to, factoryURL, profiles string
	port                          int
	tcf                           talosconfigFlags
	kf                            kubeFlags
	timeout, drainTimeout, every  time.Duration
	dryRun, jsonOut               bool
	snap                          snapshotFirstFlags
}

// flagSet binds the rolling upgrade's flags to r (upgrade -h lists those
// the per-node upgrade lacks).
func (r *rolloutFlags) flagSet(env Env) *flag.FlagSet {
	fs := newFlagSet("upgrade", env)
	fs.StringVar(&r.inv, "inventory", "", "cluster inventory (talosflash.yaml): upgrade every node, one at a time")
	fs.StringVar(&r.to, "to", "", "Talos version to upgrade to (default: the inventory's talosVersion)")
	fs.StringVar(&r.factoryURL, "factory", factory.DefaultBaseURL, "Image Factory that serves the installers (default: the inventory's)")
	fs.StringVar(&r.profiles, "profiles", "", "custom profiles YAML (as the inventory uses)")
	fs.IntVar(&r.port, "port", node.DefaultPort, "the nodes' Talos API port")
	r.tcf.register(fs)
	r.kf.register(fs)
	fs.DurationVar(&r.timeout, "timeout", node.DefaultWaitTimeout, "how long to wait for each node to come back")
	fs.DurationVar(&r.drainTimeout, "drain-timeout", kube.DefaultDrainTimeout, "how long each drain may take (a PodDisruptionBudget can hold it)")
	fs.DurationVar(&r.every, "interval", node.DefaultPollEvery, "between reads of a node that is coming back")
	fs.BoolVar(&r.dryRun, "dry-run", false, "print the plan, checking each installer on the registry; send nothing")
	r.snap.register(fs, "beside the inventory")
	fs.BoolVar(&r.jsonOut, "json", false, "one rollout_node JSON line per node on stdout (progress on stderr)")
	return fs
}

func runRollout(ctx context.Context, args []string, env Env) error {
	var r rolloutFlags
	fs := r.flagSet(env)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	settings, err := loadSettings(plan.Defaults{Inventory: r.inv, ProfilesFile: r.profiles, FactoryURL: r.factoryURL})
	if err != nil {
		return err
	}
	in := settings.Inventory
	if r.to == "" {
		r.to = in.TalosVersion
	}
	switch {
	case r.to == "":
		return usageErrorf("upgrade: --to VERSION is required (the inventory has no talosVersion)")
	case r.port <= 0 || r.port > 65535:
		return usageErrorf("upgrade: --port %d: want 1-65535", r.port)
	}
	if r.to, err = plan.TalosVersion(r.to); err != nil {
		return err
	}
	tc, err := r.tcf.load("upgrade")
	if err != nil {
		return err
	}
	warnNotAdmin(env, tc)
	c, err := settings.Cluster(r.port)
	if err != nil {
		return err
	}
	p := newRolloutPrinter(r.jsonOut, r.dryRun, env)
	job := plan.RolloutJob{Nodes: c.Members, CNI: c.CNI(), To: r.to, Talosconfig: tc, Factory: settings.Factory, DryRun: r.dryRun,
		Snapshot: plan.SnapshotPath(plan.SnapshotDir(r.snap.dir, in.Path), in.Cluster, time.Now()), NoSnapshot: r.snap.skip,
		Wait:   node.WaitOptions{Timeout: r.timeout, Every: r.every},
		Drain:  kube.DrainOptions{Timeout: r.drainTimeout},
		Follow: plan.FollowOptions{Wait: r.timeout, WatchOptions: plan.WatchOptions{Interval: r.every}},
		Event:  p.Event,
	}
	if !r.dryRun {
		v, err := openKubeView(r.kf, c.Members, nil, 10*time.Second)
		if err != nil {
			return err
		}
		if v != nil {
			job.Kube = v.access
		}
	}
	if r.dryRun {
		p.Plan(r.to)
	}
	res, err := plan.Rollout(ctx, job)
	if err != nil && res != nil && !r.dryRun {
		p.Stopped(res)
	}
	return waitExit(ctx, err)
}

// rolloutPrinter shows `upgrade --inventory` (plan.Rollout).
type rolloutPrinter interface {
	// Plan heads a dry run's plan.
	Plan(to string)
	// Event is what the job reports: each step, and each node's end.
	Event(ev plan.RolloutEvent)
	// Stopped is every node's state after a failure stopped the rollout.
	Stopped(res *plan.RolloutResult)
}

func newRolloutPrinter(jsonOut, dryRun bool, env Env) rolloutPrinter {
	if jsonOut {
		return rolloutJSONPrinter{rolloutText{w: env.Stderr}, env.Stdout, dryRun}
	}
	return rolloutText{w: env.Stdout}
}

// rolloutText is upgrade --inventory's text printer: everything on stdout.
type rolloutText struct{ w io.Writer }

func (p rolloutText) Plan(to string) {
	fmt.Fprintf(p.w, "rolling upgrade plan to Talos %s (dry run: nothing is sent), in this order:\n", to)
}

func (p rolloutText) Event(ev plan.RolloutEvent) { printRolloutEvent(p.w, ev) }

func (p rolloutText) Stopped(res *plan.RolloutResult) {
	fmt.Fprintln(p.w, "the rolling upgrade stopped; every node's state:")
	for _, n := range res.Nodes {
		fmt.Fprintf(p.w, "  %s (%s): %s\n", n.Hostname, n.Role, n.State)
	}
}

// rolloutJSONPrinter is its JSON printer: a rollout_node line per node
// when its part ends, then one per node not reached (docs/JSON.md); the
// text on stderr.
type rolloutJSONPrinter struct {
	rolloutText
	out    io.Writer
	dryRun bool
}

func (p rolloutJSONPrinter) Event(ev plan.RolloutEvent) {
	p.rolloutText.Event(ev)
	if ev.Step == plan.StepSnapshot && ev.Snapshot != nil {
		_ = contract.WriteAnswer(p.out, contract.TypeEtcdSnapshot, snapshotJSON(ev.Snapshot, p.dryRun))
	}
	if ev.Node != nil {
		_ = contract.WriteAnswer(p.out, contract.TypeRolloutNode, rolloutJSON(ev.Node, p.dryRun))
	}
}

func (p rolloutJSONPrinter) Stopped(res *plan.RolloutResult) {
	p.rolloutText.Stopped(res)
	for _, n := range res.Nodes {
		if n != res.Failed && n.Step == plan.StepUntouched {
			_ = contract.WriteAnswer(p.out, contract.TypeRolloutNode, rolloutJSON(n, p.dryRun))
		}
	}
}

func printRolloutEvent(w io.Writer, ev plan.RolloutEvent) {
	ts := time.Now().Format("15:04:05")
	switch {
	case ev.Step == plan.StepRolledBack && ev.Node == nil:
		// "worker-1 rolled back to v1.14.4: its upgrade failed (...)"
		fmt.Fprintf(w, "%s %s %s\n", ts, ev.Hostname, ev.Text)
	case ev.Node != nil:
		fmt.Fprintf(w, "%s %s: %s\n", ts, ev.Hostname, ev.Text)
	case ev.Text != "":
		fmt.Fprintf(w, "%s %s: %s\n", ts, ev.Hostname, ev.Text)
	}
}

type rolloutLine struct {
	Hostname  string   `json:"hostname"`
	Role      string   `json:"role"`
	Endpoint  string   `json:"endpoint"`
	Step      string   `json:"step"`
	State     string   `json:"state"`
	DryRun    bool     `json:"dry_run"`
	From      string   `json:"from,omitempty"`
	To        string   `json:"to,omitempty"`
	Installer string   `json:"installer,omitempty"`
	API       string   `json:"api,omitempty"`
	Schematic string   `json:"schematic_id,omitempty"`
	Phase     string   `json:"phase,omitempty"`
	Evicted   []string `json:"evicted"`
	Skipped   []string `json:"skipped"`
	Cordoned  bool     `json:"cordoned"`
	Error     string   `json:"error,omitempty"`
}

func rolloutJSON(n *plan.NodeRollout, dryRun bool) rolloutLine {
	l := rolloutLine{Hostname: n.Hostname, Role: n.Role.String(), Endpoint: n.Endpoint.String(), Step: n.Step, State: n.State, DryRun: dryRun,
		Evicted: []string{}, Skipped: []string{}, Cordoned: n.Cordon}
	if u := n.Upgrade; u != nil {
		l.From, l.To, l.Installer, l.API, l.Schematic, l.Phase = u.From, u.To, u.Image, u.API, u.SchematicID, u.Phase
	}
	if d := n.Drained; d != nil {
		l.Evicted, l.Skipped = nonNil(d.Evicted), nonNil(d.Skipped)
	}
	if n.Err != nil {
		l.Error = n.Err.Error()
	}
	return l
}
