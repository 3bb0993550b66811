package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/talosflash/talosflash/app/contract"
	"github.com/talosflash/talosflash/app/plan"
	"github.com/talosflash/talosflash/factory"
	"github.com/talosflash/talosflash/node"
)

// prefixList is a repeatable, comma-separated --subnet flag.
type prefixList []netip.Prefix

func (p *prefixList) String() string {
	s := make([]string, len(*p))
	for i, x := range *p {
		s[i] = x.String()
	}
	return strings.Join(s, ",")
}

func (p *prefixList) Set(v string) error {
	for _, part := range strings.Split(v, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		if !strings.Contains(part, "/") {
			part += "/32"
		}
		pr, err := netip.ParsePrefix(part)
		if err != nil {
			return fmt.Errorf("bad subnet %q: want CIDR like 192.168.1.0/24", part)
		}
		*p = append(*p, pr.Masked())
	}
	return nil
}

func runNodes(ctx context.Context, args []string, env Env) error {
	var subnets prefixList
	var jsonOut bool
	var timeout time.Duration
	var port int
	var profilesFile, factoryURL, cacheDir string
	fs := newFlagSet("nodes", env)
	fs.Var(&subnets, "subnet", "subnet(s) to scan, CIDR, repeatable (default: this machine's local /22-or-smaller IPv4 subnets)")
	fs.BoolVar(&jsonOut, "json", false, "print JSON")
	fs.DurationVar(&timeout, "timeout", 500*time.Millisecond, "TCP connect timeout per host")
	fs.IntVar(&port, "port", node.DefaultPort, "Talos API port")
	fs.StringVar(&profilesFile, "profiles", "", "YAML file with custom profiles (to name what each node booted)")
	fs.StringVar(&factoryURL, "factory", factory.DefaultBaseURL, "Image Factory base URL")
	fs.StringVar(&cacheDir, "cache-dir", "", "image cache directory, as given to --flash (to recognise images flashed from this machine)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	settings, err := loadSettings(plan.Defaults{ProfilesFile: profilesFile, FactoryURL: factoryURL})
	if err != nil {
		return err
	}
	if len(subnets) == 0 {
		local, err := node.LocalPrefixes()
		if err != nil {
			return fmt.Errorf("find local subnets: %w", err)
		}
		if len(local) == 0 {
			return usageErrorf("nodes: no local IPv4 subnet found to scan; pass --subnet CIDR")
		}
		subnets = local
	}
	scan := node.DiscoverOptions{Prefixes: subnets, Port: port, DialTimeout: timeout}
	if err := node.CheckScan(scan); err != nil {
		return withCode(contract.ExitUsage, err) // before "scanning": nothing is sent
	}
	fmt.Fprintf(env.Stderr, "scanning %s for Talos on port %d...\n", subnets.String(), port)
	found, err := node.Discover(ctx, scan)
	if err != nil {
		if ctx.Err() != nil {
			// The one interruption type (exit 130), saying what was sent.
			return &node.InterruptedError{Op: "scan", Endpoint: subnets.String(), State: "the scan stopped; nothing was sent to any node", Err: ctx.Err()}
		}
		return withCode(contract.ExitUsage, err)
	}
	cached := cachedIDs(cacheDir)
	rows := make([]nodeRow, len(found))
	for i := range found {
		nc := plan.NodeCheck{Profiles: settings.Profiles, Factory: settings.Factory, CachedIDs: cached, Node: &found[i]}
		rows[i] = nodeRow{Node: found[i], Match: nc.MatchBooted()}
	}
	return newAnswerPrinter(jsonOut, env).Answer(contract.TypeNodes, nodesJSON(rows), func(w io.Writer) error {
		if len(found) == 0 {
			fmt.Fprintln(env.Stderr, "no Talos nodes found (is the Pi booted and on this network? a maintenance node shows its IP on HDMI)")
			return nil
		}
		return nodesTable(w, rows)
	})
}

// nodesTable is `nodes` as text.
func nodesTable(w io.Writer, rows []nodeRow) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ADDRESS\tSTATE\tTALOS\tBOOTED\tSCHEMATIC\tEXTENSIONS\tFACTORY\tHOSTNAME\tMAC")
	for _, r := range rows {
		n := r.Node
		state := "configured"
		if n.Maintenance {
			state = "maintenance"
		}
		talos := talosLabel(&n)
		if n.Arch != "" && n.InvalidVersion == "" {
			talos += "/" + n.Arch
		}
		booted, id, exts := bootedColumns(r)
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", n.Addr, state, talos, booted, id, exts, dash(n.Factory.String()), dash(n.Hostname), dash(n.MAC))
	}
	return tw.Flush()
}

// nodeRow is one discovered node with the profile its booted image matches
// (the JSON of `nodes --json`).
type nodeRow struct {
	node.Node
	Match plan.Match
}

func bootedColumns(r nodeRow) (booted, id, exts string) {
	b := r.Node.Booted
	if b == nil {
		if r.Node.Configured {
			return "-", "-", "-"
		}
		return "unknown (no extension statuses)", "-", "-"
	}
	booted = r.Match.Label()
	if booted == "" {
		booted = "no known profile"
	}
	id = dash(b.SchematicID)
	if len(id) > 12 {
		id = id[:12]
	}
	exts = "none"
	if len(b.Extensions) > 0 {
		exts = strings.Join(b.Extensions, ",")
	}
	return booted, id, exts
}

// talosLabel is the node's Talos version as shown: "-" when unknown,
// "invalid (...)" when what it reported is not a version (node.Probe
// escaped and bounded it).
func talosLabel(n *node.Node) string {
	if n.InvalidVersion != "" {
		return "invalid (" + n.InvalidVersion + ")"
	}
	return dash(n.TalosVersion)
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// cachedIDs are the schematic IDs of images this machine downloaded into
// the cache at dir ("" = the default cache, as for --flash).
func cachedIDs(dir string) []string {
	c, err := openCache(dir)
	if err != nil {
		return nil
	}
	return plan.CachedSchematicIDs(c)
}

// applyFlags are the flags of `talosflash apply`.
type applyFlags struct {
	endpoint, file, mode, role, profiles, installer, factoryURL, cacheDir string
	dryRun, force, jsonOut                                                bool
	timeout                                                               time.Duration
}

func runApply(ctx context.Context, args []string, env Env) error {
	var f applyFlags
	fs := newFlagSet("apply", env)
	fs.StringVar(&f.endpoint, "node", "", "node address (IP or IP:port), as talosctl -n")
	fs.StringVar(&f.endpoint, "n", "", "shorthand for --node")
	fs.StringVar(&f.file, "file", "", "machine config file, e.g. worker.yaml")
	fs.StringVar(&f.file, "f", "", "shorthand for --file")
	fs.StringVar(&f.mode, "mode", "auto", "apply mode: auto, reboot, try, no-reboot, staged (the last two need Talos >= 1.13)")
	fs.BoolVar(&f.dryRun, "dry-run", false, "ask the node to validate and show its summary/diff without applying")
	fs.StringVar(&f.role, "role", "", "the role/profile the card was flashed with: used only when the node does not report what it booted")
	fs.StringVar(&f.profiles, "profiles", "", "YAML file with custom profiles")
	fs.StringVar(&f.installer, "flashed-installer", "", "installer ref the card was flashed from (fallback, like --role)")
	fs.StringVar(&f.factoryURL, "factory", factory.DefaultBaseURL, "Image Factory base URL (to resolve schematic IDs)")
	fs.StringVar(&f.cacheDir, "cache-dir", "", "image cache directory, as given to --flash (to recognise images flashed from this machine)")
	fs.BoolVar(&f.force, "force", false, "send even if the incident checks find errors")
	fs.BoolVar(&f.jsonOut, "json", false, "print the result as JSON (on failure: an error object with the findings)")
	fs.DurationVar(&f.timeout, "timeout", node.DefaultApplyTimeout, "timeout for each call to the node")
	fs.Bool("insecure", true, "accepted for talosctl compatibility: maintenance mode is always insecure")
	var inf applyInventoryFlags // --inventory (inventory_apply.go)
	inf.register(fs)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if inf.inventory != "" || len(inf.hostnames) > 0 {
		return inf.run(ctx, &f, env)
	}
	p := newApplyPrinter(&f, env)
	out, err := apply(ctx, &f, p)
	if err != nil {
		return p.Failed(out, err)
	}
	return p.Applied(out)
}

// apply fills in the apply job from the flags and runs it (app/plan); p
// shows what happens. It returns the outcome (with the incident-check
// findings also on error, once the node was checked).
func apply(ctx context.Context, f *applyFlags, p applyPrinter) (*plan.ApplyOutcome, error) {
	if f.endpoint == "" || f.file == "" {
		return nil, usageErrorf("apply: --node and --file are required")
	}
	file := f.file
	job := plan.ApplyJob{
		Endpoint: f.endpoint, Name: file, ConfigPath: file, Mode: f.mode, DryRun: f.dryRun, Force: f.force, Timeout: f.timeout,
		Event: p.Event,
	}
	if err := job.CheckInput(); err != nil { // a typo is said before anything is read
		return nil, applyError(err, file)
	}
	settings, err := loadSettings(plan.Defaults{ProfilesFile: f.profiles, FactoryURL: f.factoryURL})
	if err != nil {
		return nil, err
	}
	job.Check = plan.NodeCheck{Profiles: settings.Profiles, Factory: settings.Factory, CachedIDs: cachedIDs(f.cacheDir), Declared: f.role, FlashedInstaller: f.installer}
	out, err := plan.Apply(ctx, job) // reads the config (bounded), checks it against the node, sends it
	if err != nil {
		return out, applyError(err, file)
	}
	return out, nil
}

// applyError gives the job's failures their exit codes and the CLI's words
// (file: the config, "" the one the job names).
func applyError(err error, file string) error {
	if err == nil {
		return nil
	}
	var (
		input       *plan.InputError
		interrupted *node.InterruptedError
		unreadable  *node.ConfigFileError
	)
	switch {
	case errors.As(err, &interrupted):
		return err // context.Canceled: exit 130
	case errors.As(err, &input):
		switch flag := applyFlag[input.Setting]; {
		case flag != "" && input.Value != "": // the job's settings are the flags
			return withCode(contract.ExitUsage, fmt.Errorf("%s %s: %w", flag, input.Value, input.Err))
		case flag != "":
			return withCode(contract.ExitUsage, fmt.Errorf("%s: %w", flag, input.Err))
		}
		return withCode(contract.ExitUsage, err)
	case errors.As(err, &unreadable) && unreadable.TooLarge:
		return withCode(contract.ExitConfig, err)
	case errors.As(err, &unreadable):
		return withCode(contract.ExitUsage, err)
	case errors.Is(err, plan.ErrConfigured):
		return withCode(contract.ExitApply, err)
	case errors.Is(err, plan.ErrNoFingerprint):
		return withCode(contract.ExitNetwork, err)
	}
	var blocked *plan.BlockedError
	if errors.As(err, &blocked) {
		if file == "" {
			file = blocked.Name
		}
		return withCode(contract.ExitConfig, fmt.Errorf("%s fails the checks above; nothing was sent. Fix the config or pass --force to send it anyway", file))
	}
	return err
}

// applyFlag names plan.ApplyJob's settings as apply's flags.
var applyFlag = map[string]string{"endpoint": "--node", "mode": "--mode"}

func describeBooted(n *node.Node, m plan.Match) string {
	if n.Booted == nil {
		return "unknown (no extension statuses: Talos <= 1.12 or an image not from the Image Factory)"
	}
	if l := m.Label(); l != "" {
		return l + ": " + n.Booted.String()
	}
	return n.Booted.String()
}
