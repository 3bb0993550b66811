package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/talosflash/talosflash/app/contract"
	"github.com/talosflash/talosflash/app/plan"
	"github.com/talosflash/talosflash/factory"
	"github.com/talosflash/talosflash/node"
)

func init() {
	commandHelp["upgrade"] = help{
		synopsis: "talosflash upgrade --node IP[,IP...] --to VERSION --talosconfig FILE [flags]",
		about: "Upgrade Talos with each node's own installer: the schematic the node booted\n" +
			"(its extension statuses) at the new version,\n" +
			"<factory host>/metal-installer/<schematic>:<version>, checked on the factory\n" +
			"first; never the generic installer, which has no Raspberry Pi overlay and\n" +
			"no extensions. Several nodes upgrade one at a time; each must be back,\n" +
			"running the new version with healthy services, before the next starts.\n" +
			"Kubernetes workloads are not drained (talosctl upgrade --drain does).\n" +
			"When a control plane is among the nodes, etcd is saved first, beside the\n" +
			"talosconfig (--snapshot-dir), as talosflash etcd snapshot does; without it\n" +
			"nothing is upgraded (--no-snapshot goes on without one).",
		example: "talosflash upgrade --node 192.168.1.50 --to v1.14.6 --talosconfig talosconfig --dry-run\n" +
			"talosflash upgrade --node 192.168.1.50,192.168.1.51,192.168.1.52 --to v1.14.6 --talosconfig talosconfig",
		order: []string{"node", "to", "talosconfig", "dry-run", "factory", "context", "timeout", "snapshot-dir", "no-snapshot", "json"},
	}
}

// nodeList collects --node values; each may be a comma-separated list.
type nodeList []string

func (n *nodeList) String() string { return strings.Join(*n, ",") }
func (n *nodeList) Set(v string) error {
	for _, s := range strings.Split(v, ",") {
		if s = strings.TrimSpace(s); s != "" {
			*n = append(*n, s)
		}
	}
	return nil
}

func runUpgrade(ctx context.Context, args []string, env Env) error {
	if upgradeHasInventory(args) {
		return runRollout(ctx, args, env) // the rolling upgrade (rollout.go)
	}
	var (
		nodes           nodeList
		to, factoryURL  string
		tcf             talosconfigFlags
		timeout         time.Duration
		dryRun, jsonOut bool
		snap            snapshotFirstFlags
	)
	fs := newFlagSet("upgrade", env)
	fs.Var(&nodes, "node", "node address (IP or IP:port); repeat or separate with commas to upgrade several, in order")
	fs.Var(&nodes, "n", "shorthand for --node")
	fs.StringVar(&to, "to", "", "Talos version to upgrade to, e.g. v1.14.6")
	tcf.register(fs)
	fs.StringVar(&factoryURL, "factory", factory.DefaultBaseURL, "Image Factory that serves the installers")
	fs.BoolVar(&dryRun, "dry-run", false, "show each node's installer and what would be done; send nothing")
	fs.DurationVar(&timeout, "timeout", node.DefaultWaitTimeout, "how long to wait for each node to come back healthy")
	fs.BoolVar(&jsonOut, "json", false, "print the results as JSON on stdout (progress stays on stderr)")
	snap.register(fs, "beside the talosconfig")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if len(nodes) == 0 || to == "" {
		return usageErrorf("upgrade: --node and --to are required")
	}
	to, err := plan.TalosVersion(to)
	if err != nil {
		return err
	}
	tc, err := tcf.load("upgrade")
	if err != nil {
		return err
	}
	settings, err := loadSettings(plan.Defaults{FactoryURL: factoryURL})
	if err != nil {
		return err
	}
	warnNotAdmin(env, tc)
	p := newAnswerPrinter(jsonOut, env)
	out := p.Human()
	opts := node.UpgradeOptions{
		To: to, Factory: settings.Factory, DryRun: dryRun,
		Wait: node.WaitOptions{Timeout: timeout, Progress: func(s string) { fmt.Fprintf(out, "%s %s\n", time.Now().Format("15:04:05"), s) }},
	}
	c, err := settings.Cluster(0, nodes...)
	if err != nil {
		return err
	}
	// etcd saved before a control plane among the nodes is touched.
	snapErr := snapshotBeforeNodes(ctx, snapshotBefore{members: c.Members, tc: tc, dryRun: dryRun, skip: snap.skip, jsonOut: jsonOut, env: env, out: out,
		path: plan.SnapshotPath(plan.SnapshotDir(snap.dir, tcf.path), tc.Context, time.Now())})
	if snapErr != nil && !dryRun {
		return waitExit(ctx, snapErr)
	}
	planned := map[*node.UpgradeResult]bool{}
	opts.OnPlan = func(r *node.UpgradeResult) {
		planned[r] = true
		describeUpgrade(out, r) // shown before anything is sent
	}
	res, err := plan.UpgradeNodes(ctx, plan.UpgradeJob{Nodes: c.Members, Talosconfig: tc, Options: opts,
		Result: func(r *node.UpgradeResult, err error) {
			switch {
			case dryRun:
				describeDryRun(out, r, err)
			case !planned[r]:
				describeUpgrade(out, r)
			case r.Healthy:
				fmt.Fprintf(out, "  upgraded: running %s with schematic %s, services healthy\n", r.To, r.BootedAfter)
			}
		}})
	answer := upgradesJSON(res.Results)
	if res.Interrupted != "" && len(answer) > 0 {
		answer[len(answer)-1].Interrupted = res.Interrupted // the node it stopped at
	}
	_ = p.Answer(contract.TypeUpgrade, answer, noText)
	if snapErr != nil {
		err = snapErr // the real run stops there first
	}
	return waitExit(ctx, err)
}

// snapshotBefore is upgrade --node's snapshot.
type snapshotBefore struct {
	members      []*plan.Member
	tc           *node.Talosconfig
	path         string
	dryRun, skip bool
	jsonOut      bool
	env          Env
	out          io.Writer
}

// snapshotBeforeNodes saves etcd when a control plane is among the nodes
// (a dry run says where it would); nodes that are all workers, or control
// planes whose etcd waits for the bootstrap, need none. The error is the
// refusal to upgrade without it.
func snapshotBeforeNodes(ctx context.Context, s snapshotBefore) error {
	say := func(format string, args ...any) {
		fmt.Fprintf(s.out, "%s %s\n", time.Now().Format("15:04:05"), fmt.Sprintf(format, args...))
	}
	line := func(o *plan.SnapshotOutcome) {
		if s.jsonOut {
			_ = contract.WriteAnswer(s.env.Stdout, contract.TypeEtcdSnapshot, snapshotJSON(o, s.dryRun))
		}
	}
	if s.skip {
		say("no etcd snapshot is taken (--no-snapshot): if a control plane's upgrade breaks etcd, there is no copy to recover the cluster from")
		line(&plan.SnapshotOutcome{Skipped: "--no-snapshot"})
		return nil
	}
	o, err := plan.TakeSnapshot(ctx, plan.SnapshotJob{Members: s.members, Talosconfig: s.tc, Path: s.path, DryRun: s.dryRun,
		Progress: func(l string) { say("%s", l) }})
	switch {
	case errors.Is(err, node.ErrNotControlPlane) && ctx.Err() == nil:
		return nil // workers only: no etcd among them
	case errors.Is(err, plan.ErrNoEtcdData):
		say("no etcd snapshot: %v", err)
		o.Skipped = err.Error()
		line(o)
		return nil
	case err != nil:
		if ctx.Err() != nil {
			return err
		}
		if s.dryRun {
			say("dry run: would fail: no etcd snapshot can be taken: %v; nothing sent (--no-snapshot to upgrade without one)", err)
		}
		return fmt.Errorf("no etcd snapshot could be taken before a control plane is upgraded: %w; nothing was sent (--no-snapshot to upgrade without one)", err)
	case s.dryRun:
		say("dry run: would save an etcd snapshot of %s to %s before it is upgraded (as talosctl etcd snapshot: FILE.part 0600, fsync, etcd's checks, rename); nothing sent", o.From.Name(), s.path)
	default:
		describeSnapshot(s.out, o)
	}
	line(o)
	return nil
}

// describeDryRun shows a dry run's plan and, when a check of the real
// run failed, that the upgrade would fail and why (never "would pull").
func describeDryRun(w io.Writer, r *node.UpgradeResult, planErr error) {
	if planErr == nil {
		describeUpgrade(w, r)
		return
	}
	fmt.Fprintf(w, "node %s: Talos %s -> %s\n", r.Endpoint, dash(r.From), r.To)
	if r.Booted != nil {
		fmt.Fprintf(w, "  booted:    %s\n", r.Booted)
	}
	if r.Image != "" {
		fmt.Fprintf(w, "  installer: %s\n", r.Image)
	}
	fmt.Fprintf(w, "  dry run: would fail: %s; nothing sent\n", oneLine(planErr.Error()))
}

func describeUpgrade(w interface{ Write([]byte) (int, error) }, r *node.UpgradeResult) {
	fmt.Fprintf(w, "node %s: Talos %s -> %s\n", r.Endpoint, dash(r.From), r.To)
	if r.Booted != nil {
		fmt.Fprintf(w, "  booted:    %s\n", r.Booted)
	}
	switch {
	case r.UpToDate:
		fmt.Fprintf(w, "  already runs %s: nothing to do\n", r.To)
		return
	case r.Image == "":
		return
	}
	digest := ""
	if r.Digest != "" {
		digest = " (" + r.Digest + ")"
	}
	fmt.Fprintf(w, "  installer: %s%s\n", r.Image, digest)
	switch {
	case r.DryRun && r.API == "LifecycleService":
		fmt.Fprintf(w, "  dry run: would pull the installer, run LifecycleService.Upgrade, reboot and wait until healthy; nothing sent\n")
	case r.DryRun:
		fmt.Fprintf(w, "  dry run: would call MachineService.Upgrade (the node reboots) and wait until healthy; nothing sent\n")
	case r.Healthy:
		fmt.Fprintf(w, "  upgraded: running %s with schematic %s, services healthy\n", r.To, r.BootedAfter)
	}
}

type upgradeJSON struct {
	Node        string   `json:"node"`
	From        string   `json:"from"`
	To          string   `json:"to"`
	SchematicID string   `json:"schematic_id,omitempty"`
	Extensions  []string `json:"extensions"`
	Installer   string   `json:"installer,omitempty"`
	Digest      string   `json:"digest,omitempty"`
	API         string   `json:"api,omitempty"`
	UpToDate    bool     `json:"up_to_date"`
	DryRun      bool     `json:"dry_run"`
	Rebooted    bool     `json:"rebooted"`
	Healthy     bool     `json:"healthy"`
	// What was sent and done: the furthest step reached, what the node
	// certainly received, and (Ctrl-C) what state it was left in.
	Phase           string `json:"phase,omitempty"`
	InstallerPulled bool   `json:"installer_pulled"`
	InstallerRun    bool   `json:"installer_run"`
	RebootRequested bool   `json:"reboot_requested"`
	Interrupted     string `json:"interrupted,omitempty"`
}

func upgradesJSON(rs []*node.UpgradeResult) []upgradeJSON {
	out := []upgradeJSON{}
	for _, r := range rs {
		j := upgradeJSON{Node: r.Endpoint, From: r.From, To: r.To, Installer: r.Image, Digest: r.Digest, API: r.API,
			UpToDate: r.UpToDate, DryRun: r.DryRun, Rebooted: r.Rebooted, Healthy: r.Healthy, Extensions: []string{},
			Phase: r.Phase, InstallerPulled: r.InstallerPulled, InstallerRun: r.InstallerRun, RebootRequested: r.RebootRequested}
		if r.Booted != nil {
			j.SchematicID = r.Booted.SchematicID
			j.Extensions = nonNil(r.Booted.Extensions)
		}
		out = append(out, j)
	}
	return out
}
