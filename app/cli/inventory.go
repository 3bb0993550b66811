package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"

	"github.com/talosflash/talosflash/app/contract"
	"github.com/talosflash/talosflash/app/plan"
	"github.com/talosflash/talosflash/internal/printable"
	"github.com/talosflash/talosflash/inventory"
)

func init() {
	commandHelp["inventory"] = help{
		synopsis: "talosflash inventory (init | check) [FILE] [flags]",
		about: "The cluster inventory (default " + inventory.DefaultFile + "): each machine's hostname,\n" +
			"role, static address, gateway, DNS, machine config and installer file.\n" +
			"init writes a commented starting file (cp-1, worker-1, worker-2 with\n" +
			"example addresses); check reports every problem with file, line and fix.",
		example: "talosflash inventory init\n" +
			"talosflash inventory check talosflash.yaml --json",
		order: []string{"profiles", "force", "json"},
	}
}

func runInventory(_ context.Context, args []string, env Env) error {
	if len(args) == 0 {
		return usageErrorf("inventory: say init or check (see: talosflash inventory -h)")
	}

	switch args[0] {
	case "init":
		return runInventoryInit(args[1:], env)
	case "check":
		return runInventoryCheck(args[1:], env)
	case "-h", "--help", "help":
		fs := newFlagSet("inventory", env)
		inventoryFlags(fs, new(string), new(bool), new(bool))

		return parseFlags(fs, []string{"-h"})
	}

	return usageErrorf("inventory: unknown subcommand %q (init or check)", args[0])
}

// inventoryFlags are the flags of both subcommands, so one usage text covers them.
func inventoryFlags(fs *flag.FlagSet, profiles *string, force, jsonOut *bool) {
	fs.StringVar(profiles, "profiles", "", "check: YAML file with custom profiles (else the inventory's profiles: file)")
	fs.BoolVar(force, "force", false, "init: replace an existing file")
	fs.BoolVar(jsonOut, "json", false, "check: print JSON")
}

// parseWithFile parses flags and at most one FILE argument, in any order.
func parseWithFile(fs *flag.FlagSet, args []string, def string) (string, error) {
	file := ""

	for {
		if err := parseFlags(fs, args); err == nil {
			break
		} else if fs.NArg() == 0 || !isUnexpectedArg(err) {
			return "", err
		}

		if file != "" {
			return "", usageErrorf("%s: one FILE only (got %q and %q)", fs.Name(), file, fs.Arg(0))
		}

		file = fs.Arg(0)
		args = fs.Args()[1:]
	}

	if file == "" {
		file = def
	}

	return file, nil
}

func isUnexpectedArg(err error) bool {
	return err != nil && strings.Contains(err.Error(), "unexpected argument")
}

func runInventoryInit(args []string, env Env) error {
	var (
		profiles       string
		force, jsonOut bool
	)

	fs := newFlagSet("inventory", env)
	inventoryFlags(fs, &profiles, &force, &jsonOut)

	file, err := parseWithFile(fs, args, inventory.DefaultFile)
	if err != nil {
		return err
	}

	if jsonOut {
		return usageErrorf("inventory init: --json is check's (init writes the file and says so): drop --json, then run talosflash inventory check --json %s", file)
	}

	flags := os.O_WRONLY | os.O_CREATE | os.O_EXCL
	if force {
		flags = os.O_WRONLY | os.O_CREATE | os.O_TRUNC
	}

	// O_EXCL: an existing inventory (or a symlink planted in its place) is
	// never overwritten without --force.
	f, err := os.OpenFile(file, flags, 0o644) // no secrets in it: it names the configs
	if errors.Is(err, os.ErrExist) {
		return usageErrorf("inventory init: %s exists (check it with: talosflash inventory check %s; --force replaces it)", file, file)
	}

	if err != nil {
		return withCode(contract.ExitStorage, fmt.Errorf("inventory init: %w", err))
	}

	if _, err := f.Write(inventory.Template()); err != nil {
		f.Close()
		return withCode(contract.ExitStorage, fmt.Errorf("inventory init: write %s: %w", file, err))
	}

	if err := f.Close(); err != nil {
		return withCode(contract.ExitStorage, fmt.Errorf("inventory init: write %s: %w", file, err))
	}

	fmt.Fprintf(env.Stdout, "Wrote %s: cp-1, worker-1, worker-2 with EXAMPLE addresses (192.168.1.20-22).\n", file)
	fmt.Fprintf(env.Stdout, "Next: edit the addresses for your network, then: talosflash inventory check %s\n", file)

	return nil
}

type inventoryJSON struct {
	File     string          `json:"file"`
	OK       bool            `json:"ok"`
	Problems []problemJSON   `json:"problems"`
	Notes    []problemJSON   `json:"notes,omitempty"` // what could not be checked offline
	Cluster  string          `json:"cluster,omitempty"`
	Nodes    []inventoryNode `json:"nodes"`
}

type problemJSON struct {
	File    string `json:"file"`
	Line    int    `json:"line,omitempty"`
	Message string `json:"message"`
	Fix     string `json:"fix,omitempty"`
}

type inventoryNode struct {
	Hostname  string   `json:"hostname"`
	Role      string   `json:"role,omitempty"`
	Profile   string   `json:"profile,omitempty"`
	Board     string   `json:"board"`
	Address   string   `json:"address,omitempty"`
	Gateway   string   `json:"gateway,omitempty"`
	DNS       []string `json:"dns,omitempty"`
	Interface string   `json:"interface"`
	Config    string   `json:"config,omitempty"`
	Installer string   `json:"installer,omitempty"`
}

func runInventoryCheck(args []string, env Env) error {
	var (
		profiles       string
		force, jsonOut bool
	)

	fs := newFlagSet("inventory", env)
	inventoryFlags(fs, &profiles, &force, &jsonOut)

	file, err := parseWithFile(fs, args, inventory.DefaultFile)
	if err != nil {
		return err
	}

	// The settings a command would use: --profiles, else the inventory's.
	s, err := plan.LoadSettings(plan.Defaults{Inventory: file, ProfilesFile: profiles})

	var (
		bad      *plan.ProfilesError
		unusable *plan.InventoryError
		problems inventory.Problems
		inv      *inventory.Inventory
	)

	switch {
	case errors.As(err, &bad):
		return withCode(contract.ExitUsage, err)
	case err == nil:
		inv = s.Inventory
	case errors.As(err, &unusable):
		inv = unusable.Inventory // what could be read, for the listing
	}

	if err != nil && !errors.As(err, &problems) {
		if errors.Is(err, os.ErrNotExist) {
			return withCode(contract.ExitUsage, fmt.Errorf("%w (start one with: talosflash inventory init %s)", err, file)) // a missing file is bad input (docs/JSON.md)
		}

		return withCode(contract.ExitConfig, err)
	}

	out := inventoryJSON{File: file, OK: len(problems) == 0, Problems: []problemJSON{}, Nodes: []inventoryNode{}}
	for _, p := range problems {
		out.Problems = append(out.Problems, problemJSON(p))
	}

	if inv != nil {
		for _, n := range inv.Notes {
			out.Notes = append(out.Notes, problemJSON(n))
		}

		out.Cluster = inv.Cluster
		for _, n := range inv.Nodes {
			out.Nodes = append(out.Nodes, inventoryNodeOf(n))
		}
	}

	if err := newAnswerPrinter(jsonOut, env).Answer(contract.TypeInventory, out, func(w io.Writer) error {
		if len(problems) == 0 {
			printInventory(w, inv)
		}

		if inv != nil {
			for _, n := range inv.Notes {
				fmt.Fprintln(env.Stderr, "note: "+printable.String(n.Error())) // what it could not check
			}
		}

		for _, p := range problems {
			fmt.Fprintln(env.Stderr, printable.String(p.Error())) // it quotes the file's values
		}

		return nil
	}); err != nil {
		return err
	}

	if len(problems) > 0 {
		s := "s"
		if len(problems) == 1 {
			s = ""
		}

		return withCode(contract.ExitConfig, fmt.Errorf("%s: %d problem%s", file, len(problems), s))
	}

	return nil
}

func inventoryNodeOf(n inventory.Node) inventoryNode {
	j := inventoryNode{
		Hostname: n.Hostname, Role: n.Role.String(), Profile: n.Profile, Board: n.Board.String(), Interface: n.Interface,
		Config: n.Config, Installer: n.Installer,
	}

	if n.Address.IsValid() {
		j.Address = n.Address.String()
	}

	if n.Gateway.IsValid() {
		j.Gateway = n.Gateway.String()
	}

	for _, d := range n.DNS {
		j.DNS = append(j.DNS, d.String())
	}

	return j
}

func printInventory(w io.Writer, inv *inventory.Inventory) {
	name := inv.Cluster
	if name == "" {
		name = "(no cluster name)"
	}

	p := printable.String // the file's values, shown escaped
	fmt.Fprintf(w, "%s: cluster %s, %d nodes, no problems\n", p(inv.Path), p(name), len(inv.Nodes))

	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "HOSTNAME\tROLE\tIMAGE\tBOARD\tADDRESS\tGATEWAY\tINTERFACE\tCONFIG")

	for _, n := range inv.Nodes {
		j := inventoryNodeOf(n)
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", p(j.Hostname), p(dash(j.Role)), p(dash(j.Profile)), p(dash(j.Board)), j.Address, dash(j.Gateway), p(j.Interface), p(dash(j.Config)))
	}

	_ = tw.Flush()
}
