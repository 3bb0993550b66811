package cli

import (
	"context"
	"flag"
	"fmt"
	"net/netip"

	"github.com/talosflash/talosflash/app/contract"
	"github.com/talosflash/talosflash/app/plan"
	"github.com/talosflash/talosflash/node"
)

func init() {
	commandHelp["kubeconfig"] = help{
		synopsis: "talosflash kubeconfig (--inventory FILE [--hostname NAME] | --node IP) --talosconfig FILE [KUBECONFIG-FILE] [--force]",
		about: "Fetch the cluster's admin kubeconfig from a control plane (with the\n" +
			"talosconfig's client certificate, as talosctl kubeconfig does) and merge it\n" +
			"into your kubeconfig: $KUBECONFIG's first file, else ~/.kube/config, or\n" +
			"KUBECONFIG-FILE (a missing file is created, 0600). Entries of the same\n" +
			"name that differ are kept and the new ones renamed (homelab-1), unless\n" +
			"--force replaces them; its context becomes the current one.\n" +
			"The API endpoint is the config's when it is a control plane's address or\n" +
			"answers from this machine; a name or VIP that does not answer is replaced\n" +
			"by the control plane's address (the output says which). The file holds a\n" +
			"client key: it is never printed.",
		example: "talosflash kubeconfig --inventory talosflash.yaml --talosconfig talos/talosconfig\n" +
			"talosflash kubeconfig --node 192.168.1.50 --talosconfig talosconfig ./kubeconfig",
		order: []string{"inventory", "hostname", "node", "talosconfig", "context", "force", "json"},
	}
}

func runKubeconfig(ctx context.Context, args []string, env Env) error {
	var (
		inv, hostname, endpoint, profiles string
		port                              int
		tcf                               talosconfigFlags
		force, jsonOut                    bool
	)
	fs := newFlagSet("kubeconfig", env)
	fs.StringVar(&inv, "inventory", "", "cluster inventory (talosflash.yaml): ask its first control plane")
	fs.StringVar(&hostname, "hostname", "", "with --inventory: ask this control plane")
	fs.StringVar(&endpoint, "node", "", "control plane address (IP or IP:port), instead of --inventory")
	fs.StringVar(&endpoint, "n", "", "shorthand for --node")
	fs.StringVar(&profiles, "profiles", "", "custom profiles YAML (as the inventory uses)")
	fs.IntVar(&port, "port", node.DefaultPort, "with --inventory: the nodes' Talos API port")
	tcf.register(fs)
	fs.BoolVar(&force, "force", false, "replace entries of the same name instead of renaming the new ones")
	fs.BoolVar(&jsonOut, "json", false, "print what was written as JSON (never the kubeconfig itself)")
	files, err := parseWithArgs(fs, args)
	if err != nil {
		return err
	}
	switch {
	case len(files) > 1:
		return usageErrorf("kubeconfig: one KUBECONFIG-FILE at most, got %d", len(files))
	case inv == "" && endpoint == "":
		return usageErrorf("kubeconfig: give --inventory FILE or --node IP (a control plane)")
	case inv != "" && endpoint != "":
		return usageErrorf("kubeconfig: --inventory names the control plane: drop --node")
	case hostname != "" && inv == "":
		return usageErrorf("kubeconfig: --hostname needs --inventory FILE")
	case port <= 0 || port > 65535:
		return usageErrorf("kubeconfig: --port %d: want 1-65535", port)
	}
	tc, err := tcf.load("kubeconfig")
	if err != nil {
		return err
	}
	job := plan.KubeconfigJob{Talosconfig: tc, Force: force}
	if len(files) == 1 {
		job.Path = files[0]
	}
	_, c, err := loadCluster(plan.Defaults{Inventory: inv, ProfilesFile: profiles}, port, endpoint)
	if err != nil {
		return err
	}
	cp := c.Members[0] // the address typed
	if c.Inventory != nil {
		if cp, err = c.KubeconfigSource(hostname); err != nil {
			return fmt.Errorf("kubeconfig: %w", err)
		}
		job.ControlPlanes = c.ControlPlaneAddrs()
	} else if a := cp.Endpoint.Addr(); a.IsValid() {
		job.ControlPlanes = []netip.Addr{a}
	}
	job.Node, job.Endpoint = cp.Name(), cp.Endpoint.String()
	if !tc.IsAdmin() {
		fmt.Fprintf(env.Stderr, "warning: the client certificate of %s has roles %v, not os:admin: the node will refuse the kubeconfig\n", tc, tc.Roles)
	}
	out, err := plan.Kubeconfig(ctx, job)
	if err != nil {
		return err
	}
	p := newAnswerPrinter(jsonOut, env)
	human := p.Human()
	verb := "wrote a new kubeconfig"
	if out.Merged {
		verb = "merged the admin kubeconfig into"
	}
	fmt.Fprintf(human, "%s %s (0600): cluster %s, context %s (current), server %s\n", verb, out.Path, out.Cluster, out.Context, out.Server)
	fmt.Fprintf(human, "  server: %s\n", out.ServerNote)
	for _, r := range out.Renamed {
		fmt.Fprintf(human, "  renamed %s %q -> %q (the file had another %s of that name; --force replaces it)\n", r.Kind, r.From, r.To, r.Kind)
	}
	for _, o := range out.Overwritten {
		fmt.Fprintf(human, "  replaced %s (--force)\n", o)
	}
	renamed := []map[string]string{}
	for _, r := range out.Renamed {
		renamed = append(renamed, map[string]string{"kind": r.Kind, "from": r.From, "to": r.To})
	}
	return p.Answer(contract.TypeKubeconfig, map[string]any{
		"path": out.Path, "merged": out.Merged, "cluster": out.Cluster, "context": out.Context, "server": out.Server,
		"config_server": out.ConfigServer, "server_choice": out.ServerChoice, "server_note": out.ServerNote,
		"renamed": renamed, "overwritten": append([]string{}, out.Overwritten...),
	}, noText)
}

// parseWithArgs is parseFlags for a command that takes positional
// arguments among its flags (returned in order).
func parseWithArgs(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, parseFlags(fs, args) // the same error, reported as every command does
		}
		if fs.NArg() == 0 {
			break
		}
		pos = append(pos, fs.Arg(0))
		args = fs.Args()[1:]
	}
	return pos, checkFlags(fs)
}
