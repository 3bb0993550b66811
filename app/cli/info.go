package cli

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/talosflash/talosflash/app/contract"
	"github.com/talosflash/talosflash/app/plan"
	"github.com/talosflash/talosflash/factory"
	"github.com/talosflash/talosflash/imaging/devices"
	"github.com/talosflash/talosflash/node"
)

func runSchematic(ctx context.Context, args []string, env Env) error {
	var f imageFlags
	var register, jsonOut, installerYAML bool
	fs := newFlagSet("schematic", env)
	f.register(fs)
	fs.BoolVar(&register, "register", false, "also register it with the Image Factory (POST /schematics) and check the ID")
	fs.BoolVar(&installerYAML, "installer-yaml", false, "print the role's talos/installer-<role>.yaml instead: the machine config patch with its installer image (for talosctl gen config --config-patch-<role>)")
	fs.BoolVar(&jsonOut, "json", false, "print JSON")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if f.role == "" && f.installer == "" && f.installerFile == "" {
		return usageErrorf("schematic: give --role (controlplane, worker or a profile), --installer or --installer-file")
	}
	if _, err := f.parseBoard(); err != nil {
		return err
	}
	if installerYAML {
		if jsonOut {
			return usageErrorf("schematic: --installer-yaml prints the installer file itself, not JSON: drop --json (or drop --installer-yaml for the schematic's JSON, its installer included)")
		}
		if f.role == "" {
			return usageErrorf("schematic --installer-yaml: give --role (controlplane, worker or a profile)")
		}
		im, _, err := f.resolve(ctx, false) // a role: its profile, version and arch applied
		if err != nil {
			return err
		}
		p := *im.Profile
		patch, err := factory.InstallerPatch(p, f.client().RegistryHost())
		if err != nil {
			return fmt.Errorf("installer patch for %s: %w", p.Name, err)
		}
		_, err = env.Stdout.Write(patch)
		return err
	}
	im, _, err := f.resolve(ctx, register)
	if err != nil {
		return err
	}
	var yaml string
	if im.Schematic != nil {
		b, err := im.Schematic.Marshal()
		if err != nil {
			return fmt.Errorf("marshal schematic: %w", err)
		}
		yaml = string(b)
	}
	board := im.Board()
	return newAnswerPrinter(jsonOut, env).Answer(contract.TypeSchematic, map[string]any{
		"id": im.SchematicID, "version": im.Version, "arch": im.Arch, "schematic": yaml,
		"image_url": im.URL, "installer": im.Installer.String(), "registered": register,
		"board": string(board),
	}, func(w io.Writer) error {
		if yaml != "" {
			fmt.Fprint(w, yaml)
		} else {
			fmt.Fprintln(w, "# schematic content unknown (this factory cannot return stored schematics)")
		}
		if board != "" {
			fmt.Fprintf(w, "# board: %s (%s, overlay %s)\n", board, board.Model(), board.Overlay().Name)
		}
		if im.Schematic != nil && len(im.Schematic.Overlay.Options) > 0 {
			fmt.Fprintf(w, "# overlay options: %s (written to the card's config.txt by the overlay)\n", strings.Join(optionNames(im.Schematic.Overlay.Options), ", "))
		}
		fmt.Fprintf(w, "# id: %s\n# image: %s\n# installer: %s\n", im.SchematicID, im.URL, im.Installer)
		return nil
	})
}

func runProfiles(_ context.Context, args []string, env Env) error {
	var profiles string
	var jsonOut bool
	fs := newFlagSet("profiles", env)
	fs.StringVar(&profiles, "profiles", "", "YAML file with custom profiles")
	fs.BoolVar(&jsonOut, "json", false, "print JSON")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	all, err := loadProfiles(profiles)
	if err != nil {
		return err
	}
	list := []profileJSON{}
	// Each role once per board it can be built for (factory.ExpandBoards):
	// every image the profiles make, as the fake factory serves them.
	for _, p := range factory.ExpandBoards(all) {
		id, err := p.SchematicID()
		if err != nil {
			return fmt.Errorf("profile %s: %w", p.Name, err)
		}
		list = append(list, profileJSON{Name: p.Name, Board: string(p.TargetBoard()), Description: p.Description, TalosVersion: p.Version(), Arch: p.Architecture(),
			Overlay: overlayJSON{Image: p.Overlay.Image, Name: p.Overlay.Name, Options: optionNames(p.Overlay.Options)}, Extensions: nonNil(p.Extensions),
			ExtraKernelArgs: nonNil(p.ExtraKernelArgs), SchematicID: id})
	}
	return newAnswerPrinter(jsonOut, env).Answer(contract.TypeProfiles, list, func(w io.Writer) error {
		tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "NAME\tBOARD\tVERSION\tEXTENSIONS\tSCHEMATIC ID\tDESCRIPTION")
		for _, p := range list {
			exts := strings.Join(p.Extensions, ",")
			if exts == "" {
				exts = "-"
			}
			board := p.Board
			if board == "" {
				board = "-"
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", p.Name, board, p.TalosVersion, exts, p.SchematicID, p.Description)
		}
		return tw.Flush()
	})
}

// optionNames are an overlay's option keys, sorted (nil: none).
func optionNames(opts map[string]any) []string {
	if len(opts) == 0 {
		return nil
	}
	keys := make([]string, 0, len(opts))
	for k := range opts {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// profileJSON is one image of profiles --json: a profile on a board (a
// role is listed once per board).
type profileJSON struct {
	Name            string      `json:"name"`
	Board           string      `json:"board"` // "" for a profile of no known board
	Description     string      `json:"description"`
	TalosVersion    string      `json:"talos_version"`
	Arch            string      `json:"arch"`
	Overlay         overlayJSON `json:"overlay"`
	Extensions      []string    `json:"extensions"`
	ExtraKernelArgs []string    `json:"extra_kernel_args"`
	SchematicID     string      `json:"schematic_id"`
}

type overlayJSON struct {
	Image   string   `json:"image"`
	Name    string   `json:"name"`
	Options []string `json:"options,omitempty"` // the option keys (values: schematic --role NAME)
}

func runDevices(_ context.Context, args []string, env Env) error {
	var jsonOut, allowLoop bool
	fs := newFlagSet("devices", env)
	fs.BoolVar(&jsonOut, "json", false, "print JSON")
	fs.BoolVar(&allowLoop, "allow-loop", false, "judge loop devices as flash --allow-loop does (testing without a card)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	disks, err := devices.List()
	if err != nil {
		return err
	}
	disks = plan.ListedCards(disks, devices.Options{AllowLoop: allowLoop}) // the verdict flash --allow-loop would give, as the app's
	return newAnswerPrinter(jsonOut, env).Answer(contract.TypeDevices, devicesJSON(disks), func(w io.Writer) error {
		tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "DEVICE\tSIZE\tMODEL\tTRANSPORT\tTARGET")
		for _, d := range disks {
			verdict := "ok"
			if !d.Safe && d.Refusal != nil {
				verdict = "refused: " + d.Refusal.Msg
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", d.Path, d.SizeHuman, d.Description(), d.Transport, verdict)
		}
		return tw.Flush()
	})
}

// JSON output. Every --json output of the CLI uses snake_case keys (as the
// flash events and `schematic --json` do), declared here rather than
// derived from Go field names, so renaming a field cannot change the output.

type diskJSON struct {
	Name        string          `json:"name"`
	Path        string          `json:"path"`
	Size        int64           `json:"size"`
	SizeHuman   string          `json:"size_human"`
	Vendor      string          `json:"vendor"`
	Model       string          `json:"model"`
	Description string          `json:"description"`
	Transport   string          `json:"transport"`
	MMCType     string          `json:"mmc_type,omitempty"`
	Removable   bool            `json:"removable"`
	ReadOnly    bool            `json:"read_only"`
	Dev         string          `json:"dev"`
	Partitions  []partitionJSON `json:"partitions"`
	Mounts      []mountJSON     `json:"mounts"`
	Swap        bool            `json:"swap"`
	Holders     []string        `json:"holders"`
	Safe        bool            `json:"safe"`
	Refusal     *refusalJSON    `json:"refusal"` // null when safe
}

type partitionJSON struct {
	Name    string      `json:"name"`
	Path    string      `json:"path"`
	Number  int         `json:"number"`
	Size    int64       `json:"size"`
	Mounts  []mountJSON `json:"mounts"`
	Swap    bool        `json:"swap"`
	Holders []string    `json:"holders"`
}

type mountJSON struct {
	Point  string `json:"point"`
	FSType string `json:"fs_type"`
	Via    string `json:"via,omitempty"`
}

type refusalJSON struct {
	Reason     string `json:"reason"`
	Message    string `json:"message"`
	Suggestion string `json:"suggestion,omitempty"`
}

// devicesJSON is `devices --json`: an array of disks, lists never null.
func devicesJSON(disks []devices.Disk) []diskJSON {
	out := make([]diskJSON, 0, len(disks))
	for _, d := range disks {
		j := diskJSON{
			Name: d.Name, Path: d.Path, Size: d.Size, SizeHuman: d.SizeHuman, Vendor: d.Vendor, Model: d.Model,
			Description: d.Description(), Transport: string(d.Transport), MMCType: d.MMCType,
			Removable: d.Removable, ReadOnly: d.ReadOnly, Dev: d.Dev, Partitions: []partitionJSON{},
			Mounts: mountsJSON(d.Mounts), Swap: d.Swap, Holders: nonNil(d.Holders), Safe: d.Safe,
		}
		for _, p := range d.Partitions {
			j.Partitions = append(j.Partitions, partitionJSON{Name: p.Name, Path: p.Path, Number: p.Number, Size: p.Size,
				Mounts: mountsJSON(p.Mounts), Swap: p.Swap, Holders: nonNil(p.Holders)})
		}
		if d.Refusal != nil {
			j.Refusal = &refusalJSON{Reason: string(d.Refusal.Reason), Message: d.Refusal.Msg, Suggestion: d.Refusal.Suggestion}
		}
		out = append(out, j)
	}
	return out
}

func mountsJSON(ms []devices.Mount) []mountJSON {
	out := make([]mountJSON, 0, len(ms))
	for _, m := range ms {
		out = append(out, mountJSON{Point: m.Point, FSType: m.FSType, Via: m.Via})
	}
	return out
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// nodeJSON is one node of `nodes --json`. What the node did not report is
// null, not "" (a legacy node has no arch; an unknown image matches nothing).
type nodeJSON struct {
	Address             string       `json:"address"`
	IP                  string       `json:"ip"`
	Maintenance         bool         `json:"maintenance"`
	Configured          bool         `json:"configured"`
	Stage               *string      `json:"stage"`
	Hostname            *string      `json:"hostname"`
	MAC                 *string      `json:"mac"`
	TalosVersion        *string      `json:"talos_version"`
	TalosVersionInvalid string       `json:"talos_version_invalid,omitempty"` // what a node reported that is not a version, escaped
	Arch                *string      `json:"arch"`
	CertFingerprint     *string      `json:"cert_fingerprint"`
	Booted              *bootedJSON  `json:"booted"`  // null: the node exposes no extension statuses
	Factory             *factoryJSON `json:"factory"` // null: not reported (Talos < 1.14 or not from a factory)
	Matches             *matchJSON   `json:"matches"` // null: no profile or cached image matches
	Note                string       `json:"note"`
}

type bootedJSON struct {
	SchematicID *string  `json:"schematic_id"` // null: not an Image Factory image
	Overlay     *string  `json:"overlay"`
	Extensions  []string `json:"extensions"`
}

// matchJSON is the profile the booted image matches (plan.Match).
type matchJSON struct {
	Profile *string `json:"profile"` // null for an image recognised only from the cache
	Role    *string `json:"role"`
	Source  string  `json:"source"` // "profile" or "cache"
}

// orNull is s, or nil (JSON null) when s is empty.
func orNull(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// nodesJSON is `nodes --json`: an array of the nodes found, with what each booted.
// factoryJSON is which Image Factory built the node's image (Talos 1.14's
// ImageFactorySchematics).
type factoryJSON struct {
	SchematicID *string `json:"schematic_id"`
	Flavor      *string `json:"flavor"`
	APIURL      *string `json:"api_url"`
}

func nodesJSON(rows []nodeRow) []nodeJSON {
	out := make([]nodeJSON, 0, len(rows))
	for _, r := range rows {
		n := r.Node
		j := nodeJSON{Address: n.Addr, IP: n.IP.String(), Maintenance: n.Maintenance, Configured: n.Configured,
			Stage: orNull(n.Stage), Hostname: orNull(n.Hostname), MAC: orNull(n.MAC), TalosVersion: orNull(n.TalosVersion),
			TalosVersionInvalid: n.InvalidVersion, Arch: orNull(n.Arch), CertFingerprint: orNull(n.CertFingerprint), Note: n.Note}
		if r.Match.Source != "" {
			j.Matches = &matchJSON{Profile: orNull(r.Match.Profile), Role: orNull(r.Match.Role.String()), Source: r.Match.Source}
		}
		if b := n.Booted; b != nil {
			j.Booted = &bootedJSON{SchematicID: orNull(b.SchematicID), Overlay: orNull(b.Overlay), Extensions: nonNil(b.Extensions)}
		}
		if f := n.Factory; f != nil {
			j.Factory = &factoryJSON{SchematicID: orNull(f.SchematicID), Flavor: orNull(f.Flavor), APIURL: orNull(f.APIURL)}
		}
		out = append(out, j)
	}
	return out
}

type applyJSON struct {
	Endpoint        string             `json:"endpoint"`
	Mode            string             `json:"mode"`
	DryRun          bool               `json:"dry_run"`
	Messages        []applyMessageJSON `json:"messages"`
	Warnings        []string           `json:"warnings"`
	ModeDetails     string             `json:"mode_details"`
	CertFingerprint string             `json:"cert_fingerprint"`
	Findings        []findingJSON      `json:"findings"`       // the incident checks' findings
	Next            *applyNextJSON     `json:"next,omitempty"` // what the node does next (not after a dry run)
}

// applyNextJSON is plan.NextStep: what the node does after the apply.
type applyNextJSON struct {
	Node              string `json:"node"`
	LeavesMaintenance bool   `json:"leaves_maintenance"`
	Bootstrap         bool   `json:"bootstrap"` // etcd must be bootstrapped once (a control plane config)
	Then              string `json:"then,omitempty"`
}

// applyErrorJSON is `apply --json` when apply fails (exit code != 0): the
// flash's error event plus the findings that blocked it, if any.
type applyErrorJSON struct {
	Code     int           `json:"code"`
	Message  string        `json:"message"`
	Findings []findingJSON `json:"findings"`
}

type findingJSON struct {
	Severity string `json:"severity"`
	Code     string `json:"code"`
	Message  string `json:"message"`
	Fix      string `json:"fix"`
}

func findingsJSON(fs []node.Finding) []findingJSON {
	out := make([]findingJSON, 0, len(fs))
	for _, f := range fs {
		out = append(out, findingJSON{Severity: string(f.Severity), Code: f.Code, Message: f.Message, Fix: f.Fix})
	}
	return out
}

type applyMessageJSON struct {
	Node        string   `json:"node"`
	Mode        string   `json:"mode"`
	ModeDetails string   `json:"mode_details"`
	Warnings    []string `json:"warnings"`
}

// applyResultJSON is `apply --json`: the node's answer.
func applyResultJSON(r *node.ApplyResult) applyJSON {
	out := applyJSON{Endpoint: r.Endpoint, Mode: r.Mode, DryRun: r.DryRun, Messages: []applyMessageJSON{},
		Warnings: nonNil(r.Warnings), ModeDetails: r.ModeDetails, CertFingerprint: r.CertFingerprint}
	for _, m := range r.Messages {
		out.Messages = append(out.Messages, applyMessageJSON{Node: m.Node, Mode: m.Mode, ModeDetails: m.ModeDetails, Warnings: nonNil(m.Warnings)})
	}
	return out
}
