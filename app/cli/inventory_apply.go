package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"time"

	"github.com/talosflash/talosflash/app/contract"
	"github.com/talosflash/talosflash/app/plan"
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

// applyInventory is `apply --inventory`: plan.ApplyAll, each node in
// turn, then the follow and the bootstrap; the first failure's exit code,
// after every node had its turn.
func applyInventory(ctx context.Context, f *applyFlags, inf *applyInventoryFlags, env Env) error {
	switch {
	case f.endpoint != "" || f.file != "":
		return usageErrorf("apply: --inventory gives each node's address and config: drop --node and --file")
	case f.role != "" || f.installer != "":
		return usageErrorf("apply: --inventory gives each node's role: drop --role and --flashed-installer")
	case inf.port <= 0 || inf.port > 65535:
		return usageErrorf("apply: --port %d: want 1-65535", inf.port)
	}
	if err := plan.CheckMode(f.mode); err != nil {
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
	c, err := s.Cluster(inf.port)
	if err != nil {
		return err
	}
	nodes, err := c.Select(inf.hostnames) // each node once, names ignoring case
	if err != nil {
		return withCode(contract.ExitUsage, err)
	}
	ctx, stop := context.WithCancel(ctx)
	defer stop()
	p := newApplyAllPrinter(f, inf, env, stop)
	out, err := plan.ApplyAll(ctx, plan.ApplyAllJob{
		Cluster: c, Nodes: nodes,
		Node: plan.NodeApplyJob{Port: inf.port, Wait: inf.wait, Apply: plan.ApplyJob{
			Mode: f.mode, DryRun: f.dryRun, Force: f.force, Timeout: f.timeout,
			Check: plan.NodeCheck{Profiles: s.Profiles, Factory: s.Factory, CachedIDs: cachedIDs(f.cacheDir)},
		}},
		Talosconfig: tc, FollowEvery: inf.follow.every, Bootstrap: inf.bootstrap,
		Event: func(ev plan.AllEvent) {
			if ev.Kind == plan.AllBootstrap {
				warnNotAdmin(env, tc) // before anything is sent with it
			}
			printAll(p, ev)
		},
	})
	if werr := p.Err(); werr != nil {
		return werr
	}
	if out.Bootstrapped {
		p.KubeconfigNext()
	}
	return waitExit(ctx, applyError(err, ""))
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
	j := nodeResultJSON{Hostname: out.Node.Hostname, Address: out.Node.Entry.Address.String(), Endpoint: out.Endpoint,
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

// run is apply with --inventory or --hostname.
func (f *applyInventoryFlags) run(ctx context.Context, af *applyFlags, env Env) error {
	if f.inventory == "" {
		return usageErrorf("apply: --hostname needs --inventory FILE")
	}
	return applyInventory(ctx, af, f, env)
}
