package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/siderolabs/image-factory/pkg/schematic"

	"github.com/talosflash/talosflash/factory"
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
	fs := newFlagSet("nodes", env)
	fs.Var(&subnets, "subnet", "subnet(s) to scan, CIDR, repeatable (default: this machine's local /22-or-smaller IPv4 subnets)")
	fs.BoolVar(&jsonOut, "json", false, "print JSON")
	fs.DurationVar(&timeout, "timeout", 500*time.Millisecond, "TCP connect timeout per host")
	fs.IntVar(&port, "port", 50000, "Talos API port")
	if err := parseFlags(fs, args); err != nil {
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
		return withCode(ExitUsage, err)
	}
	if jsonOut {
		return json.NewEncoder(env.Stdout).Encode(found)
	}
	if len(found) == 0 {
		fmt.Fprintln(env.Stderr, "no Talos nodes found (is the Pi booted and on this network? a maintenance node shows its IP on HDMI)")
		return nil
	}
	tw := tabwriter.NewWriter(env.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ADDRESS\tSTATE\tHOSTNAME\tMAC\tTALOS\tNOTE")
	for _, n := range found {
		state := "configured"
		if n.Maintenance {
			state = "maintenance"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", n.Addr, state, dash(n.Hostname), dash(n.MAC), dash(n.TalosVersion), n.Note)
	}
	return tw.Flush()
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
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
	fs.StringVar(&mode, "mode", "auto", "apply mode: auto, reboot, try (maintenance mode), no-reboot, staged")
	fs.BoolVar(&dryRun, "dry-run", false, "ask the node to validate without applying")
	fs.StringVar(&role, "role", "", "the role the card was flashed with (controlplane, worker, or a profile): enables the incident checks")
	fs.StringVar(&profiles, "profiles", "", "YAML file with custom profiles")
	fs.StringVar(&installer, "flashed-installer", "", "installer ref the card was flashed from, if not a role")
	fs.StringVar(&factoryURL, "factory", factory.DefaultBaseURL, "Image Factory base URL (to resolve schematic IDs)")
	fs.BoolVar(&force, "force", false, "send even if the incident checks find errors")
	fs.BoolVar(&jsonOut, "json", false, "print the result as JSON")
	fs.DurationVar(&timeout, "timeout", node.DefaultApplyTimeout, "timeout for the call")
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
	data, err := readConfigFile(file)
	if err != nil {
		return err
	}
	cfg, err := node.LoadConfig(data)
	if err != nil {
		return fmt.Errorf("%s: %w", file, err)
	}

	all, err := loadProfiles(profiles)
	if err != nil {
		return err
	}
	opts := node.InspectOptions{Node: endpoint, Resolve: resolver(ctx, all, factory.NewClient(factoryURL, nil))}
	if role != "" {
		p, err := factory.FindProfile(all, role)
		if err != nil {
			return withCode(ExitUsage, err)
		}
		opts.Role = p.Name
		opts.Flashed = p.Schematic()
		id, _ := p.SchematicID()
		opts.Installer = factory.NewInstallerRef(strings.TrimPrefix(strings.TrimPrefix(factoryURL, "https://"), "http://"), id, p.Version()).String()
	}
	if installer != "" {
		ref, err := factory.ParseInstallerRef(installer)
		if err != nil {
			return withCode(ExitUsage, err)
		}
		opts.Installer = ref.String()
		if s, err := opts.Resolve(ref.SchematicID); err == nil {
			opts.Flashed = s
		}
	}
	findings := node.InspectWith(cfg, opts)
	blocking := false
	for _, fd := range findings {
		fmt.Fprintf(env.Stderr, "%s: %s\n", fd.Severity, fd.Message)
		if fd.Fix != "" {
			fmt.Fprintf(env.Stderr, "  fix: %s\n", fd.Fix)
		}
		if fd.Severity == node.SeverityError {
			blocking = true
		}
	}
	if blocking && !force {
		return withCode(ExitConfig, fmt.Errorf("%s fails the checks above; fix the config or pass --force to send it anyway", file))
	}

	res, err := node.Apply(ctx, node.ApplyOptions{Endpoint: endpoint, Config: data, Mode: mode, DryRun: dryRun, Timeout: timeout})
	if err != nil {
		return err
	}
	if jsonOut {
		return json.NewEncoder(env.Stdout).Encode(res)
	}
	verb := "applied"
	if dryRun {
		verb = "validated (dry run)"
	}
	fmt.Fprintf(env.Stdout, "%s %s to %s (mode %s)\n", verb, file, res.Endpoint, res.Mode)
	if res.ModeDetails != "" {
		fmt.Fprintln(env.Stdout, res.ModeDetails)
	}
	for _, w := range res.Warnings {
		fmt.Fprintf(env.Stdout, "warning: %s\n", w)
	}
	return nil
}

// maxConfigSize bounds what apply reads; real machine configs are tens of KiB.
const maxConfigSize = 4 << 20

func readConfigFile(path string) ([]byte, error) {
	data, err := userfile.Read(path, maxConfigSize)
	var tooLarge *userfile.TooLargeError
	switch {
	case errors.As(err, &tooLarge):
		return nil, withCode(ExitConfig, fmt.Errorf("config file %s: too large for a machine config (max %d bytes)", path, maxConfigSize))
	case err != nil:
		return nil, withCode(ExitUsage, fmt.Errorf("config file: %w", err))
	}
	return data, nil
}

// resolver maps a schematic ID to its content: first the known profiles
// (offline), then the factory.
func resolver(ctx context.Context, profiles []factory.Profile, c *factory.Client) func(string) (*schematic.Schematic, error) {
	return func(id string) (*schematic.Schematic, error) {
		for _, p := range profiles {
			if pid, err := p.SchematicID(); err == nil && pid == id {
				return p.Schematic(), nil
			}
		}
		return c.Schematic(ctx, id)
	}
}
