package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"time"

	"github.com/talosflash/talosflash/app/contract"
	"github.com/talosflash/talosflash/app/plan"
	"github.com/talosflash/talosflash/imaging/devices"
	"github.com/talosflash/talosflash/inventory"
	"github.com/talosflash/talosflash/node"
)

func init() {
	h := commandHelp["apply"]
	h.synopsis += "\n       talosflash apply --inventory FILE [--hostname NAME ...] [--bootstrap --talosconfig FILE] [flags]"
	h.about += "\n\nWith --inventory: for each node of the inventory (or each --hostname), wait\n" +
		"for it at its address (--wait), check that it is that node (the hostname\n" +
		"its card gave it, the image of its role: a swapped card is blocked), then\n" +
		"check and send its config as above. Nodes that already have a config are\n" +
		"skipped. For the first control plane: --bootstrap runs the bootstrap\n" +
		"(with --talosconfig), else its command is printed."
	h.example += "\ntalosflash apply --inventory talosflash.yaml\n" +
		"talosflash apply --inventory talosflash.yaml --hostname worker-1 --json"
	commandHelp["apply"] = h
	placeholders["wait"] = "DURATION"
}

// applyInventoryFlags are apply's inventory flags.
type applyInventoryFlags struct {
	inventory string
	hostnames deviceList
	wait      time.Duration
	port      int
	bootstrap bool
	tc        talosconfigFlags
	follow    followFlags // with --talosconfig (apply_follow.go)
}

func (f *applyInventoryFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.inventory, "inventory", "", "cluster inventory (talosflash.yaml): apply each node's config at its address")
	fs.Var(&f.hostnames, "hostname", "with --inventory: only this node (repeatable; default every node)")
	fs.DurationVar(&f.wait, "wait", 5*time.Minute, "with --inventory: how long to wait for each node to answer at its address")
	fs.IntVar(&f.port, "port", node.DefaultPort, "with --inventory: the nodes' Talos API port")
	fs.BoolVar(&f.bootstrap, "bootstrap", false, "with --inventory: bootstrap etcd on the first control plane after its config (needs --talosconfig)")
	f.tc.register(fs)
	f.follow.register(fs)
}

// nodeResultJSON is one node of `apply --inventory --json` (a line each,
// event contract.TypeApplyNode).
type nodeResultJSON struct {
	Hostname         string         `json:"hostname"`
	Address          string         `json:"address"`
	Endpoint         string         `json:"endpoint"`
	Status           string         `json:"status"` // applied, validated, configured, failed
	Config           string         `json:"config"`
	ReportedHostname string         `json:"reported_hostname,omitempty"`
	Booted           string         `json:"booted,omitempty"` // the profile its image matches
	Code             int            `json:"code,omitempty"`
	Message          string         `json:"message,omitempty"`
	Findings         []findingJSON  `json:"findings"`
	Warnings         []string       `json:"warnings,omitempty"` // the node's own, as apply --json
	Next             *applyNextJSON `json:"next,omitempty"`
}

// applyInventory is `apply --inventory`: each node in turn, through
// plan.ApplyNode; the first failure's exit code, after every node had its
// turn.
func applyInventory(ctx context.Context, f *applyFlags, inf *applyInventoryFlags, env Env) error {
	switch {
	case f.endpoint != "" || f.file != "":
		return usageErrorf("apply: --inventory gives each node's address and config: drop --node and --file")
	case f.role != "" || f.installer != "":
		return usageErrorf("apply: --inventory gives each node's role: drop --role and --flashed-installer")
	case inf.port <= 0 || inf.port > 65535:
		return usageErrorf("apply: --port %d: want 1-65535", inf.port)
	}
	if _, err := node.ParseMode(f.mode); err != nil {
		return withCode(contract.ExitUsage, err)
	}
	var tc *node.Talosconfig
	if inf.bootstrap || inf.tc.path != "" && !f.dryRun { // --talosconfig: follow the nodes (apply_follow.go)
		var err error
		if tc, err = inf.tc.load("apply --bootstrap"); err != nil {
			return err
		}
	}
	s, err := loadSettings(plan.Defaults{Inventory: inf.inventory, ProfilesFile: f.profiles, FactoryURL: f.factoryURL})
	if err != nil {
		return err
	}
	inv := s.Inventory
	nodes := inv.Nodes
	if len(inf.hostnames) > 0 {
		if nodes, err = inv.Select(inf.hostnames); err != nil { // each node once, names ignoring case
			return withCode(contract.ExitUsage, err)
		}
	}
	for _, n := range nodes {
		if n.Config == "" {
			return withCode(contract.ExitConfig, fmt.Errorf("%s: node %s has no config: (add config: talos/%s.yaml)", inv.Path, n.Hostname, n.Role))
		}
	}
	all := s.Profiles
	check := plan.NodeCheck{Profiles: all, Factory: s.Factory, CachedIDs: cachedIDs(f.cacheDir)}
	first := firstControlPlane(inv)

	var (
		firstErr error
		cpOut    *plan.NodeApplyOutcome
		applied  []inventory.Node // configured by this run: followed with --talosconfig
	)
	say := func(format string, args ...any) { fmt.Fprintf(env.Stderr, format+"\n", args...) }
	for _, n := range nodes {
		data, err := readConfigFile(n.Config)
		if err != nil {
			return err
		}
		say("%s · %s at %s, config %s", n.Hostname, n.Profile, n.Address.Addr(), n.Config)
		j := plan.NodeApplyJob{
			Node: n, Port: inf.port, Wait: inf.wait, Progress: func(s string) { say("%s", s) },
			Apply: plan.ApplyJob{
				Mode: f.mode, DryRun: f.dryRun, Force: f.force, Timeout: f.timeout, Check: check,
				Event: func(ev plan.ApplyEvent) { renderApplyEvent(env, n.Config, ev) },
			},
		}
		out, err := plan.ApplyNode(ctx, j, data)
		if err != nil {
			err = applyError(err, n.Config)
		}
		if errors.Is(err, context.Canceled) {
			return err
		}
		line := nodeLine(out, err, f.dryRun)
		if f.jsonOut {
			say("%s", line) // for the human; scripts read the JSON line
			if jerr := contract.WriteAnswer(env.Stdout, contract.TypeApplyNode, inventoryNodeJSON(out, err, f.dryRun)); jerr != nil {
				return jerr
			}
		} else {
			fmt.Fprintln(env.Stdout, line)
		}
		human := env.Stdout // beside the node's line; stderr when stdout is JSON
		if f.jsonOut {
			human = env.Stderr
		}
		for _, w := range nodeWarnings(out) {
			fmt.Fprintf(human, "%s: warning: %s\n", n.Hostname, w)
		}
		if err != nil && firstErr == nil {
			firstErr = err
		}
		if err == nil && n.Hostname == first {
			cpOut = out
		}
		if err == nil && !out.Configured && !f.dryRun {
			applied = append(applied, n)
		}
	}
	if tc != nil && !f.dryRun {
		if err := followStep(ctx, env, f, inf, tc, all, applied, false); err != nil && firstErr == nil {
			firstErr = err
		}
	}
	if cpOut == nil || f.dryRun {
		return firstErr
	}
	if err := bootstrapStep(ctx, env, cpOut, inf, tc, f.jsonOut); err != nil && firstErr == nil {
		firstErr = err
	} else if err == nil && inf.bootstrap {
		var cps []inventory.Node
		for _, n := range applied {
			if n.Role == "controlplane" {
				cps = append(cps, n)
			}
		}
		if err := followStep(ctx, env, f, inf, tc, all, cps, true); err != nil && firstErr == nil {
			firstErr = err
		}
		kubeconfigNext(env.Stderr, inf)
	}
	return firstErr
}

// firstControlPlane is the hostname of the inventory's first control plane.
func firstControlPlane(inv *inventory.Inventory) string {
	for _, n := range inv.Nodes {
		if n.Role == "controlplane" {
			return n.Hostname
		}
	}
	return ""
}

// nodeLine is a node's one-line result.
func nodeLine(out *plan.NodeApplyOutcome, err error, dryRun bool) string {
	switch {
	case err != nil:
		return fmt.Sprintf("%s: FAILED: %s", out.Node.Hostname, oneLine(err.Error()))
	case out.Configured:
		return fmt.Sprintf("%s: already configured (it asks for a client certificate): skipped", out.Node.Hostname)
	case dryRun:
		return fmt.Sprintf("%s: %s validated by the node at %s (dry run, nothing applied)", out.Node.Hostname, out.Node.Config, out.Endpoint)
	}
	return fmt.Sprintf("%s: applied %s at %s (node answered %s)", out.Node.Hostname, out.Node.Config, out.Endpoint, plan.ReplyModes(out.Result))
}

// nodeWarnings are the warnings the node answered the apply (or its dry
// run) with, e.g. "installer.image is not set": apply --node prints them,
// so apply --inventory does too.
func nodeWarnings(out *plan.NodeApplyOutcome) []string {
	if out == nil || out.ApplyOutcome == nil || out.Result == nil {
		return nil
	}
	return out.Result.Warnings
}

func inventoryNodeJSON(out *plan.NodeApplyOutcome, err error, dryRun bool) nodeResultJSON {
	j := nodeResultJSON{Hostname: out.Node.Hostname, Address: out.Node.Address.String(), Endpoint: out.Endpoint,
		Config: out.Node.Config, Findings: []findingJSON{}, Warnings: nodeWarnings(out)}
	if o := out.ApplyOutcome; o != nil && o.ApplyReview != nil {
		j.Findings = findingsJSON(o.Findings)
		if o.Node != nil {
			j.ReportedHostname, j.Booted = o.Node.Hostname, o.Match.Profile
		}
	}
	var id *plan.IdentityError
	if errors.As(err, &id) {
		j.ReportedHostname, j.Booted = id.Hostname, id.BootedProfile
	}
	switch {
	case err != nil:
		j.Status, j.Code, j.Message = "failed", exitCode(err), oneLine(err.Error())
	case out.Configured:
		j.Status = "configured"
	case dryRun:
		j.Status = "validated"
	default:
		j.Status = "applied"
		n := out.Next
		j.Next = &applyNextJSON{Node: n.Node, LeavesMaintenance: n.LeavesMaintenance, Bootstrap: n.Bootstrap, Then: n.Then}
	}
	return j
}

// bootstrapStep is the first control plane's bootstrap: run through the
// bootstrap command's code (node.Bootstrap) with --bootstrap, else the
// command to run is printed. A control plane skipped as configured is
// bootstrapped only with --bootstrap (node.Bootstrap refuses one whose
// etcd already has data, said as such).
func bootstrapStep(ctx context.Context, env Env, cp *plan.NodeApplyOutcome, inf *applyInventoryFlags, tc *node.Talosconfig, jsonOut bool) error {
	host := cp.Node.Address.Addr().String()
	if !inf.bootstrap {
		tcPath := inf.tc.path
		if tcPath == "" {
			tcPath = "talos/talosconfig"
		}
		cmd := fmt.Sprintf("talosflash bootstrap --node %s --talosconfig %s", host, devices.ShellJoin([]string{tcPath}))
		if cp.Configured {
			fmt.Fprintf(env.Stderr, "next: if etcd is not bootstrapped yet on %s: `%s`\n", cp.Node.Hostname, cmd)
		} else {
			fmt.Fprintf(env.Stderr, "next: bootstrap etcd once per cluster, on %s once it runs with its config: `%s` (or add --bootstrap --talosconfig FILE to this command)\n", cp.Node.Hostname, cmd)
		}
		return nil
	}
	warnNotAdmin(env, tc)
	fmt.Fprintf(env.Stderr, "%s: bootstrapping etcd (waits for the node to run with its config)\n", cp.Node.Hostname)
	res, err := node.Bootstrap(ctx, cp.Endpoint, tc, node.WaitOptions{
		Timeout: max(inf.wait, node.DefaultWaitTimeout),
		Progress: func(s string) {
			fmt.Fprintf(env.Stderr, "%s %s: %s\n", time.Now().Format("15:04:05"), cp.Node.Hostname, s)
		},
	})
	if errors.Is(err, node.ErrAlreadyBootstrapped) && cp.Configured {
		fmt.Fprintf(env.Stderr, "%s: etcd is bootstrapped already: nothing to do\n", cp.Node.Hostname)
		return nil
	}
	if err != nil {
		return waitExit(ctx, fmt.Errorf("bootstrap %s: %w", cp.Node.Hostname, err))
	}
	line := fmt.Sprintf("%s: bootstrapped etcd (Talos %s) at %s", cp.Node.Hostname, res.TalosVersion, host)
	if jsonOut {
		fmt.Fprintln(env.Stderr, line)
		return contract.WriteAnswer(env.Stdout, contract.TypeBootstrap, map[string]any{
			"node": res.Endpoint, "talos_version": res.TalosVersion, "attempts": res.Attempts, "etcd_healthy": res.EtcdHealthy,
			"bootstrap_sent": res.Attempts > 0, "accepted": res.Accepted,
		})
	}
	fmt.Fprintln(env.Stdout, line)
	return nil
}

// run is apply with --inventory or --hostname.
func (f *applyInventoryFlags) run(ctx context.Context, af *applyFlags, env Env) error {
	if f.inventory == "" {
		return usageErrorf("apply: --hostname needs --inventory FILE")
	}
	return applyInventory(ctx, af, f, env)
}
