package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/talosflash/talosflash/app/plan"
	"github.com/talosflash/talosflash/factory"
	"github.com/talosflash/talosflash/imaging"
	"github.com/talosflash/talosflash/internal/userfile"
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
	var profilesFile, factoryURL string
	fs := newFlagSet("nodes", env)
	fs.Var(&subnets, "subnet", "subnet(s) to scan, CIDR, repeatable (default: this machine's local /22-or-smaller IPv4 subnets)")
	fs.BoolVar(&jsonOut, "json", false, "print JSON")
	fs.DurationVar(&timeout, "timeout", 500*time.Millisecond, "TCP connect timeout per host")
	fs.IntVar(&port, "port", node.DefaultPort, "Talos API port")
	fs.StringVar(&profilesFile, "profiles", "", "YAML file with custom profiles (to name what each node booted)")
	fs.StringVar(&factoryURL, "factory", factory.DefaultBaseURL, "Image Factory base URL")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	all, err := loadProfiles(profilesFile)
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
	fmt.Fprintf(env.Stderr, "scanning %s for Talos on port %d...\n", subnets.String(), port)
	found, err := node.Discover(ctx, node.DiscoverOptions{Prefixes: subnets, Port: port, DialTimeout: timeout})
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return withCode(ExitUsage, err)
	}
	cached := cachedIDs()
	rows := make([]nodeRow, len(found))
	for i := range found {
		nc := plan.NodeCheck{Profiles: all, Factory: factory.NewClient(factoryURL, nil), CachedIDs: cached, Node: &found[i]}
		rows[i] = nodeRow{Node: found[i], Match: nc.MatchBooted()}
	}
	if jsonOut {
		return json.NewEncoder(env.Stdout).Encode(nodesJSON(rows))
	}
	if len(found) == 0 {
		fmt.Fprintln(env.Stderr, "no Talos nodes found (is the Pi booted and on this network? a maintenance node shows its IP on HDMI)")
		return nil
	}
	tw := tabwriter.NewWriter(env.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ADDRESS\tSTATE\tTALOS\tBOOTED\tSCHEMATIC\tEXTENSIONS\tHOSTNAME\tMAC")
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
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", n.Addr, state, talos, booted, id, exts, dash(n.Hostname), dash(n.MAC))
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

// cachedIDs are the schematic IDs of images this machine downloaded.
func cachedIDs() []string {
	c, err := imaging.DefaultCache()
	if err != nil {
		return nil
	}
	return plan.CachedSchematicIDs(c)
}

func runApply(ctx context.Context, args []string, env Env) error {
	var (
		endpoint, file, mode, role, profiles, installer, factoryURL string
		dryRun, force, jsonOut                                      bool
		timeout                                                     time.Duration
	)
	fs := newFlagSet("apply", env)
	fs.StringVar(&endpoint, "node", "", "node address (IP or IP:port), as talosctl -n")
	fs.StringVar(&endpoint, "n", "", "shorthand for --node")
	fs.StringVar(&file, "file", "", "machine config file, e.g. worker.yaml")
	fs.StringVar(&file, "f", "", "shorthand for --file")
	fs.StringVar(&mode, "mode", "auto", "apply mode: auto, reboot, try, no-reboot, staged (the last two need Talos >= 1.13)")
	fs.BoolVar(&dryRun, "dry-run", false, "ask the node to validate and show its summary/diff without applying")
	fs.StringVar(&role, "role", "", "the role/profile the card was flashed with: used only when the node does not report what it booted")
	fs.StringVar(&profiles, "profiles", "", "YAML file with custom profiles")
	fs.StringVar(&installer, "flashed-installer", "", "installer ref the card was flashed from (fallback, like --role)")
	fs.StringVar(&factoryURL, "factory", factory.DefaultBaseURL, "Image Factory base URL (to resolve schematic IDs)")
	fs.BoolVar(&force, "force", false, "send even if the incident checks find errors")
	fs.BoolVar(&jsonOut, "json", false, "print the result as JSON")
	fs.DurationVar(&timeout, "timeout", node.DefaultApplyTimeout, "timeout for each call to the node")
	fs.Bool("insecure", true, "accepted for talosctl compatibility: maintenance mode is always insecure")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if endpoint == "" || file == "" {
		return usageErrorf("apply: --node and --file are required")
	}
	if _, err := node.ParseMode(mode); err != nil {
		return withCode(ExitUsage, err)
	}
	mode = strings.ToLower(strings.TrimSpace(mode))
	data, err := readConfigFile(file)
	if err != nil {
		return err
	}
	cfg, err := node.LoadConfig(data)
	if err != nil {
		return fmt.Errorf("%s: %w", file, err)
	}
	for _, u := range cfg.Unchecked {
		fmt.Fprintf(env.Stderr, "note: %s\n", u)
	}
	for _, w := range cfg.Warnings {
		fmt.Fprintf(env.Stderr, "warning: %s\n", w)
	}
	all, err := loadProfiles(profiles)
	if err != nil {
		return err
	}

	// What did the node boot? The checks use its answer, not the user's word.
	pctx, cancel := context.WithTimeout(ctx, timeout)
	n, err := node.Probe(pctx, endpoint)
	cancel()
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return err
	}
	if n.Configured {
		return withCode(ExitApply, fmt.Errorf("%s already has a config (it asks for a client certificate): use talosctl with its talosconfig", n.Addr))
	}
	fmt.Fprintf(env.Stderr, "node %s: Talos %s, booted %s\n", n.Addr, talosLabel(n), describeBooted(n, all))

	nc := plan.NodeCheck{Profiles: all, Factory: factory.NewClient(factoryURL, nil), CachedIDs: cachedIDs(), Node: n, Declared: role, FlashedInstaller: installer, Endpoint: endpoint}
	opts, err := nc.Options(ctx)
	if err != nil {
		return withCode(ExitUsage, err)
	}
	if note := nc.DeclaredNote(); note != "" {
		fmt.Fprintf(env.Stderr, "note: %s\n", note)
	}
	blocking := false
	for _, fd := range node.InspectWith(cfg, opts) {
		fmt.Fprintf(env.Stderr, "%s: %s\n", fd.Severity, fd.Message)
		if fd.Fix != "" {
			fmt.Fprintf(env.Stderr, "  fix: %s\n", fd.Fix)
		}
		if fd.Severity == node.SeverityError {
			blocking = true
		}
	}
	if blocking && !force {
		return withCode(ExitConfig, fmt.Errorf("%s fails the checks above; nothing was sent. Fix the config or pass --force to send it anyway", file))
	}

	if !slices.Contains(node.ModesFor(n.TalosVersion), mode) {
		return usageErrorf("--mode %s: Talos <= 1.12 in maintenance mode only accepts %s (node reports %s)", mode, strings.Join(node.ModesFor(n.TalosVersion), ", "), talosLabel(n))
	}
	if mode == node.ModeTry && n.Unified() && !dryRun {
		fmt.Fprintf(env.Stderr, "warning: --mode try on Talos >= 1.13 applies the config without persisting it and rolls back after %s: the node will not keep it\n", node.DefaultTryTimeout)
	}
	pins := []string{n.CertFingerprint} // the node we probed and checked, not another one at the same address
	applyOpts := node.ApplyOptions{Endpoint: endpoint, Config: data, Mode: mode, Timeout: timeout, CertFingerprints: pins}

	// Talos >= 1.13 validates in maintenance mode: ask it first and show its verdict.
	if n.Unified() && !dryRun {
		check := applyOpts
		check.DryRun = true
		if _, err := node.Apply(ctx, check); err != nil {
			return fmt.Errorf("the node's dry run refused %s, nothing was applied: %w", file, err)
		}
		fmt.Fprintf(env.Stderr, "node's dry run: %s accepted\n", file)
	}
	applyOpts.DryRun = dryRun
	res, err := node.Apply(ctx, applyOpts)
	if err != nil {
		return err
	}
	if jsonOut {
		return json.NewEncoder(env.Stdout).Encode(applyResultJSON(res))
	}
	verb := "applied"
	if dryRun {
		verb = "validated (dry run, nothing applied)"
	}
	fmt.Fprintf(env.Stdout, "%s %s to %s (mode %s requested; node answered %s)\n", verb, file, res.Endpoint, res.Mode, replyModes(res))
	if res.ModeDetails != "" {
		fmt.Fprintln(env.Stdout, res.ModeDetails)
	}
	for _, w := range res.Warnings {
		fmt.Fprintf(env.Stdout, "warning: %s\n", w)
	}
	return nil
}

// replyModes is what the node says it did, truthfully: Talos <= 1.12 does not say.
func replyModes(res *node.ApplyResult) string {
	var modes []string
	for _, m := range res.Messages {
		if m.Mode == "" {
			modes = append(modes, "no mode (Talos <= 1.12 does not report it; it installs and reboots)")
		} else {
			modes = append(modes, m.Mode)
		}
	}
	if len(modes) == 0 {
		return "nothing"
	}
	return strings.Join(modes, ", ")
}

func describeBooted(n *node.Node, all []factory.Profile) string {
	if n.Booted == nil {
		return "unknown (no extension statuses: Talos <= 1.12 or an image not from the Image Factory)"
	}
	m := (plan.NodeCheck{Profiles: all, CachedIDs: cachedIDs(), Node: n}).MatchBooted()
	if l := m.Label(); l != "" {
		return l + ": " + n.Booted.String()
	}
	return n.Booted.String()
}

func readConfigFile(path string) ([]byte, error) {
	data, err := userfile.Read(path, node.MaxConfigSize)
	var tooLarge *userfile.TooLargeError
	switch {
	case errors.As(err, &tooLarge):
		return nil, withCode(ExitConfig, fmt.Errorf("config file %s is too large for a machine config (max %d bytes)", path, node.MaxConfigSize))
	case err != nil:
		return nil, withCode(ExitUsage, fmt.Errorf("config file: %w", err))
	}
	return data, nil
}
